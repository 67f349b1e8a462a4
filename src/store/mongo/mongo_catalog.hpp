#pragma once
// The catalog (DESIGN §4) on MongoDB: objects, distributions, target results, finalized
// children (the counters' guard), DNS-01 challenge records; every write inside the transaction
// `transact` opens, reads in one snapshot. Mirrors src/store/sqlite/sqlite_catalog.cpp.
#include "certfleet/store/catalog.hpp"
#include "client.hpp"
#include "job_tx.hpp"

#include <memory>
#include <string>
#include <vector>

namespace certfleet::store::mongo {

// The catalog side of the transaction open on `session`; `jobs` is its job side (the failure of
// a command is recorded with jobs.keep so with_transaction sees its labels).
std::unique_ptr<catalog_tx> make_catalog_tx(const connection& c, mongoc_client_t* client,
                                            mongoc_client_session_t* session, mongo_job_tx& jobs);
// transact/read on the store threads; `catalog` is the factory above, bound by the store (the
// same one the job queue's terminal hooks use).
std::unique_ptr<catalog_store> make_catalog_store(connection& c, executor& ex, const catalog_tx_factory& catalog);
// createIndexes for the catalog's collections, as sent at start.
std::vector<doc> catalog_index_commands(std::int32_t max_time_ms);

// For the catalog's wire tests: the catalog alone on its own connection (connection::open: hello only, no indexes, no schema
// write) and store threads, the factory bound to make_catalog_tx; the pointer owns all of it.
result<std::shared_ptr<catalog_store>> open_catalog_only(const mongodb_options& o);

}  // namespace certfleet::store::mongo
