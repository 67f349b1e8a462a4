#pragma once
// The pure decisions of an SSH delivery, apart from the I/O that feeds them (deliver.cpp): what
// one exec of the install or restore script came to, and whether a failed delivery puts the
// backup back. No I/O, no clock: unit-tested and fuzzed on their own.
#include <chrono>
#include <cstdint>
#include <string>

#include "delivery/recorder.hpp"
#include "delivery/ssh/script.hpp"

namespace certfleet::delivery::detail {

struct exec_output {
  int exit_status = -1;  // -1: killed by a signal or unknown
  bool timed_out = false;  // the exec deadline passed before the command finished
  std::string out, err;
};

std::string ms_text(std::chrono::milliseconds ms);  // "1500 ms"

// Remote stderr as results carry it: trailing line ends and blanks dropped, at most its last
// 2000 characters (the end is where a script says what went wrong).
std::string trim_output(std::string s);

enum class script_kind { install, restore };

// The exec being judged: which script, and where it ran (the messages name the login).
struct exec_context {
  script_kind script = script_kind::install;
  std::string user, host;
  std::uint16_t port = 22;
  bool sudo = false;  // the script ran under sudo -n
  std::chrono::milliseconds exec_timeout{60000};
};

// What one exec came to. `transport` is the exec call's own failure (deadline, lost channel),
// nullopt when the command ran to its exit; `out` is what it printed and exited with, `rep`
// parse_report(out.out). nullopt: the script succeeded. The rules, in order: a transport failure
// stands (a timeout says whether the script had started: if not, the login shell's startup files
// took the time); exit 0 succeeds; a step marker names the step; a post-command exit marker names
// the command's exit; (install under sudo) sudo's own refusal is io_permanent; else the script's
// exit status.
step exec_outcome(const exec_context& ctx, step transport, const exec_output& out, const script_report& rep);

// Where a delivery failed after its files were uploaded.
enum class failed_stage {
  install,   // the install script failed or was cut off
  validate,  // installed, but the remote hash or the served certificate is not the delivered one
};
// Whether the backup goes back. Only when this run may have changed files: after an install
// failure, when the mv step started (a failed mv can leave the cert new and the key old) or
// everything was in place when the post command failed; earlier install failures changed nothing
// (the temps are gone) and a script that never reported cannot be restored through. After a
// validation failure, always: the new files are in place.
bool restore_needed(failed_stage stage, const script_report& install_report) noexcept;

}  // namespace certfleet::delivery::detail
