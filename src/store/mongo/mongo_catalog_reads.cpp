// The reads of one catalog transaction on MongoDB (mongo_catalog_detail.hpp), shared by the read
// snapshot and the write transaction: one template, instantiated here once for each, so the write
// side (mongo_catalog.cpp) builds against its declaration and each file reads on its own.
#include "mongo_catalog_detail.hpp"

#include "certfleet/store/job_policy.hpp"
#include "job_document.hpp"

#include <algorithm>
#include <utility>

namespace certfleet::store::mongo::detail {

template <class Base>
result<catalog_object> reads<Base>::get_object(std::string_view project_id, std::string_view kind,
                                              std::string_view id) {
  doc f;
  f.str("_id", id).str("project_id", project_id).str("kind", kind);
  auto docs = find(objects_coll, f, nullptr, 1, 0, nullptr, "get object");
  if (!docs) return std::move(docs).error();
  if (docs->empty()) return object_not_found(kind, id);
  return read_object(docs->front().get());
}

template <class Base>
result<object_page> reads<Base>::list_objects(std::string_view project_id, std::string_view kind, int page,
                                              int page_size) {
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

template <class Base>
result<std::vector<catalog_object>> reads<Base>::objects_by_ids(std::string_view project_id, std::string_view kind,
                                                                const std::vector<std::string>& ids) {
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

template <class Base>
result<std::vector<catalog_object>> reads<Base>::objects_referencing(std::string_view project_id, std::string_view kind,
                                                                     std::string_view ref) {
  doc f;
  f.str("project_id", project_id).str("kind", kind).str("ref_id", ref);
  doc sort;
  sort.i32("_id", 1);
  return objects(f, &sort, 0, "objects referencing");
}

template <class Base>
result<std::vector<catalog_object>> reads<Base>::objects_named(std::string_view project_id, std::string_view kind,
                                                               std::string_view name_prefix, int limit) {
  if (limit_is_zero(limit)) return std::vector<catalog_object>{};
  // A range of the unique (project_id, kind, name) index.
  doc f;
  f.str("project_id", project_id).str("kind", kind);
  if (!name_prefix.empty()) f.sub("name", starts_with(name_prefix));
  doc sort;
  sort.i32("name", 1);
  return objects(f, &sort, mongo_limit(limit), "objects named");
}

template <class Base>
result<std::vector<catalog_object>> reads<Base>::certificates_expiring(time_ms before, int limit) {
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

template <class Base>
result<std::vector<catalog_object>> reads<Base>::objects_by_not_after(std::string_view kind, time_ms before,
                                                                     int limit) {
  if (limit_is_zero(limit)) return std::vector<catalog_object>{};
  doc range;
  range.i64("$lt", before);
  doc f;
  f.str("kind", kind).sub("not_after", range);
  doc sort;
  sort.i32("not_after", 1).i32("_id", 1);
  return objects(f, &sort, mongo_limit(limit), "objects by not_after");
}

template <class Base>
result<std::int64_t> reads<Base>::count_sealed() {
  doc exists;
  exists.boolean("$exists", true);
  doc f;
  f.sub("sealed", exists);
  return count(objects_coll, f, "count sealed objects");
}

template <class Base>
result<std::vector<sealed_count>> reads<Base>::sealed_versions() {
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

template <class Base>
result<std::vector<sealed_row>> reads<Base>::sealed_page(std::string_view kind, std::string_view except_prefix,
                                                         std::string_view after_id, int limit) {
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

template <class Base>
result<std::optional<std::string>> reads<Base>::meta(std::string_view key) {
  auto docs = find(meta_coll, one("_id", meta_id(key)), nullptr, 1, 0, nullptr, "read meta");
  if (!docs) return std::move(docs).error();
  if (docs->empty()) return std::optional<std::string>{};
  return std::optional<std::string>(view(docs->front().get()).str("value"));
}

template <class Base>
result<distribution_record> reads<Base>::get_distribution(std::string_view project_id, std::string_view id) {
  doc f;
  f.str("_id", id);
  if (!project_id.empty()) f.str("project_id", project_id);
  auto docs = find(distributions_coll, f, nullptr, 1, 0, nullptr, "get distribution");
  if (!docs) return std::move(docs).error();
  if (docs->empty()) return object_not_found("distribution", id);
  return read_distribution(docs->front().get());
}

template <class Base>
result<distribution_page> reads<Base>::list_distributions(std::string_view project_id, int page, int page_size) {
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

template <class Base>
result<std::vector<std::string>> reads<Base>::distributions_using(std::string_view project_id,
                                                                  std::string_view object_id) {
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

template <class Base>
result<std::vector<distribution_record>> reads<Base>::distributions_in_status(std::string_view status, int limit) {
  if (limit_is_zero(limit)) return std::vector<distribution_record>{};
  doc f;
  f.str("status", status);
  doc sort;
  sort.i32("updated_at", 1).i32("_id", 1);
  return distributions(f, &sort, mongo_limit(limit), "distributions in status");
}

template <class Base>
result<std::vector<distribution_record>> reads<Base>::auto_execute_distributions(int limit) {
  if (limit_is_zero(limit)) return std::vector<distribution_record>{};
  doc f;
  f.boolean("auto_execute", true).sub("status", one("$ne", to_string(run_status::running)));
  doc sort;
  sort.i32("updated_at", 1).i32("_id", 1);
  return distributions(f, &sort, mongo_limit(limit), "auto-execute distributions");
}

template <class Base>
result<std::vector<target_result>> reads<Base>::run_results(std::string_view distribution_id, std::int64_t run_no) {
  doc f;
  f.str("distribution_id", distribution_id).i64("run_no", run_no);
  return results(f, "run results");
}

template <class Base>
result<std::vector<target_result>> reads<Base>::job_results(std::string_view distribution_id, std::int64_t run_no,
                                                            std::string_view job_id) {
  doc f;
  f.str("distribution_id", distribution_id).i64("run_no", run_no).str("job_id", job_id);
  return results(f, "job results");
}

template <class Base>
result<std::vector<target_result>> reads<Base>::run_outcomes(std::string_view distribution_id, std::int64_t run_no) {
  auto all = run_results(distribution_id, run_no);
  if (!all) return all;
  return target_outcomes(std::move(*all));
}

template <class Base>
result<std::vector<finalized_child>> reads<Base>::finalized_children(std::string_view distribution_id,
                                                                     std::int64_t run_no) {
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

template <class Base>
result<std::int64_t> reads<Base>::last_files_run(std::string_view distribution_id, std::string_view target_id) {
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

template <class Base>
result<std::vector<std::pair<std::string, time_ms>>> reads<Base>::target_last_successes(int limit) {
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

template <class Base>
result<std::vector<job_record>> reads<Base>::children_of(std::string_view distribution_id,
                                                         std::string_view run_key_prefix) {
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

template <class Base>
result<std::vector<dns_record>> reads<Base>::dns_records_of(std::string_view job_id, std::int64_t fence) {
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

template <class Base>
result<std::vector<dns_record>> reads<Base>::dns_records_left(int limit) {
  if (limit_is_zero(limit)) return std::vector<dns_record>{};
  auto docs = aggregate(dns_coll, dns_left_pipeline(limit), "dns records left");
  if (!docs) return std::move(docs).error();
  std::vector<dns_record> out;
  for (const auto& d : *docs) out.push_back(read_dns(d.get()));
  return out;
}

// Records a failed command (jobs.keep inside a write transaction) and returns its error.
template <class Base>
error reads<Base>::keep(const failure& f, std::string_view doing) {
  if (jobs_) return jobs_->keep(f, doing);
  own_failed = f;
  return to_error(f, doing);
}

template <class Base>
std::optional<error> reads<Base>::send(const doc& cmd, doc& reply, std::string_view doing) {
  if (auto f = c_.command(client_, cmd, reply, s_)) return keep(*f, doing);
  return std::nullopt;
}

// Every document of a cursor: its first batch, then getMore until the server closes it.
template <class Base>
result<std::vector<doc>> reads<Base>::drain(std::string_view coll, const doc& cmd, std::string_view doing) {
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

template <class Base>
result<std::vector<doc>> reads<Base>::find(std::string_view coll, const doc& filter, const doc* sort,
                                           std::int64_t limit, std::int64_t skip, const doc* projection,
                                           std::string_view doing) {
  return drain(coll, find_cmd(coll, filter, sort, limit, skip, projection, c_.max_time_ms()), doing);
}

template <class Base>
result<std::vector<doc>> reads<Base>::aggregate(std::string_view coll, const std::vector<doc>& pipeline,
                                                std::string_view doing) {
  return drain(coll, aggregate_cmd(coll, pipeline, c_.max_time_ms()), doing);
}

// count is not allowed in a transaction: an aggregate with $count.
template <class Base>
result<std::int64_t> reads<Base>::count(std::string_view coll, const doc& filter, std::string_view doing) {
  std::vector<doc> p;
  p.push_back(with("$match", filter));
  p.push_back(one("$count", "n"));
  auto docs = aggregate(coll, p, doing);
  if (!docs) return std::move(docs).error();
  if (docs->empty()) return std::int64_t{0};
  return view(docs->front().get()).i64("n");
}

template <class Base>
result<std::vector<catalog_object>> reads<Base>::objects(const doc& f, const doc* sort, std::int64_t limit,
                                                         std::string_view doing) {
  auto docs = find(objects_coll, f, sort, limit, 0, nullptr, doing);
  if (!docs) return std::move(docs).error();
  std::vector<catalog_object> out;
  for (const auto& d : *docs) out.push_back(read_object(d.get()));
  return out;
}

template <class Base>
result<std::vector<distribution_record>> reads<Base>::distributions(const doc& f, const doc* sort, std::int64_t limit,
                                                                    std::string_view doing) {
  auto docs = find(distributions_coll, f, sort, limit, 0, nullptr, doing);
  if (!docs) return std::move(docs).error();
  std::vector<distribution_record> out;
  for (const auto& d : *docs) out.push_back(read_distribution(d.get()));
  return out;
}

template <class Base>
result<std::vector<target_result>> reads<Base>::results(const doc& f, std::string_view doing) {
  doc sort;
  sort.i32("target_id", 1).i32("retry_attempt", 1).i32("fence", 1).i32("job_id", 1);
  auto docs = find(results_coll, f, &sort, 0, 0, nullptr, doing);
  if (!docs) return std::move(docs).error();
  std::vector<target_result> out;
  for (const auto& d : *docs) out.push_back(read_result(d.get()));
  return out;
}

template class reads<catalog_read>;
template class reads<catalog_tx>;

}  // namespace certfleet::store::mongo::detail
