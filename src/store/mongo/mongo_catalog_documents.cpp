// The catalog's documents on MongoDB (mongo_catalog_detail.hpp): each record's document and
// reader, the command documents and the aggregation pipelines the reads send. Pure, no I/O: kept
// apart from the transactions that send them (mongo_catalog.cpp, mongo_catalog_reads.cpp) so a
// record's field names are spelled in one place. The collections' layout is in mongo_catalog.cpp.
#include "mongo_catalog_detail.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace certfleet::store::mongo {

namespace {

// ---- small BSON helpers ------------------------------------------------------------------------

void append_double(doc& d, std::string_view k, double v) {
  bson_append_double(d.get(), k.data(), static_cast<int>(k.size()), v);
}

double read_double(const bson_t* b, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, b, key)) return 0;
  if (BSON_ITER_HOLDS_DOUBLE(&it)) return bson_iter_double(&it);
  if (BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it)) return static_cast<double>(bson_iter_as_int64(&it));
  return 0;
}

// The strings of an array field (distribution ids lists).
std::vector<std::string> read_strings(const bson_t* b, const char* key) {
  std::vector<std::string> out;
  bson_iter_t it, child;
  if (!bson_iter_init_find(&it, b, key) || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &child)) return out;
  while (bson_iter_next(&child)) {
    if (!BSON_ITER_HOLDS_UTF8(&child)) continue;
    std::uint32_t len = 0;
    const char* s = bson_iter_utf8(&child, &len);
    out.emplace_back(s, len);
  }
  return out;
}

doc one_i32(std::string_view k, std::int32_t v) {
  doc d;
  d.i32(k, v);
  return d;
}

// A regex that matches strings starting with `prefix`, every character literal: MongoDB turns an
// anchored literal prefix into index bounds (a range scan, like SQLite's [prefix, prefix+1)).
std::string regex_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x80 && !std::isalnum(u) && ch != '_' && ch != ' ' && ch != ':' && ch != '-') out.push_back('\\');
    out.push_back(ch);
  }
  return out;
}

// What distributions_using matches: the certificate and the targets, once each.
std::vector<std::string> uses_of(const distribution_record& d) {
  std::vector<std::string> u;
  u.push_back(d.certificate_id);
  for (const auto& t : d.target_ids) u.push_back(t);
  std::sort(u.begin(), u.end());
  u.erase(std::unique(u.begin(), u.end()), u.end());
  return u;
}

}  // namespace

namespace detail {

doc one(std::string_view k, std::string_view v) {
  doc d;
  d.str(k, v);
  return d;
}
doc with(std::string_view op, const doc& v) {
  doc d;
  d.sub(op, v);
  return d;
}
doc starts_with(std::string_view prefix) {
  doc d;
  d.str("$regex", "^" + regex_escape(prefix));
  return d;
}

// ---- command documents (pure: the wire tests read them whole) ----------------------------------

doc find_cmd(std::string_view coll, const doc& filter, const doc* sort, std::int64_t limit, std::int64_t skip,
             const doc* projection, std::int32_t max_time_ms) {
  doc cmd;
  cmd.str("find", coll).sub("filter", filter);
  if (sort) cmd.sub("sort", *sort);
  if (projection) cmd.sub("projection", *projection);
  if (skip > 0) cmd.i64("skip", skip);
  if (limit > 0) cmd.i64("limit", limit);
  cmd.i32("maxTimeMS", max_time_ms);
  return cmd;
}

doc aggregate_cmd(std::string_view coll, const std::vector<doc>& pipeline, std::int32_t max_time_ms) {
  doc cmd;
  cmd.str("aggregate", coll).array("pipeline", pipeline).sub("cursor", doc{}).i32("maxTimeMS", max_time_ms);
  return cmd;
}

doc insert_cmd(std::string_view coll, const doc& d, std::int32_t max_time_ms) {
  doc cmd;
  cmd.str("insert", coll).array("documents", {d}).i32("maxTimeMS", max_time_ms);
  return cmd;
}

doc update_cmd(std::string_view coll, const doc& q, const doc& u, bool upsert, std::int32_t max_time_ms) {
  doc stmt;
  stmt.sub("q", q).sub("u", u);
  if (upsert) stmt.boolean("upsert", true);
  doc cmd;
  cmd.str("update", coll).array("updates", {stmt}).i32("maxTimeMS", max_time_ms);
  return cmd;
}

doc delete_cmd(std::string_view coll, const doc& q, std::int32_t max_time_ms) {
  doc stmt;
  stmt.sub("q", q).i32("limit", 1);
  doc cmd;
  cmd.str("delete", coll).array("deletes", {stmt}).i32("maxTimeMS", max_time_ms);
  return cmd;
}

// SQLite's LIMIT: 0 → nothing, negative → no limit.
bool limit_is_zero(int limit) { return limit == 0; }
std::int64_t mongo_limit(int limit) { return limit < 0 ? 0 : limit; }

// ---- documents ---------------------------------------------------------------------------------

doc object_document(const catalog_object& o) {
  doc d;
  d.str("_id", o.id).str("project_id", o.project_id).str("kind", o.kind).str("name", o.name).str("doc", o.doc);
  // Absent, not empty: count_sealed, sealed_page and the partial indexes read "exists".
  if (!o.sealed.empty()) d.str("sealed", o.sealed);
  if (!o.ref_id.empty()) d.str("ref_id", o.ref_id);
  d.i64("not_after", o.not_after).i64("created_at", o.created_at);
  return d;
}

catalog_object read_object(const bson_t* b) {
  view v(b);
  catalog_object o;
  o.id = v.str("_id");
  o.project_id = v.str("project_id");
  o.kind = v.str("kind");
  o.name = v.str("name");
  o.doc = v.str("doc");
  o.sealed = v.str("sealed");
  o.ref_id = v.str("ref_id");
  o.not_after = v.i64("not_after");
  o.created_at = v.i64("created_at");
  return o;
}

// The fields update_distribution writes: every mutable field of the current run.
doc distribution_run_fields(const distribution_record& d) {
  doc s;
  s.str("status", d.status).i64("run_no", d.run_no).str("mode", d.mode).str_array("run_target_ids", d.run_target_ids);
  s.str_array("job_ids", d.job_ids).str("error", d.error).i64("fan_out_total", d.fan_out_total);
  s.i64("fan_out_succeeded", d.fan_out_succeeded).i64("fan_out_failed", d.fan_out_failed);
  s.i64("fan_out_partial", d.fan_out_partial).i64("fan_out_cancelled", d.fan_out_cancelled);
  s.i64("fan_out_retrying", d.fan_out_retrying).i64("fan_out_retry_wave", d.fan_out_retry_wave);
  s.boolean("fail_fast_fired", d.fail_fast_fired).boolean("cancel_requested", d.cancel_requested);
  s.i64("run_started_at", d.run_started_at).i64("run_finished_at", d.run_finished_at).i64("updated_at", d.updated_at);
  s.i64("run_certificate_version", d.run_certificate_version).str("run_trigger", d.run_trigger);
  s.i64("run_redrives", d.run_redrives);
  return s;
}

doc new_distribution_document(const distribution_record& d) {
  doc x;
  x.str("_id", d.id).str("project_id", d.project_id).str("name", d.name).str("certificate_id", d.certificate_id);
  x.str_array("target_ids", d.target_ids).str_array("uses", uses_of(d)).boolean("canary", d.canary);
  append_double(x, "failure_tolerance", d.failure_tolerance);
  x.boolean("fail_fast", d.fail_fast).boolean("auto_execute", d.auto_execute);
  x.str("status", to_string(run_status::idle)).i64("run_no", 0).str("mode", to_string(run_mode::none)).str_array("run_target_ids", {}).str_array("job_ids", {});
  x.str("error", "").i64("fan_out_total", 0).i64("fan_out_succeeded", 0).i64("fan_out_failed", 0);
  x.i64("fan_out_partial", 0).i64("fan_out_cancelled", 0).i64("fan_out_retrying", 0).i64("fan_out_retry_wave", 0);
  x.boolean("fail_fast_fired", false).boolean("cancel_requested", false).i64("run_started_at", 0);
  x.i64("run_finished_at", 0).i64("run_certificate_version", 0).str("run_trigger", "").i64("run_redrives", 0);
  x.i64("created_at", d.created_at).i64("updated_at", d.created_at);
  return x;
}

distribution_record read_distribution(const bson_t* b) {
  view v(b);
  distribution_record d;
  d.id = v.str("_id");
  d.project_id = v.str("project_id");
  d.name = v.str("name");
  d.certificate_id = v.str("certificate_id");
  d.target_ids = read_strings(b, "target_ids");
  d.canary = v.boolean("canary");
  d.failure_tolerance = read_double(b, "failure_tolerance");
  d.fail_fast = v.boolean("fail_fast");
  d.auto_execute = v.boolean("auto_execute");
  d.status = v.str("status");
  d.run_no = v.i64("run_no");
  d.mode = v.str("mode");
  d.run_target_ids = read_strings(b, "run_target_ids");
  d.job_ids = read_strings(b, "job_ids");
  d.error = v.str("error");
  d.fan_out_total = v.i64("fan_out_total");
  d.fan_out_succeeded = v.i64("fan_out_succeeded");
  d.fan_out_failed = v.i64("fan_out_failed");
  d.fan_out_partial = v.i64("fan_out_partial");
  d.fan_out_cancelled = v.i64("fan_out_cancelled");
  d.fan_out_retrying = v.i64("fan_out_retrying");
  d.fan_out_retry_wave = v.i64("fan_out_retry_wave");
  d.fail_fast_fired = v.boolean("fail_fast_fired");
  d.cancel_requested = v.boolean("cancel_requested");
  d.run_certificate_version = v.i64("run_certificate_version");
  d.run_trigger = v.str("run_trigger");
  d.run_redrives = v.i64("run_redrives");
  d.run_started_at = v.i64("run_started_at");
  d.run_finished_at = v.i64("run_finished_at");
  d.created_at = v.i64("created_at");
  d.updated_at = v.i64("updated_at");
  return d;
}

// One attempt of one job at one target: the result's key (SQLite's primary key).
doc result_id(const target_result& r) {
  doc id;
  id.str("d", r.distribution_id).i64("r", r.run_no).str("t", r.target_id).i64("a", r.retry_attempt);
  id.i64("f", r.fence).str("j", r.job_id);
  return id;
}

doc result_document(const target_result& r) {
  doc d;
  d.str("distribution_id", r.distribution_id).i64("run_no", r.run_no).str("target_id", r.target_id);
  d.str("job_id", r.job_id).i64("retry_attempt", r.retry_attempt).i64("fence", r.fence).str("status", r.status);
  d.str("error_class", r.error_class).str("error", r.error).i64("started_at", r.started_at);
  d.i64("finished_at", r.finished_at).str("fingerprint", r.fingerprint_sha256).boolean("hash_skipped", r.hash_skipped);
  d.i64("files_from_run", r.files_from_run).str("detail", r.detail.empty() ? "{}" : r.detail);
  return d;
}

target_result read_result(const bson_t* b) {
  view v(b);
  target_result r;
  r.distribution_id = v.str("distribution_id");
  r.run_no = v.i64("run_no");
  r.target_id = v.str("target_id");
  r.job_id = v.str("job_id");
  r.retry_attempt = v.i64("retry_attempt");
  r.fence = v.i64("fence");
  r.status = v.str("status");
  r.error_class = v.str("error_class");
  r.error = v.str("error");
  r.started_at = v.i64("started_at");
  r.finished_at = v.i64("finished_at");
  r.fingerprint_sha256 = v.str("fingerprint");
  r.hash_skipped = v.boolean("hash_skipped");
  r.files_from_run = v.i64("files_from_run");
  r.detail = v.str("detail");
  return r;
}

doc finalized_id(std::string_view distribution_id, std::int64_t run_no, std::string_view job_id) {
  doc id;
  id.str("d", distribution_id).i64("r", run_no).str("j", job_id);
  return id;
}

doc dns_document(const dns_record& r) {
  doc d;
  d.str("_id", r.id).str("project_id", r.project_id).str("provider_id", r.provider_id).str("job_id", r.job_id);
  d.i64("fence", r.fence).str("zone", r.zone).str("fqdn", r.fqdn).str("value", r.value);
  d.i64("presented_at", r.presented_at).i64("removed_at", 0);
  return d;
}

dns_record read_dns(const bson_t* b) {
  view v(b);
  dns_record r;
  r.id = v.str("_id");
  r.project_id = v.str("project_id");
  r.provider_id = v.str("provider_id");
  r.job_id = v.str("job_id");
  r.fence = v.i64("fence");
  r.zone = v.str("zone");
  r.fqdn = v.str("fqdn");
  r.value = v.str("value");
  r.presented_at = v.i64("presented_at");
  r.removed_at = v.i64("removed_at");
  return r;
}

std::string meta_id(std::string_view key) { return fmt::format("meta:{}", key); }

error object_not_found(std::string_view kind, std::string_view id) {
  return make_error(errc::not_found, fmt::format("{} {} not found", kind, id), "id");
}

// "1".."4294967295" without a leading zero, else 0 (what SQLite's sealed_versions reads).
std::uint32_t parse_version(std::string_view v) {
  if (v.empty() || v.size() > 10 || v.front() == '0') return 0;
  std::uint64_t n = 0;
  for (char ch : v) {
    if (ch < '0' || ch > '9') return 0;
    n = n * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  return n <= 0xffffffffu ? static_cast<std::uint32_t>(n) : 0;
}

// sealed_versions' pipeline: envelopes grouped by kind and the text between the envelope's first
// two colons ("cfs1:<version>:…"), that text kept only when it is a version's digits.
std::vector<doc> sealed_versions_pipeline() {
  doc exists;
  exists.boolean("$exists", true);
  doc match_filter;
  match_filter.sub("sealed", exists);
  // rest = the 11 code points after "cfs1:"; i = its first ':'; v = what is before it.
  doc rest_expr;
  {
    list l;
    l.str("$sealed").i64(5).i64(11);
    rest_expr.arr("$substrCP", l);
  }
  doc colon_at;
  {
    list l;
    l.str("$$rest").str(":");
    colon_at.arr("$indexOfCP", l);
  }
  doc before_colon;
  {
    list l;
    l.str("$$rest").i64(0).str("$$i");
    before_colon.arr("$substrCP", l);
  }
  doc has_colon;
  {
    list l;
    l.str("$$i").i64(0);
    has_colon.arr("$gt", l);
  }
  doc raw_cond;
  {
    list l;
    l.sub(has_colon).sub(before_colon).str("");
    raw_cond.arr("$cond", l);
  }
  doc inner_let;
  {
    doc vars;
    vars.sub("i", colon_at);
    doc let;
    let.sub("vars", vars).sub("in", raw_cond);
    inner_let.sub("$let", let);
  }
  doc digits;
  {
    doc rm;
    rm.str("input", "$$raw").str("regex", "^[1-9][0-9]{0,9}$");
    digits.sub("$regexMatch", rm);
  }
  doc keep_digits;
  {
    list l;
    l.sub(digits).str("$$raw").str("");
    keep_digits.arr("$cond", l);
  }
  doc raw_let;
  {
    doc vars;
    vars.sub("raw", inner_let);
    doc let;
    let.sub("vars", vars).sub("in", keep_digits);
    raw_let.sub("$let", let);
  }
  doc version_expr;
  {
    doc vars;
    vars.sub("rest", rest_expr);
    doc let;
    let.sub("vars", vars).sub("in", raw_let);
    version_expr.sub("$let", let);
  }
  doc group_id;
  group_id.str("kind", "$kind").sub("v", version_expr);
  doc sum;
  sum.i32("$sum", 1);
  doc group;
  group.sub("_id", group_id).sub("n", sum);
  std::vector<doc> p;
  p.push_back(with("$match", match_filter));
  p.push_back(with("$group", group));
  return p;
}

// target_last_successes' pipeline: each target's latest succeeded result, by target id.
std::vector<doc> last_success_pipeline(int limit) {
  doc succeeded;
  succeeded.str("status", to_string(target_status::succeeded));
  doc latest;
  latest.str("$max", "$finished_at");
  doc group;
  group.str("_id", "$target_id").sub("at", latest);
  std::vector<doc> p;
  p.push_back(with("$match", succeeded));
  p.push_back(with("$group", group));
  p.push_back(with("$sort", one_i32("_id", 1)));
  if (limit > 0) {
    doc l;
    l.i64("$limit", limit);
    p.push_back(std::move(l));
  }
  return p;
}

// dns_records_left's pipeline: records still in a zone, oldest first, whose presenting attempt
// is over (no job with that id is active in that fence).
std::vector<doc> dns_left_pipeline(int limit) {
  doc sort;
  sort.i32("presented_at", 1).i32("_id", 1);
  doc running_match;
  {
    list a, b, c;
    a.str("$_id").str("$$job");
    b.str("$status").str("active");
    c.str("$fence").str("$$fence");
    doc ea, eb, ec;
    ea.arr("$eq", a);
    eb.arr("$eq", b);
    ec.arr("$eq", c);
    list all;
    all.sub(ea).sub(eb).sub(ec);
    doc and_;
    and_.arr("$and", all);
    running_match.sub("$expr", and_);
  }
  doc lookup;
  {
    doc let;
    let.str("job", "$job_id").str("fence", "$fence");
    std::vector<doc> inner;
    inner.push_back(with("$match", running_match));
    inner.push_back(with("$project", one_i32("_id", 1)));
    lookup.str("from", "jobs").sub("let", let).array("pipeline", inner).str("as", "running");
  }
  doc none_running;
  none_running.sub("running", one_i32("$size", 0));
  std::vector<doc> p;
  doc in_zone;
  in_zone.i64("removed_at", 0);
  p.push_back(with("$match", in_zone));
  p.push_back(with("$sort", sort));
  p.push_back(with("$lookup", lookup));
  p.push_back(with("$match", none_running));
  if (limit > 0) {
    doc l;
    l.i64("$limit", limit);
    p.push_back(std::move(l));
  }
  p.push_back(with("$project", one_i32("running", 0)));
  return p;
}

}  // namespace detail

}  // namespace certfleet::store::mongo
