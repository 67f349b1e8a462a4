#pragma once
// Tokens, UI sessions, the audit log, system settings (auth_store); job counts, durations and
// live log reads for /metrics and the WebSocket (observe_store); the scheduler's leader lease
// and retention (lease_store, maintenance_store); SSH session slots. On MongoDB, mirroring
// src/store/sqlite/sqlite_auth.cpp, sqlite_maintenance.cpp and sqlite_session_slots.cpp.
#include "certfleet/store/auth.hpp"
#include "certfleet/store/maintenance.hpp"
#include "certfleet/store/session_slots.hpp"
#include "client.hpp"

#include <memory>
#include <vector>

namespace certfleet::store::mongo {

std::unique_ptr<auth_store> make_auth_store(connection& c, executor& ex);
std::unique_ptr<observe_store> make_observe_store(connection& c, executor& ex);
std::unique_ptr<lease_store> make_lease_store(connection& c, executor& ex);
std::unique_ptr<maintenance_store> make_maintenance_store(connection& c, executor& ex);
std::unique_ptr<session_slot_store> make_session_slot_store(connection& c, executor& ex);
// createIndexes for these collections, as sent at start.
std::vector<doc> auth_index_commands(std::int32_t max_time_ms);

}  // namespace certfleet::store::mongo
