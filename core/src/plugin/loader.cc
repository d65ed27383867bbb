// loadBackend: the file's path and ownership checked before mapping, the ABI stamp and toolchain
// read before the factory is called, and a deleter that keeps the library mapped.

#include "plugin/loader.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/dll/shared_library.hpp>
#include <exception>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace scs::plugin {
namespace {

namespace fs = std::filesystem;

// Only root or the user running the server may own what it maps into its address space,
// and nobody else may be able to change it.
Result<Done> checkOwnership(const fs::path& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return invalid(std::string("cannot read the permissions of ") + what + " " + path.string());
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return invalid(std::string(what) + " " + path.string() + " is writable by group or others");
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return invalid(std::string(what) + " " + path.string() + " is owned by uid " +
                   std::to_string(st.st_uid) + ", neither root nor the server's user");
  }
  return Done{};
}

// The plugin file resolved (symbolic links followed), once it and its directories pass.
Result<fs::path> checkedFile(const fs::path& file) {
  if (file.empty() || !file.is_absolute()) {
    return invalid("backend plugin path '" + file.string() +
                   "' is relative; give an absolute path");
  }
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (ec || !fs::exists(status)) {
    return invalid("backend plugin " + file.string() + " does not exist");
  }
  if (!fs::is_regular_file(status)) {
    return invalid("backend plugin " + file.string() + " is not a regular file");
  }
  fs::path resolved = fs::canonical(file, ec);
  if (ec) {
    return invalid("cannot resolve backend plugin " + file.string() + ": " + ec.message());
  }
  for (const fs::path& dir : {file.parent_path(), resolved.parent_path()}) {
    const Result<Done> owned = checkOwnership(dir, "plugin directory");
    if (const Error* problem = std::get_if<Error>(&owned)) {
      return invalid("refusing backend plugin " + file.string() + ": " + problem->message);
    }
  }
  const Result<Done> owned = checkOwnership(resolved, "plugin file");
  if (const Error* problem = std::get_if<Error>(&owned)) {
    return invalid("refusing backend plugin " + file.string() + ": " + problem->message);
  }
  return resolved;
}

bool isValidName(const std::string& name) {
  if (name.empty()) {
    return false;
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

Result<backend::RuntimeBackendPtr> load(const fs::path& file, const backend::BackendContext& ctx) {
  const Result<fs::path> checked = checkedFile(file);
  if (const Error* problem = std::get_if<Error>(&checked)) {
    return *problem;
  }
  const fs::path& resolved = std::get<fs::path>(checked);

  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  library->load(boost::dll::fs::path(resolved.string()),
                boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec || !library->is_loaded()) {
    const char* detail = ::dlerror();
    return invalid("cannot load backend plugin " + file.string() + ": " +
                   (detail != nullptr ? std::string(detail) : ec.message()));
  }
  if (!library->has(backend::kAbiSymbol) || !library->has(backend::kFactorySymbol)) {
    return invalid("backend plugin " + file.string() + " does not export " + backend::kAbiSymbol +
                   " and " + backend::kFactorySymbol + "; it is not a Safe Code Sandbox backend");
  }

  const auto& stamp = library->get_alias<const backend::AbiStamp>(backend::kAbiSymbol);
  if (stamp.abi_version != backend::kAbiVersion) {
    return invalid("backend plugin " + file.string() + " has ABI version " +
                   std::to_string(stamp.abi_version) + " but this server needs ABI version " +
                   std::to_string(backend::kAbiVersion) + " (ABI mismatch; rebuild the plugin)");
  }
  if (stamp.toolchain != backend::kToolchain) {
    return invalid("backend plugin " + file.string() + " was built with toolchain " +
                   std::to_string(stamp.toolchain) + " but this server with toolchain " +
                   std::to_string(backend::kToolchain) + " (ABI mismatch; rebuild the plugin)");
  }

  auto& factory = library->get_alias<backend::FactoryFn>(backend::kFactorySymbol);
  std::string factory_error;
  backend::RuntimeBackend* raw = factory(ctx, &factory_error);
  if (raw == nullptr) {
    return internal("backend plugin " + file.string() + " could not start: " +
                    (factory_error.empty() ? std::string("no reason given") : factory_error));
  }
  // The deleter owns the library, so the plugin's code (the vtable, the destructor) stays
  // mapped until the object is gone.
  return backend::RuntimeBackendPtr(
      raw, [library = std::move(library)](backend::RuntimeBackend* object) { delete object; });
}

}  // namespace

std::filesystem::path backendPath(const std::string& name,
                                  const std::filesystem::path& plugin_dir) {
  if (!isValidName(name)) {
    throw std::invalid_argument("backend name '" + name +
                                "' is invalid: use lower-case letters, digits and '_'");
  }
  return plugin_dir / ("libscs_backend_" + name + ".so");
}

Result<backend::RuntimeBackendPtr> loadBackend(const std::filesystem::path& file,
                                               const backend::BackendContext& ctx) {
  try {
    return load(file, ctx);
  } catch (const std::exception& e) {
    return internal("cannot load backend plugin " + file.string() + ": " + e.what());
  }
}

}  // namespace scs::plugin
