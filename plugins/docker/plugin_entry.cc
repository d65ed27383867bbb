#include <boost/dll/alias.hpp>
#include <scs/backend/backend.h>
namespace {
scs::backend::RuntimeBackend* createBackend(const scs::backend::BackendContext&, std::string* e) { *e = "not yet"; return nullptr; }
const scs::backend::AbiStamp kStamp{scs::backend::kAbiVersion, scs::backend::kToolchain};
}
BOOST_DLL_ALIAS(createBackend, scs_create_backend)
BOOST_DLL_ALIAS(kStamp, scs_backend_abi)
