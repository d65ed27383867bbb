// The Kubernetes plugin's entry: its backend options parsed, KubernetesBackend connected to the
// cluster, and the factory and ABI stamp exported.

#include <plugin_export.h>

#include <string>

#include "kubernetes_backend.h"

namespace {

scs::backend::RuntimeBackend* makeBackend(const scs::backend::BackendContext& context,
                                          std::string* error) {
  scs::kubernetes::Options options;
  if (auto problem = scs::kubernetes::parseOptions(context.options, &options)) {
    *error = *problem;
    return nullptr;
  }
  return scs::kubernetes::KubernetesBackend::connect(options, context.log, error).release();
}

}  // namespace

SCS_EXPORT_BACKEND("kubernetes", makeBackend)
