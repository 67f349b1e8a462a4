#pragma once
// A scripted MongoDB server for the MongoDB store's wire-level tests: tests/testbed/
// mockupdb_server.py (Debian's python3-mockupdb under /usr/bin/python3) on 127.0.0.1, on a port
// the kernel picks. It answers hello itself as the primary of replica set rs0 (or, with
// `standalone`, as a standalone mongod), answers every other command from the script and logs
// each one, whole, as relaxed Extended JSON:
//
//   testbed::temp_dir dir;
//   testbed::mockupdb db(dir, boost::json::parse(R"({
//       "rules": [{"command": "insert", "match": {"insert": "jobs"}, "times": 1,
//                  "reply": {"ok": 0, "code": 11000, "errmsg": "E11000 duplicate key"}}],
//       "default": {"findAndModify": {"ok": 1, "value": null}}})").as_object());
//   ... open the store on db.uri() ...
//   auto inserts = db.commands("insert");   // [{"command","db","doc"}], doc["lsid"], ...
//
// Script: rules are tried in order (command name case-insensitive, optional "match": top-level
// fields that must equal the command's, "times": how often, missing = always), then
// "default"[command], then ok 1 (empty cursor for find/aggregate, n for insert/update/delete).
// Replies pass through as written, Extended JSON ({"$oid"}, {"$date"}, {"$numberLong"})
// becoming BSON types; "$hangup": true closes the connection instead, "$delay_ms": N answers
// late. Note for fault scripts: against a 4.4+ server (maxWireVersion >= 9) libmongoc retries
// a write error only when it carries "errorLabels": ["RetryableWriteError"], as a real server
// adds it; the script must add it (network errors are retried without). The file's header
// comment says the rest.
#include "process.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>

#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace testbed {

struct mockupdb_options {
  bool standalone = false;        // hello without setName/hosts/primary (a standalone mongod)
  std::string set_name = "rs0";   // the replica set's name
  int max_wire = 17;              // maxWireVersion (17: MongoDB 6.0)
  int max_await_ms = 1000;        // longest an awaitable (monitoring) hello is held
};

// tests/testbed/mockupdb_server.py with one script; stopped by PID (SIGTERM, then the process
// object's SIGKILL) whatever the test's outcome.
class mockupdb {
 public:
  mockupdb(const testbed::temp_dir& dir, const boost::json::object& script, mockupdb_options o = {})
      : options_(std::move(o)) {
    static std::atomic<int> instances{0};
    const std::string name = "mockupdb-" + std::to_string(instances.fetch_add(1));
    const auto script_path = dir.file(name + ".json");
    log_path_ = dir.file(name + ".jsonl");
    {
      std::ofstream f(script_path);
      f << boost::json::serialize(script);
    }
    std::vector<std::string> argv{"/usr/bin/python3",
                                  std::string(CERTFLEET_SOURCE_DIR) + "/tests/testbed/mockupdb_server.py",
                                  "--script", script_path, "--log", log_path_,
                                  "--set-name", options_.set_name,
                                  "--max-wire", std::to_string(options_.max_wire),
                                  "--max-await-ms", std::to_string(options_.max_await_ms)};
    if (options_.standalone) argv.push_back("--standalone");
    proc_ = std::make_unique<testbed::process>(
        std::move(argv), std::map<std::string, std::string>{{"PYTHONDONTWRITEBYTECODE", "1"}}, dir.file(name));
    // It prints its port once it accepts: no guessing, no sleeping.
    if (proc_->wait_for_stdout("ready", std::chrono::seconds(20)).empty())
      throw std::runtime_error("mockupdb_server.py did not start: " + proc_->stderr_text());
    std::istringstream in(proc_->stdout_text());
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string w;
      int port = 0;
      if (words >> w >> port && w == "listening") port_ = static_cast<std::uint16_t>(port);
    }
    if (port_ == 0) throw std::runtime_error("mockupdb_server.py printed no port: " + proc_->stdout_text());
  }
  ~mockupdb() {
    proc_->signal(SIGTERM);
    proc_->wait(std::chrono::seconds(5));
  }
  mockupdb(const mockupdb&) = delete;
  mockupdb& operator=(const mockupdb&) = delete;

  std::uint16_t port() const { return port_; }

  // mongodb://127.0.0.1:PORT/?replicaSet=rs0&serverSelectionTimeoutMS=3000&connectTimeoutMS=3000
  // (no replicaSet with `standalone`). `extra_query` ("socketTimeoutMS=500&retryWrites=false")
  // is appended; an option it names replaces the default of the same name.
  std::string uri(std::string_view extra_query = "") const {
    std::vector<std::pair<std::string, std::string>> opts;
    if (!options_.standalone) opts.emplace_back("replicaSet", options_.set_name);
    opts.emplace_back("serverSelectionTimeoutMS", "3000");
    opts.emplace_back("connectTimeoutMS", "3000");
    std::vector<std::string> extra;
    for (std::string_view rest = extra_query; !rest.empty();) {
      auto amp = rest.find('&');
      auto item = rest.substr(0, amp);
      if (!item.empty()) extra.emplace_back(item);
      rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    }
    std::string q;
    auto add = [&q](std::string_view item) {
      q += q.empty() ? "" : "&";
      q += item;
    };
    for (auto& [k, v] : opts) {
      bool replaced = false;
      for (auto& e : extra)
        if (iequals(std::string_view(e).substr(0, e.find('=')), k)) replaced = true;
      if (!replaced) add(k + "=" + v);
    }
    for (auto& e : extra) add(e);
    return "mongodb://127.0.0.1:" + std::to_string(port_) + "/?" + q;
  }

  // Every logged command, in the order the server received them:
  // {"command": NAME, "db": DB, "doc": {...the whole command, relaxed Extended JSON...}}.
  std::vector<boost::json::object> commands() const {
    std::vector<boost::json::object> out;
    std::ifstream f(log_path_);
    for (std::string line; std::getline(f, line);) {
      if (line.empty()) continue;
      boost::system::error_code ec;
      auto v = boost::json::parse(line, ec);
      // A line being written while we read it has no newline yet: getline still returns it,
      // and it does not parse; the next read sees it whole.
      if (ec || !v.is_object()) continue;
      out.push_back(std::move(v.as_object()));
    }
    return out;
  }
  // The logged commands named `name` (case-insensitive: "findAndModify" == "findandmodify").
  std::vector<boost::json::object> commands(std::string_view name) const {
    std::vector<boost::json::object> out;
    for (auto& c : commands()) {
      auto* n = c.if_contains("command");
      if (n && n->is_string() && iequals(n->as_string(), name)) out.push_back(std::move(c));
    }
    return out;
  }
  // Waits until at least `count` commands named `name` are logged (for a command a background
  // thread sends, e.g. a worker's claim); false on timeout.
  bool wait_for_commands(std::string_view name, std::size_t count,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (commands(name).size() < count) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  const std::string& log_path() const { return log_path_; }
  // The server's stderr (a traceback when it could not answer something), for failure messages.
  std::string log() const { return proc_->stdout_text() + proc_->stderr_text(); }

 private:
  static bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
        return false;
    return true;
  }

  mockupdb_options options_;
  std::unique_ptr<testbed::process> proc_;
  std::string log_path_;
  std::uint16_t port_ = 0;
};

// Building scripts: `rule("findAndModify", reply, times, match)` and `script({rules…})`, one
// spelling for every wire test.
namespace mongo_script {
inline boost::json::object rule(std::string command, boost::json::object reply, int times = 1,
                                boost::json::object match = {}) {
  boost::json::object r{{"command", std::move(command)}, {"reply", std::move(reply)}, {"times", times}};
  if (!match.empty()) r["match"] = std::move(match);
  return r;
}
inline boost::json::object script(boost::json::array rules) { return boost::json::object{{"rules", std::move(rules)}}; }
}  // namespace mongo_script

}  // namespace testbed

