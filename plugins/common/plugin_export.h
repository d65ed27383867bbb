#pragma once

// The two symbols every plugin exports (core/include/scs/backend/backend.h): its factory, which
// lets no exception cross the boundary, and its ABI stamp. A plugin's plugin_entry.cc is its own
// `make` (new backend, or nullptr with *error set) and one line:
//   SCS_EXPORT_BACKEND("docker", makeBackend)

#include <scs/backend/backend.h>

#include <boost/dll/alias.hpp>
#include <exception>
#include <string>

namespace scs::plugin {

// make(context, error), with any exception it throws said in *error.
template <typename Make>
backend::RuntimeBackend* createGuarded(const char* name, Make make,
                                       const backend::BackendContext& context, std::string* error) {
  try {
    return make(context, error);
  } catch (const std::exception& e) {
    *error = std::string("the ") + name + " backend failed to start: " + e.what();
  } catch (...) {
    *error = std::string("the ") + name + " backend failed to start: unknown exception";
  }
  return nullptr;
}

}  // namespace scs::plugin

// BOOST_DLL_ALIAS must stand in the plugin's own translation unit, hence a macro.
#define SCS_EXPORT_BACKEND(NAME, MAKE)                                                            \
  namespace {                                                                                     \
  scs::backend::RuntimeBackend* scsCreateBackend(const scs::backend::BackendContext& context,     \
                                                 std::string* error) {                            \
    return ::scs::plugin::createGuarded(NAME, MAKE, context, error);                              \
  }                                                                                               \
  const scs::backend::AbiStamp kScsAbiStamp{scs::backend::kAbiVersion, scs::backend::kToolchain}; \
  }                                                                                               \
  BOOST_DLL_ALIAS(scsCreateBackend, scs_create_backend)                                           \
  BOOST_DLL_ALIAS(kScsAbiStamp, scs_backend_abi)
