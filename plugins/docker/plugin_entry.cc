// The Docker plugin's entry: its options and engine address parsed, DockerBackend connected
// over a real EngineSocket, and the factory and ABI stamp exported.

#include <plugin_export.h>

#include <string>

#include "docker_backend.h"
#include "engine_socket.h"

namespace {

scs::backend::RuntimeBackend* makeBackend(const scs::backend::BackendContext& context,
                                          std::string* error) {
  const auto settings = scs::docker::parseSettings(context.options, error);
  if (!settings) {
    return nullptr;
  }
  const auto address = scs::docker::parseEngineAddress(settings->engine, error);
  if (!address) {
    return nullptr;
  }
  return scs::docker::DockerBackend::connect(scs::docker::makeEngineSocket(*address), *settings,
                                             context.log, error)
      .release();
}

}  // namespace

SCS_EXPORT_BACKEND("docker", makeBackend)
