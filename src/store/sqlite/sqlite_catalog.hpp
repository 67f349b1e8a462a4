#pragma once
// The SQLite side of catalog_store, sharing the store's writer and readers.
#include "certfleet/store/catalog.hpp"
#include "executor.hpp"

#include <functional>
#include <memory>

namespace certfleet::store::sqlite {

// The job operations of a write transaction, made by the job store (sqlite_store.cpp).
using job_tx_factory = std::function<std::unique_ptr<job_tx>(db&)>;

// The catalog operations of the write transaction open on `d`; `jobs` is the job side of it.
std::unique_ptr<catalog_tx> make_catalog_tx(db& d, job_tx& jobs);
std::unique_ptr<catalog_store> make_catalog_store(writer& w, reader_pool& r, job_tx_factory jobs);

}  // namespace certfleet::store::sqlite
