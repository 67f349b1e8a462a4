#pragma once
// The collections' indexes (created at start; creating an existing index is a no-op) and the
// schema version, recorded like SQLite's so a newer store is refused by an older binary.
#include "client.hpp"

namespace certfleet::store::mongo {

inline constexpr int schema_version = 1;

// One index of a createIndexes command.
struct index_spec {
  const char* name;
  std::vector<std::pair<const char*, int>> keys;  // field, 1 or -1: the order of the query's sort
  bool unique = false;
  // Partial filter: the field exists (a document without it is not in the index).
  const char* partial_exists = nullptr;
};
// createIndexes on `coll`, w:majority (creating an index that exists is a no-op).
doc create_indexes(const char* coll, const std::vector<index_spec>& specs, std::int32_t max_time_ms);

// The createIndexes commands, one per collection, as sent (the wire tests assert them).
std::vector<doc> index_commands(std::int32_t max_time_ms);
result<void> prepare_schema(connection& c);

}  // namespace certfleet::store::mongo
