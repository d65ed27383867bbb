#include <scs/backend/backend.h>

#include <boost/dll/alias.hpp>
#include <exception>
#include <string>

#include "docker_backend.h"
#include "http_transport.h"

namespace {

scs::backend::RuntimeBackend* createBackend(const scs::backend::BackendContext& context,
                                            std::string* error) {
  try {
    const auto settings = scs::docker::parseSettings(context.options, error);
    if (!settings) {
      return nullptr;
    }
    const auto address = scs::docker::parseEngineAddress(settings->engine, error);
    if (!address) {
      return nullptr;
    }
    return scs::docker::DockerBackend::connect(scs::docker::makeSocketTransport(*address),
                                               *settings, context.log, error)
        .release();
  } catch (const std::exception& e) {
    *error = std::string("the docker backend failed to start: ") + e.what();
  } catch (...) {
    *error = "the docker backend failed to start: unknown exception";
  }
  return nullptr;
}

const scs::backend::AbiStamp kStamp{scs::backend::kAbiVersion, scs::backend::kToolchain};

}  // namespace

BOOST_DLL_ALIAS(createBackend, scs_create_backend)
BOOST_DLL_ALIAS(kStamp, scs_backend_abi)
