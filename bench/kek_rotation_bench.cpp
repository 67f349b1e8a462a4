// bench/kek_rotation_bench: envelopes re-sealed per second by a KEK rotation (DESIGN §11).
// Makes a data directory with N sealed credentials (through the catalog's own constructor), starts
// `certfleet serve --mode worker` on it, runs `certfleet kek rotate`, and polls the store until
// every envelope names the new version. Reports the re-seal rate from the first envelope seen at
// the new version to the last (the 2 s settle before the chains start is reported apart).
//   bench/run kek_rotation_bench --certfleet build/certfleet --secrets 100000 --batch 500
#include "certfleet/core/object_id.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace certfleet;
using steady = std::chrono::steady_clock;
extern char** environ;

namespace {

template <class F>
auto run_sync(F&& make) {
  using R = typename decltype(make())::value_type;
  boost::asio::io_context ioc;
  std::optional<R> out;
  boost::asio::co_spawn(ioc, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await make()); },
                        [](std::exception_ptr e) {
                          if (e) std::rethrow_exception(e);
                        });
  ioc.run();
  return std::move(*out);
}

pid_t spawn(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, (log + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

int main(int argc, char** argv) {
  std::string certfleet = "build/certfleet";
  int secrets = 100'000, batch = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--certfleet") certfleet = argv[i + 1];
    else if (a == "--secrets") secrets = std::atoi(argv[i + 1]);
    else if (a == "--batch") batch = std::atoi(argv[i + 1]);
  }
  auto dir = std::filesystem::temp_directory_path() / fmt::format("certfleet-kek-bench-{}", ::getpid());
  std::filesystem::create_directories(dir / "var");
  const auto data = (dir / "var").string();
  auto key = create_key_file(dir / "var" / "certfleet.key");
  if (!key) return std::cerr << key.error().message << "\n", 1;
  auto st = store::open_sqlite({data + "/certfleet.db", 2, 10000, false});
  if (!st) return std::cerr << st.error().message << "\n", 1;
  auto& s = **st;
  auto project = run_sync([&] { return s.projects().ensure("default", 1); }).value().first.id;
  run_sync([&] {
    return s.auth().put_system_settings({{"kek_rotation_batch", std::to_string(batch)}},
                                        store::audit_entry{0, "", "cli", "settings.update", "settings", "ok", "", 1});
  }).value();
  auto t0 = steady::now();
  for (int start = 0; start < secrets; start += 5000) {
    auto objects = std::make_shared<std::vector<store::catalog_object>>();
    for (int i = start; i < std::min(secrets, start + 5000); ++i) {
      catalog::new_credential c;
      c.name = "cred-" + std::to_string(i);
      c.kind = "password";
      c.secret.password = std::string(40, 'p');
      objects->push_back(catalog::make_credential_object(c, *key, new_object_id(), project, 1).value());
    }
    store::tx_fn fn = [objects](store::catalog_tx& tx) -> result<void> {
      for (const auto& o : *objects)
        if (auto r = tx.insert_object(o); !r) return std::move(r).error();
      return {};
    };
    run_sync([&] { return s.catalog().transact(std::move(fn)); }).value();
  }
  auto inserted_ms = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0).count();

  auto worker = spawn({certfleet, "serve", "--mode", "worker", "--listen", "127.0.0.1:0", "--data", data, "--set",
                       "worker_poll_ms=20"},
                      (dir / "worker.log").string());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto rotate = spawn({certfleet, "kek", "rotate", "--data", data}, (dir / "rotate.log").string());
  if (wait_exit(rotate) != 0) return std::cerr << "kek rotate failed (" << dir << "/rotate.log.err)\n", 1;
  const auto rotated = steady::now();
  std::optional<steady::time_point> first, last;
  std::int64_t at_new = 0;
  while (steady::now() - rotated < std::chrono::minutes(30)) {
    auto counts = run_sync([&] {
      return store::read_value<std::vector<store::sealed_count>>(s.catalog(),
                                                                  [](store::catalog_read& rd) { return rd.sealed_versions(); });
    });
    at_new = 0;
    for (const auto& c : counts.value())
      if (c.version == 2) at_new += c.count;
    if (at_new > 0 && !first) first = steady::now();
    if (at_new == secrets) {
      last = steady::now();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(worker, SIGTERM);
  wait_exit(worker);
  if (!last) return std::cerr << "rotation did not finish: " << at_new << " of " << secrets << "\n", 1;
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  const auto resealing = ms(*last - *first);
  std::cout << fmt::format(
      "secrets {}  batch {}  inserted in {} ms  rotate→first re-seal {} ms  re-sealing {} ms  {:.0f} envelopes/s  "
      "(rotate→done {} ms)\n",
      secrets, batch, inserted_ms, ms(*first - rotated), resealing,
      resealing > 0 ? secrets * 1000.0 / static_cast<double>(resealing) : 0.0, ms(*last - rotated));
  std::filesystem::remove_all(dir);
  return 0;
}
