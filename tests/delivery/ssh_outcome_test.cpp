// The pure decisions of SSH delivery (src/delivery/ssh/outcome, script's parse_report): what an
// exec of the install or restore script came to, whether a failure puts the backup back, and
// what the scripts' stdout markers say. No sshd: every input is built here, so each rule of
// deliver.cpp is pinned down without a network.
#include <gtest/gtest.h>

#include <string>

#include "certfleet/net/error_class.hpp"
#include "delivery/ssh/outcome.hpp"
#include "delivery/ssh/script.hpp"

using namespace certfleet::delivery;
using namespace certfleet::delivery::detail;

namespace {

exec_context ctx(script_kind k, bool sudo = false) {
  return {k, "deploy", "host.example", 2222, sudo, std::chrono::milliseconds(1500)};
}

exec_output exited(int status, std::string out, std::string err = {}) {
  exec_output o;
  o.exit_status = status;
  o.out = std::move(out);
  o.err = std::move(err);
  return o;
}

step judge(const exec_context& c, const exec_output& o, step transport = std::nullopt) {
  return exec_outcome(c, std::move(transport), o, parse_report(o.out));
}

std::string started_line() { return std::string(marker_started) + "\n"; }

std::string step_line(remote_step s) { return std::string(marker_step) + std::to_string(static_cast<int>(s)) + "\n"; }

}  // namespace

TEST(ssh_outcome, parse_report_reads_each_marker_on_its_own_line) {
  auto r = parse_report(std::string(marker_started) + "\n" + marker_installed + "\n" + marker_post + "3\n");
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.installed);
  EXPECT_FALSE(r.restored);
  EXPECT_EQ(r.failed_step, 0);
  EXPECT_EQ(r.post_exit, 3);

  auto none = parse_report("");
  EXPECT_FALSE(none.started || none.installed || none.restored);
  EXPECT_EQ(none.failed_step, 0);
  EXPECT_EQ(none.post_exit, -2) << "-2: the post command did not run";

  // A marker is a whole line: one inside other text, or with trailing bytes, is not one.
  auto partial = parse_report(std::string("x") + marker_started + "\n" + marker_installed + " \n" + marker_restored);
  EXPECT_FALSE(partial.started);
  EXPECT_FALSE(partial.installed);
  EXPECT_TRUE(partial.restored) << "the last line needs no newline";

  auto failed = parse_report(std::string(marker_started) + "\n" + step_line(remote_step::owner_mode));
  EXPECT_EQ(failed.failed_step, static_cast<int>(remote_step::owner_mode));
}

TEST(ssh_outcome, parse_report_numbers_are_bounded_and_never_undefined) {
  // A number that does not fit an int (a login shell may print anything) reads as "none"
  // instead of whatever atoi's overflow would give.
  auto big = parse_report(std::string(marker_step) + "99999999999999999999\n" + marker_post + "-99999999999999999999\n");
  EXPECT_EQ(big.failed_step, 0);
  EXPECT_EQ(big.post_exit, 0);
  auto junk = parse_report(std::string(marker_step) + "abc\n" + marker_post + "\n");
  EXPECT_EQ(junk.failed_step, 0);
  EXPECT_EQ(junk.post_exit, 0);
  // Leading blanks and digits followed by text read as atoi read them.
  auto loose = parse_report(std::string(marker_step) + " 4x\n" + marker_post + "+7\n");
  EXPECT_EQ(loose.failed_step, 4);
  EXPECT_EQ(loose.post_exit, 7);
}

TEST(ssh_outcome, exit_zero_succeeds_and_a_transport_failure_stands) {
  for (auto k : {script_kind::install, script_kind::restore}) {
    const std::string started = started_line();
    EXPECT_FALSE(judge(ctx(k), exited(0, started)));
    failure lost{error_class::io_transient, "the channel closed"};
    auto f = judge(ctx(k), exited(0, ""), lost);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->cls, error_class::io_transient);
    EXPECT_EQ(f->message, "the channel closed") << "not timed out: the message is the transport's own";
  }
}

TEST(ssh_outcome, a_timeout_says_whether_the_script_had_started) {
  failure deadline{error_class::network, "the remote command took longer than 1500 ms"};
  exec_output o = exited(-1, "");
  o.timed_out = true;
  auto never = judge(ctx(script_kind::install), o, deadline);
  ASSERT_TRUE(never);
  EXPECT_EQ(never->cls, error_class::network);
  EXPECT_EQ(never->message,
            "the remote command had not started after 1500 ms: the login shell of deploy on host.example:2222 took that "
            "long before running it (it runs the user's startup files, such as ~/.bashrc, first; time `ssh "
            "deploy@host.example true` to see it)");
  o.out = std::string(marker_started) + "\n";
  auto running = judge(ctx(script_kind::restore), o, deadline);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->message, "the remote command took longer than 1500 ms (the script had started and was still running)");
}

TEST(ssh_outcome, a_failed_step_names_the_step_and_its_class) {
  const std::pair<remote_step, error_class> steps[] = {
      {remote_step::backup, error_class::io_permanent},     {remote_step::install, error_class::io_permanent},
      {remote_step::owner_mode, error_class::io_permanent}, {remote_step::post_command, error_class::io_transient},
      {remote_step::restore, error_class::io_transient},    {remote_step::missing_backup, error_class::io_permanent}};
  for (auto [st, cls] : steps) {
    for (auto k : {script_kind::install, script_kind::restore}) {
      auto f = judge(ctx(k), exited(1, std::string(marker_started) + "\n" + step_line(st), "certfleet: it broke\n\n"));
      ASSERT_TRUE(f);
      EXPECT_EQ(f->cls, cls) << static_cast<int>(st);
      EXPECT_EQ(f->message, describe(cause{cause_kind::remote_step, static_cast<int>(st)}) + ": certfleet: it broke");
    }
  }
  auto quiet = judge(ctx(script_kind::install), exited(1, step_line(remote_step::backup)));
  ASSERT_TRUE(quiet);
  EXPECT_EQ(quiet->message, "backup of the current files failed") << "no stderr: no colon";
}

TEST(ssh_outcome, a_failed_post_command_is_transient_and_worded_by_script) {
  std::string out = std::string(marker_started) + "\n" + marker_installed + "\n" + marker_post + "7\n";
  auto install = judge(ctx(script_kind::install), exited(1, out, "nginx: bad config\n"));
  ASSERT_TRUE(install);
  EXPECT_EQ(install->cls, error_class::io_transient);
  EXPECT_EQ(install->message, "post-deploy command exited 7: nginx: bad config");
  auto restore = judge(ctx(script_kind::restore), exited(1, out, "nginx: bad config\n"));
  ASSERT_TRUE(restore);
  EXPECT_EQ(restore->cls, error_class::io_transient);
  EXPECT_EQ(restore->message, "post-deploy command exited 7 after restore");
}

TEST(ssh_outcome, sudo_refusing_the_install_is_permanent) {
  const std::string err = "sudo: a password is required\n";
  auto f = judge(ctx(script_kind::install, true), exited(1, "", err));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->cls, error_class::io_permanent);
  EXPECT_EQ(f->message, "sudo -n refused to run the install script (the login user needs a NOPASSWD sudo rule for sh): "
                        "sudo: a password is required");
  // Without sudo, once installed, or for the restore script, it is the script's exit status.
  for (auto [c, out] : {std::pair{ctx(script_kind::install, false), std::string()},
                        std::pair{ctx(script_kind::install, true), std::string(marker_installed) + "\n"},
                        std::pair{ctx(script_kind::restore, true), std::string()}}) {
    auto g = judge(c, exited(1, out, err));
    ASSERT_TRUE(g);
    EXPECT_EQ(g->cls, error_class::io_transient);
    EXPECT_EQ(g->message, std::string(c.script == script_kind::install ? "install" : "restore") +
                              " script exited 1: sudo: a password is required");
  }
}

TEST(ssh_outcome, stderr_in_messages_is_trimmed_and_bounded) {
  EXPECT_EQ(trim_output("line\r\n \n"), "line");
  std::string long_err(5000, 'e');
  long_err += "THE END\n";
  auto t = trim_output(long_err);
  EXPECT_EQ(t.size(), 2000u);
  EXPECT_TRUE(t.ends_with("THE END")) << "the end is kept: that is where a script says what went wrong";
  auto f = judge(ctx(script_kind::install), exited(255, "", long_err));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->message, "install script exited 255: " + t);
  auto killed = judge(ctx(script_kind::restore), exited(-1, "", ""));
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->cls, error_class::io_transient);
  EXPECT_EQ(killed->message, "restore script exited -1: ");
}

TEST(ssh_outcome, restore_only_when_this_run_may_have_changed_files) {
  script_report r;
  EXPECT_FALSE(restore_needed(failed_stage::install, r)) << "nothing reported: nothing changed (or nothing to reach)";
  r.started = true;
  for (auto st : {remote_step::backup, remote_step::owner_mode, remote_step::missing_backup}) {
    r.failed_step = static_cast<int>(st);
    EXPECT_FALSE(restore_needed(failed_stage::install, r)) << "before the mv step: the temps are gone";
  }
  r.failed_step = static_cast<int>(remote_step::install);
  EXPECT_TRUE(restore_needed(failed_stage::install, r)) << "a failed mv can leave the cert new and the key old";
  r.failed_step = 0;
  r.installed = true;
  r.post_exit = 1;
  EXPECT_TRUE(restore_needed(failed_stage::install, r)) << "everything in place when the post command failed";
  EXPECT_TRUE(restore_needed(failed_stage::validate, script_report{}));
  EXPECT_TRUE(restore_needed(failed_stage::validate, r));
}

// fuzz_ssh_outcome found it: the script prints the post command's status even when it is 0, and
// a number that does not parse reads as 0. A script that then exited non-zero had failed with a
// class of none (a failure that classified as success); the exit status decides instead.
TEST(ssh_outcome, a_post_exit_of_zero_is_no_post_command_failure) {
  for (const char* post : {"0", " ;"}) {
    for (auto k : {script_kind::install, script_kind::restore}) {
      auto f = judge(ctx(k), exited(1, started_line() + std::string(marker_post) + post + "\n", "boom"));
      ASSERT_TRUE(f) << post;
      EXPECT_NE(f->cls, certfleet::net::error_class::none) << post;
      EXPECT_EQ(f->message.find("post-deploy"), std::string::npos) << f->message;
      EXPECT_NE(f->message.find(k == script_kind::install ? "install script exited 1" : "restore script exited 1"),
                std::string::npos)
          << f->message;
    }
  }
}
