#include "delivery/ssh/outcome.hpp"

#include "certfleet/net/error_class.hpp"

namespace certfleet::delivery::detail {

std::string ms_text(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

std::string trim_output(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  if (s.size() > 2000) s = s.substr(s.size() - 2000);
  return s;
}

namespace {

// A script that timed out before printing its first marker never began: the time went into the
// login shell, which runs the user's startup files (~/.bashrc, ~/.profile …) before any command.
// Saying so points the operator at the target's shell instead of at the network or at certfleet.
void explain_timeout(failure& f, const script_report& rep, const exec_context& ctx) {
  if (rep.started) {
    f.message += " (the script had started and was still running)";
    return;
  }
  f.message = "the remote command had not started after " + ms_text(ctx.exec_timeout) + ": the login shell of " +
              ctx.user + " on " + ctx.host + ":" + std::to_string(ctx.port) +
              " took that long before running it (it runs the user's startup files, such as ~/.bashrc, first; time "
              "`ssh " + ctx.user + "@" + ctx.host + " true` to see it)";
}

std::string colon_stderr(const exec_output& out) { return out.err.empty() ? "" : ": " + trim_output(out.err); }

}  // namespace

step exec_outcome(const exec_context& ctx, step transport, const exec_output& out, const script_report& rep) {
  const bool install = ctx.script == script_kind::install;
  if (transport) {
    if (out.timed_out) explain_timeout(*transport, rep, ctx);
    return transport;
  }
  if (out.exit_status == 0) return std::nullopt;
  if (rep.failed_step != 0) {
    cause c{cause_kind::remote_step, rep.failed_step};
    return failure{classify(c), describe(c) + colon_stderr(out)};
  }
  // The script reports the post command's status only when it failed; a 0 (or a marker whose
  // number did not parse, read as 0) is no post-command failure, so the exit status decides.
  if (rep.post_exit != -2 && rep.post_exit != 0) {
    cause c{cause_kind::exit_status, rep.post_exit};
    return failure{classify(c), "post-deploy command exited " + std::to_string(rep.post_exit) +
                                    (install ? colon_stderr(out) : std::string(" after restore"))};
  }
  if (install && ctx.sudo && !rep.installed && out.err.find("sudo:") != std::string::npos) {
    // sudo itself refused (no NOPASSWD rule, user not in sudoers): nothing ran, and a retry will
    // not change that.
    return failure{error_class::io_permanent, "sudo -n refused to run the install script (the login user needs a "
                                              "NOPASSWD sudo rule for sh): " + trim_output(out.err)};
  }
  cause c{cause_kind::exit_status, out.exit_status};
  std::string message = install ? "install script exited " : "restore script exited ";
  message += std::to_string(out.exit_status) + ": " + trim_output(out.err);
  return failure{classify(c), std::move(message)};
}

bool restore_needed(failed_stage stage, const script_report& rep) noexcept {
  switch (stage) {
    case failed_stage::install:
      return rep.installed || rep.failed_step == static_cast<int>(remote_step::install);
    case failed_stage::validate:
      return true;
  }
  return false;
}

}  // namespace certfleet::delivery::detail
