#pragma once
// The shell scripts of the one exec channel (install) and of restore. Only paths, modes, the
// owner and the operator's post command go into them: never file contents, never key material.
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::delivery::detail {

struct remote_file {
  std::string path;  // final place
  std::string temp;  // temp file in the same directory (so the final mv -f is one rename(2))
  unsigned mode = 0644;
  // With sudo the login user usually cannot write the destination directory: the file is then
  // uploaded here (the user's staging directory) and the sudo'd script copies it to `temp`.
  std::string staged;
};

std::string temp_path_for(const std::string& path, const std::string& run_id);
// <dir>/.certfleet-backup/<run>/<base>; "<…>.absent" marks a file that did not exist before.
std::string backup_path_for(const std::string& path, const std::string& run_id);
// <home>/.certfleet-staging/<run>: the login user's own directory for sudo targets.
std::string staging_dir_for(const std::string& home, const std::string& run_id);

// Markers the scripts print on stdout (the post command's stdout goes to stderr).
// `started` is the first thing a script prints: a command that timed out without it never began,
// its time went into the login shell (which runs the user's startup files before any command).
inline constexpr const char* marker_started = "certfleet-started";
inline constexpr const char* marker_installed = "certfleet-installed";
inline constexpr const char* marker_restored = "certfleet-restored";
inline constexpr const char* marker_step = "certfleet-step-failed ";   // + remote_step number
inline constexpr const char* marker_post = "certfleet-post-exit ";     // + exit status

std::string install_script(const std::vector<remote_file>& files, const std::string& run_id, const std::string& owner,
                           const std::string& post_command);
std::string restore_script(const std::vector<std::string>& paths, const std::string& run_id,
                           const std::string& post_command);
// `sh -c '<script>'`, under `sudo -n` when asked: the login shell of the user only starts it.
std::string wrap_command(const std::string& script, bool sudo);

struct script_report {
  bool started = false, installed = false, restored = false;
  int failed_step = 0;   // remote_step, 0: none
  int post_exit = -2;    // -2: the post command did not run
};
// What the script's stdout says, line by line; pure and total (any bytes give a report). A marker
// counts only as a whole line; the last of each kind wins.
script_report parse_report(std::string_view out);

}  // namespace certfleet::delivery::detail
