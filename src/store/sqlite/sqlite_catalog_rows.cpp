// The catalog's rows on SQLite (sqlite_catalog_detail.hpp): each record's reader, the id lists
// stored as JSON, a key prefix as an index range and objects_named's statement texts. Apart from
// the statements that use them (sqlite_catalog.cpp) so a column's position is read in one place.
#include "sqlite_catalog_detail.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

namespace certfleet::store::sqlite {

namespace {

std::vector<std::string> ids_from_json(const std::string& text) {
  std::vector<std::string> out;
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec || !v.is_array()) return out;
  for (const auto& e : v.as_array())
    if (e.is_string()) out.emplace_back(e.as_string());
  return out;
}

constexpr std::string_view known_kinds[] = {kind_certificate, kind_credential, kind_target, kind_channel, kind_rule};

}  // namespace

namespace detail {

catalog_object read_object(stmt& s) {
  catalog_object o;
  o.id = s.text(0);
  o.project_id = s.text(1);
  o.kind = s.text(2);
  o.name = s.text(3);
  o.doc = s.text(4);
  o.sealed = s.text(5);
  o.ref_id = s.text(6);
  o.not_after = s.int64(7);
  o.created_at = s.int64(8);
  return o;
}

std::string ids_to_json(const std::vector<std::string>& ids) {
  boost::json::array a;
  a.reserve(ids.size());
  for (const auto& id : ids) a.emplace_back(id);
  return boost::json::serialize(a);
}

distribution_record read_distribution(stmt& s) {
  distribution_record d;
  d.id = s.text(0);
  d.project_id = s.text(1);
  d.name = s.text(2);
  d.certificate_id = s.text(3);
  d.target_ids = ids_from_json(s.text(4));
  d.canary = s.int64(5) != 0;
  d.failure_tolerance = s.real(6);
  d.fail_fast = s.int64(7) != 0;
  d.status = s.text(8);
  d.run_no = s.int64(9);
  d.mode = s.text(10);
  d.run_target_ids = ids_from_json(s.text(11));
  d.job_ids = ids_from_json(s.text(12));
  d.error = s.text(13);
  d.fan_out_total = s.int64(14);
  d.fan_out_succeeded = s.int64(15);
  d.fan_out_failed = s.int64(16);
  d.fan_out_partial = s.int64(17);
  d.fan_out_cancelled = s.int64(18);
  d.fan_out_retrying = s.int64(19);
  d.fan_out_retry_wave = s.int64(20);
  d.fail_fast_fired = s.int64(21) != 0;
  d.cancel_requested = s.int64(22) != 0;
  d.run_started_at = s.int64(23);
  d.run_finished_at = s.int64(24);
  d.created_at = s.int64(25);
  d.updated_at = s.int64(26);
  d.auto_execute = s.int64(27) != 0;
  d.run_certificate_version = s.int64(28);
  d.run_trigger = s.text(29);
  d.run_redrives = s.int64(30);
  return d;
}

target_result read_result(stmt& s) {
  target_result r;
  r.distribution_id = s.text(0);
  r.run_no = s.int64(1);
  r.target_id = s.text(2);
  r.job_id = s.text(3);
  r.retry_attempt = s.int64(4);
  r.fence = s.int64(5);
  r.status = s.text(6);
  r.error_class = s.text(7);
  r.error = s.text(8);
  r.started_at = s.int64(9);
  r.finished_at = s.int64(10);
  r.fingerprint_sha256 = s.text(11);
  r.hash_skipped = s.int64(12) != 0;
  r.files_from_run = s.int64(13);
  r.detail = s.text(14);
  return r;
}

dns_record read_dns_record(stmt& s, int at) {
  dns_record r;
  r.id = s.text(at + 0);
  r.project_id = s.text(at + 1);
  r.provider_id = s.text(at + 2);
  r.job_id = s.text(at + 3);
  r.fence = s.int64(at + 4);
  r.zone = s.text(at + 5);
  r.fqdn = s.text(at + 6);
  r.value = s.text(at + 7);
  r.presented_at = s.int64(at + 8);
  r.removed_at = s.is_null(at + 9) ? 0 : s.int64(at + 9);
  return r;
}

// The keys that start with `prefix` are one range on the (project_id, idempotency_key) index:
// [prefix, the prefix with its last byte raised by one) in SQLite's bytewise order. A prefix of
// 0xff bytes only (or none) has no upper bound: hi is empty.
std::pair<std::string, std::string> prefix_range(std::string_view prefix) {
  std::string hi(prefix);
  while (!hi.empty() && static_cast<unsigned char>(hi.back()) == 0xff) hi.pop_back();
  if (!hi.empty()) hi.back() = static_cast<char>(static_cast<unsigned char>(hi.back()) + 1);
  return {std::string(prefix), std::move(hi)};
}

bool is_known_kind(std::string_view kind) {
  return std::find(std::begin(known_kinds), std::end(known_kinds), kind) != std::end(known_kinds);
}

// objects_named's statement, with a known kind written into it rather than bound: with `kind = ?`
// SQLite prepares the statement again on every run (the partial index objects_not_after is on
// kind = 'certificate', so the planner must look at each bound value), 15 µs instead of 1 — and
// a dead job's terminal hook runs this for every dead job. Texts live as long as the process, so
// the connection's statement cache (keyed by the text's address) keeps one per kind.
const char* named_sql(std::string_view kind, bool bounded) {
  static const std::map<std::string, std::array<std::string, 2>, std::less<>> by_kind = [] {
    std::map<std::string, std::array<std::string, 2>, std::less<>> m;
    for (auto k : known_kinds) {
      auto head = fmt::format("SELECT " OBJECT_COLS " FROM objects WHERE project_id = ?1 AND kind = '{}' AND name >= ?3 ", k);
      m[std::string(k)] = {head + "ORDER BY name LIMIT ?5", head + "AND name < ?4 ORDER BY name LIMIT ?5"};
    }
    return m;
  }();
  if (auto it = by_kind.find(kind); it != by_kind.end()) return it->second[bounded ? 1 : 0].c_str();
  return bounded ? "SELECT " OBJECT_COLS " FROM objects WHERE project_id = ?1 AND kind = ?2 AND name >= ?3 "
                   "AND name < ?4 ORDER BY name LIMIT ?5"
                 : "SELECT " OBJECT_COLS " FROM objects WHERE project_id = ?1 AND kind = ?2 AND name >= ?3 "
                   "ORDER BY name LIMIT ?5";
}

error object_not_found(std::string_view kind, std::string_view id) {
  return make_error(errc::not_found, fmt::format("{} {} not found", kind, id), "id");
}

}  // namespace detail

}  // namespace certfleet::store::sqlite
