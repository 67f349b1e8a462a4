#pragma once
// The command shapes the auth, maintenance and session-slot stores share (private to
// src/store/mongo; commands.hpp has the ones every file uses).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bson_doc.hpp"
#include "client.hpp"

namespace certfleet::store::mongo::detail {

// Reads whose result set is not bounded by a limit ask for everything in the first batch (the
// server's default first batch is 101 documents); each is small (tokens, settings, slots).
constexpr std::int32_t whole_batch = 100'000;

doc op(const char* name, const doc& v);
doc literal(std::string_view v);
doc exists(bool yes);
doc i64_op(const char* name, std::int64_t v);
doc str_in(const std::vector<std::string>& values);
// find with an optional sort and projection; `limit` 0: no limit (whole_batch); readConcern
// majority when a decision depends on the read.
doc find_cmd(std::string_view coll, const doc& filter, const doc* sort, const doc* projection, std::int64_t limit,
             std::int64_t skip, bool majority, std::int32_t max_time_ms);
// The same inside a transaction: the transaction's read concern, no command-level one.
doc find_txn(std::string_view coll, const doc& filter, const doc* sort, const doc* projection, std::int64_t limit,
             std::int32_t max_time_ms);
// One delete statement (limit 0: every match).
doc delete_cmd(std::string_view coll, const doc& filter, bool many, const connection& c, bool in_txn = false);
doc insert_cmd(std::string_view coll, const doc& d, const connection& c, bool in_txn = false);

}  // namespace certfleet::store::mongo::detail
