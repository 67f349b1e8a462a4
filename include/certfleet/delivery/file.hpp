#pragma once
// The `file` delivery module (DESIGN §4): writes the certificate, key and chain to paths on the
// machine certfleet runs on, with the same guarantees as SSH delivery: hash-skip when the files
// already match, a per-run backup, atomic replacement (temp file in the same directory, fsync,
// rename), an optional post-deploy command, and a rollback that restores the backup. All file
// and process work runs on the thread pool given (the event loop never blocks).
//
// Local delivery writes on the worker host as certfleet's own user, so it is fenced in: every
// path must lie under one of the base directories (system setting file_target_base_dirs; none =
// every file target refused), checked lexically when the target is created and again at each
// delivery with the parent directory resolved (symbolic links followed) right before writing;
// the post command runs without a shell (split_post_command), under a deadline, and only a
// bounded tail of its output reaches a result. Who may create such targets is decided by the
// caller (service::service: system-admin tokens only).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/error.hpp"
#include "certfleet/net/error_class.hpp"
#include "certfleet/delivery/module.hpp"

namespace certfleet::delivery {

struct file_target {
  std::string cert_path, key_path;  // absolute, no "." / ".." segments
  std::string chain_path;           // empty: no chain file
  unsigned cert_mode = 0644, key_mode = 0600;
  // Run after the files are in place (and after a rollback); empty: none. Split into words by
  // split_post_command and executed directly (execve, no shell). It gets a minimal environment
  // (PATH, LC_ALL, CERTFLEET_CERT_PATH, CERTFLEET_KEY_PATH, CERTFLEET_CHAIN_PATH,
  // CERTFLEET_RUN_ID), stdin /dev/null, and never the key itself.
  std::string post_command;
  std::chrono::milliseconds post_command_timeout{60000};
};

// Parses the `file` object of a target (DESIGN §6): {cert_path, key_path, chain_path?,
// cert_mode="0644", key_mode="0600", post_command?}. Errors name the field ("file.cert_path").
result<file_target> parse_file_target(const boost::json::value& file);
// The same checks for a target built in code (paths, modes, the post command's grammar).
result<void> check_file_target(const file_target& t);

// The post command's grammar, shell-like but never a shell: words are separated by spaces or
// tabs; '...' is literal; "..." is literal except that \" and \\ stand for " and \; outside
// quotes \c stands for c. No expansion of any kind ($VAR, $(...), `...`, globs, ~). Outside
// quotes the characters ; & | < > ( ) $ ` and line breaks are refused: they would mean something
// to a shell, and here they would silently become arguments. The first word is the program: an
// absolute path, or a bare name looked up in the fixed PATH /usr/local/sbin:/usr/local/bin:
// /usr/sbin:/usr/bin:/sbin:/bin. At most 256 words. Errors name "file.post_command".
// (A shell, when really wanted, is asked for by name: /bin/sh -c '…'.)
result<std::vector<std::string>> split_post_command(std::string_view command);

// The lexical half of the base-directory rule: cert_path, key_path and chain_path each lie
// strictly below one of `base_dirs` (parse_base_dirs' form). invalid_argument naming the path's
// field ("file.cert_path"); with no base directories every file target is refused.
result<void> check_file_target_paths(const file_target& t, const std::vector<std::string>& base_dirs);

// Where a file's backup for run `run_id` lives: "<path>.certfleet-backup.<run_id>"; when the
// file did not exist before the run, "<that>.absent" (an empty marker) instead.
std::string file_backup_path(std::string_view path, std::string_view run_id);

// One delivery. First the base-directory rule again (the setting may have changed since the
// target was stored): lexically, then with each parent directory resolved by realpath and the
// result re-checked against the resolved base directories; the resolved paths are the ones
// written, and a destination that is itself a symbolic link is refused (validation). In order: hash-skip (every file present with the same bytes: skipped_by_hash,
// nothing touched) → back up the current files (once per run: a retried run keeps the pre-run
// state) → write each file to a temp file next to it with its final mode, fsync → rename into
// place, fsync the directory → post_command (with its timeout). When the rename step or the
// post command fails, the backup is put back (restored = true) and the post command run again.
// Errors: permission denied, read-only file system, no space → io_permanent; post command exit
// non-zero or timeout → io_transient; bad target/bundle/run id → validation.
boost::asio::awaitable<delivery_result> deliver_file(file_target target, cert_bundle bundle, std::string run_id,
                                                     std::vector<std::string> base_dirs,
                                                     boost::asio::thread_pool& pool);

// Puts back the files that were in place before run `run_id` (removing those that did not
// exist), then runs the post command. io_permanent when that run left no backup.
// The base-directory rule applies as for deliver_file.
boost::asio::awaitable<delivery_result> rollback_file(file_target target, std::string run_id,
                                                      std::vector<std::string> base_dirs,
                                                      boost::asio::thread_pool& pool);

}  // namespace certfleet::delivery
