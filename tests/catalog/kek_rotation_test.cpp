// KEK rotation (DESIGN §11) with real processes on a real SQLite file: `certfleet kek rotate`
// while a worker re-seals 10,000 secrets and a reader keeps opening them through the catalog's
// own code path; the refusals (a second rotate, a retire too early, a start with an envelope of a
// version the key file lacks); SIGKILL of the worker at each crash point of a batch, then a
// restart: the rotation finishes, every envelope opens, none was re-sealed twice.
#include "certfleet/core/object_id.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/catalog/body_fields.hpp"
#include "certfleet/catalog/kek_rotation.hpp"
#include "certfleet/service/kinds.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"
#include "process.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <atomic>
#include <map>
#include <random>
#include <regex>
#include <thread>

using namespace certfleet;
using namespace std::chrono_literals;
using testbed::run_sync;

namespace {

struct run_result {
  int status = -1;
  std::string out, err;
};

run_result run(const testbed::temp_dir& dir, const std::string& data, std::vector<std::string> args) {
  static int n = 0;
  std::vector<std::string> argv{CERTFLEET_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--data");
  argv.push_back(data);
  testbed::process p(argv, {}, dir.file("cmd" + std::to_string(++n)));
  run_result r;
  r.status = p.wait(60s);
  if (r.status == -1) p.signal(SIGKILL);
  r.out = p.stdout_text();
  r.err = p.stderr_text();
  return r;
}

void exec_sql(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_busy_timeout(h, 10000);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(h);
}

// Rows of a one-column-pair query: {text, integer}.
std::map<std::string, std::int64_t> query_pairs(const std::string& db, const std::string& sql) {
  std::map<std::string, std::int64_t> out;
  sqlite3* h = nullptr;
  sqlite3_open(db.c_str(), &h);
  sqlite3_busy_timeout(h, 10000);
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK)
    while (sqlite3_step(s) == SQLITE_ROW)
      out[reinterpret_cast<const char*>(sqlite3_column_text(s, 0))] = sqlite3_column_int64(s, 1);
  sqlite3_finalize(s);
  sqlite3_close(h);
  return out;
}

struct rotation_env {
  testbed::temp_dir dir{"certfleet-kek"};
  std::string data = dir.file("var");
  std::string db = data + "/certfleet.db";
  std::string key_file = data + "/certfleet.key";
  std::unique_ptr<store::store> st;
  std::vector<std::pair<std::string, std::string>> credential_ids;  // id, project
  std::vector<std::string> all_ids;
  std::string project_id;

  std::vector<std::string> worker_args() const {
    return {CERTFLEET_BINARY, "serve",  "--mode", "worker", "--listen", "127.0.0.1:0", "--data", data,
            "--set",          "worker_poll_ms=20",  "--set",  "lease_ms=1500"};
  }
  std::unique_ptr<testbed::process> start_worker(const std::string& name, std::map<std::string, std::string> env = {}) {
    auto p = std::make_unique<testbed::process>(worker_args(), std::move(env), dir.file(name));
    EXPECT_FALSE(p->wait_for_stdout("serving:", 20s).empty()) << p->stderr_text();
    return p;
  }
  void open_store() {
    auto s = store::open_sqlite({db, 2, 10000, false});
    ASSERT_TRUE(s) << s.error().message;
    st = std::move(*s);
    auto p = run_sync(st->projects().ensure("default", 1));
    ASSERT_TRUE(p);
    project_id = p->first.id;
  }
  // A marker per re-seal: every UPDATE of an envelope, with the version it had and got.
  void log_reseals() {
    exec_sql(db,
             "CREATE TABLE IF NOT EXISTS test_reseal_log (id TEXT, old_v TEXT, new_v TEXT);"
             "CREATE TRIGGER IF NOT EXISTS test_reseal AFTER UPDATE OF sealed ON objects BEGIN "
             "INSERT INTO test_reseal_log VALUES (old.id, substr(old.sealed, 1, 7), substr(new.sealed, 1, 7)); END;");
  }
  // `n` credentials through the catalog's own constructor (sealed with the key file's primary),
  // spread over two projects, and a few envelopes of every other sealed collection.
  void insert_secrets(const kek& key, int n) {
    auto other = run_sync(st->projects().ensure("other", 1));
    ASSERT_TRUE(other);
    const std::string other_id = other->first.id;
    for (int start = 0; start < n; start += 2500) {
      auto objects = std::make_shared<std::vector<store::catalog_object>>();
      for (int i = start; i < std::min(n, start + 2500); ++i) {
        catalog::new_credential c;
        c.name = "cred-" + std::to_string(i);
        c.kind = "password";
        c.secret.password = "pw-" + std::to_string(i);
        auto o = catalog::make_credential_object(c, key, new_object_id(), i % 2 ? other_id : project_id, 1);
        ASSERT_TRUE(o) << o.error().message;
        credential_ids.emplace_back(o->id, o->project_id);
        objects->push_back(std::move(*o));
      }
      if (start == 0)
        for (const auto& col : service::catalog_kinds()) {
          if (col.sealed.empty() || col.name == store::kind_credential) continue;
          for (int i = 0; i < 3; ++i) {
            store::catalog_object o;
            o.id = new_object_id();
            o.project_id = project_id;
            o.kind = std::string(col.name);
            o.name = std::string(col.name) + "-" + std::to_string(i);
            o.sealed = seal(key, "secret of " + o.id, catalog::body_fields::aad_for(o, col.sealed)).value();
            objects->push_back(std::move(o));
          }
        }
      store::tx_fn fn = [objects](store::catalog_tx& tx) -> result<void> {
        for (const auto& o : *objects)
          if (auto r = tx.insert_object(o); !r) return std::move(r).error();
        return {};
      };
      ASSERT_TRUE(run_sync(st->catalog().transact(std::move(fn))));
      for (const auto& o : *objects) all_ids.push_back(o.id);
    }
  }
  void set_batch(int n) {
    ASSERT_TRUE(run_sync(st->auth().put_system_settings({{"kek_rotation_batch", std::to_string(n)}},
                                                         store::audit_entry{0, "", "cli", "settings.update", "settings",
                                                                            "ok", "", 1})));
  }
  boost::json::object status() {
    auto r = run(dir, data, {"kek", "status", "--json"});
    EXPECT_EQ(r.status, 0) << r.err;
    return boost::json::parse(r.out).as_object();
  }
  // Until no rotation job is open and every envelope is at `to`.
  bool wait_done(std::uint32_t to, std::chrono::seconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      auto s = status();
      if (!s.at("running").as_bool() && s.at("left").as_int64() == 0 && s.at("primary").as_int64() == to) return true;
      std::this_thread::sleep_for(200ms);
    }
    return false;
  }
  // Every envelope in the store names `version` and opens with a fresh read of the key file.
  void expect_all_open_at(std::uint32_t version) {
    auto key = load_key_file(key_file);
    ASSERT_TRUE(key) << key.error().message;
    std::int64_t seen = 0;
    for (const auto& col : service::catalog_kinds()) {
      if (col.sealed.empty()) continue;
      store::read_value_fn<std::vector<store::sealed_row>> page = [kind = std::string(col.name)](store::catalog_read& rd) {
        return rd.sealed_page(kind, "", "", 1'000'000);
      };
      auto rows = run_sync(store::read_value(st->catalog(), std::move(page)));
      ASSERT_TRUE(rows);
      for (const auto& r : *rows) {
        ++seen;
        ASSERT_EQ(sealed_kek_version(r.sealed), version) << col.name << " " << r.id;
        // Bound to its object and what its kind seals: "<kind>:<id>:<what>" (DESIGN §11).
        const auto aad = std::string(col.name) + ":" + r.id + ":" + std::string(col.sealed);
        auto plain = open_sealed(*key, r.sealed, aad);
        ASSERT_TRUE(plain) << col.name << " " << r.id << ": " << plain.error().message;
      }
    }
    EXPECT_EQ(seen, static_cast<std::int64_t>(all_ids.size()));
  }
  // Each envelope was re-sealed exactly once, from `from` to `to`.
  void expect_resealed_once(std::uint32_t from, std::uint32_t to) {
    auto per_id = query_pairs(db, "SELECT id, count(*) FROM test_reseal_log GROUP BY id");
    EXPECT_EQ(per_id.size(), all_ids.size());
    std::int64_t twice = 0;
    for (const auto& [id, n] : per_id) twice += n > 1;
    EXPECT_EQ(twice, 0) << "envelopes re-sealed more than once";
    auto kinds = query_pairs(db, "SELECT old_v || '>' || new_v, count(*) FROM test_reseal_log GROUP BY 1");
    ASSERT_EQ(kinds.size(), 1u);
    EXPECT_EQ(kinds.begin()->first, fmt_versions(from, to));
  }
  static std::string fmt_versions(std::uint32_t from, std::uint32_t to) {
    return "cfs1:" + std::to_string(from) + ":>cfs1:" + std::to_string(to) + ":";
  }
};

TEST(kek_rotation, ten_thousand_secrets_rotate_while_a_reader_opens_them_then_the_old_version_retires) {
  rotation_env env;
  auto worker = env.start_worker("worker");
  env.open_store();
  env.log_reseals();
  auto key = load_key_file(env.key_file).value();
  const auto t0 = std::chrono::steady_clock::now();
  env.insert_secrets(key, 10'000);
  std::cerr << "inserted " << env.all_ids.size() << " envelopes in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
            << " ms\n";

  // A reader started before the rotation keeps opening credentials the way a distribution does
  // (its kek reads the key file again when it meets version 2).
  auto reader_key = load_key_file(env.key_file).value();
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> opened{0}, failures{0};
  std::string first_failure;
  struct join_on_exit {
    std::atomic<bool>& stop;
    std::thread& t;
    ~join_on_exit() {
      stop = true;
      if (t.joinable()) t.join();
    }
  };
  std::thread reader;
  join_on_exit joiner{stop, reader};
  reader = std::thread([&] {
    std::mt19937 rng(42);
    while (!stop) {
      const auto& [id, project] = env.credential_ids[rng() % env.credential_ids.size()];
      store::read_value_fn<store::catalog_object> get = [id, project](store::catalog_read& rd) {
        return rd.get_object(project, store::kind_credential, id);
      };
      auto o = run_sync(store::read_value(env.st->catalog(), std::move(get)));
      if (!o) {
        if (failures++ == 0) first_failure = o.error().message;
        continue;
      }
      auto s = catalog::open_credential(reader_key, *o);
      if (!s) {
        if (failures++ == 0) first_failure = s.error().message;
      } else if (s->password.rfind("pw-", 0) != 0) {
        ++failures;
      }
      ++opened;
    }
  });

  auto rotated = run(env.dir, env.data, {"kek", "rotate"});
  ASSERT_EQ(rotated.status, 0) << rotated.err;
  auto answer = boost::json::parse(rotated.out).as_object();
  EXPECT_EQ(answer.at("from").as_int64(), 1);
  EXPECT_EQ(answer.at("to").as_int64(), 2);
  const auto rotate_started = std::chrono::steady_clock::now();

  // While it runs: a second rotate and a retire of version 1 are refused.
  auto again = run(env.dir, env.data, {"kek", "rotate"});
  EXPECT_EQ(again.status, 4) << again.out << again.err;
  EXPECT_NE(again.err.find("a key rotation is running (v1 → v2"), std::string::npos) << again.err;
  auto early = run(env.dir, env.data, {"kek", "retire", "1"});
  EXPECT_EQ(early.status, 4) << early.err;
  EXPECT_NE(early.err.find("still use key version 1"), std::string::npos) << early.err;
  {
    // The count is what is still at v1 when the retire reads it: the rotation may already have
    // resealed some (a sanitized CLI start can outlast the settle), never none left.
    std::smatch m;
    const std::regex count_re("([0-9]+) sealed secrets still use key version 1");
    ASSERT_TRUE(std::regex_search(early.err, m, count_re)) << early.err;
    const auto left = std::stoul(m[1].str());
    EXPECT_GT(left, 0u) << early.err;
    EXPECT_LE(left, env.all_ids.size()) << early.err;
  }
  auto primary = run(env.dir, env.data, {"kek", "retire", "2"});
  EXPECT_EQ(primary.status, 4) << primary.err;
  EXPECT_NE(primary.err.find("primary"), std::string::npos) << primary.err;

  ASSERT_TRUE(env.wait_done(2, 120s)) << boost::json::serialize(env.status()) << worker->stderr_text();
  std::cerr << "rotation of " << env.all_ids.size() << " envelopes took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - rotate_started)
                   .count()
            << " ms (including the 2 s settle)\n";
  stop = true;
  reader.join();
  EXPECT_GT(opened.load(), 0);
  EXPECT_EQ(failures.load(), 0) << first_failure;

  env.expect_all_open_at(2);
  env.expect_resealed_once(1, 2);
  auto s = env.status();
  for (const auto& c : s.at("collections").as_array())
    EXPECT_EQ(c.at("done").as_int64(), c.at("total").as_int64()) << boost::json::serialize(c);
  auto human = run(env.dir, env.data, {"kek", "status"});
  EXPECT_EQ(human.status, 0);
  EXPECT_NE(human.out.find("every secret is at v2"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("credential"), std::string::npos) << human.out;

  auto retired = run(env.dir, env.data, {"kek", "retire", "1"});
  ASSERT_EQ(retired.status, 0) << retired.err;
  auto ring = load_key_file(env.key_file).value();
  EXPECT_EQ(ring.versions(), std::vector<std::uint32_t>{2});
  env.expect_all_open_at(2);
  // The running worker and a restarted one both go on with the smaller ring.
  worker->signal(SIGTERM);
  EXPECT_EQ(worker->wait(30s), 0);
  auto again_worker = env.start_worker("worker2");
  again_worker->signal(SIGTERM);
  EXPECT_EQ(again_worker->wait(30s), 0) << again_worker->stderr_text();
}

TEST(kek_rotation, a_start_with_an_envelope_of_a_version_the_key_file_lacks_is_refused_naming_it) {
  rotation_env env;
  {
    auto worker = env.start_worker("first");
    worker->signal(SIGTERM);
    ASSERT_EQ(worker->wait(30s), 0);
  }
  env.open_store();
  auto key = load_key_file(env.key_file).value();
  env.insert_secrets(key, 3);
  // An envelope of version 7 (a store restored next to an older key file).
  auto seven = kek::generate(7).value();
  exec_sql(env.db, "UPDATE objects SET sealed = '" + seal(seven, "x", "y").value() + "' WHERE id = '" +
                       env.credential_ids[0].first + "'");
  env.st.reset();
  testbed::process serve(env.worker_args(), {}, env.dir.file("refused"));
  EXPECT_EQ(serve.wait(30s), 1);
  EXPECT_NE(serve.stderr_text().find("1 sealed secret is sealed with key version 7, which the key file"),
            std::string::npos)
      << serve.stderr_text();
  auto rotate = run(env.dir, env.data, {"kek", "rotate"});
  EXPECT_EQ(rotate.status, 2) << rotate.err;
  EXPECT_NE(rotate.err.find("key version 7"), std::string::npos) << rotate.err;
  // status still answers, with the reason.
  auto status = run(env.dir, env.data, {"kek", "status"});
  EXPECT_EQ(status.status, 0) << status.err;
  EXPECT_NE(status.out.find("key version 7"), std::string::npos) << status.out;
}

// A rotate that wrote the key file but stopped before its job was stored: the next rotate starts
// the rotation to the primary already in the file instead of adding another version.
TEST(kek_rotation, a_rotate_that_stopped_after_writing_the_key_file_is_resumed_without_a_new_version) {
  rotation_env env;
  auto worker = env.start_worker("worker");
  env.open_store();
  env.log_reseals();
  auto key = load_key_file(env.key_file).value();
  env.insert_secrets(key, 50);
  ASSERT_TRUE(replace_key_file(env.key_file, key.with_new_primary().value()));
  auto resumed = run(env.dir, env.data, {"kek", "rotate"});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("has no rotation yet"), std::string::npos) << resumed.err;
  auto answer = boost::json::parse(resumed.out).as_object();
  EXPECT_EQ(answer.at("from").as_int64(), 1);
  EXPECT_EQ(answer.at("to").as_int64(), 2);
  EXPECT_EQ(load_key_file(env.key_file).value().versions(), (std::vector<std::uint32_t>{1, 2}));
  ASSERT_TRUE(env.wait_done(2, 60s)) << boost::json::serialize(env.status());
  env.expect_all_open_at(2);
  env.expect_resealed_once(1, 2);
  // The next rotate adds version 3 (version 1 still there: nothing forces a retire).
  auto next = run(env.dir, env.data, {"kek", "rotate"});
  ASSERT_EQ(next.status, 0) << next.err;
  EXPECT_EQ(boost::json::parse(next.out).at("to").as_int64(), 3);
  ASSERT_TRUE(env.wait_done(3, 60s)) << boost::json::serialize(env.status());
  env.expect_all_open_at(3);
  EXPECT_EQ(load_key_file(env.key_file).value().versions(), (std::vector<std::uint32_t>{1, 2, 3}));
  for (auto v : {"1", "2"}) EXPECT_EQ(run(env.dir, env.data, {"kek", "retire", v}).status, 0) << v;
  EXPECT_EQ(load_key_file(env.key_file).value().versions(), std::vector<std::uint32_t>{3});
  EXPECT_EQ(run(env.dir, env.data, {"kek", "retire", "5"}).status, 3);
  worker->signal(SIGTERM);
  EXPECT_EQ(worker->wait(30s), 0);
}

// An envelope written with the old key behind a chain's cursor (here: each batch leaves its first
// one, CERTFLEET_FAIL_AT=kek_rotation_leave_first) is re-sealed by the chain's final sweep.
TEST(kek_rotation, the_final_sweep_reseals_envelopes_left_behind_the_cursor) {
  rotation_env env;
  {
    auto first = env.start_worker("first");
    first->signal(SIGTERM);
    ASSERT_EQ(first->wait(30s), 0);
  }
  env.open_store();
  env.log_reseals();
  env.set_batch(100);
  auto key = load_key_file(env.key_file).value();
  env.insert_secrets(key, 1000);
  auto worker = env.start_worker("worker", {{"CERTFLEET_FAIL_AT", "kek_rotation_leave_first"}});
  auto rotated = run(env.dir, env.data, {"kek", "rotate"});
  ASSERT_EQ(rotated.status, 0) << rotated.err;
  ASSERT_TRUE(env.wait_done(2, 60s)) << boost::json::serialize(env.status());
  env.expect_all_open_at(2);
  env.expect_resealed_once(1, 2);
  // The sweep did it: 10 credentials (one per batch of 100) and one of each other collection.
  auto swept = query_pairs(env.db,
                           "SELECT substr(message, instr(message, 'final sweep'), 40), count(*) FROM job_logs "
                           "WHERE message LIKE '%final sweep re-sealed%' GROUP BY 1");
  std::map<std::string, std::int64_t> want{{"final sweep re-sealed 1 left behind the ", 7},
                                           {"final sweep re-sealed 10 left behind the", 1}};
  EXPECT_EQ(swept, want);
  worker->signal(SIGTERM);
  EXPECT_EQ(worker->wait(30s), 0);
}

struct crash_case {
  const char* point;
  const char* after;
};

class kek_rotation_crash : public ::testing::TestWithParam<crash_case> {};

TEST_P(kek_rotation_crash, a_worker_killed_at_the_point_restarts_and_the_rotation_finishes_resealing_each_once) {
  rotation_env env;
  {
    auto first = env.start_worker("first");
    first->signal(SIGTERM);
    ASSERT_EQ(first->wait(30s), 0);
  }
  env.open_store();
  env.log_reseals();
  env.set_batch(100);
  auto key = load_key_file(env.key_file).value();
  env.insert_secrets(key, 1000);

  auto doomed = env.start_worker("doomed", {{"CERTFLEET_CRASH_AT", GetParam().point},
                                            {"CERTFLEET_CRASH_AFTER", GetParam().after}});
  auto rotated = run(env.dir, env.data, {"kek", "rotate"});
  ASSERT_EQ(rotated.status, 0) << rotated.err;
  EXPECT_EQ(doomed->wait(60s), 128 + SIGKILL) << "the worker did not reach " << GetParam().point;
  // Killed mid-rotation: not done yet.
  auto mid = env.status();
  EXPECT_TRUE(mid.at("running").as_bool()) << boost::json::serialize(mid);

  auto worker = env.start_worker("again");
  ASSERT_TRUE(env.wait_done(2, 120s)) << boost::json::serialize(env.status()) << worker->stderr_text();
  env.expect_all_open_at(2);
  env.expect_resealed_once(1, 2);
  auto retired = run(env.dir, env.data, {"kek", "retire", "1"});
  EXPECT_EQ(retired.status, 0) << retired.err;
  worker->signal(SIGTERM);
  EXPECT_EQ(worker->wait(30s), 0);
}

INSTANTIATE_TEST_SUITE_P(points, kek_rotation_crash,
                         ::testing::Values(crash_case{"kek_rotation_planned", "1"},
                                           crash_case{"kek_rotation_batch_half", "3"},
                                           crash_case{"kek_rotation_before_commit", "4"},
                                           crash_case{"kek_rotation_batch_committed", "5"}),
                         [](const auto& info) { return std::string(info.param.point); });

}  // namespace
