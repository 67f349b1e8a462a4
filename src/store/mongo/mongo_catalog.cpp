// The catalog on MongoDB (DESIGN §4, §10): objects, distributions, target results, the fan-out
// guard set, DNS-01 challenge records and catalog meta values. Every operation runs inside the
// transaction `transact` (or `read`) opened: commands carry the session's lsid/txnNumber and no
// read or write concern of their own (the transaction's: majority). A failed command is recorded
// with mongo_job_tx::keep so with_transaction sees its labels; a duplicate key aborts a MongoDB
// transaction, so uniqueness is checked by a lookup first, or writes upsert on a deterministic _id.
// Mirrors src/store/sqlite/sqlite_catalog.cpp method by method.
//
// Collections:
//   objects                {_id, project_id, kind, name, doc, sealed?, ref_id?, not_after (0: none), created_at}
//   distributions          {_id, project_id, name, certificate_id, target_ids[], uses[] (certificate + targets),
//                           canary, failure_tolerance, fail_fast, auto_execute, status, run_no, mode,
//                           run_target_ids[], job_ids[], error, fan_out_*, fail_fast_fired, cancel_requested,
//                           run_certificate_version, run_trigger, run_redrives, run_started_at, run_finished_at,
//                           created_at, updated_at}
//   target_results         {_id: {d, r, t, a, f, j}, distribution_id, run_no, target_id, job_id, retry_attempt,
//                           fence, status, error_class, error, started_at, finished_at, fingerprint,
//                           hash_skipped, files_from_run, detail}
//   distribution_finalized {_id: {d, r, j}, distribution_id, run_no, job_id, outcome, batch}
//   dns_records            {_id, project_id, provider_id, job_id, fence, zone, fqdn, value, presented_at,
//                           removed_at (0: still in the zone)}
//   store_meta             {_id: "meta:<key>", value}   (_id "schema" is schema.cpp's)
#include "mongo_catalog.hpp"
#include "schema.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/store/job_policy.hpp"
#include "commands.hpp"
#include "job_document.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <map>
#include <utility>

namespace certfleet::store::mongo {

namespace {

constexpr const char* objects_coll = "objects";
constexpr const char* distributions_coll = "distributions";
constexpr const char* results_coll = "target_results";
constexpr const char* finalized_coll = "distribution_finalized";
constexpr const char* dns_coll = "dns_records";
constexpr const char* meta_coll = "store_meta";

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

doc one(std::string_view k, std::string_view v) {
  doc d;
  d.str(k, v);
  return d;
}
doc one_i32(std::string_view k, std::int32_t v) {
  doc d;
  d.i32(k, v);
  return d;
}
doc with(std::string_view op, const doc& v) {
  doc d;
  d.sub(op, v);
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

// What distributions_using matches: the certificate and the targets, once each.
std::vector<std::string> uses_of(const distribution_record& d) {
  std::vector<std::string> u;
  u.push_back(d.certificate_id);
  for (const auto& t : d.target_ids) u.push_back(t);
  std::sort(u.begin(), u.end());
  u.erase(std::unique(u.begin(), u.end()), u.end());
  return u;
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

// ---- reads: the commands of one transaction ----------------------------------------------------

template <class Base>
class reads : public Base {
 public:
  reads(const connection& c, mongoc_client_t* client, mongoc_client_session_t* s, mongo_job_tx* jobs)
      : c_(c), client_(client), s_(s), jobs_(jobs) {}

  // The failure that ended this transaction's work, when there is no job side to record it.
  std::optional<failure> own_failed;

  result<catalog_object> get_object(std::string_view project_id, std::string_view kind, std::string_view id) override {
    doc f;
    f.str("_id", id).str("project_id", project_id).str("kind", kind);
    auto docs = find(objects_coll, f, nullptr, 1, 0, nullptr, "get object");
    if (!docs) return std::move(docs).error();
    if (docs->empty()) return object_not_found(kind, id);
    return read_object(docs->front().get());
  }

  result<object_page> list_objects(std::string_view project_id, std::string_view kind, int page,
                                   int page_size) override {
    doc f;
    f.str("project_id", project_id).str("kind", kind);
    object_page out;
    if (page_size > 0) {
      doc sort;
      sort.i32("_id", -1);
      const auto skip = std::max<std::int64_t>(0, static_cast<std::int64_t>(page - 1) * page_size);
      auto docs = find(objects_coll, f, &sort, page_size, skip, nullptr, "list objects");
      if (!docs) return std::move(docs).error();
      for (const auto& d : *docs) out.items.push_back(read_object(d.get()));
    }
    auto n = count(objects_coll, f, "count objects");
    if (!n) return std::move(n).error();
    out.total = *n;
    return out;
  }

  result<std::vector<catalog_object>> objects_by_ids(std::string_view project_id, std::string_view kind,
                                                     const std::vector<std::string>& ids) override {
    std::vector<catalog_object> out;
    if (ids.empty()) return out;
    doc in;
    in.str_array("$in", ids);
    doc f;
    f.str("project_id", project_id).str("kind", kind).sub("_id", in);
    doc sort;
    sort.i32("_id", 1);
    auto docs = find(objects_coll, f, &sort, 0, 0, nullptr, "objects by ids");
    if (!docs) return std::move(docs).error();
    for (const auto& d : *docs) out.push_back(read_object(d.get()));
    return out;
  }

  result<std::vector<catalog_object>> objects_referencing(std::string_view project_id, std::string_view kind,
                                                          std::string_view ref) override {
    doc f;
    f.str("project_id", project_id).str("kind", kind).str("ref_id", ref);
    doc sort;
    sort.i32("_id", 1);
    return objects(f, &sort, 0, "objects referencing");
  }

  result<std::vector<catalog_object>> objects_named(std::string_view project_id, std::string_view kind,
                                                    std::string_view name_prefix, int limit) override {
    if (limit_is_zero(limit)) return std::vector<catalog_object>{};
    // A range of the unique (project_id, kind, name) index.
    doc f;
    f.str("project_id", project_id).str("kind", kind);
    if (!name_prefix.empty()) f.sub("name", starts_with(name_prefix));
    doc sort;
    sort.i32("name", 1);
    return objects(f, &sort, mongo_limit(limit), "objects named");
  }

  result<std::vector<catalog_object>> certificates_expiring(time_ms before, int limit) override {
    if (limit_is_zero(limit)) return std::vector<catalog_object>{};
    // not_after 0 is "none" (SQLite's NULL, which no bound matches).
    doc range;
    range.i64("$gt", 0).i64("$lt", before);
    doc f;
    f.str("kind", kind_certificate).sub("not_after", range);
    doc sort;
    sort.i32("not_after", 1).i32("_id", 1);
    return objects(f, &sort, mongo_limit(limit), "certificates expiring");
  }

  result<std::vector<catalog_object>> objects_by_not_after(std::string_view kind, time_ms before, int limit) override {
    if (limit_is_zero(limit)) return std::vector<catalog_object>{};
    doc range;
    range.i64("$lt", before);
    doc f;
    f.str("kind", kind).sub("not_after", range);
    doc sort;
    sort.i32("not_after", 1).i32("_id", 1);
    return objects(f, &sort, mongo_limit(limit), "objects by not_after");
  }

  result<std::int64_t> count_sealed() override {
    doc exists;
    exists.boolean("$exists", true);
    doc f;
    f.sub("sealed", exists);
    return count(objects_coll, f, "count sealed objects");
  }

  result<std::vector<sealed_count>> sealed_versions() override {
    auto docs = aggregate(objects_coll, sealed_versions_pipeline(), "sealed versions");
    if (!docs) return std::move(docs).error();
    std::vector<sealed_count> out;
    for (const auto& d : *docs) {
      view v(d.get());
      sealed_count c;
      c.kind = v.str("_id.kind");
      c.version = parse_version(v.str("_id.v"));
      c.count = v.i64("n");
      out.push_back(std::move(c));
    }
    std::sort(out.begin(), out.end(), [](const sealed_count& a, const sealed_count& b) {
      return a.kind != b.kind ? a.kind < b.kind : a.version < b.version;
    });
    // Two spellings that are not versions both count as 0: merge them.
    std::vector<sealed_count> merged;
    for (auto& c : out) {
      if (!merged.empty() && merged.back().kind == c.kind && merged.back().version == c.version)
        merged.back().count += c.count;
      else merged.push_back(std::move(c));
    }
    return merged;
  }

  result<std::vector<sealed_row>> sealed_page(std::string_view kind, std::string_view except_prefix,
                                              std::string_view after_id, int limit) override {
    if (limit_is_zero(limit)) return std::vector<sealed_row>{};
    doc sealed;
    sealed.boolean("$exists", true);
    if (!except_prefix.empty()) sealed.sub("$not", starts_with(except_prefix));
    doc after;
    after.str("$gt", after_id);
    doc f;
    f.str("kind", kind).sub("sealed", sealed).sub("_id", after);
    doc sort;
    sort.i32("_id", 1);
    doc projection;
    projection.i32("sealed", 1);
    auto docs = find(objects_coll, f, &sort, mongo_limit(limit), 0, &projection, "sealed page");
    if (!docs) return std::move(docs).error();
    std::vector<sealed_row> out;
    for (const auto& d : *docs) {
      view v(d.get());
      out.push_back({v.str("_id"), v.str("sealed")});
    }
    return out;
  }

  result<std::optional<std::string>> meta(std::string_view key) override {
    auto docs = find(meta_coll, one("_id", meta_id(key)), nullptr, 1, 0, nullptr, "read meta");
    if (!docs) return std::move(docs).error();
    if (docs->empty()) return std::optional<std::string>{};
    return std::optional<std::string>(view(docs->front().get()).str("value"));
  }

  result<distribution_record> get_distribution(std::string_view project_id, std::string_view id) override {
    doc f;
    f.str("_id", id);
    if (!project_id.empty()) f.str("project_id", project_id);
    auto docs = find(distributions_coll, f, nullptr, 1, 0, nullptr, "get distribution");
    if (!docs) return std::move(docs).error();
    if (docs->empty()) return object_not_found("distribution", id);
    return read_distribution(docs->front().get());
  }

  result<distribution_page> list_distributions(std::string_view project_id, int page, int page_size) override {
    doc f;
    f.str("project_id", project_id);
    distribution_page out;
    if (page_size > 0) {
      doc sort;
      sort.i32("_id", -1);
      const auto skip = std::max<std::int64_t>(0, static_cast<std::int64_t>(page - 1) * page_size);
      auto docs = find(distributions_coll, f, &sort, page_size, skip, nullptr, "list distributions");
      if (!docs) return std::move(docs).error();
      for (const auto& d : *docs) out.items.push_back(read_distribution(d.get()));
    }
    auto n = count(distributions_coll, f, "count distributions");
    if (!n) return std::move(n).error();
    out.total = *n;
    return out;
  }

  result<std::vector<std::string>> distributions_using(std::string_view project_id,
                                                       std::string_view object_id) override {
    doc f;
    f.str("project_id", project_id).str("uses", object_id);
    doc sort;
    sort.i32("_id", 1);
    doc projection;
    projection.i32("_id", 1);
    auto docs = find(distributions_coll, f, &sort, 0, 0, &projection, "distributions using");
    if (!docs) return std::move(docs).error();
    std::vector<std::string> out;
    for (const auto& d : *docs) out.push_back(view(d.get()).str("_id"));
    return out;
  }

  result<std::vector<distribution_record>> distributions_in_status(std::string_view status, int limit) override {
    if (limit_is_zero(limit)) return std::vector<distribution_record>{};
    doc f;
    f.str("status", status);
    doc sort;
    sort.i32("updated_at", 1).i32("_id", 1);
    return distributions(f, &sort, mongo_limit(limit), "distributions in status");
  }

  result<std::vector<distribution_record>> auto_execute_distributions(int limit) override {
    if (limit_is_zero(limit)) return std::vector<distribution_record>{};
    doc f;
    f.boolean("auto_execute", true).sub("status", one("$ne", to_string(run_status::running)));
    doc sort;
    sort.i32("updated_at", 1).i32("_id", 1);
    return distributions(f, &sort, mongo_limit(limit), "auto-execute distributions");
  }

  result<std::vector<target_result>> run_results(std::string_view distribution_id, std::int64_t run_no) override {
    doc f;
    f.str("distribution_id", distribution_id).i64("run_no", run_no);
    return results(f, "run results");
  }

  result<std::vector<target_result>> job_results(std::string_view distribution_id, std::int64_t run_no,
                                                 std::string_view job_id) override {
    doc f;
    f.str("distribution_id", distribution_id).i64("run_no", run_no).str("job_id", job_id);
    return results(f, "job results");
  }

  result<std::vector<target_result>> run_outcomes(std::string_view distribution_id, std::int64_t run_no) override {
    auto all = run_results(distribution_id, run_no);
    if (!all) return all;
    return target_outcomes(std::move(*all));
  }

  result<std::vector<finalized_child>> finalized_children(std::string_view distribution_id,
                                                          std::int64_t run_no) override {
    doc f;
    f.str("distribution_id", distribution_id).i64("run_no", run_no);
    doc sort;
    sort.i32("job_id", 1);
    auto docs = find(finalized_coll, f, &sort, 0, 0, nullptr, "finalized children");
    if (!docs) return std::move(docs).error();
    std::vector<finalized_child> out;
    for (const auto& d : *docs) {
      view v(d.get());
      out.push_back(finalized_child{v.str("job_id"), v.str("outcome"), v.boolean("batch")});
    }
    return out;
  }

  result<std::int64_t> last_files_run(std::string_view distribution_id, std::string_view target_id) override {
    doc f;
    f.str("distribution_id", distribution_id).str("target_id", target_id).str("status", to_string(target_status::succeeded));
    doc sort;
    sort.i32("files_from_run", -1);
    doc projection;
    projection.i32("files_from_run", 1);
    auto docs = find(results_coll, f, &sort, 1, 0, &projection, "last files run");
    if (!docs) return std::move(docs).error();
    if (docs->empty()) return std::int64_t{0};
    return view(docs->front().get()).i64("files_from_run");
  }

  result<std::vector<std::pair<std::string, time_ms>>> target_last_successes(int limit) override {
    if (limit_is_zero(limit)) return std::vector<std::pair<std::string, time_ms>>{};
    // Grouped on the server: one document per target, not one per result of every run.
    auto docs = aggregate(results_coll, last_success_pipeline(limit), "target last successes");
    if (!docs) return std::move(docs).error();
    std::vector<std::pair<std::string, time_ms>> out;
    for (const auto& d : *docs) {
      view v(d.get());
      out.emplace_back(v.str("_id"), v.i64("at"));
    }
    return out;
  }

  result<std::vector<job_record>> children_of(std::string_view distribution_id,
                                              std::string_view run_key_prefix) override {
    doc projection;
    projection.i32("project_id", 1);
    auto dist = find(distributions_coll, one("_id", distribution_id), nullptr, 1, 0, &projection, "children of a run");
    if (!dist) return std::move(dist).error();
    if (dist->empty()) return object_not_found("distribution", distribution_id);
    const auto project_id = view(dist->front().get()).str("project_id");
    // A range of the (project_id, idempotency_key) index.
    doc f;
    f.str("project_id", project_id).sub("idempotency_key", starts_with(run_key_prefix));
    doc sort;
    sort.i32("_id", 1);
    auto docs = find("jobs", f, &sort, 0, 0, nullptr, "children of a run");
    if (!docs) return std::move(docs).error();
    std::vector<job_record> out;
    for (const auto& d : *docs) out.push_back(read_job(d.get()));
    return out;
  }

  result<std::vector<dns_record>> dns_records_of(std::string_view job_id, std::int64_t fence) override {
    doc f;
    f.str("job_id", job_id).i64("fence", fence);
    doc sort;
    sort.i32("presented_at", 1).i32("_id", 1);
    auto docs = find(dns_coll, f, &sort, 0, 0, nullptr, "dns records of an attempt");
    if (!docs) return std::move(docs).error();
    std::vector<dns_record> out;
    for (const auto& d : *docs) out.push_back(read_dns(d.get()));
    return out;
  }

  result<std::vector<dns_record>> dns_records_left(int limit) override {
    if (limit_is_zero(limit)) return std::vector<dns_record>{};
    auto docs = aggregate(dns_coll, dns_left_pipeline(limit), "dns records left");
    if (!docs) return std::move(docs).error();
    std::vector<dns_record> out;
    for (const auto& d : *docs) out.push_back(read_dns(d.get()));
    return out;
  }

 protected:
  // Records a failed command (jobs.keep inside a write transaction) and returns its error.
  error keep(const failure& f, std::string_view doing) {
    if (jobs_) return jobs_->keep(f, doing);
    own_failed = f;
    return to_error(f, doing);
  }

  std::optional<error> send(const doc& cmd, doc& reply, std::string_view doing) {
    if (auto f = c_.command(client_, cmd, reply, s_)) return keep(*f, doing);
    return std::nullopt;
  }

  // Every document of a cursor: its first batch, then getMore until the server closes it.
  result<std::vector<doc>> drain(std::string_view coll, const doc& cmd, std::string_view doing) {
    doc reply;
    if (auto e = send(cmd, reply, doing)) return std::move(*e);
    auto out = view(reply.get()).docs("cursor.firstBatch");
    auto id = view(reply.get()).i64("cursor.id");
    while (id != 0) {
      doc more;
      more.i64("getMore", id).str("collection", coll);
      doc next;
      if (auto e = send(more, next, doing)) return std::move(*e);
      for (auto& d : view(next.get()).docs("cursor.nextBatch")) out.push_back(std::move(d));
      id = view(next.get()).i64("cursor.id");
    }
    return out;
  }

  result<std::vector<doc>> find(std::string_view coll, const doc& filter, const doc* sort, std::int64_t limit,
                                std::int64_t skip, const doc* projection, std::string_view doing) {
    return drain(coll, find_cmd(coll, filter, sort, limit, skip, projection, c_.max_time_ms()), doing);
  }

  result<std::vector<doc>> aggregate(std::string_view coll, const std::vector<doc>& pipeline, std::string_view doing) {
    return drain(coll, aggregate_cmd(coll, pipeline, c_.max_time_ms()), doing);
  }

  // count is not allowed in a transaction: an aggregate with $count.
  result<std::int64_t> count(std::string_view coll, const doc& filter, std::string_view doing) {
    std::vector<doc> p;
    p.push_back(with("$match", filter));
    p.push_back(one("$count", "n"));
    auto docs = aggregate(coll, p, doing);
    if (!docs) return std::move(docs).error();
    if (docs->empty()) return std::int64_t{0};
    return view(docs->front().get()).i64("n");
  }

  result<std::vector<catalog_object>> objects(const doc& f, const doc* sort, std::int64_t limit, std::string_view doing) {
    auto docs = find(objects_coll, f, sort, limit, 0, nullptr, doing);
    if (!docs) return std::move(docs).error();
    std::vector<catalog_object> out;
    for (const auto& d : *docs) out.push_back(read_object(d.get()));
    return out;
  }

  result<std::vector<distribution_record>> distributions(const doc& f, const doc* sort, std::int64_t limit,
                                                         std::string_view doing) {
    auto docs = find(distributions_coll, f, sort, limit, 0, nullptr, doing);
    if (!docs) return std::move(docs).error();
    std::vector<distribution_record> out;
    for (const auto& d : *docs) out.push_back(read_distribution(d.get()));
    return out;
  }

  result<std::vector<target_result>> results(const doc& f, std::string_view doing) {
    doc sort;
    sort.i32("target_id", 1).i32("retry_attempt", 1).i32("fence", 1).i32("job_id", 1);
    auto docs = find(results_coll, f, &sort, 0, 0, nullptr, doing);
    if (!docs) return std::move(docs).error();
    std::vector<target_result> out;
    for (const auto& d : *docs) out.push_back(read_result(d.get()));
    return out;
  }

  const connection& c_;
  mongoc_client_t* client_;
  mongoc_client_session_t* s_;
  mongo_job_tx* jobs_;
};

class read_impl final : public reads<catalog_read> {
 public:
  read_impl(const connection& c, mongoc_client_t* client, mongoc_client_session_t* s) : reads(c, client, s, nullptr) {}
};

class tx_impl final : public reads<catalog_tx> {
 public:
  tx_impl(const connection& c, mongoc_client_t* client, mongoc_client_session_t* s, mongo_job_tx& jobs)
      : reads(c, client, s, &jobs), jobs_ref_(jobs) {}

  job_tx& jobs() override { return jobs_ref_; }

  result<catalog_object> insert_object(catalog_object o) override {
    // Looked up first: a duplicate key would abort the transaction, and a caller may go on
    // after a conflict.
    doc f;
    f.str("project_id", o.project_id).str("kind", o.kind).str("name", o.name);
    doc projection;
    projection.i32("_id", 1);
    auto taken = find(objects_coll, f, nullptr, 1, 0, &projection, "insert object");
    if (!taken) return std::move(taken).error();
    if (!taken->empty()) return name_taken(o.kind, o.name);
    if (o.id.empty()) o.id = new_object_id();
    doc reply;
    if (auto fail = c_.command(client_, insert_cmd(objects_coll, object_document(o), c_.max_time_ms()), reply, s_)) {
      // A concurrent transaction took the name after our snapshot: the transaction is over.
      if (is_duplicate_key(*fail) && !duplicate_on_id(*fail)) {
        auto f2 = *fail;
        f2.err = name_taken(o.kind, o.name);
        jobs_ref_.keep(f2, "insert object");
        return f2.err;
      }
      return keep(*fail, "insert object");
    }
    return o;
  }

  result<void> update_object_doc(std::string_view id, std::string_view d) override {
    doc set;
    set.str("doc", d);
    auto n = update_one(objects_coll, one("_id", id), with("$set", set), "update object");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found("object", id);
    return {};
  }

  result<void> update_object(const catalog_object& o) override {
    doc set;
    set.str("doc", o.doc);
    doc unset;
    bool unsets = false;
    if (!o.sealed.empty()) set.str("sealed", o.sealed);
    else unset.str("sealed", ""), unsets = true;
    if (!o.ref_id.empty()) set.str("ref_id", o.ref_id);
    else unset.str("ref_id", ""), unsets = true;
    set.i64("not_after", o.not_after);
    doc u;
    u.sub("$set", set);
    if (unsets) u.sub("$unset", unset);
    auto n = update_one(objects_coll, one("_id", o.id), u, "update object");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found(o.kind, o.id);
    return {};
  }

  result<void> delete_object(std::string_view project_id, std::string_view kind, std::string_view id) override {
    doc q;
    q.str("_id", id).str("project_id", project_id).str("kind", kind);
    auto n = delete_one(objects_coll, q, "delete object");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found(kind, id);
    return {};
  }

  result<void> set_meta(std::string_view key, std::string_view value) override {
    doc set;
    set.str("value", value);
    auto n = update(meta_coll, one("_id", meta_id(key)), with("$set", set), true, "set meta");
    if (!n) return std::move(n).error();
    return {};
  }

  result<void> delete_meta(std::string_view key) override {
    auto n = delete_one(meta_coll, one("_id", meta_id(key)), "delete meta");
    if (!n) return std::move(n).error();
    return {};
  }

  result<bool> reseal_object(std::string_view id, std::string_view old_sealed, std::string_view new_sealed) override {
    doc q;
    q.str("_id", id).str("sealed", old_sealed);
    doc set;
    set.str("sealed", new_sealed);
    auto n = update_one(objects_coll, q, with("$set", set), "reseal object");
    if (!n) return std::move(n).error();
    return *n > 0;
  }

  result<distribution_record> insert_distribution(distribution_record d) override {
    doc f;
    f.str("project_id", d.project_id).str("name", d.name);
    doc projection;
    projection.i32("_id", 1);
    auto taken = find(distributions_coll, f, nullptr, 1, 0, &projection, "insert distribution");
    if (!taken) return std::move(taken).error();
    if (!taken->empty()) return distribution_name_taken(d.name);
    if (d.id.empty()) d.id = new_object_id();
    doc reply;
    if (auto fail =
            c_.command(client_, insert_cmd(distributions_coll, new_distribution_document(d), c_.max_time_ms()), reply, s_)) {
      if (is_duplicate_key(*fail) && !duplicate_on_id(*fail)) {
        auto f2 = *fail;
        f2.err = distribution_name_taken(d.name);
        jobs_ref_.keep(f2, "insert distribution");
        return f2.err;
      }
      return keep(*fail, "insert distribution");
    }
    d.status = to_string(run_status::idle);
    d.updated_at = d.created_at;
    return d;
  }

  result<void> update_distribution(const distribution_record& d) override {
    auto n = update_one(distributions_coll, one("_id", d.id), with("$set", distribution_run_fields(d)),
                        "update distribution");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found("distribution", d.id);
    return {};
  }

  result<void> delete_distribution(std::string_view project_id, std::string_view id) override {
    doc q;
    q.str("_id", id).str("project_id", project_id);
    auto n = delete_one(distributions_coll, q, "delete distribution");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found("distribution", id);
    return {};
  }

  result<void> add_result(const target_result& r) override {
    // INSERT OR REPLACE on the attempt's key: a replacement upserted on a deterministic _id.
    doc q;
    q.sub("_id", result_id(r));
    auto n = update(results_coll, q, result_document(r), true, "add result");
    if (!n) return std::move(n).error();
    return {};
  }

  result<bool> add_finalized(std::string_view distribution_id, std::int64_t run_no, const finalized_child& c) override {
    // The guard: an upsert that only inserts, on the child's deterministic _id. A replayed report
    // matches the existing document and changes nothing (no duplicate key inside the transaction).
    doc q;
    q.sub("_id", finalized_id(distribution_id, run_no, c.job_id));
    doc ins;
    ins.str("distribution_id", distribution_id).i64("run_no", run_no).str("job_id", c.job_id);
    ins.str("outcome", c.outcome).boolean("batch", c.batch);
    doc reply;
    if (auto e = send(update_cmd(finalized_coll, q, with("$setOnInsert", ins), true, c_.max_time_ms()), reply,
                      "add finalized child"))
      return std::move(*e);
    return !view(reply.get()).docs("upserted").empty();
  }

  result<std::vector<job_record>> cancel_waiting_children(std::string_view distribution_id,
                                                          std::string_view run_key_prefix, time_ms now) override {
    auto kids = children_of(distribution_id, run_key_prefix);
    if (!kids) return std::move(kids).error();
    std::vector<job_record> out;
    for (const auto& k : *kids) {
      if (k.status != job_status::pending && k.status != job_status::failed) continue;
      doc statuses;
      {
        list l;
        l.str("pending").str("failed");
        statuses.arr("$in", l);
      }
      doc q;
      q.str("_id", k.id).sub("status", statuses);
      doc set;
      set.str("status", "cancelled").i64("completed_at", now).boolean("held", false);
      set.str("error", "cancelled with its distribution");
      doc u;
      u.sub("$set", set).sub("$unset", one("q", ""));
      doc cmd;
      cmd.str("findAndModify", "jobs").sub("query", q).sub("update", u).boolean("new", true);
      cmd.i32("maxTimeMS", c_.max_time_ms());
      doc reply;
      if (auto e = send(cmd, reply, "cancel a run's waiting children")) return std::move(*e);
      if (auto v = find_and_modify_value(reply)) out.push_back(read_job(v->get()));
    }
    return out;
  }

  result<std::vector<std::string>> request_cancel_children(std::string_view distribution_id,
                                                           std::string_view run_key_prefix) override {
    auto kids = children_of(distribution_id, run_key_prefix);
    if (!kids) return std::move(kids).error();
    std::vector<std::string> out;
    for (const auto& k : *kids) {
      if (k.status != job_status::active) continue;
      doc q;
      q.str("_id", k.id).str("status", "active");
      doc set;
      set.boolean("cancel_requested", true);
      // A cancel request takes the job out of the claim index (claim_command's rule).
      doc u;
      u.sub("$set", set).sub("$unset", one("q", ""));
      auto n = update_one("jobs", q, u, "request cancel of a run's children");
      if (!n) return std::move(n).error();
      if (*n > 0) out.push_back(k.id);
    }
    return out;
  }

  result<int> release_held_children(std::string_view distribution_id, std::string_view run_key_prefix,
                                    time_ms now) override {
    auto kids = children_of(distribution_id, run_key_prefix);
    if (!kids) return std::move(kids).error();
    int released = 0;
    for (const auto& k : *kids) {
      if (!k.held) continue;
      doc q;
      q.str("_id", k.id).boolean("held", true).str("status", "pending");
      // Claimable again: back in the claim index under its lane.
      doc set;
      set.boolean("held", false).i64("ready_at", now).str("q", k.lane);
      auto n = update_one("jobs", q, with("$set", set), "release a run's held children");
      if (!n) return std::move(n).error();
      released += static_cast<int>(*n);
    }
    return released;
  }

  result<job_record> get_job(std::string_view id) override {
    auto docs = find("jobs", one("_id", id), nullptr, 1, 0, nullptr, "get job");
    if (!docs) return std::move(docs).error();
    if (docs->empty()) return job_not_found(std::string(id));
    return read_job(docs->front().get());
  }

  result<void> add_dns_record(const dns_record& r) override {
    doc reply;
    if (auto e = send(insert_cmd(dns_coll, dns_document(r), c_.max_time_ms()), reply, "add dns record"))
      return std::move(*e);
    return {};
  }

  result<void> mark_dns_record_removed(std::string_view id, time_ms now) override {
    doc q;
    q.str("_id", id).i64("removed_at", 0);
    doc set;
    set.i64("removed_at", now);
    auto n = update_one(dns_coll, q, with("$set", set), "mark dns record removed");
    if (!n) return std::move(n).error();
    return {};
  }

 private:
  static error name_taken(std::string_view kind, std::string_view name) {
    return make_error(errc::conflict, fmt::format("a {} named \"{}\" already exists in this project", kind, name),
                      "name");
  }
  static error distribution_name_taken(std::string_view name) {
    return make_error(errc::conflict, fmt::format("a distribution named \"{}\" already exists in this project", name),
                      "name");
  }

  // The number of documents the statement matched.
  result<std::int64_t> update(std::string_view coll, const doc& q, const doc& u, bool upsert, std::string_view doing) {
    doc reply;
    if (auto e = send(update_cmd(coll, q, u, upsert, c_.max_time_ms()), reply, doing)) return std::move(*e);
    return view(reply.get()).i64("n");
  }
  result<std::int64_t> update_one(std::string_view coll, const doc& q, const doc& u, std::string_view doing) {
    return update(coll, q, u, false, doing);
  }
  result<std::int64_t> delete_one(std::string_view coll, const doc& q, std::string_view doing) {
    doc reply;
    if (auto e = send(delete_cmd(coll, q, c_.max_time_ms()), reply, doing)) return std::move(*e);
    return view(reply.get()).i64("n");
  }

  mongo_job_tx& jobs_ref_;
};

// ---- the store: transactions on the store threads ---------------------------------------------

class store_impl final : public catalog_store {
 public:
  store_impl(connection& c, executor& ex, catalog_tx_factory factory) : c_(c), ex_(ex), factory_(std::move(factory)) {
    if (!factory_) {
      const connection* conn = &c_;
      factory_ = [conn](mongoc_client_t* client, mongoc_client_session_t* s, mongo_job_tx& jobs) {
        return make_catalog_tx(*conn, client, s, jobs);
      };
    }
  }

  task<void> transact(tx_fn fn) override {
    return run<result<void>>(ex_, [this, fn = std::move(fn)](mongoc_client_t* client) -> result<void> {
      // The body may run several times (TransientTransactionError): fn is called afresh each
      // time, and only the last attempt's outcome counts.
      std::optional<error> fn_error;
      std::exception_ptr thrown;
      auto fail = c_.transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
        fn_error.reset();
        mongo_job_tx jobs(c_, client, s, &factory_);
        result<void> r;
        try {
          r = fn(jobs.catalog());
        } catch (...) {
          // A bug: the transaction is aborted (never thrown through the driver), then rethrown.
          thrown = std::current_exception();
          failure f;
          f.err = make_error(errc::store_failure, "the catalog transaction threw");
          return f;
        }
        if (!r) fn_error = r.error();
        if (jobs.failed) return jobs.failed;  // its labels decide whether the body runs again
        if (fn_error) {
          failure f;  // no labels: aborted, nothing commits
          f.err = *fn_error;
          return f;
        }
        return std::nullopt;
      });
      if (thrown) std::rethrow_exception(thrown);
      if (!fail) return {};
      // What fn returned, unchanged (a kept store failure reaches fn as its error too).
      if (fn_error) return *fn_error;
      return to_error(*fail, "catalog transaction");
    });
  }

  task<void> read(read_fn fn) override {
    return run<result<void>>(ex_, [this, fn = std::move(fn)](mongoc_client_t* client) -> result<void> {
      // One snapshot: a transaction at majority read concern that writes nothing.
      std::optional<error> fn_error;
      std::exception_ptr thrown;
      auto fail = c_.transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
        fn_error.reset();
        read_impl rd(c_, client, s);
        result<void> r;
        try {
          r = fn(rd);
        } catch (...) {
          thrown = std::current_exception();
          failure f;
          f.err = make_error(errc::store_failure, "the catalog read threw");
          return f;
        }
        if (!r) fn_error = r.error();
        if (rd.own_failed) return rd.own_failed;
        if (fn_error) {
          failure f;
          f.err = *fn_error;
          return f;
        }
        return std::nullopt;
      });
      if (thrown) std::rethrow_exception(thrown);
      if (!fail) return {};
      if (fn_error) return *fn_error;
      return to_error(*fail, "catalog read");
    });
  }

 private:
  connection& c_;
  executor& ex_;
  catalog_tx_factory factory_;
};

// ---- indexes -----------------------------------------------------------------------------------


struct owned_catalog {
  std::unique_ptr<connection> c;
  catalog_tx_factory factory;
  std::unique_ptr<executor> ex;
  std::unique_ptr<catalog_store> store;
  ~owned_catalog() {
    store.reset();
    if (ex) ex->close();
  }
};

}  // namespace

std::unique_ptr<catalog_tx> make_catalog_tx(const connection& c, mongoc_client_t* client,
                                            mongoc_client_session_t* session, mongo_job_tx& jobs) {
  return std::make_unique<tx_impl>(c, client, session, jobs);
}

std::unique_ptr<catalog_store> make_catalog_store(connection& c, executor& ex, const catalog_tx_factory& catalog) {
  return std::make_unique<store_impl>(c, ex, catalog);
}

std::vector<doc> catalog_index_commands(std::int32_t max_time_ms) {
  std::vector<doc> out;
  out.push_back(create_indexes(
      objects_coll,
      {
          // One name per kind in a project; objects_named's prefix range, in name order.
          {"name", {{"project_id", 1}, {"kind", 1}, {"name", 1}}, true},
          // list_objects (newest first) and objects_by_ids (id order): one index, both directions.
          {"project_kind", {{"project_id", 1}, {"kind", 1}, {"_id", 1}}},
          // objects_referencing: only objects that reference something.
          {"ref", {{"project_id", 1}, {"kind", 1}, {"ref_id", 1}, {"_id", 1}}, false, "ref_id"},
          // certificates_expiring and objects_by_not_after: equality on kind, then their sort.
          {"not_after", {{"kind", 1}, {"not_after", 1}, {"_id", 1}}},
          // KEK rotation's pages: only objects that hold an envelope, by kind in id order.
          {"sealed", {{"kind", 1}, {"_id", 1}}, false, "sealed"},
      },
      max_time_ms));
  out.push_back(create_indexes(
      distributions_coll,
      {
          {"name", {{"project_id", 1}, {"name", 1}}, true},
          {"project", {{"project_id", 1}, {"_id", -1}}},
          // distributions_using: the certificate and targets (multikey).
          {"uses", {{"project_id", 1}, {"uses", 1}, {"_id", 1}}},
          {"status", {{"status", 1}, {"updated_at", 1}, {"_id", 1}}},
          {"auto_execute", {{"auto_execute", 1}, {"updated_at", 1}, {"_id", 1}}},
      },
      max_time_ms));
  out.push_back(create_indexes(
      results_coll,
      {
          // run_results / run_outcomes: the run, in (target, retry_attempt, fence) order.
          {"run", {{"distribution_id", 1}, {"run_no", 1}, {"target_id", 1}, {"retry_attempt", 1}, {"fence", 1},
                   {"job_id", 1}}},
          // job_results: a child's report reads only its own rows.
          {"job", {{"distribution_id", 1}, {"run_no", 1}, {"job_id", 1}, {"target_id", 1}, {"retry_attempt", 1},
                   {"fence", 1}}},
          // last_files_run.
          {"files", {{"distribution_id", 1}, {"target_id", 1}, {"status", 1}, {"files_from_run", -1}}},
      },
      max_time_ms));
  out.push_back(create_indexes(finalized_coll, {{"run", {{"distribution_id", 1}, {"run_no", 1}, {"job_id", 1}}}},
                               max_time_ms));
  out.push_back(create_indexes(dns_coll,
                               {
                                   {"left", {{"removed_at", 1}, {"presented_at", 1}, {"_id", 1}}},
                                   {"attempt", {{"job_id", 1}, {"fence", 1}, {"presented_at", 1}, {"_id", 1}}},
                               },
                               max_time_ms));
  return out;
}

result<std::shared_ptr<catalog_store>> open_catalog_only(const mongodb_options& o) {
  auto c = connection::open(o);
  if (!c) return std::move(c).error();
  auto owned = std::make_shared<owned_catalog>();
  owned->c = std::move(*c);
  const connection* conn = owned->c.get();
  owned->factory = [conn](mongoc_client_t* client, mongoc_client_session_t* s, mongo_job_tx& jobs) {
    return make_catalog_tx(*conn, client, s, jobs);
  };
  owned->ex = std::make_unique<executor>(*owned->c, o.threads);
  owned->store = make_catalog_store(*owned->c, *owned->ex, owned->factory);
  auto* store = owned->store.get();
  return std::shared_ptr<catalog_store>(std::move(owned), store);
}

}  // namespace certfleet::store::mongo
