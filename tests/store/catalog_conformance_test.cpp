// The catalog interface (certfleet/store/catalog.hpp), run against every store backend the jobs
// suite runs against (backends.hpp): catalog objects, distributions and their runs, per-target
// results, the fan-out guard set, and the transaction that makes a report, its counter and its
// guard commit together or not at all.
#include "backends.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using namespace certfleet;
using namespace certfleet::store;
using testbed::run_sync;
using store_conformance_backends::backend;
using store_conformance_backends::backends;

namespace {

constexpr time_ms t0 = 1'700'000'000'000;

std::vector<std::string> ids_of(const std::vector<catalog_object>& v) {
  std::vector<std::string> out;
  for (const auto& o : v) out.push_back(o.id);
  return out;
}
std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

class catalog_conformance : public ::testing::TestWithParam<backend> {
 protected:
  void SetUp() override {
    st = GetParam().open(dir);
    project = run_sync(st->projects().ensure("default", t0))->first.id;
    other_project = run_sync(st->projects().ensure("other", t0))->first.id;
  }
  void TearDown() override { st->close(); }

  // One write transaction; its result is the function's.
  result<void> write(const tx_fn& fn) {
    tx_fn f = fn;  // named: see tx_fn
    return run_sync(st->catalog().transact(std::move(f)));
  }
  // A read on a reader connection (what was committed).
  result<void> read(const read_fn& fn) {
    read_fn f = fn;
    return run_sync(st->catalog().read(std::move(f)));
  }
  template <class T>
  T read_value(const std::function<result<T>(catalog_read&)>& fn) {
    std::optional<T> out;
    auto r = read([&](catalog_read& rd) -> result<void> {
      auto v = fn(rd);
      if (!v) return std::move(v).error();
      out.emplace(std::move(*v));
      return {};
    });
    EXPECT_TRUE(r) << r.error().message;
    return out ? std::move(*out) : T{};
  }

  catalog_object object(std::string kind, std::string name, std::string project_id = {}) {
    catalog_object o;
    o.project_id = project_id.empty() ? project : std::move(project_id);
    o.kind = std::move(kind);
    o.name = std::move(name);
    o.created_at = t0;
    return o;
  }
  catalog_object insert(catalog_object o) {
    catalog_object out;
    auto r = write([&](catalog_tx& tx) -> result<void> {
      auto ins = tx.insert_object(o);
      if (!ins) return std::move(ins).error();
      out = std::move(*ins);
      return {};
    });
    EXPECT_TRUE(r) << r.error().message;
    return out;
  }
  result<catalog_object> get_object(std::string project_id, std::string_view kind, std::string id) {
    std::optional<result<catalog_object>> out;
    auto r = read([&](catalog_read& rd) -> result<void> {
      out.emplace(rd.get_object(project_id, kind, id));
      return {};
    });
    EXPECT_TRUE(r);
    return std::move(*out);
  }

  distribution_record distribution(std::string name, const std::string& certificate_id,
                                   std::vector<std::string> target_ids, std::string project_id = {}) {
    distribution_record d;
    d.project_id = project_id.empty() ? project : std::move(project_id);
    d.name = std::move(name);
    d.certificate_id = certificate_id;
    std::sort(target_ids.begin(), target_ids.end());
    d.target_ids = std::move(target_ids);
    d.created_at = t0;
    return d;
  }
  distribution_record insert(distribution_record d) {
    distribution_record out;
    auto r = write([&](catalog_tx& tx) -> result<void> {
      auto ins = tx.insert_distribution(d);
      if (!ins) return std::move(ins).error();
      out = std::move(*ins);
      return {};
    });
    EXPECT_TRUE(r) << r.error().message;
    return out;
  }
  result<distribution_record> get_distribution(std::string project_id, std::string id) {
    std::optional<result<distribution_record>> out;
    auto r = read([&](catalog_read& rd) -> result<void> {
      out.emplace(rd.get_distribution(project_id, id));
      return {};
    });
    EXPECT_TRUE(r);
    return std::move(*out);
  }

  target_result result_row(const std::string& dist, std::int64_t run, std::string target, std::string job,
                           std::int64_t retry_attempt, std::int64_t fence, std::string status) {
    target_result r;
    r.distribution_id = dist;
    r.run_no = run;
    r.target_id = std::move(target);
    r.job_id = std::move(job);
    r.retry_attempt = retry_attempt;
    r.fence = fence;
    r.status = std::move(status);
    r.started_at = t0 + 10;
    r.finished_at = t0 + 20;
    return r;
  }
  void add_results(const std::vector<target_result>& rows) {
    auto r = write([&](catalog_tx& tx) -> result<void> {
      for (const auto& row : rows)
        if (auto a = tx.add_result(row); !a) return a;
      return {};
    });
    ASSERT_TRUE(r) << r.error().message;
  }

  testbed::temp_dir dir;
  std::unique_ptr<certfleet::store::store> st;
  std::string project, other_project;
};

// ---- catalog objects ----------------------------------------------------------------------

TEST_P(catalog_conformance, an_object_keeps_every_field_and_belongs_to_its_project_and_kind) {
  auto cred = insert(object(std::string(kind_credential), "deploy-key"));
  auto o = object(std::string(kind_target), "web-1");
  o.doc = R"({"host":"10.0.0.1","port":22})";
  o.sealed = "sealed-envelope-text";
  o.ref_id = cred.id;
  o.not_after = t0 + 123;
  auto t = insert(o);
  EXPECT_TRUE(is_object_id(t.id)) << t.id;  // generated when empty
  EXPECT_NE(t.id, cred.id);

  auto got = get_object(project, kind_target, t.id);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->id, t.id);
  EXPECT_EQ(got->project_id, project);
  EXPECT_EQ(got->kind, kind_target);
  EXPECT_EQ(got->name, "web-1");
  EXPECT_EQ(got->doc, R"({"host":"10.0.0.1","port":22})");
  EXPECT_EQ(got->sealed, "sealed-envelope-text");
  EXPECT_EQ(got->ref_id, cred.id);
  EXPECT_EQ(got->not_after, t0 + 123);
  EXPECT_EQ(got->created_at, t0);
  // No secret and no reference read back empty.
  auto c = get_object(project, kind_credential, cred.id);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->sealed, "");
  EXPECT_EQ(c->ref_id, "");

  for (auto miss : {get_object(other_project, kind_target, t.id), get_object(project, kind_credential, t.id),
                    get_object(project, kind_target, new_object_id())}) {
    ASSERT_FALSE(miss);
    EXPECT_TRUE(miss.error().is(errc::not_found));
  }
}

TEST_P(catalog_conformance, an_object_name_is_unique_per_project_and_kind) {
  auto first = insert(object(std::string(kind_certificate), "www"));
  std::optional<error> dup;
  auto r = write([&](catalog_tx& tx) -> result<void> {
    auto again = tx.insert_object(object(std::string(kind_certificate), "www"));
    if (!again) dup = again.error();
    return {};
  });
  ASSERT_TRUE(r);
  ASSERT_TRUE(dup);
  EXPECT_TRUE(dup->is(errc::conflict));
  EXPECT_EQ(dup->field, "name");
  // The same name as another kind, or in another project, is another object.
  auto target = insert(object(std::string(kind_target), "www"));
  auto foreign = insert(object(std::string(kind_certificate), "www", other_project));
  EXPECT_FALSE(target.id.empty());
  EXPECT_FALSE(foreign.id.empty());
  EXPECT_EQ(read_value<object_page>([&](catalog_read& rd) { return rd.list_objects(project, kind_certificate, 1, 10); })
                .total,
            1);
  EXPECT_TRUE(get_object(project, kind_certificate, first.id));
}

TEST_P(catalog_conformance, list_objects_pages_newest_first_within_project_and_kind) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(insert(object(std::string(kind_target), "t" + std::to_string(i))).id);
  insert(object(std::string(kind_credential), "c"));
  insert(object(std::string(kind_target), "t-other", other_project));
  std::vector<std::string> newest_first = sorted(ids);
  std::reverse(newest_first.begin(), newest_first.end());

  auto p1 = read_value<object_page>([&](catalog_read& rd) { return rd.list_objects(project, kind_target, 1, 2); });
  EXPECT_EQ(p1.total, 5);
  EXPECT_EQ(ids_of(p1.items), (std::vector<std::string>{newest_first[0], newest_first[1]}));
  auto p3 = read_value<object_page>([&](catalog_read& rd) { return rd.list_objects(project, kind_target, 3, 2); });
  EXPECT_EQ(p3.total, 5);
  EXPECT_EQ(ids_of(p3.items), (std::vector<std::string>{newest_first[4]}));
  auto p4 = read_value<object_page>([&](catalog_read& rd) { return rd.list_objects(project, kind_target, 4, 2); });
  EXPECT_EQ(p4.total, 5);
  EXPECT_TRUE(p4.items.empty());
  auto none = read_value<object_page>([&](catalog_read& rd) { return rd.list_objects(project, kind_rule, 1, 10); });
  EXPECT_EQ(none.total, 0);
  EXPECT_TRUE(none.items.empty());
}

TEST_P(catalog_conformance, objects_by_ids_returns_the_existing_ones_of_that_project_and_kind_in_id_order) {
  auto a = insert(object(std::string(kind_target), "a"));
  auto b = insert(object(std::string(kind_target), "b"));
  auto cred = insert(object(std::string(kind_credential), "c"));
  auto foreign = insert(object(std::string(kind_target), "f", other_project));
  std::vector<std::string> asked{b.id, new_object_id(), cred.id, foreign.id, a.id};
  auto got = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.objects_by_ids(project, kind_target, asked); });
  EXPECT_EQ(ids_of(got), sorted({a.id, b.id}));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, got[0].id == a.id ? "a" : "b");
  auto empty = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.objects_by_ids(project, kind_target, {}); });
  EXPECT_TRUE(empty.empty());
}

TEST_P(catalog_conformance, objects_named_finds_the_names_with_a_prefix_in_that_project_and_kind) {
  insert(object(std::string(kind_rule), "job.dead->c2"));
  insert(object(std::string(kind_rule), "job.dead->c1"));
  insert(object(std::string(kind_rule), "job.dead"));        // shorter than the prefix
  insert(object(std::string(kind_rule), "job.dead-?x"));     // just past the range
  insert(object(std::string(kind_rule), "job.deadline->c1"));
  insert(object(std::string(kind_rule), "distribution.finished->c1"));
  insert(object(std::string(kind_channel), "job.dead->c3"));  // another kind
  insert(object(std::string(kind_rule), "job.dead->c4", other_project));
  auto names = [&](std::string prefix, int limit = 100) {
    auto got = read_value<std::vector<catalog_object>>(
        [&](catalog_read& rd) { return rd.objects_named(project, kind_rule, prefix, limit); });
    std::vector<std::string> out;
    for (const auto& o : got) out.push_back(o.name);
    return out;
  };
  EXPECT_EQ(names("job.dead->"), (std::vector<std::string>{"job.dead->c1", "job.dead->c2"}));
  EXPECT_EQ(names("job.dead->", 1), (std::vector<std::string>{"job.dead->c1"}));
  EXPECT_EQ(names("job.dead"), (std::vector<std::string>{"job.dead", "job.dead->c1", "job.dead->c2", "job.dead-?x",
                                                          "job.deadline->c1"}));  // byte order: '>' before '?'
  EXPECT_TRUE(names("certificate.expiring->").empty());
  EXPECT_EQ(names("").size(), 6u);  // every rule of the project
}

TEST_P(catalog_conformance, objects_referencing_finds_the_users_of_an_object) {
  auto cred = insert(object(std::string(kind_credential), "key"));
  auto spare = insert(object(std::string(kind_credential), "spare"));
  auto t1 = object(std::string(kind_target), "t1");
  t1.ref_id = cred.id;
  auto t2 = object(std::string(kind_target), "t2");
  t2.ref_id = cred.id;
  auto t3 = object(std::string(kind_target), "t3");
  t3.ref_id = spare.id;
  auto rule = object(std::string(kind_rule), "r");  // another kind with the same reference
  rule.ref_id = cred.id;
  std::vector<std::string> users{insert(t1).id, insert(t2).id};
  insert(t3);
  insert(rule);
  auto got = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.objects_referencing(project, kind_target, cred.id); });
  EXPECT_EQ(ids_of(got), sorted(users));
  auto elsewhere = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.objects_referencing(other_project, kind_target, cred.id); });
  EXPECT_TRUE(elsewhere.empty());
  auto unused = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.objects_referencing(project, kind_target, t3.ref_id + "x"); });
  EXPECT_TRUE(unused.empty());
}

TEST_P(catalog_conformance, certificates_expiring_spans_projects_oldest_first_strictly_before_the_bound) {
  auto cert = [&](std::string name, time_ms not_after, std::string project_id = {}) {
    auto o = object(std::string(kind_certificate), std::move(name), std::move(project_id));
    o.not_after = not_after;
    return insert(o).id;
  };
  auto late = cert("late", t0 + 3'000);
  auto soon = cert("soon", t0 + 1'000, other_project);
  auto mid = cert("mid", t0 + 2'000);
  cert("at-bound", t0 + 5'000);
  cert("after", t0 + 9'000);
  auto target = object(std::string(kind_target), "not-a-certificate");
  target.not_after = t0 + 1;  // only certificates expire
  insert(target);

  auto got = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.certificates_expiring(t0 + 5'000, 100); });
  EXPECT_EQ(ids_of(got), (std::vector<std::string>{soon, mid, late}));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].project_id, other_project);
  auto two = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.certificates_expiring(t0 + 5'000, 2); });
  EXPECT_EQ(ids_of(two), (std::vector<std::string>{soon, mid}));
}

TEST_P(catalog_conformance, objects_by_not_after_spans_projects_unknown_first_and_keeps_to_its_kind) {
  auto domain = [&](std::string name, time_ms not_after, std::string project_id = {}) {
    auto o = object(std::string(kind_domain), std::move(name), std::move(project_id));
    o.not_after = not_after;
    return insert(o).id;
  };
  auto later = domain("later.example", t0 + 3'000);
  auto unknown = domain("new.example", 0, other_project);
  auto sooner = domain("sooner.example", t0 + 1'000);
  domain("beyond.example", t0 + 9'000);
  auto cert = object(std::string(kind_certificate), "a-certificate");
  cert.not_after = t0 + 1;
  insert(cert);

  auto got = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.objects_by_not_after(kind_domain, t0 + 5'000, 100); });
  EXPECT_EQ(ids_of(got), (std::vector<std::string>{unknown, sooner, later}));
  auto one = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.objects_by_not_after(kind_domain, t0 + 5'000, 1); });
  EXPECT_EQ(ids_of(one), (std::vector<std::string>{unknown}));
}

TEST_P(catalog_conformance, update_and_delete_an_object) {
  auto t = insert(object(std::string(kind_target), "web"));
  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.update_object_doc(t.id, R"({"host":"b"})"); }));
  EXPECT_EQ(get_object(project, kind_target, t.id)->doc, R"({"host":"b"})");
  auto missing = write([&](catalog_tx& tx) { return tx.update_object_doc(new_object_id(), "{}"); });
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().is(errc::not_found));

  // Deletes are scoped by project and kind.
  for (auto [pid, kind] : {std::pair{other_project, kind_target}, std::pair{project, kind_certificate}}) {
    auto wrong = write([&, pid = pid, kind = kind](catalog_tx& tx) { return tx.delete_object(pid, kind, t.id); });
    ASSERT_FALSE(wrong);
    EXPECT_TRUE(wrong.error().is(errc::not_found));
    EXPECT_TRUE(get_object(project, kind_target, t.id));
  }
  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.delete_object(project, kind_target, t.id); }));
  EXPECT_TRUE(get_object(project, kind_target, t.id).error().is(errc::not_found));
  auto twice = write([&](catalog_tx& tx) { return tx.delete_object(project, kind_target, t.id); });
  ASSERT_FALSE(twice);
  EXPECT_TRUE(twice.error().is(errc::not_found));
  // The name is free again.
  EXPECT_FALSE(insert(object(std::string(kind_target), "web")).id.empty());
}

TEST_P(catalog_conformance, count_sealed_counts_objects_with_a_secret_in_every_project) {
  EXPECT_EQ(read_value<std::int64_t>([](catalog_read& rd) { return rd.count_sealed(); }), 0);
  auto a = object(std::string(kind_credential), "a");
  a.sealed = "s1";
  auto b = object(std::string(kind_credential), "b", other_project);
  b.sealed = "s2";
  auto a_id = insert(a).id;
  insert(b);
  insert(object(std::string(kind_credential), "plain"));
  EXPECT_EQ(read_value<std::int64_t>([](catalog_read& rd) { return rd.count_sealed(); }), 2);
  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.delete_object(project, kind_credential, a_id); }));
  EXPECT_EQ(read_value<std::int64_t>([](catalog_read& rd) { return rd.count_sealed(); }), 1);
}

// KEK rotation (DESIGN §11): envelopes counted per collection and version, read in id order past
// a cursor, and re-sealed only while they are what the rotation read.
TEST_P(catalog_conformance, sealed_envelopes_are_counted_paged_and_resealed_only_when_unchanged) {
  auto make = [&](std::string_view kind, std::string name, std::string sealed, const std::string& proj) {
    auto o = object(std::string(kind), std::move(name), proj);
    o.sealed = std::move(sealed);
    return insert(o).id;
  };
  auto c1 = make(kind_credential, "c1", "cfs1:1:AAAA", project);
  auto c2 = make(kind_credential, "c2", "cfs1:2:BBBB", other_project);
  auto c3 = make(kind_credential, "c3", "cfs1:1:CCCC", other_project);
  make(kind_certificate, "k1", "cfs1:12:DDDD", project);
  make(kind_credential, "bad", "not an envelope", project);
  insert(object(std::string(kind_credential), "plain"));
  using counts = std::vector<sealed_count>;
  auto got = read_value<counts>([](catalog_read& rd) { return rd.sealed_versions(); });
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].kind, kind_certificate);
  EXPECT_EQ(got[0].version, 12u);
  EXPECT_EQ(got[0].count, 1);
  EXPECT_EQ(got[1].kind, kind_credential);
  EXPECT_EQ(got[1].version, 0u);  // not an envelope
  EXPECT_EQ(got[2].version, 1u);
  EXPECT_EQ(got[2].count, 2);
  EXPECT_EQ(got[3].version, 2u);
  EXPECT_EQ(got[3].count, 1);

  using rows = std::vector<sealed_row>;
  // Every project, id order, those not yet at version 2, past the cursor, at most `limit`.
  auto page = read_value<rows>([](catalog_read& rd) { return rd.sealed_page(kind_credential, "cfs1:2:", "", 10); });
  std::vector<std::string> ids;
  for (const auto& r : page) ids.push_back(r.id);
  ASSERT_EQ(page.size(), 3u);  // c1, c3 and the one that is not an envelope
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  for (const auto& id : {c1, c3}) EXPECT_TRUE(std::find(ids.begin(), ids.end(), id) != ids.end()) << id;
  auto first = read_value<rows>([](catalog_read& rd) { return rd.sealed_page(kind_credential, "cfs1:2:", "", 1); });
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].id, page[0].id);
  auto after = read_value<rows>(
      [&](catalog_read& rd) { return rd.sealed_page(kind_credential, "cfs1:2:", page[0].id, 10); });
  EXPECT_EQ(after.size(), 2u);
  EXPECT_TRUE(std::find(ids.begin(), ids.end(), c2) == ids.end());
  // No prefix: every envelope of the kind.
  EXPECT_EQ(read_value<rows>([](catalog_read& rd) { return rd.sealed_page(kind_credential, "", "", 10); }).size(), 4u);

  // Re-seal: only while the envelope is still the one read.
  bool changed = false;
  ASSERT_TRUE(write([&](catalog_tx& tx) -> result<void> {
    auto r = tx.reseal_object(c1, "cfs1:1:AAAA", "cfs1:2:EEEE");
    if (!r) return std::move(r).error();
    changed = *r;
    return {};
  }));
  EXPECT_TRUE(changed);
  ASSERT_TRUE(write([&](catalog_tx& tx) -> result<void> {
    auto r = tx.reseal_object(c1, "cfs1:1:AAAA", "cfs1:2:FFFF");  // stale: someone changed it
    if (!r) return std::move(r).error();
    changed = *r;
    return {};
  }));
  EXPECT_FALSE(changed);
  EXPECT_EQ(read_value<catalog_object>([&](catalog_read& rd) { return rd.get_object(project, kind_credential, c1); }).sealed,
            "cfs1:2:EEEE");
  ASSERT_TRUE(write([](catalog_tx& tx) { return tx.set_meta("kek_rotation", "x"); }));
  ASSERT_TRUE(write([](catalog_tx& tx) { return tx.delete_meta("kek_rotation"); }));
  EXPECT_EQ(read_value<std::optional<std::string>>([](catalog_read& rd) { return rd.meta("kek_rotation"); }),
            std::nullopt);
}

TEST_P(catalog_conformance, meta_values_are_set_and_overwritten) {
  using opt = std::optional<std::string>;
  EXPECT_EQ(read_value<opt>([](catalog_read& rd) { return rd.meta("kek_fingerprint"); }), std::nullopt);
  ASSERT_TRUE(write([](catalog_tx& tx) { return tx.set_meta("kek_fingerprint", "abc"); }));
  EXPECT_EQ(read_value<opt>([](catalog_read& rd) { return rd.meta("kek_fingerprint"); }), opt("abc"));
  ASSERT_TRUE(write([](catalog_tx& tx) { return tx.set_meta("kek_fingerprint", "def"); }));
  EXPECT_EQ(read_value<opt>([](catalog_read& rd) { return rd.meta("kek_fingerprint"); }), opt("def"));
  EXPECT_EQ(read_value<opt>([](catalog_read& rd) { return rd.meta("other"); }), std::nullopt);
}

// ---- transactions -------------------------------------------------------------------------

TEST_P(catalog_conformance, a_transaction_sees_its_own_writes_and_commits_only_on_success) {
  std::string kept;
  auto ok = write([&](catalog_tx& tx) -> result<void> {
    auto o = tx.insert_object(object(std::string(kind_target), "kept"));
    if (!o) return std::move(o).error();
    kept = o->id;
    // Reads inside the transaction see what it wrote.
    auto again = tx.get_object(project, kind_target, kept);
    EXPECT_TRUE(again) << again.error().message;
    auto page = tx.list_objects(project, kind_target, 1, 10);
    EXPECT_TRUE(page && page->total == 1);
    return {};
  });
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(get_object(project, kind_target, kept));

  std::string dropped;
  auto refused = write([&](catalog_tx& tx) -> result<void> {
    auto o = tx.insert_object(object(std::string(kind_target), "dropped"));
    if (!o) return std::move(o).error();
    dropped = o->id;
    if (auto m = tx.set_meta("k", "v"); !m) return m;
    return make_error(errc::conflict, "changed my mind");
  });
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(errc::conflict));
  EXPECT_EQ(refused.error().message, "changed my mind");
  ASSERT_FALSE(dropped.empty());
  EXPECT_TRUE(get_object(project, kind_target, dropped).error().is(errc::not_found));
  EXPECT_EQ(read_value<std::optional<std::string>>([](catalog_read& rd) { return rd.meta("k"); }), std::nullopt);

  // A throw is a bug: rethrown to the caller, and nothing is written.
  EXPECT_THROW(write([&](catalog_tx& tx) -> result<void> {
                 auto o = tx.insert_object(object(std::string(kind_target), "thrown"));
                 EXPECT_TRUE(o);
                 throw std::runtime_error("bug");
               }),
               std::runtime_error);
  auto page = read_value<object_page>([&](catalog_read& rd) { return rd.list_objects(project, kind_target, 1, 10); });
  EXPECT_EQ(ids_of(page.items), (std::vector<std::string>{kept}));
}

TEST_P(catalog_conformance, a_transaction_enqueues_jobs_with_its_catalog_writes) {
  std::string job_id, object_id;
  auto ok = write([&](catalog_tx& tx) -> result<void> {
    auto o = tx.insert_object(object(std::string(kind_certificate), "c"));
    if (!o) return std::move(o).error();
    object_id = o->id;
    new_job j;
    j.project_id = project;
    j.type = "noop";
    j.lane = "main";
    auto e = tx.jobs().enqueue(j, t0);
    if (!e) return std::move(e).error();
    job_id = e->job.id;
    auto seen = tx.get_job(job_id);  // the job is visible to the same transaction
    EXPECT_TRUE(seen && seen->status == job_status::pending);
    return {};
  });
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(run_sync(st->jobs().get(project, job_id))->status, job_status::pending);

  std::string rolled_back;
  auto refused = write([&](catalog_tx& tx) -> result<void> {
    new_job j;
    j.project_id = project;
    j.type = "noop";
    j.lane = "main";
    auto e = tx.jobs().enqueue(j, t0);
    if (!e) return std::move(e).error();
    rolled_back = e->job.id;
    return make_error(errc::conflict, "no");
  });
  ASSERT_FALSE(refused);
  ASSERT_FALSE(rolled_back.empty());
  EXPECT_TRUE(run_sync(st->jobs().get(project, rolled_back)).error().is(errc::not_found));
  auto unknown = write([&](catalog_tx& tx) -> result<void> {
    auto g = tx.get_job(new_object_id());
    return g ? result<void>{} : std::move(g).error();
  });
  ASSERT_FALSE(unknown);
  EXPECT_TRUE(unknown.error().is(errc::not_found));
}

// ---- distributions ------------------------------------------------------------------------

TEST_P(catalog_conformance, a_new_distribution_is_idle_and_keeps_its_definition) {
  auto cert = insert(object(std::string(kind_certificate), "c")).id;
  auto ta = insert(object(std::string(kind_target), "a")).id;
  auto tb = insert(object(std::string(kind_target), "b")).id;
  auto d = distribution("web", cert, {tb, ta});
  d.canary = true;
  d.failure_tolerance = 0.25;
  d.fail_fast = true;
  auto rec = insert(d);
  EXPECT_TRUE(is_object_id(rec.id)) << rec.id;
  EXPECT_EQ(rec.status, "idle");
  EXPECT_EQ(rec.updated_at, t0);

  auto got = get_distribution(project, rec.id);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->project_id, project);
  EXPECT_EQ(got->name, "web");
  EXPECT_EQ(got->certificate_id, cert);
  EXPECT_EQ(got->target_ids, sorted({ta, tb}));
  EXPECT_TRUE(got->canary);
  EXPECT_DOUBLE_EQ(got->failure_tolerance, 0.25);
  EXPECT_TRUE(got->fail_fast);
  EXPECT_EQ(got->status, "idle");
  EXPECT_EQ(got->run_no, 0);
  EXPECT_TRUE(got->run_target_ids.empty());
  EXPECT_TRUE(got->job_ids.empty());
  EXPECT_EQ(got->fan_out_total, 0);
  EXPECT_FALSE(got->cancel_requested);
  EXPECT_EQ(got->created_at, t0);
  EXPECT_EQ(got->updated_at, t0);

  // An empty project means any project (workers act on ids they were given); another project
  // never sees it.
  EXPECT_TRUE(get_distribution("", rec.id));
  EXPECT_TRUE(get_distribution(other_project, rec.id).error().is(errc::not_found));
  EXPECT_TRUE(get_distribution("", new_object_id()).error().is(errc::not_found));
}

TEST_P(catalog_conformance, a_distribution_name_is_unique_per_project) {
  auto cert = insert(object(std::string(kind_certificate), "c")).id;
  insert(distribution("web", cert, {}));
  auto dup = write([&](catalog_tx& tx) -> result<void> {
    auto r = tx.insert_distribution(distribution("web", cert, {}));
    return r ? result<void>{} : std::move(r).error();
  });
  ASSERT_FALSE(dup);
  EXPECT_TRUE(dup.error().is(errc::conflict));
  EXPECT_EQ(dup.error().field, "name");
  EXPECT_FALSE(insert(distribution("web", cert, {}, other_project)).id.empty());
  auto page =
      read_value<distribution_page>([&](catalog_read& rd) { return rd.list_distributions(project, 1, 10); });
  EXPECT_EQ(page.total, 1);
}

TEST_P(catalog_conformance, list_distributions_pages_newest_first_within_the_project) {
  auto cert = insert(object(std::string(kind_certificate), "c")).id;
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(insert(distribution("d" + std::to_string(i), cert, {})).id);
  insert(distribution("foreign", cert, {}, other_project));
  auto newest_first = sorted(ids);
  std::reverse(newest_first.begin(), newest_first.end());
  auto p1 = read_value<distribution_page>([&](catalog_read& rd) { return rd.list_distributions(project, 1, 2); });
  EXPECT_EQ(p1.total, 3);
  ASSERT_EQ(p1.items.size(), 2u);
  EXPECT_EQ(p1.items[0].id, newest_first[0]);
  EXPECT_EQ(p1.items[1].id, newest_first[1]);
  auto p2 = read_value<distribution_page>([&](catalog_read& rd) { return rd.list_distributions(project, 2, 2); });
  ASSERT_EQ(p2.items.size(), 1u);
  EXPECT_EQ(p2.items[0].id, newest_first[2]);
}

TEST_P(catalog_conformance, distributions_using_an_object_until_the_distribution_is_deleted) {
  auto cert = insert(object(std::string(kind_certificate), "c")).id;
  auto ta = insert(object(std::string(kind_target), "a")).id;
  auto tb = insert(object(std::string(kind_target), "b")).id;
  auto unused = insert(object(std::string(kind_target), "unused")).id;
  auto d1 = insert(distribution("one", cert, {ta})).id;
  auto d2 = insert(distribution("two", cert, {ta, tb})).id;
  auto using_ = [&](const std::string& pid, const std::string& id) {
    return read_value<std::vector<std::string>>([&](catalog_read& rd) { return rd.distributions_using(pid, id); });
  };
  EXPECT_EQ(using_(project, cert), sorted({d1, d2}));
  EXPECT_EQ(using_(project, ta), sorted({d1, d2}));
  EXPECT_EQ(using_(project, tb), (std::vector<std::string>{d2}));
  EXPECT_TRUE(using_(project, unused).empty());
  EXPECT_TRUE(using_(other_project, cert).empty());

  auto wrong = write([&](catalog_tx& tx) { return tx.delete_distribution(other_project, d2); });
  ASSERT_FALSE(wrong);
  EXPECT_TRUE(wrong.error().is(errc::not_found));
  EXPECT_TRUE(get_distribution(project, d2));
  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.delete_distribution(project, d2); }));
  EXPECT_TRUE(get_distribution("", d2).error().is(errc::not_found));
  EXPECT_TRUE(using_(project, tb).empty());
  EXPECT_EQ(using_(project, cert), (std::vector<std::string>{d1}));
  auto twice = write([&](catalog_tx& tx) { return tx.delete_distribution(project, d2); });
  ASSERT_FALSE(twice);
  EXPECT_TRUE(twice.error().is(errc::not_found));
}

TEST_P(catalog_conformance, update_distribution_writes_every_field_of_the_current_run) {
  auto cert = insert(object(std::string(kind_certificate), "c")).id;
  auto ta = insert(object(std::string(kind_target), "a")).id;
  auto tb = insert(object(std::string(kind_target), "b")).id;
  auto d = insert(distribution("web", cert, {ta, tb}));
  d.status = "running";
  d.run_no = 3;
  d.mode = "fan_out";
  d.run_target_ids = sorted({ta, tb});
  d.job_ids = {"j2", "j1"};  // as given: the run's own order
  d.error = "why it stopped";
  d.fan_out_total = 7;
  d.fan_out_succeeded = 1;
  d.fan_out_failed = 2;
  d.fan_out_partial = 3;
  d.fan_out_cancelled = 4;
  d.fan_out_retrying = 5;
  d.fan_out_retry_wave = 6;
  d.fail_fast_fired = true;
  d.cancel_requested = true;
  d.run_started_at = t0 + 100;
  d.run_finished_at = t0 + 200;
  d.updated_at = t0 + 300;
  d.run_certificate_version = 4;
  d.run_trigger = "dist-renew:x:4";
  d.run_redrives = 2;
  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.update_distribution(d); }));
  auto got = get_distribution(project, d.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, "running");
  EXPECT_EQ(got->run_no, 3);
  EXPECT_EQ(got->mode, "fan_out");
  EXPECT_EQ(got->run_target_ids, sorted({ta, tb}));
  EXPECT_EQ(got->job_ids, (std::vector<std::string>{"j2", "j1"}));
  EXPECT_EQ(got->error, "why it stopped");
  EXPECT_EQ(got->fan_out_total, 7);
  EXPECT_EQ(got->fan_out_succeeded, 1);
  EXPECT_EQ(got->fan_out_failed, 2);
  EXPECT_EQ(got->fan_out_partial, 3);
  EXPECT_EQ(got->fan_out_cancelled, 4);
  EXPECT_EQ(got->fan_out_retrying, 5);
  EXPECT_EQ(got->fan_out_retry_wave, 6);
  EXPECT_EQ(got->run_redrives, 2);
  EXPECT_TRUE(got->fail_fast_fired);
  EXPECT_TRUE(got->cancel_requested);
  EXPECT_EQ(got->run_started_at, t0 + 100);
  EXPECT_EQ(got->run_finished_at, t0 + 200);
  EXPECT_EQ(got->updated_at, t0 + 300);
  EXPECT_EQ(got->run_certificate_version, 4);
  EXPECT_EQ(got->run_trigger, "dist-renew:x:4");
  EXPECT_EQ(got->name, "web");
  EXPECT_EQ(got->created_at, t0);

  // The next run clears what the last one set.
  d.status = "success";
  d.mode = "normal";
  d.error.clear();
  d.job_ids = {"j3"};
  d.fail_fast_fired = false;
  d.cancel_requested = false;
  d.fan_out_total = 0;
  d.run_trigger.clear();
  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.update_distribution(d); }));
  got = get_distribution(project, d.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->run_trigger, "");
  EXPECT_EQ(got->status, "success");
  EXPECT_EQ(got->mode, "normal");
  EXPECT_EQ(got->error, "");
  EXPECT_EQ(got->job_ids, (std::vector<std::string>{"j3"}));
  EXPECT_FALSE(got->fail_fast_fired);
  EXPECT_FALSE(got->cancel_requested);
  EXPECT_EQ(got->fan_out_total, 0);

  auto gone = d;
  gone.id = new_object_id();
  auto missing = write([&](catalog_tx& tx) { return tx.update_distribution(gone); });
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().is(errc::not_found));
}

TEST_P(catalog_conformance, distributions_in_status_span_projects_oldest_update_first) {
  auto cert = insert(object(std::string(kind_certificate), "c")).id;
  auto cert2 = insert(object(std::string(kind_certificate), "c", other_project)).id;
  auto set_status = [&](distribution_record d, std::string status, time_ms updated) {
    d.status = std::move(status);
    d.updated_at = updated;
    ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.update_distribution(d); }));
  };
  auto a = insert(distribution("a", cert, {}));
  auto b = insert(distribution("b", cert2, {}, other_project));
  auto c = insert(distribution("c", cert, {}));
  auto idle = insert(distribution("idle", cert, {}));
  set_status(a, "running", t0 + 30);
  set_status(b, "running", t0 + 10);
  set_status(c, "running", t0 + 20);
  auto ids = [](const std::vector<distribution_record>& v) {
    std::vector<std::string> out;
    for (const auto& d : v) out.push_back(d.id);
    return out;
  };
  auto running = read_value<std::vector<distribution_record>>(
      [](catalog_read& rd) { return rd.distributions_in_status("running", 10); });
  EXPECT_EQ(ids(running), (std::vector<std::string>{b.id, c.id, a.id}));
  auto first = read_value<std::vector<distribution_record>>(
      [](catalog_read& rd) { return rd.distributions_in_status("running", 1); });
  EXPECT_EQ(ids(first), (std::vector<std::string>{b.id}));
  auto idles = read_value<std::vector<distribution_record>>(
      [](catalog_read& rd) { return rd.distributions_in_status("idle", 10); });
  EXPECT_EQ(ids(idles), (std::vector<std::string>{idle.id}));
}

TEST_P(catalog_conformance, auto_execute_distributions_are_those_not_running_oldest_update_first) {
  auto cert = insert(object(std::string(kind_certificate), "c")).id;
  auto cert2 = insert(object(std::string(kind_certificate), "c", other_project)).id;
  auto make = [&](std::string name, bool auto_execute, std::string status, time_ms updated, std::string pid = {}) {
    auto d = distribution(std::move(name), pid.empty() ? cert : cert2, {}, pid);
    d.auto_execute = auto_execute;
    d = insert(d);
    EXPECT_EQ(d.auto_execute, auto_execute);
    d.status = std::move(status);
    d.updated_at = updated;
    EXPECT_TRUE(write([&](catalog_tx& tx) { return tx.update_distribution(d); }));
    return d.id;
  };
  auto late = make("late", true, "success", t0 + 30);
  auto other = make("other", true, "idle", t0 + 10, other_project);
  make("running", true, "running", t0 + 5);
  make("manual", false, "success", t0 + 1);
  auto early = make("early", true, "failed", t0 + 20);
  auto got = read_value<std::vector<distribution_record>>(
      [](catalog_read& rd) { return rd.auto_execute_distributions(10); });
  std::vector<std::string> ids;
  for (const auto& d : got) ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::string>{other, early, late}));
  EXPECT_TRUE(get_distribution(project, late)->auto_execute);
  auto one = read_value<std::vector<distribution_record>>(
      [](catalog_read& rd) { return rd.auto_execute_distributions(1); });
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].id, other);
}

TEST_P(catalog_conformance, update_object_rewrites_doc_secret_ref_and_expiry) {
  auto c = object(std::string(kind_certificate), "c");
  c.sealed = "v1-secret";
  c.not_after = t0 + 10;
  c = insert(c);
  auto next = c;
  next.doc = R"({"version":2})";
  next.sealed = "v2-secret";
  next.ref_id = "ref";
  next.not_after = t0 + 99;
  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.update_object(next); }));
  auto got = get_object(project, kind_certificate, c.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->doc, R"({"version":2})");
  EXPECT_EQ(got->sealed, "v2-secret");
  EXPECT_EQ(got->ref_id, "ref");
  EXPECT_EQ(got->not_after, t0 + 99);
  EXPECT_EQ(got->name, "c");
  auto expiring = read_value<std::vector<catalog_object>>(
      [&](catalog_read& rd) { return rd.certificates_expiring(t0 + 50, 10); });
  EXPECT_TRUE(expiring.empty());  // the index follows the new not_after
  auto gone = next;
  gone.id = new_object_id();
  auto missing = write([&](catalog_tx& tx) { return tx.update_object(gone); });
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().is(errc::not_found));
}

// ---- runs: results, outcomes, the finalized-jobs guard -----------------------------------

TEST_P(catalog_conformance, a_result_keeps_every_field) {
  auto r = result_row("d1", 1, "t1", "j1", 0, 1, "failed");
  r.error_class = "auth";
  r.error = "permission denied (publickey)";
  r.fingerprint_sha256 = "ab:cd";
  r.hash_skipped = true;
  r.files_from_run = 0;
  r.detail = R"({"connect_ms":12})";
  add_results({r});
  auto rows = read_value<std::vector<target_result>>([](catalog_read& rd) { return rd.run_results("d1", 1); });
  ASSERT_EQ(rows.size(), 1u);
  const auto& g = rows[0];
  EXPECT_EQ(g.distribution_id, "d1");
  EXPECT_EQ(g.run_no, 1);
  EXPECT_EQ(g.target_id, "t1");
  EXPECT_EQ(g.job_id, "j1");
  EXPECT_EQ(g.retry_attempt, 0);
  EXPECT_EQ(g.fence, 1);
  EXPECT_EQ(g.status, "failed");
  EXPECT_EQ(g.error_class, "auth");
  EXPECT_EQ(g.error, "permission denied (publickey)");
  EXPECT_EQ(g.started_at, t0 + 10);
  EXPECT_EQ(g.finished_at, t0 + 20);
  EXPECT_EQ(g.fingerprint_sha256, "ab:cd");
  EXPECT_TRUE(g.hash_skipped);
  EXPECT_EQ(g.files_from_run, 0);
  EXPECT_EQ(g.detail, R"({"connect_ms":12})");
  // Success: no class, no error.
  auto ok = result_row("d1", 1, "t2", "j1", 0, 1, "succeeded");
  ok.files_from_run = 1;
  add_results({ok});
  rows = read_value<std::vector<target_result>>([](catalog_read& rd) { return rd.job_results("d1", 1, "j1"); });
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].target_id, "t2");
  EXPECT_EQ(rows[1].error_class, "");
  EXPECT_EQ(rows[1].error, "");
  EXPECT_EQ(rows[1].fingerprint_sha256, "");
  EXPECT_FALSE(rows[1].hash_skipped);
  EXPECT_EQ(rows[1].files_from_run, 1);
}

TEST_P(catalog_conformance, run_results_and_outcomes_order_attempts_by_retry_attempt_then_fence) {
  add_results({
      result_row("d1", 1, "t2", "batch", 0, 1, "failed"),
      result_row("d1", 1, "t1", "batch", 0, 2, "failed"),
      result_row("d1", 1, "t1", "batch", 0, 1, "failed"),   // an earlier attempt of the same job
      result_row("d1", 1, "t1", "retry1", 1, 1, "succeeded"),
      result_row("d1", 1, "t3", "batch", 0, 1, "succeeded"),
      result_row("d1", 2, "t1", "next-run", 0, 1, "failed"),  // another run
      result_row("d2", 1, "t1", "other", 0, 1, "failed"),     // another distribution
  });
  auto rows = read_value<std::vector<target_result>>([](catalog_read& rd) { return rd.run_results("d1", 1); });
  std::vector<std::string> seen;
  for (const auto& r : rows)
    seen.push_back(r.target_id + "/" + std::to_string(r.retry_attempt) + "/" + std::to_string(r.fence) + "/" + r.job_id);
  EXPECT_EQ(seen, (std::vector<std::string>{"t1/0/1/batch", "t1/0/2/batch", "t1/1/1/retry1", "t2/0/1/batch",
                                             "t3/0/1/batch"}));

  auto outcomes = read_value<std::vector<target_result>>([](catalog_read& rd) { return rd.run_outcomes("d1", 1); });
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[0].target_id, "t1");
  EXPECT_EQ(outcomes[0].job_id, "retry1");
  EXPECT_EQ(outcomes[0].status, "succeeded");
  EXPECT_EQ(outcomes[1].target_id, "t2");
  EXPECT_EQ(outcomes[1].status, "failed");
  EXPECT_EQ(outcomes[2].target_id, "t3");

  auto batch = read_value<std::vector<target_result>>([](catalog_read& rd) { return rd.job_results("d1", 1, "batch"); });
  ASSERT_EQ(batch.size(), 4u);
  for (const auto& r : batch) EXPECT_EQ(r.job_id, "batch");
  EXPECT_TRUE(read_value<std::vector<target_result>>([](catalog_read& rd) { return rd.job_results("d1", 2, "batch"); })
                  .empty());
  EXPECT_TRUE(read_value<std::vector<target_result>>([](catalog_read& rd) { return rd.run_outcomes("d1", 3); }).empty());
}

// One target, one attempt of one job: writing it again replaces it (a report that is retried
// does not add a second row).
TEST_P(catalog_conformance, the_same_attempt_written_twice_is_one_result) {
  auto first = result_row("d1", 1, "t1", "j1", 0, 1, "failed");
  first.error = "first";
  auto second = first;
  second.status = "cancelled";
  second.error = "second";
  add_results({first});
  add_results({second});
  auto rows = read_value<std::vector<target_result>>([](catalog_read& rd) { return rd.run_results("d1", 1); });
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, "cancelled");
  EXPECT_EQ(rows[0].error, "second");
}

// One target's result of one run (job "j<run>", first attempt).
target_result run_result(std::string distribution, std::int64_t run, std::string target, std::string status) {
  target_result r;
  r.distribution_id = std::move(distribution);
  r.run_no = run;
  r.target_id = std::move(target);
  r.job_id = "j" + std::to_string(run);
  r.fence = 1;
  r.status = std::move(status);
  return r;
}

TEST_P(catalog_conformance, last_files_run_is_the_latest_successful_delivery_of_that_target) {
  EXPECT_EQ(read_value<std::int64_t>([](catalog_read& rd) { return rd.last_files_run("d1", "t1"); }), 0);
  auto delivered = [](std::int64_t run, std::string target, std::string status, std::int64_t files_from_run) {
    auto r = run_result("d1", run, std::move(target), std::move(status));
    r.files_from_run = files_from_run;
    return r;
  };
  add_results({delivered(1, "t1", "succeeded", 1), delivered(2, "t1", "succeeded", 2),
               delivered(3, "t1", "succeeded", 2),  // hash-skipped: the files are run 2's
               delivered(4, "t1", "failed", 4),     // failed: put nothing in place
               delivered(5, "t2", "succeeded", 5)});
  EXPECT_EQ(read_value<std::int64_t>([](catalog_read& rd) { return rd.last_files_run("d1", "t1"); }), 2);
  EXPECT_EQ(read_value<std::int64_t>([](catalog_read& rd) { return rd.last_files_run("d1", "t2"); }), 5);
  EXPECT_EQ(read_value<std::int64_t>([](catalog_read& rd) { return rd.last_files_run("d2", "t1"); }), 0);
}

TEST_P(catalog_conformance, target_last_successes_are_each_targets_latest_success_across_distributions) {
  using pairs = std::vector<std::pair<std::string, time_ms>>;
  EXPECT_EQ(read_value<pairs>([](catalog_read& rd) { return rd.target_last_successes(10); }), pairs{});
  auto at = [](std::string dist, std::int64_t run, std::string target, std::string status, time_ms finished) {
    auto r = run_result(std::move(dist), run, std::move(target), std::move(status));
    r.finished_at = finished;
    return r;
  };
  add_results({at("d1", 1, "t1", "succeeded", 1000), at("d2", 1, "t1", "succeeded", 3000),
               at("d1", 2, "t1", "failed", 5000),  // a later failure: the success still counts
               at("d1", 2, "t2", "succeeded", 2000), at("d1", 1, "t3", "failed", 4000)});
  EXPECT_EQ(read_value<pairs>([](catalog_read& rd) { return rd.target_last_successes(10); }),
            (pairs{{"t1", 3000}, {"t2", 2000}}));
  EXPECT_EQ(read_value<pairs>([](catalog_read& rd) { return rd.target_last_successes(1); }), (pairs{{"t1", 3000}}));
}

TEST_P(catalog_conformance, a_child_is_finalized_once_per_run) {
  auto add = [&](std::int64_t run, finalized_child c) {
    std::optional<bool> added;
    auto r = write([&](catalog_tx& tx) -> result<void> {
      auto a = tx.add_finalized("d1", run, c);
      if (!a) return std::move(a).error();
      added = *a;
      return {};
    });
    EXPECT_TRUE(r) << r.error().message;
    return added.value_or(false);
  };
  EXPECT_TRUE(add(1, {"jb", "failed", true}));
  EXPECT_TRUE(add(1, {"ja", "succeeded", true}));
  EXPECT_TRUE(add(1, {"jr", "partial", false}));
  // Reported again (a redelivered hook, a second reporter): refused, the first outcome stays.
  EXPECT_FALSE(add(1, {"jb", "succeeded", false}));
  EXPECT_TRUE(add(2, {"jb", "cancelled", true}));  // another run is another set

  auto run1 = read_value<std::vector<finalized_child>>([](catalog_read& rd) { return rd.finalized_children("d1", 1); });
  ASSERT_EQ(run1.size(), 3u);
  EXPECT_EQ(run1[0].job_id, "ja");
  EXPECT_EQ(run1[0].outcome, "succeeded");
  EXPECT_TRUE(run1[0].batch);
  EXPECT_EQ(run1[1].job_id, "jb");
  EXPECT_EQ(run1[1].outcome, "failed");
  EXPECT_TRUE(run1[1].batch);
  EXPECT_EQ(run1[2].job_id, "jr");
  EXPECT_EQ(run1[2].outcome, "partial");
  EXPECT_FALSE(run1[2].batch);
  auto run2 = read_value<std::vector<finalized_child>>([](catalog_read& rd) { return rd.finalized_children("d1", 2); });
  ASSERT_EQ(run2.size(), 1u);
  EXPECT_EQ(run2[0].outcome, "cancelled");
  EXPECT_TRUE(read_value<std::vector<finalized_child>>([](catalog_read& rd) { return rd.finalized_children("d2", 1); })
                  .empty());
}

// The fan-out protocol's unit of work: a child's results, its guard entry and the counter it
// moves commit together, or none of them does.
TEST_P(catalog_conformance, a_report_its_guard_and_its_counter_commit_together) {
  auto cert = insert(object(std::string(kind_certificate), "c")).id;
  auto d = insert(distribution("web", cert, {}));
  d.status = "running";
  d.run_no = 1;
  d.mode = "fan_out";
  d.fan_out_total = 2;
  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.update_distribution(d); }));

  auto report = [&](const std::string& job, bool then_fail) {
    return write([&](catalog_tx& tx) -> result<void> {
      auto cur = tx.get_distribution("", d.id);
      if (!cur) return std::move(cur).error();
      if (auto a = tx.add_result(result_row(d.id, 1, "t-" + job, job, 0, 1, "succeeded")); !a) return a;
      auto added = tx.add_finalized(d.id, 1, finalized_child{job, "succeeded", true});
      if (!added) return std::move(added).error();
      if (*added) ++cur->fan_out_succeeded;
      if (auto u = tx.update_distribution(*cur); !u) return u;
      // What this transaction wrote is what it reads.
      auto fin = tx.finalized_children(d.id, 1);
      EXPECT_TRUE(fin && !fin->empty());
      if (then_fail) return make_error(errc::store_busy, "lost the race");
      return {};
    });
  };
  ASSERT_FALSE(report("j1", true));
  auto after_failure = get_distribution(project, d.id);
  ASSERT_TRUE(after_failure);
  EXPECT_EQ(after_failure->fan_out_succeeded, 0);
  EXPECT_TRUE(read_value<std::vector<finalized_child>>([&](catalog_read& rd) { return rd.finalized_children(d.id, 1); })
                  .empty());
  EXPECT_TRUE(read_value<std::vector<target_result>>([&](catalog_read& rd) { return rd.run_results(d.id, 1); }).empty());

  // The retried report counts once, and a duplicate of it changes nothing.
  ASSERT_TRUE(report("j1", false));
  ASSERT_TRUE(report("j1", false));
  ASSERT_TRUE(report("j2", false));
  auto done = get_distribution(project, d.id);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->fan_out_succeeded, 2);
  EXPECT_EQ(read_value<std::vector<finalized_child>>([&](catalog_read& rd) { return rd.finalized_children(d.id, 1); })
                .size(),
            2u);
  EXPECT_EQ(read_value<std::vector<target_result>>([&](catalog_read& rd) { return rd.run_results(d.id, 1); }).size(), 2u);
}

// ---- a run's jobs ------------------------------------------------------------------------

// The jobs of a run are found by their idempotency keys, which the distribution module builds
// (`dist:<distribution>:<run>:<role>`, distribution/plan). The key is spelled here, once, as
// the store receives it.
// The store is given a run's key prefix by its caller and knows nothing of the format.
std::string run_prefix(const std::string& dist, std::int64_t run) { return "dist:" + dist + ":" + std::to_string(run) + ":"; }
std::string run_job_key(const std::string& dist, std::int64_t run, const std::string& role) {
  return run_prefix(dist, run) + role;
}

TEST_P(catalog_conformance, a_runs_jobs_are_found_cancelled_and_released_by_their_keys) {
  auto cert = insert(object(std::string(kind_certificate), "c")).id;
  auto d = insert(distribution("web", cert, {}));
  auto other = insert(distribution("other", cert, {}));
  auto child = [&](const std::string& key, bool held = false) {
    new_job j;
    j.project_id = project;
    j.type = "distribution_execute";
    j.lane = "dist";
    j.max_attempts = 3;
    j.held = held;
    j.idempotency_key = key;
    j.distribution_id = d.id;
    auto r = run_sync(st->jobs().enqueue(j, t0));
    EXPECT_TRUE(r) << r.error().message;
    return r->job;
  };
  auto pending = child(run_job_key(d.id, 1, "batch:0"));
  auto held = child(run_job_key(d.id, 1, "batch:1"), true);
  auto active = child(run_job_key(d.id, 1, "batch:2"));
  auto failed = child(run_job_key(d.id, 1, "retry:x"));
  // Not this run's: the next run (whose number starts with the same digit), another
  // distribution, a job without a key.
  auto next_run = child(run_job_key(d.id, 11, "batch:0"));
  auto foreign = child(run_job_key(other.id, 1, "batch:0"));
  auto plain = child("");

  // Claim every claimable job of the lane: `active` stays active, `failed` fails with a retry
  // time ahead, the others are released back to pending.
  auto claimed = run_sync(st->jobs().claim("dist", "w", t0, 10'000, 10));
  ASSERT_TRUE(claimed);
  for (const auto& j : *claimed) {
    if (j.id == active.id || j.id == failed.id) continue;
    finish_request f;
    f.lease = {j.id, j.fence};
    f.worker_id = "w";
    f.kind = finish_kind::released;
    ASSERT_TRUE((*run_sync(st->jobs().finish({f}, t0)))[0]);
  }
  for (const auto& j : *claimed) {
    if (j.id != failed.id) continue;
    finish_request f;
    f.lease = {j.id, j.fence};
    f.worker_id = "w";
    f.kind = finish_kind::failed;
    f.error = "boom";
    f.retry_at = t0 + 60'000;
    ASSERT_TRUE((*run_sync(st->jobs().finish({f}, t0)))[0]);
  }
  auto status_of = [&](const job_record& j) { return run_sync(st->jobs().get(project, j.id))->status; };
  ASSERT_EQ(status_of(active), job_status::active);
  ASSERT_EQ(status_of(failed), job_status::failed);
  ASSERT_EQ(status_of(pending), job_status::pending);

  auto kids = read_value<std::vector<job_record>>([&](catalog_read& rd) { return rd.children_of(d.id, run_prefix(d.id, 1)); });
  std::vector<std::string> ids;
  for (const auto& k : kids) ids.push_back(k.id);
  EXPECT_EQ(ids, sorted({pending.id, held.id, active.id, failed.id}));
  auto unknown = read([&](catalog_read& rd) -> result<void> {
    auto k = rd.children_of(new_object_id(), run_prefix(d.id, 1));
    return k ? result<void>{} : std::move(k).error();
  });
  ASSERT_FALSE(unknown);
  EXPECT_TRUE(unknown.error().is(errc::not_found));

  // held -> claimable now; only this run's.
  int released = -1;
  ASSERT_TRUE(write([&](catalog_tx& tx) -> result<void> {
    auto n = tx.release_held_children(d.id, run_prefix(d.id, 1), t0 + 5);
    if (!n) return std::move(n).error();
    released = *n;
    return {};
  }));
  EXPECT_EQ(released, 1);
  auto now_claimable = run_sync(st->jobs().get(project, held.id));
  EXPECT_FALSE(now_claimable->held);
  EXPECT_EQ(now_claimable->ready_at, t0 + 5);

  // active -> cancel requested; pending and failed -> cancelled, returned for accounting.
  std::vector<std::string> asked, cancelled;
  ASSERT_TRUE(write([&](catalog_tx& tx) -> result<void> {
    auto r = tx.request_cancel_children(d.id, run_prefix(d.id, 1));
    if (!r) return std::move(r).error();
    asked = *r;
    auto c = tx.cancel_waiting_children(d.id, run_prefix(d.id, 1), t0 + 7);
    if (!c) return std::move(c).error();
    for (const auto& j : *c) {
      EXPECT_EQ(j.status, job_status::cancelled);
      EXPECT_EQ(j.completed_at, t0 + 7);
      cancelled.push_back(j.id);
    }
    return {};
  }));
  EXPECT_EQ(asked, (std::vector<std::string>{active.id}));
  EXPECT_EQ(sorted(cancelled), sorted({pending.id, held.id, failed.id}));
  EXPECT_TRUE(run_sync(st->jobs().get(project, active.id))->cancel_requested);
  EXPECT_EQ(status_of(active), job_status::active);
  for (const auto& j : {pending, held, failed}) EXPECT_EQ(status_of(j), job_status::cancelled);
  for (const auto& j : {next_run, foreign, plain}) EXPECT_EQ(status_of(j), job_status::pending);
}

// ---- DNS-01 challenge records ----------------------------------------------------------------

TEST_P(catalog_conformance, dns_records_are_left_once_their_attempt_is_over_until_marked_removed) {
  // Three jobs on the main lane: one claimed twice (its first attempt's record is left while its
  // second attempt runs), one active in the attempt that presented, one finished.
  auto job = [&] {
    new_job j;
    j.project_id = project;
    j.type = "noop";
    j.lane = "main";
    j.max_attempts = 3;
    return run_sync(st->jobs().enqueue(j, t0))->job;
  };
  auto retried = job();
  auto running = job();
  auto finished = job();
  auto claimed = run_sync(st->jobs().claim("main", "w", t0, 10'000, 10));
  ASSERT_TRUE(claimed);
  ASSERT_EQ(claimed->size(), 3u);
  auto fence_of = [&](const std::string& id) {
    for (const auto& j : *claimed)
      if (j.id == id) return j.fence;
    return std::int64_t{-1};
  };
  auto record = [&](const std::string& job_id, std::int64_t fence, std::string fqdn, time_ms at,
                    std::string project_id = {}) {
    dns_record r;
    r.id = new_object_id();
    r.project_id = project_id.empty() ? project : project_id;
    r.provider_id = new_object_id();
    r.job_id = job_id;
    r.fence = fence;
    r.zone = "example.test";
    r.fqdn = std::move(fqdn);
    r.value = "v-" + r.fqdn;
    r.presented_at = at;
    auto ok = write([&](catalog_tx& tx) { return tx.add_dns_record(r); });
    EXPECT_TRUE(ok) << ok.error().message;
    return r;
  };
  auto old_attempt = record(retried.id, fence_of(retried.id), "_acme-challenge.a.example.test", t0 + 1);
  auto in_flight = record(running.id, fence_of(running.id), "_acme-challenge.b.example.test", t0 + 2);
  auto done = record(finished.id, fence_of(finished.id), "_acme-challenge.c.example.test", t0 + 3);
  auto orphan = record(new_object_id(), 1, "_acme-challenge.d.example.test", t0 + 4, other_project);  // job purged

  auto finish = [&](const std::string& id, finish_kind kind) {
    finish_request f;
    f.lease = {id, fence_of(id)};
    f.worker_id = "w";
    f.kind = kind;
    if (kind == finish_kind::completed) f.result_status = "ok";
    else {
      f.retry_at = t0;
      f.error = "boom";
    }
    ASSERT_TRUE((*run_sync(st->jobs().finish({f}, t0)))[0]);
  };
  finish(retried.id, finish_kind::failed);  // ready again at t0: claimed below in a new attempt
  finish(finished.id, finish_kind::completed);
  auto again = run_sync(st->jobs().claim("main", "w2", t0 + 10, 10'000, 10));
  ASSERT_TRUE(again);
  ASSERT_EQ(again->size(), 1u);
  ASSERT_EQ((*again)[0].id, retried.id);
  auto new_attempt = record(retried.id, (*again)[0].fence, "_acme-challenge.a.example.test", t0 + 11);

  auto left_ids = [&] {
    auto left = read_value<std::vector<dns_record>>([](catalog_read& rd) { return rd.dns_records_left(100); });
    std::vector<std::string> out;
    for (const auto& r : left) out.push_back(r.id);
    return out;
  };
  // Oldest first, every project; not the records of attempts still running (in_flight, new_attempt).
  EXPECT_EQ(left_ids(), (std::vector<std::string>{old_attempt.id, done.id, orphan.id}));
  auto limited = read_value<std::vector<dns_record>>([](catalog_read& rd) { return rd.dns_records_left(1); });
  ASSERT_EQ(limited.size(), 1u);
  // Every field comes back.
  EXPECT_EQ(limited[0].project_id, old_attempt.project_id);
  EXPECT_EQ(limited[0].provider_id, old_attempt.provider_id);
  EXPECT_EQ(limited[0].job_id, old_attempt.job_id);
  EXPECT_EQ(limited[0].fence, old_attempt.fence);
  EXPECT_EQ(limited[0].zone, "example.test");
  EXPECT_EQ(limited[0].fqdn, old_attempt.fqdn);
  EXPECT_EQ(limited[0].value, old_attempt.value);
  EXPECT_EQ(limited[0].presented_at, t0 + 1);
  EXPECT_EQ(limited[0].removed_at, 0);

  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.mark_dns_record_removed(done.id, t0 + 20); }));
  // A second mark keeps the first time.
  ASSERT_TRUE(write([&](catalog_tx& tx) { return tx.mark_dns_record_removed(done.id, t0 + 30); }));
  EXPECT_EQ(left_ids(), (std::vector<std::string>{old_attempt.id, orphan.id}));
  // An attempt's records, removed ones too.
  auto of_done = read_value<std::vector<dns_record>>(
      [&](catalog_read& rd) { return rd.dns_records_of(finished.id, fence_of(finished.id)); });
  ASSERT_EQ(of_done.size(), 1u);
  EXPECT_EQ(of_done[0].removed_at, t0 + 20);
  auto of_retried = read_value<std::vector<dns_record>>(
      [&](catalog_read& rd) { return rd.dns_records_of(retried.id, fence_of(retried.id)); });
  ASSERT_EQ(of_retried.size(), 1u);
  EXPECT_EQ(of_retried[0].id, old_attempt.id);
  (void)in_flight;
  (void)new_attempt;
}

INSTANTIATE_TEST_SUITE_P(backends, catalog_conformance, ::testing::ValuesIn(backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
