// SKELETON: being written (helper); replaced whole.
#include "mongo_catalog.hpp"

namespace certfleet::store::mongo {
std::unique_ptr<catalog_tx> make_catalog_tx(const connection&, mongoc_client_t*, mongoc_client_session_t*, mongo_job_tx&) {
  return nullptr;
}
std::unique_ptr<catalog_store> make_catalog_store(connection&, executor&, const catalog_tx_factory&) { return nullptr; }
std::vector<doc> catalog_index_commands(std::int32_t) { return {}; }
}  // namespace certfleet::store::mongo
