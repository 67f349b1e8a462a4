// The CLI for people (issue 19), the real binary on a temp data directory: lists as aligned
// tables and --json, --watch following a job that a real worker process runs to its end, the
// exit-code table (code and docs/cli.md), and the generated bash completion script.
#include "certfleet/app/exit_codes.hpp"
#include "certs.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

using namespace std::chrono_literals;

namespace {

struct run_result {
  int status = -1;
  std::string out, err;
};

run_result run(const std::string& data, std::vector<std::string> args, std::chrono::seconds timeout = 60s,
               std::map<std::string, std::string> env = {}) {
  static int n = 0;
  testbed::temp_dir logs("certfleet-cli-run");
  std::vector<std::string> argv{CERTFLEET_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!data.empty()) {
    argv.push_back("--data");
    argv.push_back(data);
  }
  testbed::process p(argv, std::move(env), logs.file("cmd" + std::to_string(++n)));
  run_result r;
  r.status = p.wait(timeout);
  if (r.status == -1) p.signal(SIGKILL);
  r.out = p.stdout_text();
  r.err = p.stderr_text();
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Commands other than serve refuse a store that does not exist (issue 35): a test makes its store
// as an operator would, with `store init`.
void ensure_store(const std::string& data) {
  if (std::filesystem::exists(data + "/certfleet.db")) return;
  auto r = run(data, {"store", "init"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

std::string enqueue(const std::string& data, const std::string& payload) {
  ensure_store(data);
  auto r = run(data, {"jobs", "enqueue", "--type", "noop", "--payload", payload});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  return std::string(boost::json::parse(r.out).at("id").as_string());
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(cli, lists_are_aligned_tables_and_json_on_request) {
  testbed::temp_dir dir("certfleet-cli");
  const auto data = dir.file("var");
  const auto a = enqueue(data, "{}");
  const auto b = enqueue(data, R"({"ms":1})");
  auto t = run(data, {"jobs", "list"});
  ASSERT_EQ(t.status, 0) << t.err;
  auto lines = lines_of(t.out);
  ASSERT_EQ(lines.size(), 3u) << t.out;  // header + 2 jobs, one page: no footer
  EXPECT_TRUE(std::regex_search(lines[0], std::regex("^ID +TYPE +STATUS +ATTEMPTS +CREATED +DURATION +ERROR$"))) << lines[0];
  // Columns line up: each row's status starts under STATUS, its time under CREATED.
  const auto status_col = lines[0].find("STATUS"), created_col = lines[0].find("CREATED");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].find("pending"), status_col) << lines[i];
    EXPECT_TRUE(std::regex_match(lines[i].substr(created_col, 19), std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"))) << lines[i];
    EXPECT_NE(lines[i].find("0/3"), std::string::npos) << lines[i];
  }
  // Both jobs, each id whole (ids made by two processes in one second have no set order).
  std::set<std::string> ids{lines[1].substr(0, 24), lines[2].substr(0, 24)};
  EXPECT_EQ(ids, (std::set<std::string>{a, b})) << t.out;

  auto j = run(data, {"jobs", "list", "--json"});
  ASSERT_EQ(j.status, 0) << j.err;
  auto v = boost::json::parse(j.out);
  EXPECT_EQ(v.at("total"), 2);
  EXPECT_EQ(v.at("items").as_array().size(), 2u);

  // -o json is --json; -o wide adds where and why each job ran; -o table is the default.
  EXPECT_EQ(boost::json::parse(run(data, {"jobs", "list", "-o", "json"}).out).at("total"), 2);
  EXPECT_EQ(run(data, {"jobs", "list", "-o", "table"}).out.substr(0, lines[0].size()), lines[0]);
  auto wide = lines_of(run(data, {"jobs", "list", "--output", "wide"}).out);
  ASSERT_EQ(wide.size(), 3u);
  EXPECT_TRUE(std::regex_search(wide[0], std::regex("^ID +TYPE +STATUS +ATTEMPTS +CREATED +DURATION +LANE +PROGRESS +WORKER "
                                                    "+TRIGGERED BY +ERROR$"))) << wide[0];
  EXPECT_NE(wide[1].find("main"), std::string::npos) << wide[1];
  EXPECT_NE(wide[1].find("cli"), std::string::npos) << wide[1];
  auto yaml = run(data, {"jobs", "list", "-o", "yaml"});
  EXPECT_EQ(yaml.status, 2);
  EXPECT_NE(yaml.err.find("--output"), std::string::npos) << yaml.err;
  EXPECT_TRUE(std::regex_search(run(data, {"token", "list", "-o", "wide"}).out, std::regex("LAST USED +CREATED BY\n")));

  // A page smaller than the total says where the rest is.
  auto paged = run(data, {"jobs", "list", "--page-size", "1"});
  EXPECT_NE(paged.out.find("page 1 of 2, 2 jobs (next: --page 2)"), std::string::npos) << paged.out;

  auto show = run(data, {"jobs", "show", a});
  ASSERT_EQ(show.status, 0) << show.err;
  EXPECT_TRUE(std::regex_search(show.out, std::regex("\nstatus +pending\n"))) << show.out;
  EXPECT_EQ(boost::json::parse(run(data, {"jobs", "show", a, "--json"}).out).at("id").as_string(), a);

  auto projects = run(data, {"project", "list"});
  EXPECT_TRUE(std::regex_search(projects.out, std::regex("^NAME +ID +CREATED\ndefault +[0-9a-f]{24} "))) << projects.out;
  EXPECT_TRUE(boost::json::parse(run(data, {"project", "list", "--json"}).out).at("items").is_array());
  auto tokens = run(data, {"token", "list"});
  EXPECT_EQ(tokens.status, 0) << tokens.err;
  EXPECT_EQ(tokens.out.rfind("ID", 0), 0u) << tokens.out;
  auto dists = run(data, {"distributions", "list"});
  EXPECT_EQ(dists.status, 0) << dists.err;
  EXPECT_TRUE(std::regex_search(dists.out, std::regex("^ID +NAME +STATUS +RUN +TARGETS +CREATED +ERROR\n$"))) << dists.out;
  EXPECT_EQ(boost::json::parse(run(data, {"distributions", "list", "--json"}).out).at("total"), 0);
  auto sessions = run(data, {"distributions", "sessions"});
  EXPECT_EQ(sessions.out, "DESTINATION  SESSIONS\n");
}

TEST(cli, exit_codes_say_what_went_wrong) {
  using certfleet::app::exit_code;
  using certfleet::app::to_int;
  testbed::temp_dir dir("certfleet-cli-exit");
  const auto data = dir.file("var");
  const auto id = enqueue(data, "{}");
  const std::string nobody = "0123456789abcdef01234567";

  auto missing = run(data, {"jobs", "show", nobody});
  EXPECT_EQ(missing.status, to_int(exit_code::not_found)) << missing.err;
  auto bad_status = run(data, {"jobs", "list", "--status", "sleeping"});
  EXPECT_EQ(bad_status.status, to_int(exit_code::usage));
  EXPECT_NE(bad_status.err.find("status"), std::string::npos) << bad_status.err;
  auto bad_payload = run(data, {"jobs", "enqueue", "--type", "noop", "--payload", R"({"ms":"soon"})"});
  EXPECT_EQ(bad_payload.status, to_int(exit_code::usage));
  EXPECT_NE(bad_payload.err.find("payload.ms"), std::string::npos) << bad_payload.err;
  EXPECT_EQ(run(data, {"jobs", "frobnicate"}).status, to_int(exit_code::usage));
  EXPECT_EQ(run("", {"no-such-command"}).status, to_int(exit_code::usage));
  EXPECT_EQ(run(data, {"jobs", "retry", id}).status, to_int(exit_code::conflict));  // pending: nothing to retry
  EXPECT_EQ(run(data, {"distributions", "execute", nobody}).status, to_int(exit_code::not_found));
  EXPECT_EQ(run(data, {"jobs", "show", id, "--watch", "--timeout", "-1"}).status, to_int(exit_code::usage));
  // No worker runs here: watching a pending job gives up at --timeout, and says so.
  auto waited = run(data, {"jobs", "show", id, "--watch", "--timeout", "1"});
  EXPECT_EQ(waited.status, to_int(exit_code::timeout)) << waited.err;
  EXPECT_NE(waited.err.find("still pending"), std::string::npos) << waited.err;
  EXPECT_EQ(run(data, {"jobs", "logs", id, "--watch", "--timeout", "1"}).status, to_int(exit_code::timeout));

  // docs/cli.md carries the table the code uses.
  EXPECT_NE(read_text(std::string(CERTFLEET_SOURCE_DIR) + "/docs/cli.md").find(certfleet::app::exit_codes_markdown()),
            std::string::npos)
      << "docs/cli.md's exit-code table must read exactly:\n"
      << certfleet::app::exit_codes_markdown();
}

// The exit of a command that failed with each code, pinned as exit_code_for's switch had it
// before the errc table (issue 29): scripts test these numbers.
TEST(cli, every_error_code_exits_as_before) {
  using certfleet::errc;
  const std::pair<errc, int> pinned[] = {
      {errc::ok, 1},           {errc::invalid_argument, 2},     {errc::not_found, 3},
      {errc::conflict, 4},     {errc::unknown_job_type, 2},     {errc::payload_too_large, 2},
      {errc::lease_lost, 1},   {errc::cancelled, 1},            {errc::rate_limited, 5},
      {errc::store_busy, 5},   {errc::store_failure, 1},        {errc::store_disk_full, 5},
      {errc::unauthorized, 1}, {errc::forbidden, 1},            {errc::shutting_down, 1},
      {errc::too_many_connections, 1}, {errc::timeout, 7},      {errc::config_invalid, 2},
      {errc::ssh_unreachable, 1},
  };
  ASSERT_EQ(std::size(pinned), static_cast<std::size_t>(errc::count_)) << "a code without its pinned exit here";
  for (int i = 0; i < static_cast<int>(errc::count_); ++i) {
    ASSERT_EQ(pinned[i].first, static_cast<errc>(i)) << i;
    EXPECT_EQ(certfleet::app::to_int(certfleet::app::exit_code_for(certfleet::make_error(pinned[i].first, "x"))),
              pinned[i].second)
        << certfleet::errc_name(pinned[i].first);
  }
  // Another category's error (value() reads it as store_failure), and a value of ours that is no code.
  EXPECT_EQ(certfleet::app::to_int(certfleet::app::exit_code_for(
                certfleet::error{std::make_error_code(std::errc::io_error), "disk", "", 0})),
            1);
  EXPECT_EQ(certfleet::app::to_int(certfleet::app::exit_code_for(
                certfleet::error{{static_cast<int>(errc::count_), certfleet::certfleet_category()}, "?", "", 0})),
            1);
}

TEST(cli, watch_follows_a_job_a_worker_runs_to_its_end) {
  testbed::temp_dir dir("certfleet-cli-watch");
  const auto data = dir.file("var");
  // Enqueued before the worker starts, so --watch sees them pending, then running, then ended.
  const auto ok = enqueue(data, R"({"ms":1500,"log":true,"lines":3})");
  const auto dead = enqueue(data, R"({"ms":300,"fail_times":5,"permanent":true})");
  testbed::process worker({CERTFLEET_BINARY, "serve", "--mode", "worker", "--listen", "127.0.0.1:0", "--data", data}, {},
                          dir.file("worker"));
  ASSERT_FALSE(worker.wait_for_stdout("serving:", 20s).empty()) << worker.stderr_text();

  auto logs = run(data, {"jobs", "logs", ok, "--watch", "--timeout", "60"});
  EXPECT_EQ(logs.status, 0) << logs.err;
  const auto log_lines = lines_of(logs.out);
  ASSERT_EQ(log_lines.size(), 5u) << logs.out;  // attempt, 3 lines, done: each once, in order
  EXPECT_NE(log_lines.front().find("INFO  noop attempt 1"), std::string::npos) << logs.out;
  EXPECT_NE(log_lines.back().find("noop done"), std::string::npos) << logs.out;
  EXPECT_NE(logs.err.find("completed"), std::string::npos) << logs.err;

  auto show = run(data, {"jobs", "show", dead, "--watch", "--timeout", "60"});
  EXPECT_EQ(show.status, certfleet::app::to_int(certfleet::app::exit_code::failed)) << show.err;
  EXPECT_NE(show.err.find("dead"), std::string::npos) << show.err;
  EXPECT_NE(show.err.find("failing on purpose"), std::string::npos) << show.err;

  // The table shows the ended jobs: durations, the error truncated to one cell.
  auto list = run(data, {"jobs", "list"});
  EXPECT_TRUE(std::regex_search(list.out, std::regex(ok + R"( +noop +completed +1/3 +\S+ \S+ +\d+\.\ds)"))) << list.out;
  EXPECT_TRUE(std::regex_search(list.out, std::regex(dead + R"( +noop +dead +1/3 .* noop: failing on purpose)"))) << list.out;
  worker.signal(SIGTERM);
  EXPECT_EQ(worker.wait(30s), 0);
}

// What a person at the prompt gets after typing these words, in the shells that filter by the
// typed prefix themselves (bash's compgen, fish's engine).
const std::pair<const char*, const char*> prefix_completions[] = {
    {"certfleet jobs l", "list\nlogs\n"},
    {"certfleet di", "distributions\n"},
    {"certfleet distributions execute X --w", "--wait\n"},
    {"certfleet jobs list --status d", "dead\n"},
    {"certfleet token create --role o", "operator\nowner\n"},
    {"certfleet serve --set log_f", "log_format=\n"},
    // After a flag that takes no value, the next word is a flag or command again.
    {"certfleet jobs show X --json --w", "--watch\n"},
};

// `certfleet completion SHELL` written to a file in `dir`, after the shell's own syntax check
// (`-n`) passed on it.
static std::string completion_file(const testbed::temp_dir& dir, const std::string& shell, const std::string& shell_binary) {
  auto r = run("", {"completion", shell});
  EXPECT_EQ(r.status, 0) << r.err;
  const auto script = dir.file("certfleet." + shell);
  std::ofstream(script) << r.out;
  auto syntax = testbed::run_command({shell_binary, "-n", script});
  EXPECT_EQ(syntax.first, 0) << syntax.second;
  return script;
}

TEST(cli, bash_completion_is_generated_from_the_commands) {
  testbed::temp_dir dir("certfleet-cli-completion");
  const auto script = completion_file(dir, "bash", "/bin/bash");
  // Ask it what a person at the prompt gets after typing these words.
  auto complete = [&](const std::string& words) {
    const auto cmd = "source " + script + "; COMP_WORDS=(" + words + "); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); " +
                     "_certfleet; printf '%s\\n' \"${COMPREPLY[@]}\"";
    return testbed::run_command({"/bin/bash", "-c", cmd}).second;
  };
  for (const auto& [line, expected] : prefix_completions) EXPECT_EQ(complete(line), expected) << line;
  EXPECT_EQ(complete("certfleet jobs list --page ''"), "\n");  // nothing: a number of the user's own
  const auto refused = run("", {"completion", "tcsh"});
  EXPECT_EQ(refused.status, certfleet::app::to_int(certfleet::app::exit_code::usage));
  EXPECT_NE(refused.err.find("bash, zsh or fish"), std::string::npos) << refused.err;
}

// zsh runs the bash function through its own bashcompinit (as vault and terraform install
// theirs). Asked the way zsh's _bash_complete asks it (COMP_WORDS, COMP_CWORD, then compgen -F):
// zsh's compgen does not filter by the typed prefix (zsh's matcher does that afterwards), so the
// candidates are the whole set for that place. Not pressed with TAB in a terminal here.
TEST(cli, zsh_completion_runs_the_generated_function_through_bashcompinit) {
  testbed::temp_dir dir("certfleet-cli-zsh");
  const auto script = completion_file(dir, "zsh", "/usr/bin/zsh");
  auto complete = [&](const std::string& words) {
    const auto cmd = "source " + script + "; print -r -- \"comps: $_comps[certfleet]\"; " +
                     "local -a words COMP_WORDS; local CURRENT COMP_CWORD; words=(" + words + "); " +
                     "CURRENT=$#words; COMP_WORDS=( \"${words[@]}\" ); COMP_CWORD=$(( CURRENT - 1 )); " +
                     "compgen -F _certfleet -- \"${words[CURRENT]}\"";
    // HOME: compinit writes its dump file there.
    return testbed::run_command({"/usr/bin/env", "HOME=" + dir.path().string(), "/usr/bin/zsh", "-f", "-c", cmd}).second;
  };
  auto out = complete("certfleet jobs l");
  EXPECT_EQ(out, "comps: _bash_complete -F _certfleet\nlist\nshow\nenqueue\nretry\ncancel\nlogs\n--help\n");
  EXPECT_EQ(complete("certfleet jobs list --status d"),
            "comps: _bash_complete -F _certfleet\nall\npending\nactive\ncompleted\nfailed\ndead\ncancelled\n");
  out = complete("certfleet distributions execute X --w");
  EXPECT_NE(out.find("\n--wait\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("\nlist\n"), std::string::npos) << out;  // no commands after an id
}

// fish: native `complete` lines, asked through fish's own engine (`complete -C`), which filters
// by the typed prefix and shows each command's description.
TEST(cli, fish_completion_is_generated_from_the_commands) {
  testbed::temp_dir dir("certfleet-cli-fish");
  const auto script = completion_file(dir, "fish", "/usr/bin/fish");
  auto complete = [&](const std::string& line) {
    auto out = testbed::run_command({"/usr/bin/env", "HOME=" + dir.path().string(), "/usr/bin/fish", "--no-config",
                                     "-c", "source " + script + "; complete -C'" + line + "'"})
                   .second;
    // Names only: the description follows a tab.
    std::string names;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);) names += l.substr(0, l.find('\t')) + "\n";
    return names;
  };
  for (const auto& [line, expected] : prefix_completions) EXPECT_EQ(complete(line), expected) << line;
  EXPECT_EQ(complete("certfleet jobs list --page "), "");  // a number of the user's own
  auto described = testbed::run_command({"/usr/bin/env", "HOME=" + dir.path().string(), "/usr/bin/fish",
                                         "--no-config", "-c", "source " + script + "; complete -C'certfleet jobs l'"})
                       .second;
  EXPECT_NE(described.find("list\tList jobs"), std::string::npos) << described;
}

// `distributions execute --wait` against a real server (API + worker) delivering to local file
// targets: one target whose directory is missing fails, so the run ends partial (exit 6) with
// the progress on stderr; a run of the good target alone succeeds (exit 0).
TEST(cli, execute_wait_follows_a_run_to_its_end) {
  testbed::temp_dir dir("certfleet-cli-exec");
  const auto data = dir.file("var");
  const auto base = dir.path() / "deploy";
  std::filesystem::create_directories(base / "ok");
  testbed::process server({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data}, {}, dir.file("serve"));
  auto line = server.wait_for_stdout("serving:", 20s);
  ASSERT_FALSE(line.empty()) << server.stderr_text();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"( listen=127\.0\.0\.1:(\d+))"))) << line;
  testbed::http_client c("127.0.0.1", static_cast<unsigned short>(std::stoi(m[1])));
  const auto token = [&] {
    auto t = read_text(data + "/owner-token");
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
  }();
  auto ok = [&](std::string_view method, const std::string& path, const boost::json::object& body) {
    auto r = c.request(method, "/api/v1" + path, boost::json::serialize(body), token);
    EXPECT_LT(r.status, 300) << path << ": " << r.body;
    return r.json();
  };
  ok("PUT", "/settings", {{"file_target_base_dirs", base.string()}});
  auto pem = testbed::make_certificate({});
  const auto cert = std::string(ok("POST", "/projects/default/certificates", {{"name", "c"}, {"cert_pem", pem.cert_pem}, {"key_pem", pem.key_pem}})
                                    .at("id").as_string());
  auto target = [&](const std::string& name, const std::filesystem::path& d) {
    return std::string(ok("POST", "/projects/default/targets",
                          {{"name", name}, {"module", "file"},
                           {"file", boost::json::object{{"cert_path", (d / "cert.pem").string()},
                                                        {"key_path", (d / "key.pem").string()}}}})
                           .at("id").as_string());
  };
  const auto good = target("good", base / "ok"), bad = target("bad", base / "missing");
  auto dist = [&](const std::string& name, boost::json::array targets) {
    boost::json::object body{{"name", name}, {"certificate_id", cert}};
    body["target_ids"] = std::move(targets);
    return std::string(ok("POST", "/projects/default/distributions", body).at("id").as_string());
  };
  const auto mixed = dist("mixed", {boost::json::value(good), boost::json::value(bad)});
  const auto clean = dist("clean", {boost::json::value(good)});

  auto partial = run(data, {"distributions", "execute", mixed, "--wait", "--timeout", "120"});
  EXPECT_EQ(partial.status, certfleet::app::to_int(certfleet::app::exit_code::partial)) << partial.out << partial.err;
  EXPECT_EQ(boost::json::parse(partial.out).at("run_no"), 1) << partial.out;
  EXPECT_NE(partial.err.find("2/2 targets  1 succeeded  1 failed  partial"), std::string::npos) << partial.err;
  EXPECT_TRUE(std::filesystem::exists(base / "ok" / "cert.pem"));

  auto success = run(data, {"distributions", "execute", clean, "--wait", "--timeout", "120"});
  EXPECT_EQ(success.status, 0) << success.out << success.err;
  EXPECT_NE(success.err.find("1/1 targets  1 succeeded  0 failed  success"), std::string::npos) << success.err;
  auto shown = run(data, {"distributions", "show", clean});
  EXPECT_TRUE(std::regex_search(shown.out, std::regex("\nstatus +success\n"))) << shown.out;
  EXPECT_TRUE(std::regex_search(run(data, {"distributions", "list"}).out, std::regex("\n" + clean + " +clean +success +1 +1 "))) << "list";

  // The per-target results, filtered: the bad target's failure and its class.
  auto failed = run(data, {"distributions", "results", mixed, "--status", "failed"});
  EXPECT_EQ(failed.status, 0) << failed.err;
  EXPECT_TRUE(std::regex_search(failed.out, std::regex("\n" + bad + " +failed +\\S+"))) << failed.out;
  EXPECT_EQ(failed.out.find(good), std::string::npos) << failed.out;
  EXPECT_NE(failed.out.find("run 1: 1 results matching the filter"), std::string::npos) << failed.out;

  // The same over the API (remote mode: plain HTTP to loopback is allowed): retry the failed
  // target and follow it, read the results, a cancel of an ended run is a conflict.
  const std::map<std::string, std::string> remote{{"CERTFLEET_ADDR", "http://127.0.0.1:" + m[1].str()},
                                                  {"CERTFLEET_TOKEN", token}};
  auto retried = run("", {"distributions", "retry-failed", mixed, "--wait", "--timeout", "120"}, 60s, remote);
  EXPECT_EQ(retried.status, certfleet::app::to_int(certfleet::app::exit_code::failed)) << retried.out << retried.err;
  EXPECT_EQ(boost::json::parse(retried.out).at("run_no"), 2) << retried.out;
  EXPECT_NE(retried.err.find("1/1 targets  0 succeeded  1 failed  failed"), std::string::npos) << retried.err;
  auto results = run("", {"distributions", "results", mixed, "-o", "json"}, 60s, remote);
  ASSERT_EQ(results.status, 0) << results.err;
  EXPECT_EQ(boost::json::parse(results.out).at("run"), 2) << results.out;
  auto cancel = run("", {"distributions", "cancel", clean}, 60s, remote);
  EXPECT_EQ(cancel.status, certfleet::app::to_int(certfleet::app::exit_code::conflict)) << cancel.out << cancel.err;
  auto remote_list = run("", {"distributions", "list"}, 60s, remote);
  EXPECT_TRUE(std::regex_search(remote_list.out, std::regex("\n" + mixed + " +mixed +failed +2 +2 "))) << remote_list.out;

  // Issue 31: re-drive the bad target in run 2 once its directory exists: the same run, reopened,
  // ends success. Neither --job nor --target is the API's 400 (exit 2), locally too.
  auto neither = run(data, {"distributions", "retry-targets", mixed});
  EXPECT_EQ(neither.status, certfleet::app::to_int(certfleet::app::exit_code::usage)) << neither.out << neither.err;
  std::filesystem::create_directories(base / "missing");
  auto redriven = run("", {"distributions", "retry-targets", mixed, "--target", bad, "--wait", "--timeout", "120"}, 60s, remote);
  EXPECT_EQ(redriven.status, 0) << redriven.out << redriven.err;
  EXPECT_EQ(boost::json::parse(redriven.out).at("run_no"), 2) << redriven.out;
  EXPECT_EQ(boost::json::parse(redriven.out).at("redrive"), 1) << redriven.out;
  EXPECT_NE(redriven.err.find("1/1 targets  1 succeeded  0 failed  success"), std::string::npos) << redriven.err;

  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(30s), 0);
}

namespace {

// The store setting: a bad value is a usage error naming `store`; a MongoDB URI is checked, and an
// unreachable cluster fails within the configured timeout without printing the URI's password;
// backup and restore say what to use for MongoDB; store check refuses the embedded store. Nothing
// is written to the data directory in any case.
TEST(cli, the_store_setting_is_checked_and_an_unreachable_mongodb_fails_clearly) {
  using certfleet::app::exit_code;
  using certfleet::app::to_int;
  testbed::temp_dir dir("certfleet-cli-store");
  const auto data = dir.file("var");
  auto bad_scheme = run(data, {"jobs", "list", "--store", "postgres://127.0.0.1/x"});
  EXPECT_EQ(bad_scheme.status, to_int(exit_code::usage));
  EXPECT_NE(bad_scheme.err.find("store must be sqlite or a mongodb://"), std::string::npos) << bad_scheme.err;
  auto weak = run(data, {"jobs", "list", "--store", "mongodb://127.0.0.1/?w=1"});
  EXPECT_EQ(weak.status, to_int(exit_code::usage));
  EXPECT_NE(weak.err.find("w=majority"), std::string::npos) << weak.err;
  for (std::vector<std::string> cmd : {std::vector<std::string>{"serve"}, {"jobs", "list"}, {"token", "list"}}) {
    cmd.insert(cmd.end(), {"--store", "mongodb://ops:hunter2secret@127.0.0.1:1/certfleet?replicaSet=rs0", "--set",
                           "store_timeout_ms=300"});
    const auto start = std::chrono::steady_clock::now();
    auto r = run(data, cmd, 30s);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << cmd[0];
    EXPECT_NE(r.status, 0) << cmd[0];
    EXPECT_NE(r.status, to_int(exit_code::usage)) << cmd[0] << ": the setting is valid, the cluster is not there";
    EXPECT_NE(r.err.find("no MongoDB primary answered within 300 ms"), std::string::npos) << cmd[0] << ": " << r.err;
    EXPECT_EQ((r.out + r.err).find("hunter2secret"), std::string::npos) << cmd[0];
  }
  auto backup = run(data, {"backup", "--store", "mongodb://127.0.0.1/certfleet", "--to", dir.file("b.db")});
  EXPECT_EQ(backup.status, to_int(exit_code::usage));
  EXPECT_NE(backup.err.find("mongodump"), std::string::npos) << backup.err;
  auto check = run(data, {"store", "check"});
  EXPECT_EQ(check.status, to_int(exit_code::usage));
  EXPECT_NE(check.err.find("certfleet doctor"), std::string::npos) << check.err;
  EXPECT_FALSE(std::filesystem::exists(data + "/certfleet.db"));
}

}  // namespace

// Issue 35: a command run where there is no store says so, names the data directory it looked
// in, exits 3 and creates nothing; CERTFLEET_CONFIG is the config file when no --config is given;
// `store init` makes the store (once: again, it says it was there).
TEST(cli, fails_closed_without_a_store_and_honours_certfleet_config) {
  testbed::temp_dir dir("certfleet-cli-closed");
  const auto data = dir.file("var");
  for (std::vector<std::string> args : {std::vector<std::string>{"jobs", "list"}, {"token", "create", "--role", "owner", "--name", "x"},
                                        {"project", "list"}, {"distributions", "list"}}) {
    auto r = run(data, args);
    EXPECT_EQ(r.status, 3) << args[0] << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("no store in " + data), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("store init"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(data)) << args[0] << " created the data directory";
  }
  auto init = run(data, {"store", "init"});
  ASSERT_EQ(init.status, 0) << init.err;
  EXPECT_EQ(boost::json::parse(init.out).at("created"), true) << init.out;
  EXPECT_TRUE(std::filesystem::exists(data + "/certfleet.key"));
  auto again = run(data, {"store", "init"});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(boost::json::parse(again.out).at("created"), false) << again.out;
  ASSERT_EQ(run(data, {"jobs", "list"}).status, 0);

  // The config file from the environment: its data directory is the one used.
  const auto config = dir.file("certfleet.toml");
  std::ofstream(config) << "data = \"" << data << "\"\n";
  testbed::temp_dir logs("certfleet-cli-env");
  testbed::process p({CERTFLEET_BINARY, "jobs", "list", "--json"}, {{"CERTFLEET_CONFIG", config}}, logs.file("env"));
  EXPECT_EQ(p.wait(60s), 0) << p.stderr_text();
  EXPECT_NE(p.stdout_text().find("\"total\":0"), std::string::npos) << p.stdout_text() << p.stderr_text();
  testbed::process missing({CERTFLEET_BINARY, "jobs", "list"}, {{"CERTFLEET_CONFIG", dir.file("nope.toml")}},
                           logs.file("missing"));
  EXPECT_EQ(missing.wait(60s), 2);
  EXPECT_NE(missing.stderr_text().find("nope.toml"), std::string::npos) << missing.stderr_text();
}

// Issue 35: a mistyped command or flag is named with the closest known one, exit 2.
TEST(cli, a_mistyped_command_or_flag_gets_a_did_you_mean) {
  testbed::temp_dir dir("certfleet-cli-typo");
  const auto data = dir.file("var");
  struct typo {
    std::vector<std::string> args;
    std::string says;
  };
  for (const auto& t : std::vector<typo>{
           {{"jbos"}, R"(unknown command "jbos" for certfleet; did you mean "jobs"?)"},
           {{"jobs", "lst"}, R"(unknown command "lst" for certfleet jobs; did you mean "list"?)"},
           {{"jobs", "list", "--jsn"}, R"(unknown flag "--jsn" for certfleet jobs list; did you mean "--json"?)"},
           {{"jobs", "list", "--stauts", "failed"}, R"(did you mean "--status"?)"},
           {{"kek", "rotat"}, R"(did you mean "rotate"?)"},
           {{"xyzzy"}, R"(unknown command "xyzzy" for certfleet (certfleet --help lists them))"}}) {
    auto r = run(data, t.args);
    EXPECT_EQ(r.status, 2) << t.args[0] << ": " << r.err;
    EXPECT_EQ(r.err.rfind("certfleet: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(t.says), std::string::npos) << r.err;
  }
}
