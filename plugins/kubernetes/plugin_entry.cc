#include <scs/backend/backend.h>

#include <boost/dll/alias.hpp>
#include <exception>
#include <string>

#include "kubernetes_backend.h"

namespace {

scs::backend::RuntimeBackend* createBackend(const scs::backend::BackendContext& context,
                                            std::string* error) {
  try {
    scs::kubernetes::Options options;
    if (auto problem = scs::kubernetes::parseOptions(context.options, &options)) {
      *error = *problem;
      return nullptr;
    }
    return scs::kubernetes::KubernetesBackend::connect(options, context.log, error).release();
  } catch (const std::exception& e) {
    *error = std::string("kubernetes: ") + e.what();
    return nullptr;
  }
}

const scs::backend::AbiStamp kStamp{scs::backend::kAbiVersion, scs::backend::kToolchain};

}  // namespace

BOOST_DLL_ALIAS(createBackend, scs_create_backend)
BOOST_DLL_ALIAS(kStamp, scs_backend_abi)
