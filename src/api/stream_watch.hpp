#pragma once
// A live log stream ends when the credential that opened it does: its token revoked (by this
// process, another one or the CLI) or expired, its browser session signed out or expired. One
// watcher per process, running only while streams are open, asks the store about each distinct
// credential every stream_recheck_interval (the store, not the auth cache, which may hold a
// revoked token for auth_cache_ttl) and closes the streams of one that is gone with 1008 and the
// reason. This process's own revoke and sign-out wake it at once.
#include "certfleet/core/clock.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

namespace certfleet::api {

struct server_state;

// Within a second of a revoke anywhere: half a second between looks, plus the store's answer.
inline constexpr std::chrono::milliseconds stream_recheck_interval{500};

struct stream_credential {
  std::string hash;     // the store key: hash of the bearer token's text, or of the session cookie
  bool session = false;
  time_ms expires_at = 0;  // the earlier of the token's and the session's expiry; 0: never
};

struct stream_watch {
  struct entry {
    stream_credential cred;
    std::function<void(std::string reason)> end;  // closes the stream with this reason
  };
  std::uint64_t next_id = 0;
  std::unordered_map<std::uint64_t, entry> streams;
  bool running = false;
  std::function<void()> wake;  // set while the watcher runs
};

// Registers an open stream (starting the watcher when it is the first); the id unregisters it.
std::uint64_t watch_stream(const std::shared_ptr<server_state>& s, stream_credential cred,
                           std::function<void(std::string reason)> end);
void unwatch_stream(server_state& s, std::uint64_t id);
// A token was revoked or a session ended in this process: look now, not at the next interval.
void recheck_streams_now(server_state& s);

}  // namespace certfleet::api
