#pragma once
// Shared by the commands of the app module: how settings become a store and worker options.
#include "certfleet/core/secrets.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/co_spawn.hpp>
#include <filesystem>
#include <optional>

namespace certfleet::distribution {
class delivery_phase_metrics;
}

namespace certfleet::app {

// The data directory, created 0700 when missing (an existing one is left as it is; with
// warn_if_open, a warning when group or others have access).
result<void> make_data_dir(const std::filesystem::path& dir, bool warn_if_open);
// The store setting: sqlite, or a well-formed MongoDB URI (docs/operations-mongodb.md). A
// setting error (exit 2); whether the cluster answers is open_store's to find out.
result<void> check_store_setting(const settings_map& s);
// read_only (`certfleet doctor`): an existing SQLite file is opened without any write (see
// sqlite_options::read_only); a MongoDB store is opened as usual.
enum class store_access { read_write, read_only };
result<std::unique_ptr<store::store>> open_store(const settings_map& s, store_access access = store_access::read_write);
queue::worker_options worker_options_from(const settings_map& s);
// Every handler this build has; a type missing here is refused at enqueue. `key` and `cpu` are
// what the distribution handlers need to run (null in CLI commands, which only enqueue).
// `phases` (may be null) collects the delivery phases for /metrics.
void register_handlers(queue::handler_registry& r, const settings_map& s, const kek* key = nullptr,
                       boost::asio::thread_pool* cpu = nullptr, distribution::delivery_phase_metrics* phases = nullptr);
// The key-encryption key for this store: loaded from the key file, or created on a store that
// has no sealed secret yet; refused (with the reason) when it is missing or not the key the
// store's secrets were sealed with. Also installs the distribution terminal hook.
result<kek> prepare_store(store::store& st, const settings_map& s);
// The key file: the process setting key_file, else DATA/certfleet.key.
std::filesystem::path key_file_path(const settings_map& s);
// What the start-up check of a keyring reads from the store (the fingerprints of `ring`'s
// versions; null: only the legacy one and the envelope counts).
result<keyring_facts> read_keyring_facts(store::store& st, const kek* ring);
// Records the fingerprint of every version of `ring` not recorded yet (and the legacy one when
// missing); refused when another key's fingerprint is there (`created`: a new key on a store
// with nothing sealed replaces it).
result<void> record_key_fingerprints(store::store& st, const kek& ring, bool created);
void raise_fd_limit();

// Runs one coroutine to completion on a private event loop (CLI commands).
template <class F>
auto run_sync(F&& make_awaitable) {
  using R = typename decltype(make_awaitable())::value_type;
  boost::asio::io_context ioc;
  std::optional<R> out;
  std::exception_ptr failure;
  boost::asio::co_spawn(
      ioc, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await make_awaitable()); },
      [&](std::exception_ptr e) { failure = e; });
  ioc.run();
  if (failure) std::rethrow_exception(failure);
  return std::move(*out);
}

}  // namespace certfleet::app
