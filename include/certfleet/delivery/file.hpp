#pragma once
// The `file` delivery module (DESIGN §4): writes the certificate, key and chain to paths on the
// machine certfleet runs on, with the same guarantees as SSH delivery: hash-skip when the files
// already match, a per-run backup, atomic replacement (temp file in the same directory, fsync,
// rename), an optional post-deploy command, and a rollback that restores the backup. All file
// and process work runs on the thread pool given (the event loop never blocks).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <string>
#include <string_view>

#include "certfleet/core/error.hpp"
#include "certfleet/delivery/error_class.hpp"
#include "certfleet/delivery/ssh.hpp"  // cert_bundle, delivery_result

namespace certfleet::delivery {

struct file_target {
  std::string cert_path, key_path;  // absolute, no "." / ".." segments
  std::string chain_path;           // empty: no chain file
  unsigned cert_mode = 0644, key_mode = 0600;
  // Run with /bin/sh -c after the files are in place (and after a rollback); empty: none. It
  // gets a minimal environment (PATH, CERTFLEET_CERT_PATH, CERTFLEET_KEY_PATH,
  // CERTFLEET_CHAIN_PATH, CERTFLEET_RUN_ID) and never the key itself.
  std::string post_command;
  std::chrono::milliseconds post_command_timeout{60000};
};

// Parses the `file` object of a target (DESIGN §6): {cert_path, key_path, chain_path?,
// cert_mode="0644", key_mode="0600", post_command?}. Errors name the field ("file.cert_path").
result<file_target> parse_file_target(const boost::json::value& file);
// The same checks for a target built in code.
result<void> check_file_target(const file_target& t);

// Where a file's backup for run `run_id` lives: "<path>.certfleet-backup.<run_id>"; when the
// file did not exist before the run, "<that>.absent" (an empty marker) instead.
std::string file_backup_path(std::string_view path, std::string_view run_id);

// One delivery. In order: hash-skip (every file present with the same bytes: skipped_by_hash,
// nothing touched) → back up the current files (once per run: a retried run keeps the pre-run
// state) → write each file to a temp file next to it with its final mode, fsync → rename into
// place, fsync the directory → post_command (with its timeout). When the rename step or the
// post command fails, the backup is put back (restored = true) and the post command run again.
// Errors: permission denied, read-only file system, no space → io_permanent; post command exit
// non-zero or timeout → io_transient; bad target/bundle/run id → validation.
boost::asio::awaitable<delivery_result> deliver_file(file_target target, cert_bundle bundle, std::string run_id,
                                                     boost::asio::thread_pool& pool);

// Puts back the files that were in place before run `run_id` (removing those that did not
// exist), then runs the post command. io_permanent when that run left no backup.
boost::asio::awaitable<delivery_result> rollback_file(file_target target, std::string run_id,
                                                      boost::asio::thread_pool& pool);

}  // namespace certfleet::delivery
