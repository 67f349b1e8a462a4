#pragma once
// The SQLite side of auth_store and observe_store, sharing the store's writer and readers.
#include "certfleet/store/auth.hpp"
#include "executor.hpp"

#include <memory>

namespace certfleet::store::sqlite {

class auth_stores {
 public:
  virtual ~auth_stores() = default;
  virtual auth_store& auth() = 0;
  virtual observe_store& observe() = 0;
};

std::unique_ptr<auth_stores> make_auth_store(writer& w, reader_pool& r);

}  // namespace certfleet::store::sqlite
