#pragma once
// The catalog (DESIGN §4): certificates, credentials, targets, notification channels and rules
// as project-scoped objects; distributions with their runs, per-target results and fan-out
// counters. The store offers typed reads and writes that run inside one transaction; the
// distribution module owns the protocol (what to write when) and runs it through `transact`,
// so a report, its counter and its guard commit together or not at all.
#include "certfleet/store/states.hpp"
#include "certfleet/store/store.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::store {

// Kinds of catalog object. One table holds them; `doc` is the object's JSON (never a secret),
// `sealed` its encrypted secret (an envelope from core/secrets), if any.
inline constexpr std::string_view kind_certificate = "certificate";
inline constexpr std::string_view kind_credential = "credential";
inline constexpr std::string_view kind_target = "target";
inline constexpr std::string_view kind_channel = "notification_channel";
inline constexpr std::string_view kind_rule = "notification_rule";
// An earlier version of a certificate (ref_id: the certificate), kept when a new one is stored:
// its document and sealed key as they were while it was current.
inline constexpr std::string_view kind_certificate_version = "certificate_version";
// ACME (DESIGN §9): an account at a CA (its key sealed) and a DNS provider for DNS-01 (its TSIG
// secret sealed).
inline constexpr std::string_view kind_acme_account = "acme_account";
inline constexpr std::string_view kind_dns_provider = "dns_provider";
// AD CS (DESIGN §13): a CA reached through its CEP/CES services (its password, client key or
// keytab sealed), and one request the CA holds for approval (ref_id: the certificate; its
// private key sealed until the certificate is retrieved).
inline constexpr std::string_view kind_msca_ca = "msca_ca";
inline constexpr std::string_view kind_msca_request = "msca_request";
// Checks (DESIGN §12): a registered domain whose registration the domain check watches
// (not_after: its registration expiry, 0 until first read).
inline constexpr std::string_view kind_domain = "domain";
// Discovery (DESIGN §12): a source of endpoints to scan, and a certificate a scan found (name: the
// SHA-256 of its leaf, unique per project; not_after: the leaf's).
inline constexpr std::string_view kind_discovery_source = "discovery_source";
inline constexpr std::string_view kind_discovered_certificate = "discovered_certificate";
// A project's settings (setting_scope::project): at most one object per project, named
// "settings", its doc the values set. Not content: deleting the project deletes it.
inline constexpr std::string_view kind_project_settings = "project_settings";

// How many envelopes of one collection name one KEK version (malformed ones count as version 0).
struct sealed_count {
  std::string kind;
  std::uint32_t version = 0;
  std::int64_t count = 0;
};

// An object's envelope, as KEK rotation reads it.
struct sealed_row {
  std::string id;
  std::string sealed;
};

struct catalog_object {
  std::string id;
  std::string project_id;
  std::string kind;
  std::string name;
  std::string doc = "{}";    // JSON object text
  std::string sealed;        // empty: no secret
  std::string ref_id;        // the object this one uses (a target's credential, a rule's channel)
  time_ms not_after = 0;     // certificates: expiry, indexed for the expiration check
  time_ms created_at = 0;
};

struct object_page {
  std::vector<catalog_object> items;
  std::int64_t total = 0;
};

// The distribution document: definition, the current run and its fan-out counters.
struct distribution_record {
  std::string id;
  std::string project_id;
  std::string name;
  std::string certificate_id;
  std::vector<std::string> target_ids;  // sorted, unique
  bool canary = false;
  double failure_tolerance = 0;
  bool fail_fast = false;
  // Each new version of the certificate opens a run by itself (DESIGN §9).
  bool auto_execute = false;
  // Current run. status: a run_status; mode: a run_mode (states.hpp).
  std::string status{to_string(run_status::idle)};
  std::int64_t run_no = 0;
  std::string mode;                        // of the current run
  std::vector<std::string> run_target_ids; // the targets of the current run (retry-failed: a subset)
  std::vector<std::string> job_ids;        // the run's job (normal) or its batch children (fan_out)
  std::string error;                       // why the run ended failed/cancelled, for operators
  std::int64_t fan_out_total = 0;
  std::int64_t fan_out_succeeded = 0, fan_out_failed = 0, fan_out_partial = 0, fan_out_cancelled = 0;
  std::int64_t fan_out_retrying = 0;
  std::int64_t fan_out_retry_wave = 0;
  bool fail_fast_fired = false;
  bool cancel_requested = false;
  // The certificate version that was current when the run opened, and what opened it when it was
  // not a person ("dist-renew:<distribution>:<version>" for a new version's automatic run).
  std::int64_t run_certificate_version = 0;
  std::string run_trigger;
  // Times an operator re-drove failed targets of this run after it ended (issue 31): each re-drive
  // reopens the run, and its next end is told as a new distribution.finished.
  std::int64_t run_redrives = 0;
  time_ms run_started_at = 0;
  time_ms run_finished_at = 0;
  time_ms created_at = 0;
  time_ms updated_at = 0;
};

struct distribution_page {
  std::vector<distribution_record> items;
  std::int64_t total = 0;
};

// One target's result from one attempt of one job of a run. A target's outcome in a run is its
// result with the highest (retry_attempt, fence).
struct target_result {
  std::string distribution_id;
  std::int64_t run_no = 0;
  std::string target_id;
  std::string job_id;
  std::int64_t retry_attempt = 0;
  std::int64_t fence = 0;
  std::string status;       // a target_status (states.hpp)
  std::string error_class;  // DESIGN §4 class, empty on success
  std::string error;
  time_ms started_at = 0;
  time_ms finished_at = 0;
  std::string fingerprint_sha256;
  bool hash_skipped = false;       // the files were already in place
  std::int64_t files_from_run = 0; // the run whose delivery put the files there (rollback)
  std::string detail = "{}";       // phase timings, JSON
};

// A fan-out child that has reported, with the counter it incremented.
struct finalized_child {
  std::string job_id;
  std::string outcome;  // a fan_out_outcome (states.hpp)
  bool batch = false;   // batch children decide completion; retry children do not
};

// A DNS-01 challenge TXT record a certificate workflow put into a DNS provider's zone (DESIGN
// §9), recorded before the UPDATE is sent and marked removed once it is out of the zone, so that
// a record a crash left behind is found and removed (cleanup_dns and the scheduler's sweep).
struct dns_record {
  std::string id;
  std::string project_id;
  std::string provider_id;  // the dns_provider object
  std::string job_id;       // the attempt that presented it: job and fence
  std::int64_t fence = 0;
  std::string zone;         // as the provider names it; "" : found by the SOA walk
  std::string fqdn, value;
  time_ms presented_at = 0;
  time_ms removed_at = 0;   // 0: still in the zone (as far as certfleet knows)
};

// Reads that work both inside a write transaction and on a reader connection.
class catalog_read {
 public:
  virtual ~catalog_read() = default;
  virtual result<catalog_object> get_object(std::string_view project_id, std::string_view kind, std::string_view id) = 0;
  virtual result<object_page> list_objects(std::string_view project_id, std::string_view kind, int page,
                                           int page_size) = 0;
  // Objects of these ids (of this project and kind) that exist, in id order.
  virtual result<std::vector<catalog_object>> objects_by_ids(std::string_view project_id, std::string_view kind,
                                                             const std::vector<std::string>& ids) = 0;
  // Objects of a kind whose ref_id is `ref` (targets using a credential, rules of a channel).
  virtual result<std::vector<catalog_object>> objects_referencing(std::string_view project_id, std::string_view kind,
                                                                  std::string_view ref) = 0;
  // Objects of a kind whose name starts with `name_prefix`, in name order, at most `limit`: a
  // range scan of the (project, kind, name) index (the rules of one event, named
  // "<event>-><channel>", without reading the others).
  virtual result<std::vector<catalog_object>> objects_named(std::string_view project_id, std::string_view kind,
                                                            std::string_view name_prefix, int limit) = 0;
  // Every certificate (all projects) with not_after before `before`, oldest first.
  virtual result<std::vector<catalog_object>> certificates_expiring(time_ms before, int limit) = 0;
  // Every object of `kind` (all projects) with not_after before `before`, oldest first (0, which
  // a kind uses for "not known yet", first of all): the domain check's list of domains.
  virtual result<std::vector<catalog_object>> objects_by_not_after(std::string_view kind, time_ms before, int limit) = 0;
  virtual result<std::int64_t> count_sealed() = 0;
  // Envelopes per collection (kind) and KEK version, every project: the start-up check, `kek
  // status` and `kek retire` read it. Ordered by kind, then version.
  virtual result<std::vector<sealed_count>> sealed_versions() = 0;
  // Objects of `kind` (every project) whose envelope does not start with `except_prefix` (empty:
  // every envelope), with
  // id > after_id, in id order, at most `limit`: one batch of a KEK rotation.
  virtual result<std::vector<sealed_row>> sealed_page(std::string_view kind, std::string_view except_prefix,
                                                      std::string_view after_id, int limit) = 0;
  virtual result<std::optional<std::string>> meta(std::string_view key) = 0;

  // project_id empty: any project (workers and sweeps, which act on ids they were given).
  virtual result<distribution_record> get_distribution(std::string_view project_id, std::string_view id) = 0;
  virtual result<distribution_page> list_distributions(std::string_view project_id, int page, int page_size) = 0;
  // Distributions using a certificate or a target (deletes refuse while any does).
  virtual result<std::vector<std::string>> distributions_using(std::string_view project_id, std::string_view object_id) = 0;
  // Distributions whose status is `status` (the sweeps), oldest update first.
  virtual result<std::vector<distribution_record>> distributions_in_status(std::string_view status, int limit) = 0;
  // Distributions that run by themselves for a new certificate version and are not running now
  // (the distributions sweep looks for runs owed to a new version), oldest update first.
  virtual result<std::vector<distribution_record>> auto_execute_distributions(int limit) = 0;
  // Every result row of a run (all attempts), ordered by target, retry_attempt, fence.
  virtual result<std::vector<target_result>> run_results(std::string_view distribution_id, std::int64_t run_no) = 0;
  // The result rows one job of a run wrote (a child's report reads only its own).
  virtual result<std::vector<target_result>> job_results(std::string_view distribution_id, std::int64_t run_no,
                                                         std::string_view job_id) = 0;
  // The outcome (latest result) of each target of a run, by target id.
  virtual result<std::vector<target_result>> run_outcomes(std::string_view distribution_id, std::int64_t run_no) = 0;
  virtual result<std::vector<finalized_child>> finalized_children(std::string_view distribution_id,
                                                                  std::int64_t run_no) = 0;
  // The latest run of this distribution whose successful delivery put files on the target
  // (0: none): a hash-skipped target records it, so rollback knows which backup to restore.
  virtual result<std::int64_t> last_files_run(std::string_view distribution_id, std::string_view target_id) = 0;
  // Each target's latest successful delivery (any distribution, any run), as (target_id,
  // finished_at), in target id order, at most `limit`: /metrics's per-target series. A scan of
  // the succeeded result rows: its cost grows with the runs kept.
  virtual result<std::vector<std::pair<std::string, time_ms>>> target_last_successes(int limit) = 0;
  // The jobs of a run (normal job, batch and retry children), oldest first: the jobs of the
  // distribution's project whose idempotency key starts with `run_key_prefix`. The distribution
  // module spells the keys (distribution::run_key_prefix); the store only matches the prefix.
  virtual result<std::vector<job_record>> children_of(std::string_view distribution_id,
                                                      std::string_view run_key_prefix) = 0;

  // The challenge records one job attempt presented (removed ones too), oldest first.
  virtual result<std::vector<dns_record>> dns_records_of(std::string_view job_id, std::int64_t fence) = 0;
  // Records still in a zone whose presenting attempt is over (all projects), oldest first: the
  // job is gone, is not active, or is active in a later attempt (a crash left them; the running
  // attempt removes its own).
  virtual result<std::vector<dns_record>> dns_records_left(int limit) = 0;
};

// Writes (and reads) inside one write transaction.
class catalog_tx : public catalog_read {
 public:
  virtual job_tx& jobs() = 0;

  // Insert; conflict when the project already has an object of this kind with that name.
  virtual result<catalog_object> insert_object(catalog_object o) = 0;
  virtual result<void> update_object_doc(std::string_view id, std::string_view doc) = 0;
  // Rewrites an object's doc, sealed secret, ref_id and not_after (a certificate's new version).
  virtual result<void> update_object(const catalog_object& o) = 0;
  virtual result<void> delete_object(std::string_view project_id, std::string_view kind, std::string_view id) = 0;
  virtual result<void> set_meta(std::string_view key, std::string_view value) = 0;
  virtual result<void> delete_meta(std::string_view key) = 0;
  // Replaces an object's envelope only while it is still `old_sealed` (a concurrent write wins:
  // false, nothing changed).
  virtual result<bool> reseal_object(std::string_view id, std::string_view old_sealed, std::string_view new_sealed) = 0;

  virtual result<distribution_record> insert_distribution(distribution_record d) = 0;
  // Writes every mutable field of the current run (status, run, counters, flags, job ids).
  virtual result<void> update_distribution(const distribution_record& d) = 0;
  virtual result<void> delete_distribution(std::string_view project_id, std::string_view id) = 0;

  virtual result<void> add_result(const target_result& r) = 0;
  // Adds the child to the run's finalized set; false when it was already there (nothing changed).
  virtual result<bool> add_finalized(std::string_view distribution_id, std::int64_t run_no, const finalized_child& c) = 0;

  // Children of a distribution run (children_of: `run_key_prefix`), by job operations that do
  // not run the terminal hook (the caller accounts for them in this same transaction).
  // pending/failed (held or not) -> cancelled; returns the jobs cancelled.
  virtual result<std::vector<job_record>> cancel_waiting_children(std::string_view distribution_id,
                                                                  std::string_view run_key_prefix, time_ms now) = 0;
  // active -> cancel_requested; returns their ids.
  virtual result<std::vector<std::string>> request_cancel_children(std::string_view distribution_id,
                                                                   std::string_view run_key_prefix) = 0;
  // held -> claimable now.
  virtual result<int> release_held_children(std::string_view distribution_id, std::string_view run_key_prefix,
                                            time_ms now) = 0;
  virtual result<job_record> get_job(std::string_view id) = 0;

  // Challenge records (dns_record): one written before its UPDATE is sent; marked removed after.
  virtual result<void> add_dns_record(const dns_record& r) = 0;
  virtual result<void> mark_dns_record_removed(std::string_view id, time_ms now) = 0;
};

// Name the function before awaiting: GCC 12 destroys a lambda temporary built inside a
// co_await expression twice.
using tx_fn = std::function<result<void>(catalog_tx&)>;
using read_fn = std::function<result<void>(catalog_read&)>;

class catalog_store {
 public:
  virtual ~catalog_store() = default;
  // Runs `fn` in one write transaction: its writes commit when it returns a value, roll back
  // when it returns an error (or throws: a bug, rethrown to the caller). Runs on the store's
  // writer thread: no awaiting inside.
  virtual task<void> transact(tx_fn fn) = 0;
  // Runs `fn` on a reader connection, in one snapshot.
  virtual task<void> read(read_fn fn) = 0;
};

// A read that returns one value: `read` with the value carried out of the reader thread.
template <class T>
using read_value_fn = std::function<result<T>(catalog_read&)>;
template <class T>
task<T> read_value(catalog_store& c, read_value_fn<T> get) {
  auto out = std::make_shared<std::optional<T>>();
  read_fn fn = [out, get = std::move(get)](catalog_read& rd) -> result<void> {
    auto v = get(rd);
    if (!v) return std::move(v).error();
    out->emplace(std::move(*v));
    return {};
  };
  auto r = co_await c.read(std::move(fn));
  if (!r) co_return std::move(r).error();
  co_return std::move(**out);
}

}  // namespace certfleet::store
