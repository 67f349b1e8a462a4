// Local file delivery (file.hpp). Everything here blocks (file system, the post command), so the
// public coroutines only hop onto the caller's pool and back; the steps themselves are plain
// functions returning a failure value.
#include "certfleet/delivery/file.hpp"
#include "certfleet/delivery/local_command.hpp"
#include "certfleet/delivery/pem.hpp"
#include "certfleet/delivery/redact.hpp"
#include "certfleet/delivery/ssh_target.hpp"  // valid_run_id, check_remote_path, parse_mode
#include "delivery/recorder.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "delivery/codec.hpp"
#include "delivery/json_fields.hpp"

namespace certfleet::delivery {

namespace asio = boost::asio;
using asio::awaitable;
using steady = std::chrono::steady_clock;

namespace {

constexpr std::size_t max_read = 4 * 1024 * 1024;  // larger files are "different", never loaded
constexpr std::size_t max_output = 4096;            // post command output kept for the job log
constexpr std::size_t max_output_in_error = 512;    // of that, what a result's error message carries
constexpr const char* command_path = local_command_path;

using detail::failure;
using detail::recorder;
using detail::step;

failure errno_failure(int e, const std::string& what) {
  cause c{cause_kind::posix_errno, e};
  return {classify(c), what + ": " + describe(c)};
}

std::string dir_of(const std::string& p) {
  auto i = p.rfind('/');
  return i == 0 ? "/" : p.substr(0, i);
}
std::string base_of(const std::string& p) { return p.substr(p.rfind('/') + 1); }
std::string join(const std::string& dir, const std::string& name) { return dir == "/" ? "/" + name : dir + "/" + name; }

// Same naming as the SSH module's temps: hidden, per run, next to the destination so the final
// rename stays within one file system.
std::string temp_path(const std::string& path, const std::string& tag) {
  return join(dir_of(path), "." + base_of(path) + ".certfleet-" + tag + ".tmp");
}

std::string tail(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  if (s.size() > 2000) s = s.substr(s.size() - 2000);
  return s;
}

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

struct read_result {
  bool missing = false;
  bool too_big = false;
  unsigned mode = 0;
  std::string data;
};

step read_file(const std::string& path, read_result& out) {
  // O_NOFOLLOW: a symbolic link planted at a destination or backup name must not make us read
  // (and copy into a backup) a file elsewhere.
  fd_guard f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (f.fd < 0) {
    if (errno == ENOENT) {
      out.missing = true;
      return std::nullopt;
    }
    return errno_failure(errno, "cannot read " + path);
  }
  struct stat st{};
  if (::fstat(f.fd, &st) != 0) return errno_failure(errno, "cannot stat " + path);
  if (!S_ISREG(st.st_mode)) return failure{error_class::io_permanent, path + " is not a regular file"};
  out.mode = st.st_mode & 07777;
  if (static_cast<std::size_t>(st.st_size) > max_read) {
    out.too_big = true;
    return std::nullopt;
  }
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_failure(errno, "cannot read " + path);
    if (n == 0) break;
    out.data.append(buf, static_cast<std::size_t>(n));
    if (out.data.size() > max_read) {
      out.too_big = true;
      out.data.clear();
      break;
    }
  }
  return std::nullopt;
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0;
}

void fsync_dir(const std::string& dir) {
  // Makes the renames durable; some file systems refuse fsync on directories, which is fine.
  fd_guard d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd >= 0) (void)::fsync(d.fd);
}

// Writes `data` to `temp` (created fresh) with exactly `mode`, and fsyncs it. With a uid/gid
// (the file being replaced), the temp takes them over, best effort: a root-run certfleet keeps a
// key's group (ssl-cert) as it was.
step write_temp(const std::string& temp, std::string_view data, unsigned mode, const struct stat* like) {
  // O_EXCL + O_NOFOLLOW: never write through something another user planted at the temp name.
  // The creation mode is never wider than the final one, so a key is not readable even briefly.
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  fd_guard f{::open(temp.c_str(), flags, mode & 0777)};
  if (f.fd < 0 && errno == EEXIST) {  // left by a crashed earlier attempt of this run
    ::unlink(temp.c_str());
    f.fd = ::open(temp.c_str(), flags, mode & 0777);
  }
  if (f.fd < 0) return errno_failure(errno, "cannot create " + temp);
  auto fail = [&](int e, const std::string& what) {
    ::close(f.fd);
    f.fd = -1;
    ::unlink(temp.c_str());
    return errno_failure(e, what);
  };
  if (like && (like->st_uid != ::geteuid() || like->st_gid != ::getegid())) (void)::fchown(f.fd, like->st_uid, like->st_gid);
  if (::fchmod(f.fd, mode) != 0) return fail(errno, "cannot set the mode of " + temp);
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(f.fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno, "cannot write " + temp);
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(f.fd) != 0) return fail(errno, "cannot sync " + temp);
  int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(temp.c_str());
    return errno_failure(e, "cannot write " + temp);
  }
  return std::nullopt;
}

// Copies `from` to `to` atomically (temp + rename), keeping the source's mode.
step copy_atomic(const std::string& from, const std::string& to, const std::string& tag) {
  read_result rr;
  if (auto f = read_file(from, rr)) return f;
  if (rr.missing) return failure{error_class::io_permanent, from + " disappeared"};
  if (rr.too_big) return failure{error_class::io_permanent, from + " is larger than 4 MiB"};
  std::string tmp = temp_path(to, tag);
  auto f = write_temp(tmp, rr.data, rr.mode, nullptr);
  OPENSSL_cleanse(rr.data.data(), rr.data.size());
  if (f) return f;
  if (::rename(tmp.c_str(), to.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return errno_failure(e, "cannot move a file to " + to);
  }
  fsync_dir(dir_of(to));
  return std::nullopt;
}

std::vector<std::string> target_paths(const file_target& t) {
  std::vector<std::string> v{t.cert_path, t.key_path};
  if (!t.chain_path.empty()) v.push_back(t.chain_path);
  return v;
}

// The post command: its words (split_post_command) run by run_local_command with a minimal
// environment (certfleet's own may hold secrets).
struct command_result : local_command_result {
  std::string program;  // as resolved
};

command_result run_command(const std::string& command, const file_target& t, const std::string& run_id) {
  command_result r;
  auto words = split_post_command(command);
  if (!words || words->empty()) {  // checked when the target was parsed; a target built in code
    r.spawn_errno = EINVAL;
    return r;
  }
  r.program = find_local_program(words->front());
  if (r.program.empty()) {
    r.program = words->front();
    r.spawn_errno = ENOENT;
    return r;
  }
  local_command c;
  c.program = r.program;
  c.argv = std::move(*words);
  c.env = {std::string("PATH=") + command_path, "LC_ALL=C", "CERTFLEET_CERT_PATH=" + t.cert_path,
           "CERTFLEET_KEY_PATH=" + t.key_path, "CERTFLEET_CHAIN_PATH=" + t.chain_path, "CERTFLEET_RUN_ID=" + run_id};
  c.timeout = t.post_command_timeout;
  c.max_output = max_output;
  static_cast<local_command_result&>(r) = run_local_command(c);
  return r;
}

// `secrets`: the private keys the command may print (redact.hpp): its output goes into the
// result and the job log, which every role of the project reads.
step post_command(const file_target& t, const std::string& run_id, delivery_result& out,
                  std::span<const std::string_view> secrets) {
  if (t.post_command.empty()) return std::nullopt;
  auto r = run_command(t.post_command, t, run_id);
  std::string output = tail(redact_command_output(r.output, secrets));
  OPENSSL_cleanse(r.output.data(), r.output.size());
  if (!output.empty()) out.remote_stderr = out.remote_stderr.empty() ? output : tail(out.remote_stderr + "\n" + output);
  // A result is visible to the whole project: only the last bytes of the output go into it (the
  // job log's detail keeps the longer tail above).
  if (output.size() > max_output_in_error) output = "…" + output.substr(output.size() - max_output_in_error);
  if (r.spawn_errno == ENOENT && r.program.find('/') == std::string::npos)
    return failure{error_class::validation, "post-deploy command: " + r.program + " is not in PATH (" + command_path + ")"};
  if (r.spawn_errno) return errno_failure(r.spawn_errno, "cannot start the post-deploy command " + r.program);
  if (r.timed_out) {
    cause c{cause_kind::exit_status, -1};
    return failure{classify(c), "post-deploy command did not finish within " +
                                    std::to_string(t.post_command_timeout.count()) + " ms (killed)"};
  }
  if (r.exit_status != 0) {
    cause c{cause_kind::exit_status, r.exit_status};
    return failure{classify(c), (r.exit_status < 0 ? std::string("post-deploy command was killed")
                                                   : "post-deploy command exited " + std::to_string(r.exit_status)) +
                                    (output.empty() ? "" : ": " + output)};
  }
  return std::nullopt;
}

// Puts the run's backups back. `found` says whether the run left any backup at all.
step restore(const file_target& t, const std::string& run_id, bool& found) {
  found = false;
  for (const auto& p : target_paths(t)) {
    std::string b = file_backup_path(p, run_id);
    if (exists(b)) {
      found = true;
      if (auto f = copy_atomic(b, p, run_id + "-restore")) return f;
    } else if (exists(b + ".absent")) {
      found = true;
      if (::unlink(p.c_str()) != 0 && errno != ENOENT) return errno_failure(errno, "cannot remove " + p);
      fsync_dir(dir_of(p));
    }
  }
  return std::nullopt;
}

// The phase clock, as in the SSH module.
// After a failure that may have changed files: put the backup back and reload with it. The
// command then sees the key put back as well as the one delivered: neither may show.
void restore_after_failure(recorder& rec, const file_target& t, const std::string& run_id, std::string_view delivered_key) {
  auto started = steady::now();
  read_result previous;
  (void)read_file(file_backup_path(t.key_path, run_id), previous);
  bool found = false;
  auto rf = restore(t, run_id, found);
  if (!rf) {
    rec.r.restored = true;
    const std::string_view secrets[] = {delivered_key, previous.data};
    rf = post_command(t, run_id, rec.r, secrets);
    if (rf) rf->message += " after restore";
  }
  OPENSSL_cleanse(previous.data.data(), previous.data.size());
  rec.add_timing("restore", started);
  if (rf) rec.r.error += "; restore: " + rf->message;
}

bool strictly_under(const std::string& path, const std::string& base) {
  return path.size() > base.size() && path.compare(0, base.size(), base) == 0 && path[base.size()] == '/';
}

// The delivery-time half of the base-directory rule: each parent directory resolved (symbolic
// links followed), re-checked against the resolved base directories, and the resolved path put
// in the target, so what is written is what was checked. A destination that is a symbolic link
// is refused (rename would replace the link, but the backup and hash reads would follow it).
step pin_paths(file_target& t, const std::vector<std::string>& base_dirs) {
  if (auto ok = check_file_target_paths(t, base_dirs); !ok)
    return failure{error_class::validation, ok.error().field + ": " + ok.error().message};
  std::vector<std::string> bases;
  for (const auto& b : base_dirs) {
    char buf[PATH_MAX];
    if (::realpath(b.c_str(), buf)) bases.emplace_back(buf);  // a missing base dir allows nothing
  }
  std::pair<std::string*, const char*> paths[] = {{&t.cert_path, "file.cert_path"}, {&t.key_path, "file.key_path"},
                                                  {&t.chain_path, "file.chain_path"}};
  for (auto [p, field] : paths) {
    if (p->empty()) continue;
    char buf[PATH_MAX];
    std::string parent = dir_of(*p);
    if (!::realpath(parent.c_str(), buf)) return errno_failure(errno, std::string(field) + ": cannot resolve " + parent);
    std::string resolved(buf);
    bool inside = std::any_of(bases.begin(), bases.end(), [&](const std::string& b) {
      return resolved == b || strictly_under(resolved, b);
    });
    if (!inside)
      return failure{error_class::validation, std::string(field) + ": " + parent + " resolves to " + resolved +
                                                  ", which is outside file_target_base_dirs (a symbolic link?)"};
    *p = join(resolved, base_of(*p));
    struct stat st{};
    if (::lstat(p->c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      return failure{error_class::validation, std::string(field) + ": " + *p + " is a symbolic link; refusing to write through it"};
  }
  return std::nullopt;
}

delivery_result deliver_sync(file_target t, const cert_bundle& bundle, const std::string& run_id,
                             const std::vector<std::string>& base_dirs) {
  recorder rec;
  rec.begin("check");
  if (!valid_run_id(run_id)) return rec.fail({error_class::validation, "run id must be 1-64 characters of [A-Za-z0-9._-]"});
  if (auto ok = check_file_target(t); !ok) return rec.fail({error_class::validation, ok.error().field + ": " + ok.error().message});
  if (auto f = pin_paths(t, base_dirs)) return rec.fail(*f);
  auto fp = bundle_fingerprint(bundle);
  if (!fp) return rec.fail({error_class::validation, fp.error().message});
  rec.r.fingerprint_sha256 = *fp;
  rec.end();

  struct item {
    std::string path;
    const std::string* data;
    unsigned mode;
    std::string temp;
  };
  std::vector<item> files{{t.cert_path, &bundle.cert_pem, t.cert_mode, temp_path(t.cert_path, run_id)},
                          {t.key_path, &bundle.key_pem, t.key_mode, temp_path(t.key_path, run_id)}};
  if (!t.chain_path.empty()) files.push_back({t.chain_path, &bundle.chain_pem, t.cert_mode, temp_path(t.chain_path, run_id)});

  // Delivery is idempotent: identical bytes everywhere mean nothing to do.
  rec.begin("hash_check");
  bool all_same = true;
  for (const auto& f : files) {
    read_result rr;
    auto rf = read_file(f.path, rr);
    bool same = !rf && !rr.missing && !rr.too_big && rr.data == *f.data;
    OPENSSL_cleanse(rr.data.data(), rr.data.size());
    // Unreadable: cannot tell, so deliver (the write will say what is wrong).
    if (!same) { all_same = false; break; }
  }
  rec.end();
  if (all_same) {
    rec.r.status = delivery_status::skipped_by_hash;
    return rec.r;
  }

  // Once per run: a retried run must keep the state from before the run, not its own files.
  rec.begin("backup");
  for (const auto& f : files) {
    std::string b = file_backup_path(f.path, run_id);
    if (exists(b) || exists(b + ".absent")) continue;
    if (exists(f.path)) {
      if (auto e = copy_atomic(f.path, b, run_id + "-backup")) return rec.fail(*e);
    } else {
      if (auto e = write_temp(b + ".absent", {}, 0600, nullptr)) return rec.fail(*e);
      fsync_dir(dir_of(b));
    }
  }
  rec.end();

  rec.begin("write");
  for (std::size_t i = 0; i < files.size(); ++i) {
    struct stat st{};
    bool had = ::stat(files[i].path.c_str(), &st) == 0;
    if (auto e = write_temp(files[i].temp, *files[i].data, files[i].mode, had ? &st : nullptr)) {
      for (std::size_t j = 0; j < i; ++j) ::unlink(files[j].temp.c_str());
      return rec.fail(*e);
    }
  }
  rec.end();

  rec.begin("install");
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (::rename(files[i].temp.c_str(), files[i].path.c_str()) != 0) {
      auto e = errno_failure(errno, "cannot move the new file to " + files[i].path);
      for (std::size_t j = i; j < files.size(); ++j) ::unlink(files[j].temp.c_str());
      rec.fail(e);
      // A half-installed set (new cert, old key) must not stay: put everything back.
      if (i > 0) restore_after_failure(rec, t, run_id, bundle.key_pem);
      return rec.r;
    }
  }
  for (const auto& f : files) fsync_dir(dir_of(f.path));
  rec.end();

  if (!t.post_command.empty()) {
    rec.begin("post_command");
    const std::string_view secrets[] = {bundle.key_pem};
    if (auto e = post_command(t, run_id, rec.r, secrets)) {
      rec.fail(*e);
      restore_after_failure(rec, t, run_id, bundle.key_pem);
      return rec.r;
    }
    rec.end();
  }
  rec.r.status = delivery_status::succeeded;
  return rec.r;
}

delivery_result rollback_sync(file_target t, const std::string& run_id, const std::vector<std::string>& base_dirs) {
  recorder rec;
  rec.begin("check");
  if (!valid_run_id(run_id)) return rec.fail({error_class::validation, "run id must be 1-64 characters of [A-Za-z0-9._-]"});
  if (auto ok = check_file_target(t); !ok) return rec.fail({error_class::validation, ok.error().field + ": " + ok.error().message});
  if (auto f = pin_paths(t, base_dirs)) return rec.fail(*f);
  rec.end();

  // Read the backups first: their bytes are what the files must hold afterwards.
  rec.begin("read_backup");
  std::vector<std::pair<std::string, read_result>> backups;
  for (const auto& p : target_paths(t)) {
    read_result rr;
    std::string b = file_backup_path(p, run_id);
    if (exists(b)) {
      if (auto f = read_file(b, rr)) return rec.fail(*f);
    } else {
      rr.missing = true;  // absent marker, or no backup for this file
    }
    backups.emplace_back(p, std::move(rr));
  }
  rec.end();

  rec.begin("restore");
  bool found = false;
  if (auto f = restore(t, run_id, found)) return rec.fail(*f);
  if (!found) return rec.fail({error_class::io_permanent, "no backup of run " + run_id + " next to " + t.cert_path});
  rec.r.restored = true;
  rec.end();
  if (!backups.front().second.missing) rec.r.fingerprint_sha256 = certificate_fingerprint(backups.front().second.data).value_or("");

  // Kept for the post command's redaction; the validation below wipes the backups' copies.
  std::string key_backup = backups.size() > 1 && !backups[1].second.missing ? backups[1].second.data : std::string();
  rec.begin("validate");
  for (auto& [path, b] : backups) {
    if (b.too_big) continue;
    bool marker = exists(file_backup_path(path, run_id) + ".absent");
    if (b.missing && !marker) continue;  // this file had no backup: left as it is
    read_result now;
    auto f = read_file(path, now);
    bool same = !f && now.missing == b.missing && now.data == b.data;
    OPENSSL_cleanse(now.data.data(), now.data.size());
    OPENSSL_cleanse(b.data.data(), b.data.size());
    if (!same) return rec.fail({classify(cause_kind::remote_hash_mismatch), path + " does not hold the backed-up bytes after restore"});
  }
  rec.end();

  if (!t.post_command.empty()) {
    rec.begin("post_command");
    // The key put back is the one the command may print.
    const std::string_view secrets[] = {key_backup};
    auto e = post_command(t, run_id, rec.r, secrets);
    OPENSSL_cleanse(key_backup.data(), key_backup.size());
    if (e) return rec.fail(*e);
    rec.end();
  }
  rec.r.status = delivery_status::succeeded;
  return rec.r;
}

// Coroutine bodies run on the pool by co_spawn; the arguments live in their frames.
awaitable<delivery_result> deliver_on_pool(file_target t, cert_bundle b, std::string run_id, std::vector<std::string> bases) {
  auto r = deliver_sync(t, b, run_id, bases);
  OPENSSL_cleanse(b.key_pem.data(), b.key_pem.size());
  co_return r;
}

awaitable<delivery_result> rollback_on_pool(file_target t, std::string run_id, std::vector<std::string> bases) {
  co_return rollback_sync(t, run_id, bases);
}

}  // namespace

std::string file_backup_path(std::string_view path, std::string_view run_id) {
  return std::string(path) + ".certfleet-backup." + std::string(run_id);
}

result<std::vector<std::string>> split_post_command(std::string_view c) {
  auto bad = [](std::string msg) {
    return make_error(errc::invalid_argument, "post_command " + msg + " (it runs without a shell; see docs/delivery-file.md)",
                      "file.post_command");
  };
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  std::size_t i = 0;
  while (i < c.size()) {
    char ch = c[i];
    if (ch == ' ' || ch == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      ++i;
      continue;
    }
    in_word = true;
    if (ch == '\'') {
      auto end = c.find('\'', i + 1);
      if (end == std::string_view::npos) return bad("has an unterminated '");
      word.append(c.substr(i + 1, end - i - 1));
      i = end + 1;
    } else if (ch == '"') {
      ++i;
      for (;;) {
        if (i >= c.size()) return bad("has an unterminated \"");
        if (c[i] == '"') { ++i; break; }
        if (c[i] == '\\' && i + 1 < c.size() && (c[i + 1] == '"' || c[i + 1] == '\\')) ++i;
        word.push_back(c[i++]);
      }
    } else if (ch == '\\') {
      if (i + 1 >= c.size()) return bad("ends with a lone backslash");
      word.push_back(c[i + 1]);
      i += 2;
    } else if (std::string_view(";&|<>()$`\n\r").find(ch) != std::string_view::npos) {
      std::string shown = ch == '\n' ? "a line break" : ch == '\r' ? "a carriage return" : std::string("'") + ch + "'";
      return bad("contains " + shown + " outside quotes, which only a shell would understand; quote it to pass it "
                 "literally, or run a script");
    } else {
      word.push_back(ch);
      ++i;
    }
    if (words.size() >= 256) return bad("has more than 256 words");
  }
  if (in_word) words.push_back(std::move(word));
  if (words.size() > 256) return bad("has more than 256 words");
  if (!words.empty()) {
    const auto& prog = words.front();
    if (prog.empty()) return bad("names an empty program");
    if (prog.find('/') != std::string::npos && prog.front() != '/')
      return bad("names the program by a relative path; give an absolute path or a bare name found in PATH");
  }
  return words;
}

result<void> check_file_target_paths(const file_target& t, const std::vector<std::string>& base_dirs) {
  if (base_dirs.empty())
    return make_error(errc::invalid_argument,
                      "file targets are refused: the system setting file_target_base_dirs names no directory", "file.cert_path");
  std::string list;
  for (const auto& b : base_dirs) list += (list.empty() ? "" : ", ") + b;
  std::pair<const std::string*, const char*> paths[] = {{&t.cert_path, "file.cert_path"}, {&t.key_path, "file.key_path"},
                                                        {&t.chain_path, "file.chain_path"}};
  for (auto [p, field] : paths) {
    if (p->empty()) continue;
    if (auto r = check_remote_path(*p, field); !r) return r;
    bool inside = std::any_of(base_dirs.begin(), base_dirs.end(), [&](const std::string& b) { return strictly_under(*p, b); });
    if (!inside)
      return make_error(errc::invalid_argument, *p + " is not under any of file_target_base_dirs (" + list + ")", field);
  }
  return {};
}

result<void> check_file_target(const file_target& t) {
  if (auto r = check_install_files("file", t.cert_path, t.key_path, t.chain_path, t.cert_mode, t.key_mode); !r) return r;
  if (t.post_command.size() > 4096)
    return make_error(errc::invalid_argument, "post_command is longer than 4096 characters", "file.post_command");
  if (t.post_command.find('\0') != std::string::npos)
    return make_error(errc::invalid_argument, "post_command contains a NUL byte", "file.post_command");
  if (!t.post_command.empty() && t.post_command.find_first_not_of(" \t") == std::string::npos)
    return make_error(errc::invalid_argument, "post_command is blank; leave it out for no command", "file.post_command");
  if (!t.post_command.empty())
    if (auto w = split_post_command(t.post_command); !w) return std::move(w).error();
  if (t.post_command_timeout.count() <= 0)
    return make_error(errc::invalid_argument, "post_command timeout must be positive", "file.post_command");
  return {};
}

result<file_target> parse_file_target(const boost::json::value& v) {
  if (!v.is_object()) return make_error(errc::invalid_argument, "file must be an object", "file");
  const auto& o = v.as_object();
  file_target t;
  auto str = [&](const char* key, std::string& out, bool required) {
    return string_member(o, "file", key, out, required);
  };
  std::string cert_mode = "0644", key_mode = "0600";
  for (auto r : {str("cert_path", t.cert_path, true), str("key_path", t.key_path, true),
                 str("chain_path", t.chain_path, false), str("cert_mode", cert_mode, false),
                 str("key_mode", key_mode, false), str("post_command", t.post_command, false)})
    if (!r) return std::move(r).error();
  // Given but empty is a mistake, not "no command" (that is leaving it out).
  if (auto* pc = o.if_contains("post_command"); pc && pc->is_string() && t.post_command.empty())
    return make_error(errc::invalid_argument, "post_command is blank; leave it out for no command", "file.post_command");
  auto cm = parse_mode(cert_mode);
  if (!cm) return make_error(errc::invalid_argument, "mode must be octal like \"0644\"", "file.cert_mode");
  auto km = parse_mode(key_mode);
  if (!km) return make_error(errc::invalid_argument, "mode must be octal like \"0600\"", "file.key_mode");
  t.cert_mode = *cm;
  t.key_mode = *km;
  if (auto r = check_file_target(t); !r) return std::move(r).error();
  return t;
}

awaitable<delivery_result> deliver_file(file_target target, cert_bundle bundle, std::string run_id,
                                        std::vector<std::string> base_dirs, asio::thread_pool& pool) {
  std::string where = target.cert_path;
  auto r = co_await asio::co_spawn(pool, deliver_on_pool(std::move(target), std::move(bundle), run_id, std::move(base_dirs)),
                                   asio::use_awaitable);
  if (r.ok())
    spdlog::debug("file delivery[{}] run {}: {} ({})", where, run_id, delivery_status_name(r.status), r.fingerprint_sha256);
  else
    spdlog::debug("file delivery[{}] run {}: failed [{}] {}", where, run_id, error_class_name(r.cls), r.error);
  co_return r;
}

awaitable<delivery_result> rollback_file(file_target target, std::string run_id, std::vector<std::string> base_dirs,
                                         asio::thread_pool& pool) {
  std::string where = target.cert_path;
  auto r = co_await asio::co_spawn(pool, rollback_on_pool(std::move(target), run_id, std::move(base_dirs)), asio::use_awaitable);
  spdlog::debug("file rollback[{}] run {}: {} {}", where, run_id, delivery_status_name(r.status), r.error);
  co_return r;
}

}  // namespace certfleet::delivery
