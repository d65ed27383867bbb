#include <scs/backend/backend.h>

#include <boost/dll/alias.hpp>
#include <exception>
#include <string>

#include "fake_backend.h"

namespace {

scs::backend::RuntimeBackend* createBackend(const scs::backend::BackendContext& context,
                                            std::string* error) {
  try {
    scs::fake::Options options;
    if (auto problem = scs::fake::parseOptions(context.options, &options)) {
      *error = *problem;
      return nullptr;
    }
    return new scs::fake::FakeBackend(std::move(options), context.log);
  } catch (const std::exception& e) {
    *error = std::string("fake: ") + e.what();
    return nullptr;
  }
}

const scs::backend::AbiStamp kStamp{scs::backend::kAbiVersion, scs::backend::kToolchain};

}  // namespace

BOOST_DLL_ALIAS(createBackend, scs_create_backend)
BOOST_DLL_ALIAS(kStamp, scs_backend_abi)
