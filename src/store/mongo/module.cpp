// The MongoDB backend's one entry point as a module (certfleet_store_mongo.so): the table the
// executable resolves by name (store/mongodb_module.cpp loads it). Everything else the module
// uses of core and store is the executable's own (it exports its symbols), so the process has one
// error category, one logger and one set of Asio services.
#include "certfleet/store/mongodb.hpp"

namespace {

constexpr certfleet::store::mongodb_backend backend{
    CERTFLEET_VERSION,
    sizeof(certfleet::store::mongodb_options),
    certfleet::store::validate_mongodb_uri,
    certfleet::store::redacted_mongodb_uri,
    certfleet::store::open_mongodb,
    certfleet::store::drop_mongodb_database,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const certfleet::store::mongodb_backend*
CERTFLEET_MONGODB_BACKEND_ENTRY() {
  return &backend;
}
