// Catalog objects, distributions, target results and the fan-out guard set on SQLite. The rows'
// column lists and readers are sqlite_catalog_rows.cpp's (sqlite_catalog_detail.hpp).
#include "sqlite_catalog.hpp"
#include "sqlite_catalog_detail.hpp"
#include "job_row.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/store/job_policy.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace certfleet::store::sqlite {

using namespace detail;

namespace {

template <class Base>
class reads : public Base {
 public:
  explicit reads(db& d) : d_(d) {}

  result<catalog_object> get_object(std::string_view project_id, std::string_view kind, std::string_view id) override {
    auto s = d_.prepare("SELECT " OBJECT_COLS " FROM objects WHERE id = ?1 AND project_id = ?2 AND kind = ?3");
    s->bind(1, id).bind(2, project_id).bind(3, kind);
    if (!s->step()) return object_not_found(kind, id);
    return read_object(*s);
  }

  result<object_page> list_objects(std::string_view project_id, std::string_view kind, int page,
                                   int page_size) override {
    read_guard g(d_);
    object_page out;
    {
      auto s = d_.prepare("SELECT " OBJECT_COLS " FROM objects WHERE project_id = ?1 AND kind = ?2 "
                          "ORDER BY id DESC LIMIT ?3 OFFSET ?4");
      s->bind(1, project_id).bind(2, kind).bind(3, page_size).bind(4, static_cast<std::int64_t>(page - 1) * page_size);
      while (s->step()) out.items.push_back(read_object(*s));
    }
    auto c = d_.prepare("SELECT count(*) FROM objects WHERE project_id = ?1 AND kind = ?2");
    c->bind(1, project_id).bind(2, kind);
    if (c->step()) out.total = c->int64(0);
    return out;
  }

  result<std::vector<catalog_object>> objects_by_ids(std::string_view project_id, std::string_view kind,
                                                     const std::vector<std::string>& ids) override {
    std::vector<catalog_object> out;
    out.reserve(ids.size());
    auto s = d_.prepare("SELECT " OBJECT_COLS " FROM objects WHERE project_id = ?1 AND kind = ?2 AND id IN "
                        "(SELECT value FROM json_each(?3)) ORDER BY id");
    s->bind(1, project_id).bind(2, kind).bind(3, ids_to_json(ids));
    while (s->step()) out.push_back(read_object(*s));
    return out;
  }

  result<std::vector<catalog_object>> objects_referencing(std::string_view project_id, std::string_view kind,
                                                          std::string_view ref) override {
    std::vector<catalog_object> out;
    auto s = d_.prepare("SELECT " OBJECT_COLS " FROM objects WHERE project_id = ?1 AND kind = ?2 AND ref_id = ?3 "
                        "ORDER BY id");
    s->bind(1, project_id).bind(2, kind).bind(3, ref);
    while (s->step()) out.push_back(read_object(*s));
    return out;
  }

  result<std::vector<catalog_object>> objects_named(std::string_view project_id, std::string_view kind,
                                                    std::string_view name_prefix, int limit) override {
    std::vector<catalog_object> out;
    // A range of the unique (project_id, kind, name) index.
    auto [lower, upper] = prefix_range(name_prefix);
    const char* sql = named_sql(kind, !upper.empty());
    auto s = d_.prepare(sql);
    s->bind(1, project_id).bind(3, lower).bind(5, limit);
    if (!upper.empty()) s->bind(4, upper);
    if (!is_known_kind(kind)) s->bind(2, kind);
    while (s->step()) out.push_back(read_object(*s));
    return out;
  }

  result<std::vector<catalog_object>> certificates_expiring(time_ms before, int limit) override {
    std::vector<catalog_object> out;
    auto s = d_.prepare("SELECT " OBJECT_COLS " FROM objects WHERE kind = 'certificate' AND not_after < ?1 "
                        "ORDER BY not_after LIMIT ?2");
    s->bind(1, before).bind(2, limit);
    while (s->step()) out.push_back(read_object(*s));
    return out;
  }

  result<std::vector<catalog_object>> objects_by_not_after(std::string_view kind, time_ms before, int limit) override {
    std::vector<catalog_object> out;
    auto s = d_.prepare("SELECT " OBJECT_COLS " FROM objects WHERE kind = ?1 AND coalesce(not_after, 0) < ?2 "
                        "ORDER BY coalesce(not_after, 0), id LIMIT ?3");
    s->bind(1, kind).bind(2, before).bind(3, limit);
    while (s->step()) out.push_back(read_object(*s));
    return out;
  }

  result<std::int64_t> count_sealed() override {
    auto s = d_.prepare("SELECT count(*) FROM objects WHERE sealed IS NOT NULL");
    return s->step() ? s->int64(0) : 0;
  }

  result<std::vector<sealed_count>> sealed_versions() override {
    // "cfs1:<version>:…": the digits between the first two colons.
    auto s = d_.prepare(
        "SELECT kind, substr(sealed, 6, instr(substr(sealed, 6), ':') - 1) AS v, count(*) FROM objects "
        "WHERE sealed IS NOT NULL GROUP BY kind, v ORDER BY kind, v");
    std::vector<sealed_count> out;
    while (s->step()) {
      sealed_count c;
      c.kind = s->text(0);
      auto v = s->text(1);
      std::uint64_t n = 0;
      bool ok = !v.empty() && v.size() <= 10 && v.front() != '0';
      for (char ch : v) {
        if (ch < '0' || ch > '9') ok = false;
        else n = n * 10 + static_cast<std::uint64_t>(ch - '0');
      }
      c.version = ok && n <= 0xffffffffu ? static_cast<std::uint32_t>(n) : 0;
      c.count = s->int64(2);
      // Two spellings that are not versions both count as 0: merge them.
      if (!out.empty() && out.back().kind == c.kind && out.back().version == c.version) out.back().count += c.count;
      else out.push_back(std::move(c));
    }
    std::sort(out.begin(), out.end(), [](const sealed_count& a, const sealed_count& b) {
      return a.kind != b.kind ? a.kind < b.kind : a.version < b.version;
    });
    return out;
  }

  result<std::vector<sealed_row>> sealed_page(std::string_view kind, std::string_view except_prefix,
                                              std::string_view after_id, int limit) override {
    auto s = d_.prepare(
        "SELECT id, sealed FROM objects WHERE id > ?2 AND kind = ?1 AND sealed IS NOT NULL "
        "AND (?3 = '' OR substr(sealed, 1, length(?3)) <> ?3) ORDER BY id LIMIT ?4");
    s->bind(1, kind).bind(2, after_id).bind(3, except_prefix).bind(4, static_cast<std::int64_t>(limit));
    std::vector<sealed_row> out;
    while (s->step()) out.push_back({s->text(0), s->text(1)});
    return out;
  }

  result<std::optional<std::string>> meta(std::string_view key) override {
    auto s = d_.prepare("SELECT value FROM store_meta WHERE key = ?1");
    s->bind(1, key);
    if (!s->step()) return std::optional<std::string>{};
    return std::optional<std::string>(s->text(0));
  }

  result<distribution_record> get_distribution(std::string_view project_id, std::string_view id) override {
    auto s = d_.prepare("SELECT " DIST_COLS " FROM distributions WHERE id = ?1 "
                        "AND (?2 = '' OR project_id = ?2)");
    s->bind(1, id).bind(2, project_id);
    if (!s->step()) return object_not_found("distribution", id);
    return read_distribution(*s);
  }

  result<distribution_page> list_distributions(std::string_view project_id, int page, int page_size) override {
    read_guard g(d_);
    distribution_page out;
    {
      auto s = d_.prepare("SELECT " DIST_COLS " FROM distributions WHERE project_id = ?1 "
                          "ORDER BY id DESC LIMIT ?2 OFFSET ?3");
      s->bind(1, project_id).bind(2, page_size).bind(3, static_cast<std::int64_t>(page - 1) * page_size);
      while (s->step()) out.items.push_back(read_distribution(*s));
    }
    auto c = d_.prepare("SELECT count(*) FROM distributions WHERE project_id = ?1");
    c->bind(1, project_id);
    if (c->step()) out.total = c->int64(0);
    return out;
  }

  result<std::vector<std::string>> distributions_using(std::string_view project_id, std::string_view object_id) override {
    std::vector<std::string> out;
    auto s = d_.prepare("SELECT o.distribution_id FROM distribution_objects o JOIN distributions d "
                        "ON d.id = o.distribution_id WHERE o.object_id = ?1 AND d.project_id = ?2 ORDER BY 1");
    s->bind(1, object_id).bind(2, project_id);
    while (s->step()) out.push_back(s->text(0));
    return out;
  }

  result<std::vector<distribution_record>> distributions_in_status(std::string_view status, int limit) override {
    std::vector<distribution_record> out;
    auto s = d_.prepare("SELECT " DIST_COLS " FROM distributions WHERE status = ?1 "
                        "ORDER BY updated_at LIMIT ?2");
    s->bind(1, status).bind(2, limit);
    while (s->step()) out.push_back(read_distribution(*s));
    return out;
  }

  result<std::vector<distribution_record>> auto_execute_distributions(int limit) override {
    std::vector<distribution_record> out;
    auto s = d_.prepare("SELECT " DIST_COLS " FROM distributions WHERE auto_execute = 1 AND status <> ?2 "
                        "ORDER BY updated_at LIMIT ?1");
    s->bind(1, limit).bind(2, to_string(run_status::running));
    while (s->step()) out.push_back(read_distribution(*s));
    return out;
  }

  result<std::vector<target_result>> run_results(std::string_view distribution_id, std::int64_t run_no) override {
    std::vector<target_result> out;
    auto s = d_.prepare("SELECT " RESULT_COLS " FROM target_results WHERE distribution_id = ?1 AND run_no = ?2 "
                        "ORDER BY target_id, retry_attempt, fence");
    s->bind(1, distribution_id).bind(2, run_no);
    while (s->step()) out.push_back(read_result(*s));
    return out;
  }

  result<std::vector<target_result>> job_results(std::string_view distribution_id, std::int64_t run_no,
                                                 std::string_view job_id) override {
    std::vector<target_result> out;
    auto s = d_.prepare("SELECT " RESULT_COLS " FROM target_results WHERE distribution_id = ?1 AND run_no = ?2 "
                        "AND job_id = ?3 ORDER BY target_id, retry_attempt, fence");
    s->bind(1, distribution_id).bind(2, run_no).bind(3, job_id);
    while (s->step()) out.push_back(read_result(*s));
    return out;
  }

  result<std::vector<target_result>> run_outcomes(std::string_view distribution_id, std::int64_t run_no) override {
    auto all = run_results(distribution_id, run_no);
    if (!all) return all;
    return target_outcomes(std::move(*all));
  }

  result<std::vector<finalized_child>> finalized_children(std::string_view distribution_id,
                                                          std::int64_t run_no) override {
    std::vector<finalized_child> out;
    auto s = d_.prepare("SELECT job_id, outcome, batch FROM fanout_finalized WHERE distribution_id = ?1 AND run_no = ?2 "
                        "ORDER BY job_id");
    s->bind(1, distribution_id).bind(2, run_no);
    while (s->step()) out.push_back(finalized_child{s->text(0), s->text(1), s->int64(2) != 0});
    return out;
  }

  result<std::int64_t> last_files_run(std::string_view distribution_id, std::string_view target_id) override {
    auto s = d_.prepare("SELECT coalesce(max(files_from_run), 0) FROM target_results WHERE distribution_id = ?1 "
                        "AND target_id = ?2 AND status = ?3");
    s->bind(1, distribution_id).bind(2, target_id).bind(3, to_string(target_status::succeeded));
    return s->step() ? s->int64(0) : 0;
  }

  result<std::vector<std::pair<std::string, time_ms>>> target_last_successes(int limit) override {
    std::vector<std::pair<std::string, time_ms>> out;
    auto s = d_.prepare("SELECT target_id, max(finished_at) FROM target_results WHERE status = ?1 "
                        "GROUP BY target_id ORDER BY target_id LIMIT ?2");
    s->bind(1, to_string(target_status::succeeded)).bind(2, limit);
    while (s->step()) out.emplace_back(s->text(0), s->int64(1));
    return out;
  }

  result<std::vector<job_record>> children_of(std::string_view distribution_id,
                                              std::string_view run_key_prefix) override {
    std::string project_id;
    {
      auto p = d_.prepare("SELECT project_id FROM distributions WHERE id = ?1");
      p->bind(1, distribution_id);
      if (!p->step()) return object_not_found("distribution", distribution_id);
      project_id = p->text(0);
    }
    auto [lo, hi] = prefix_range(run_key_prefix);
    std::vector<job_record> out;
    auto s = hi.empty() ? d_.prepare("SELECT " JOB_COLS " FROM jobs WHERE project_id = ?1 AND idempotency_key >= ?2 "
                                     "ORDER BY id")
                        : d_.prepare("SELECT " JOB_COLS " FROM jobs WHERE project_id = ?1 AND idempotency_key >= ?2 "
                                     "AND idempotency_key < ?3 ORDER BY id");
    s->bind(1, project_id).bind(2, lo);
    if (!hi.empty()) s->bind(3, hi);
    while (s->step()) out.push_back(read_job(*s));
    return out;
  }

 protected:
  // A consistent view over several statements on a reader; inside a write transaction the
  // transaction already is one.
  result<std::vector<dns_record>> dns_records_of(std::string_view job_id, std::int64_t fence) override {
    std::vector<dns_record> out;
    auto s = d_.prepare("SELECT " DNS_RECORD_COLS " FROM acme_dns_records WHERE job_id = ?1 AND fence = ?2 "
                        "ORDER BY presented_at, id");
    s->bind(1, job_id).bind(2, fence);
    while (s->step()) out.push_back(read_dns_record(*s));
    return out;
  }

  result<std::vector<dns_record>> dns_records_left(int limit) override {
    std::vector<dns_record> out;
    auto s = d_.prepare("SELECT r.id, r.project_id, r.provider_id, r.job_id, r.fence, r.zone, r.fqdn, r.value, "
                        "r.presented_at, r.removed_at FROM acme_dns_records r LEFT JOIN jobs j ON j.id = r.job_id "
                        "WHERE r.removed_at IS NULL AND (j.id IS NULL OR j.status <> 'active' OR j.fence <> r.fence) "
                        "ORDER BY r.presented_at, r.id LIMIT ?1");
    s->bind(1, limit);
    while (s->step()) out.push_back(read_dns_record(*s));
    return out;
  }

  struct read_guard {
    explicit read_guard(db& d) : d_(d), own_(sqlite3_get_autocommit(d.handle()) != 0) {
      if (own_) d_.prepare("BEGIN")->run();
    }
    ~read_guard() {
      if (!own_) return;
      try {
        d_.prepare("COMMIT")->run();
      } catch (...) {
        // Read-only: nothing to lose; the next BEGIN resets the connection.
      }
    }
    db& d_;
    bool own_;
  };

  
  db& d_;
};

class read_impl final : public reads<catalog_read> {
 public:
  using reads::reads;
};

class tx_impl final : public reads<catalog_tx> {
 public:
  tx_impl(db& d, job_tx& jobs) : reads(d), jobs_(jobs) {}

  job_tx& jobs() override { return jobs_; }

  result<catalog_object> insert_object(catalog_object o) override {
    if (o.id.empty()) o.id = new_object_id();
    auto s = d_.prepare("INSERT INTO objects (" OBJECT_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
                        "ON CONFLICT (project_id, kind, name) DO NOTHING");
    s->bind(1, o.id).bind(2, o.project_id).bind(3, o.kind).bind(4, o.name).bind(5, o.doc);
    s->bind_or_null(6, o.sealed).bind_or_null(7, o.ref_id);
    if (o.not_after) s->bind(8, o.not_after);
    else s->bind_null(8);
    s->bind(9, o.created_at);
    s->run();
    if (d_.changes() == 0)
      return make_error(errc::conflict, fmt::format("a {} named \"{}\" already exists in this project", o.kind, o.name),
                        "name");
    return o;
  }

  result<void> update_object_doc(std::string_view id, std::string_view doc) override {
    auto s = d_.prepare("UPDATE objects SET doc = ?2 WHERE id = ?1");
    s->bind(1, id).bind(2, doc);
    s->run();
    if (d_.changes() == 0) return object_not_found("object", id);
    return {};
  }

  result<void> update_object(const catalog_object& o) override {
    auto s = d_.prepare("UPDATE objects SET doc = ?2, sealed = ?3, ref_id = ?4, not_after = ?5 WHERE id = ?1");
    s->bind(1, o.id).bind(2, o.doc).bind_or_null(3, o.sealed).bind_or_null(4, o.ref_id);
    if (o.not_after) s->bind(5, o.not_after);
    else s->bind_null(5);
    s->run();
    if (d_.changes() == 0) return object_not_found(o.kind, o.id);
    return {};
  }

  result<void> delete_object(std::string_view project_id, std::string_view kind, std::string_view id) override {
    auto s = d_.prepare("DELETE FROM objects WHERE id = ?1 AND project_id = ?2 AND kind = ?3");
    s->bind(1, id).bind(2, project_id).bind(3, kind);
    s->run();
    if (d_.changes() == 0) return object_not_found(kind, id);
    return {};
  }

  result<void> set_meta(std::string_view key, std::string_view value) override {
    auto s = d_.prepare("INSERT INTO store_meta (key, value) VALUES (?1, ?2) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
    s->bind(1, key).bind(2, value);
    s->run();
    return {};
  }

  result<void> delete_meta(std::string_view key) override {
    auto s = d_.prepare("DELETE FROM store_meta WHERE key = ?1");
    s->bind(1, key);
    s->run();
    return {};
  }

  result<bool> reseal_object(std::string_view id, std::string_view old_sealed, std::string_view new_sealed) override {
    auto s = d_.prepare("UPDATE objects SET sealed = ?3 WHERE id = ?1 AND sealed = ?2");
    s->bind(1, id).bind(2, old_sealed).bind(3, new_sealed);
    s->run();
    return d_.changes() > 0;
  }

  result<distribution_record> insert_distribution(distribution_record d) override {
    if (d.id.empty()) d.id = new_object_id();
    auto s = d_.prepare(
        "INSERT INTO distributions (id, project_id, name, certificate_id, target_ids, canary, failure_tolerance, "
        "fail_fast, status, run_no, run_target_ids, job_ids, created_at, updated_at, auto_execute) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?11, 0, '[]', '[]', ?9, ?9, ?10) "
        "ON CONFLICT (project_id, name) DO NOTHING");
    s->bind(1, d.id).bind(2, d.project_id).bind(3, d.name).bind(4, d.certificate_id).bind(5, ids_to_json(d.target_ids));
    s->bind(6, d.canary ? 1 : 0).bind_real(7, d.failure_tolerance).bind(8, d.fail_fast ? 1 : 0).bind(9, d.created_at);
    s->bind(10, d.auto_execute ? 1 : 0).bind(11, to_string(run_status::idle));
    s->run();
    if (d_.changes() == 0)
      return make_error(errc::conflict, fmt::format("a distribution named \"{}\" already exists in this project", d.name),
                        "name");
    auto link = d_.prepare("INSERT OR IGNORE INTO distribution_objects (distribution_id, object_id) VALUES (?1, ?2)");
    auto add = [&](const std::string& object_id) {
      link->bind(1, d.id).bind(2, object_id);
      link->run();
      link->reset();
    };
    add(d.certificate_id);
    for (const auto& t : d.target_ids) add(t);
    d.status = to_string(run_status::idle);
    d.updated_at = d.created_at;
    return d;
  }

  result<void> update_distribution(const distribution_record& d) override {
    auto s = d_.prepare(
        "UPDATE distributions SET status = ?2, run_no = ?3, mode = ?4, run_target_ids = ?5, job_ids = ?6, error = ?7, "
        "fan_out_total = ?8, fan_out_succeeded = ?9, fan_out_failed = ?10, fan_out_partial = ?11, "
        "fan_out_cancelled = ?12, fan_out_retrying = ?13, fan_out_retry_wave = ?14, fail_fast_fired = ?15, "
        "cancel_requested = ?16, run_started_at = ?17, run_finished_at = ?18, updated_at = ?19, "
        "run_certificate_version = ?20, run_trigger = ?21, run_redrives = ?22 WHERE id = ?1");
    s->bind(1, d.id).bind(2, d.status).bind(3, d.run_no).bind_or_null(4, d.mode).bind(5, ids_to_json(d.run_target_ids));
    s->bind(6, ids_to_json(d.job_ids)).bind_or_null(7, d.error).bind(8, d.fan_out_total).bind(9, d.fan_out_succeeded);
    s->bind(10, d.fan_out_failed).bind(11, d.fan_out_partial).bind(12, d.fan_out_cancelled);
    s->bind(13, d.fan_out_retrying).bind(14, d.fan_out_retry_wave).bind(15, d.fail_fast_fired ? 1 : 0);
    s->bind(16, d.cancel_requested ? 1 : 0).bind(17, d.run_started_at).bind(18, d.run_finished_at);
    s->bind(19, d.updated_at).bind(20, d.run_certificate_version).bind_or_null(21, d.run_trigger).bind(22, d.run_redrives);
    s->run();
    if (d_.changes() == 0) return object_not_found("distribution", d.id);
    return {};
  }

  result<void> delete_distribution(std::string_view project_id, std::string_view id) override {
    auto s = d_.prepare("DELETE FROM distributions WHERE id = ?1 AND project_id = ?2");
    s->bind(1, id).bind(2, project_id);
    s->run();
    if (d_.changes() == 0) return object_not_found("distribution", id);
    auto l = d_.prepare("DELETE FROM distribution_objects WHERE distribution_id = ?1");
    l->bind(1, id);
    l->run();
    return {};
  }

  result<void> add_result(const target_result& r) override {
    auto s = d_.prepare("INSERT OR REPLACE INTO target_results (" RESULT_COLS ") VALUES "
                        "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
    s->bind(1, r.distribution_id).bind(2, r.run_no).bind(3, r.target_id).bind(4, r.job_id).bind(5, r.retry_attempt);
    s->bind(6, r.fence).bind(7, r.status).bind_or_null(8, r.error_class).bind_or_null(9, r.error);
    s->bind(10, r.started_at).bind(11, r.finished_at).bind_or_null(12, r.fingerprint_sha256);
    s->bind(13, r.hash_skipped ? 1 : 0).bind(14, r.files_from_run).bind(15, r.detail.empty() ? "{}" : r.detail);
    s->run();
    return {};
  }

  result<bool> add_finalized(std::string_view distribution_id, std::int64_t run_no, const finalized_child& c) override {
    auto s = d_.prepare("INSERT INTO fanout_finalized (distribution_id, run_no, job_id, outcome, batch) "
                        "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING");
    s->bind(1, distribution_id).bind(2, run_no).bind(3, c.job_id).bind(4, c.outcome).bind(5, c.batch ? 1 : 0);
    s->run();
    return d_.changes() > 0;
  }

  result<std::vector<job_record>> cancel_waiting_children(std::string_view distribution_id,
                                                          std::string_view run_key_prefix, time_ms now) override {
    auto kids = children_of(distribution_id, run_key_prefix);
    if (!kids) return std::move(kids).error();
    std::vector<job_record> out;
    auto s = d_.prepare("UPDATE jobs SET status = 'cancelled', completed_at = ?2, held = 0, "
                        "error = 'cancelled with its distribution', error_code = ?3, error_class = NULL "
                        "WHERE id = ?1 AND status IN ('pending', 'failed') RETURNING " JOB_COLS);
    for (const auto& k : *kids) {
      if (k.status != job_status::pending && k.status != job_status::failed) continue;
      s->bind(1, k.id).bind(2, now).bind(3, cancelled_code);
      if (s->step()) out.push_back(read_job(*s));
      while (s->step()) {
      }
      s->reset();
    }
    return out;
  }

  result<std::vector<std::string>> request_cancel_children(std::string_view distribution_id,
                                                           std::string_view run_key_prefix) override {
    auto kids = children_of(distribution_id, run_key_prefix);
    if (!kids) return std::move(kids).error();
    std::vector<std::string> out;
    auto s = d_.prepare("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND status = 'active'");
    for (const auto& k : *kids) {
      if (k.status != job_status::active) continue;
      s->bind(1, k.id);
      s->run();
      if (d_.changes() > 0) out.push_back(k.id);
      s->reset();
    }
    return out;
  }

  result<int> release_held_children(std::string_view distribution_id, std::string_view run_key_prefix,
                                    time_ms now) override {
    auto kids = children_of(distribution_id, run_key_prefix);
    if (!kids) return std::move(kids).error();
    int n = 0;
    auto s = d_.prepare("UPDATE jobs SET held = 0, ready_at = ?2 WHERE id = ?1 AND held = 1 AND status = 'pending'");
    for (const auto& k : *kids) {
      if (!k.held) continue;
      s->bind(1, k.id).bind(2, now);
      s->run();
      n += static_cast<int>(d_.changes());
      s->reset();
    }
    return n;
  }

  result<void> add_dns_record(const dns_record& r) override {
    auto s = d_.prepare("INSERT INTO acme_dns_records (" DNS_RECORD_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL)");
    s->bind(1, r.id).bind(2, r.project_id).bind(3, r.provider_id).bind(4, r.job_id).bind(5, r.fence);
    s->bind(6, r.zone).bind(7, r.fqdn).bind(8, r.value).bind(9, r.presented_at);
    s->run();
    return {};
  }

  result<void> mark_dns_record_removed(std::string_view id, time_ms now) override {
    auto s = d_.prepare("UPDATE acme_dns_records SET removed_at = ?2 WHERE id = ?1 AND removed_at IS NULL");
    s->bind(1, id).bind(2, now);
    s->run();
    return {};
  }

  result<job_record> get_job(std::string_view id) override {
    auto s = d_.prepare("SELECT " JOB_COLS " FROM jobs WHERE id = ?1");
    s->bind(1, id);
    if (!s->step()) return make_error(errc::not_found, fmt::format("job {} not found", id), "id");
    return read_job(*s);
  }

 private:
  job_tx& jobs_;
};

class store_impl final : public catalog_store {
 public:
  store_impl(writer& w, reader_pool& r, job_tx_factory jobs) : w_(w), r_(r), jobs_(std::move(jobs)) {}

  task<void> transact(std::function<result<void>(catalog_tx&)> fn) override {
    return run_write<result<void>>(w_, [fn = std::move(fn), this](db& d) -> result<void> {
      auto jobs = jobs_(d);
      return fn(jobs->catalog());
    });
  }

  task<void> read(std::function<result<void>(catalog_read&)> fn) override {
    return run_read<result<void>>(r_, [fn = std::move(fn)](db& d) -> result<void> {
      read_impl r(d);
      return fn(r);
    });
  }

 private:
  writer& w_;
  reader_pool& r_;
  job_tx_factory jobs_;
};

}  // namespace

std::unique_ptr<catalog_tx> make_catalog_tx(db& d, job_tx& jobs) { return std::make_unique<tx_impl>(d, jobs); }

std::unique_ptr<catalog_store> make_catalog_store(writer& w, reader_pool& r, job_tx_factory jobs) {
  return std::make_unique<store_impl>(w, r, std::move(jobs));
}

}  // namespace certfleet::store::sqlite
