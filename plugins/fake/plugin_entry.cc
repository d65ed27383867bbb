// The fake plugin's entry: its backend options parsed, a FakeBackend on real time made, and the
// factory and ABI stamp exported.

#include <plugin_export.h>

#include <string>
#include <utility>

#include "fake_backend.h"

namespace {

scs::backend::RuntimeBackend* makeBackend(const scs::backend::BackendContext& context,
                                          std::string* error) {
  scs::fake::Options options;
  if (auto problem = scs::fake::parseOptions(context.options, &options)) {
    *error = *problem;
    return nullptr;
  }
  return new scs::fake::FakeBackend(std::move(options), context.log);
}

}  // namespace

SCS_EXPORT_BACKEND("fake", makeBackend)
