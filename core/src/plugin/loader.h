#pragma once

// The plugin loader: the one backend named at startup, found by name in the plugin directory or
// given by absolute path, checked, mapped with Boost.DLL and created by its factory.

#include <scs/backend/backend.h>

#include <filesystem>
#include <memory>
#include <string>

#include "result.h"

namespace scs::plugin {

// The plugin file for backend `name` in `plugin_dir`: plugin_dir/libscs_backend_<name>.so.
// Throws std::invalid_argument unless `name` matches [a-z0-9_]+.
std::filesystem::path backendPath(const std::string& name, const std::filesystem::path& plugin_dir);

// Loads exactly the plugin at `file` and creates its backend. Refuses, before mapping the
// file, a relative path, a missing or non-regular file, and a file or a parent directory
// writable by group or others. After mapping, reads the ABI stamp and refuses a wrong ABI
// version or toolchain; only then calls the factory. Returns the backend, or on any failure
// an Error whose sentence names the file; never throws. The returned object keeps the
// library mapped until it is destroyed.
Result<backend::RuntimeBackendPtr> loadBackend(const std::filesystem::path& file,
                                               const backend::BackendContext& ctx);

}  // namespace scs::plugin
