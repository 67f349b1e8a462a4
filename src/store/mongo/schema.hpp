#pragma once
// The collections' indexes (created at start; creating an existing index is a no-op) and the
// schema version, recorded like SQLite's so a newer store is refused by an older binary.
#include "client.hpp"

namespace certfleet::store::mongo {

inline constexpr int schema_version = 1;

// The createIndexes commands, one per collection, as sent (the wire tests assert them).
std::vector<doc> index_commands(std::int32_t max_time_ms);
result<void> prepare_schema(connection& c);

}  // namespace certfleet::store::mongo
