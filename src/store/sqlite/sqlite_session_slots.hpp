#pragma once
// The SQLite side of session_slot_store, sharing the store's writer and readers.
#include "certfleet/store/session_slots.hpp"
#include "executor.hpp"

#include <memory>

namespace certfleet::store::sqlite {

std::unique_ptr<session_slot_store> make_session_slot_store(writer& w, reader_pool& r);

}  // namespace certfleet::store::sqlite
