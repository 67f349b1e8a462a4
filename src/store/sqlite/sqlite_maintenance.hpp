#pragma once
// The SQLite side of lease_store and maintenance_store, sharing the store's writer and readers.
#include "certfleet/store/maintenance.hpp"
#include "executor.hpp"

#include <memory>

namespace certfleet::store::sqlite {

class maintenance_stores {
 public:
  virtual ~maintenance_stores() = default;
  virtual lease_store& leases() = 0;
  virtual maintenance_store& maintenance() = 0;
};

std::unique_ptr<maintenance_stores> make_maintenance_stores(writer& w, reader_pool& r);

}  // namespace certfleet::store::sqlite
