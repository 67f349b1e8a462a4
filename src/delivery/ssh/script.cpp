#include "delivery/ssh/script.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "certfleet/delivery/module.hpp"  // remote_step, classify
#include "delivery/codec.hpp"

namespace certfleet::delivery::detail {
namespace {

std::string dir_of(const std::string& p) {
  auto i = p.rfind('/');
  return i == 0 ? "/" : p.substr(0, i);
}
std::string base_of(const std::string& p) { return p.substr(p.rfind('/') + 1); }
std::string join(const std::string& dir, const std::string& name) { return dir == "/" ? "/" + name : dir + "/" + name; }
std::string octal(unsigned m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", m);
  return b;
}

// Shared prelude: fail STEP MESSAGE prints the step marker, removes the temps, exits non-zero.
std::string prelude(const std::string& cleanup) {
  std::string s = "echo " + std::string(marker_started) + "\numask 077\n";
  s += "fail() { echo \"" + std::string(marker_step) + "$1\"; shift; echo \"certfleet: $*\" >&2; " + cleanup + " exit 1; }\n";
  return s;
}

std::string post_part(const std::string& post_command) {
  if (post_command.empty()) return "";
  // The post command's stdout joins stderr so our stdout carries only the markers.
  return "sh -c " + shell_quote(post_command) + " 1>&2 </dev/null\nrc=$?\necho \"" + marker_post +
         "$rc\"\nif [ $rc -ne 0 ]; then echo \"certfleet: post-deploy command exited $rc\" >&2; exit 1; fi\n";
}

}  // namespace

std::string temp_path_for(const std::string& path, const std::string& run_id) {
  return join(dir_of(path), "." + base_of(path) + ".certfleet-" + run_id + ".tmp");
}

std::string backup_path_for(const std::string& path, const std::string& run_id) {
  return join(dir_of(path), ".certfleet-backup/" + run_id + "/" + base_of(path));
}

std::string staging_dir_for(const std::string& home, const std::string& run_id) {
  return join(home.empty() ? "/" : home, ".certfleet-staging/" + run_id);
}

std::string install_script(const std::vector<remote_file>& files, const std::string& run_id, const std::string& owner,
                           const std::string& post_command) {
  std::string rm_temps = "rm -f";
  for (const auto& f : files) {
    rm_temps += " " + shell_quote(f.temp);
    if (!f.staged.empty()) rm_temps += " " + shell_quote(f.staged);
  }
  rm_temps += ";";
  std::ostringstream s;
  s << prelude(rm_temps);
  auto step = [](remote_step st) { return std::to_string(static_cast<int>(st)); };
  // 1. Back up what is there now, once per run: a retried run keeps the pre-run state. Every
  // process costs the target ~1 ms of CPU, so: one mkdir for all backup directories, and the
  // backup is a hard link (step 3's mv gives the path a new inode, the link keeps the old bytes);
  // cp -p where linking is refused (fs.protected_hardlinks, a filesystem without links).
  std::vector<std::string> backup_dirs;
  for (const auto& f : files) {
    auto bd = shell_quote(dir_of(backup_path_for(f.path, run_id)));
    if (std::find(backup_dirs.begin(), backup_dirs.end(), bd) == backup_dirs.end()) backup_dirs.push_back(bd);
  }
  s << "mkdir -p";
  for (const auto& bd : backup_dirs) s << " " << bd;
  s << " || fail " << step(remote_step::backup) << " cannot create the backup directory\n";
  for (const auto& f : files) {
    std::string b = shell_quote(backup_path_for(f.path, run_id));
    std::string p = shell_quote(f.path);
    s << "if [ ! -e " << b << " ] && [ ! -e " << b << ".absent ]; then\n"
      << "  if [ -e " << p << " ]; then { ln -f " << p << " " << b << ".part 2>/dev/null || cp -p " << p << " " << b
      << ".part; } && mv -f " << b << ".part " << b << " || fail " << step(remote_step::backup) << " cannot back up " << p
      << "\n"
      << "  else : > " << b << ".absent || fail " << step(remote_step::backup) << " cannot write " << b << ".absent; fi\n"
      << "fi\n";
  }
  // 1b. Staged uploads (sudo targets) are copied next to their destination first.
  for (const auto& f : files)
    if (!f.staged.empty())
      s << "cp " << shell_quote(f.staged) << " " << shell_quote(f.temp) << " && rm -f " << shell_quote(f.staged)
        << " || fail " << step(remote_step::install) << " cannot copy the staged file to " << shell_quote(f.temp) << "\n";
  // 2. Owner and mode on the temps, so a file never appears at its final path with the wrong ones.
  // An upload straight to the temp got its mode over SFTP; a staged copy was made under umask 077.
  for (const auto& f : files) {
    std::string t = shell_quote(f.temp);
    if (!f.staged.empty())
      s << "chmod " << octal(f.mode) << " " << t << " || fail " << step(remote_step::owner_mode) << " chmod failed on " << t
        << "\n";
    if (!owner.empty())
      s << "chown " << shell_quote(owner) << " " << t << " || fail " << step(remote_step::owner_mode) << " chown "
        << shell_quote(owner) << " failed\n";
  }
  // 3. Into place; SFTP v3 rename cannot replace a file, mv -f (rename(2)) can, atomically.
  for (const auto& f : files)
    s << "mv -f " << shell_quote(f.temp) << " " << shell_quote(f.path) << " || fail " << step(remote_step::install)
      << " cannot move the new file to " << shell_quote(f.path) << "\n";
  s << "echo " << marker_installed << "\n";
  s << post_part(post_command);
  return s.str();
}

std::string restore_script(const std::vector<std::string>& paths, const std::string& run_id,
                           const std::string& post_command) {
  std::ostringstream s;
  s << prelude("");
  s << "found=0\n";
  std::string st = std::to_string(static_cast<int>(remote_step::restore));
  for (const auto& path : paths) {
    std::string b = shell_quote(backup_path_for(path, run_id));
    std::string p = shell_quote(path);
    std::string tmp = shell_quote(temp_path_for(path, run_id + "-restore"));
    s << "if [ -e " << b << " ]; then found=1; cp -p " << b << " " << tmp << " && mv -f " << tmp << " " << p
      << " || fail " << st << " cannot restore " << p << "\n"
      << "elif [ -e " << b << ".absent ]; then found=1; rm -f " << p << " || fail " << st << " cannot remove " << p << "\n"
      << "fi\n";
  }
  s << "[ $found = 1 ] || fail " << static_cast<int>(remote_step::missing_backup) << " no backup of run "
    << shell_quote(run_id) << "\n";
  s << "echo " << marker_restored << "\n";
  s << post_part(post_command);
  return s.str();
}

std::string wrap_command(const std::string& script, bool sudo) {
  return std::string(sudo ? "sudo -n " : "") + "sh -c " + shell_quote(script);
}

namespace {
// The number after a marker, read as atoi reads it (leading blanks, a sign, digits up to the
// first other character) but defined for every input: no digits, or a number that does not fit
// an int, is 0 (what the remote printed is not trusted to be small).
int marker_number(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) ++i;
  if (i < s.size() && s[i] == '+') ++i;
  int v = 0;
  auto [p, ec] = std::from_chars(s.data() + i, s.data() + s.size(), v);
  return ec == std::errc() ? v : 0;
}
}  // namespace

script_report parse_report(std::string_view out) {
  script_report r;
  const std::string_view step = marker_step, post = marker_post;
  while (!out.empty()) {
    auto nl = out.find('\n');
    std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view{} : out.substr(nl + 1);
    if (line == marker_started) r.started = true;
    else if (line == marker_installed) r.installed = true;
    else if (line == marker_restored) r.restored = true;
    else if (line.starts_with(step)) r.failed_step = marker_number(line.substr(step.size()));
    else if (line.starts_with(post)) r.post_exit = marker_number(line.substr(post.size()));
  }
  return r;
}

}  // namespace certfleet::delivery::detail
