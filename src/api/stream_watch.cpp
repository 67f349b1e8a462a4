#include "stream_watch.hpp"

#include "certfleet/core/spawn.hpp"
#include "server_state.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <optional>
#include <vector>

namespace certfleet::api {

namespace asio = boost::asio;

namespace {

// Why the credential no longer admits anyone, or nullopt while it does (or the store could not
// say: a store that is busy for a moment must not end every stream).
asio::awaitable<std::optional<std::string>> gone_reason(server_state& s, const stream_credential& c, time_ms now) {
  if (c.session) {
    auto sess = co_await s.timed("session_find", s.st.auth().find_session(c.hash, now));
    if (!sess) {
      if (sess.error().is(errc::not_found)) co_return "signed out, or the session's token was revoked; sign in again";
      co_return std::nullopt;
    }
    if (sess->token.expires_at && sess->token.expires_at <= now) co_return "the session's token expired; sign in again";
    co_return std::nullopt;
  }
  auto tok = co_await s.timed("token_find", s.st.auth().find_token(c.hash));
  if (!tok) {
    if (tok.error().is(errc::not_found)) co_return "the token was revoked";
    co_return std::nullopt;
  }
  if (tok->expires_at && tok->expires_at <= now) co_return "the token expired";
  co_return std::nullopt;
}

asio::awaitable<void> recheck(server_state& s) {
  auto& w = s.stream_credentials;
  const auto now = s.clock.now_ms();
  // One look per distinct credential: a thousand viewers of one token cost one store read.
  std::unordered_map<std::string, std::optional<std::string>> verdicts;
  std::vector<stream_credential> distinct;
  for (const auto& [id, e] : w.streams)
    if (verdicts.emplace(e.cred.hash, std::nullopt).second) distinct.push_back(e.cred);
  for (const auto& c : distinct) {
    auto why = co_await gone_reason(s, c, now);
    verdicts[c.hash] = std::move(why);
  }
  // Streams may have come and gone during the reads: walk the map as it is now.
  std::vector<std::pair<std::function<void(std::string)>, std::string>> ends;
  for (auto it = w.streams.begin(); it != w.streams.end();) {
    std::optional<std::string> why;
    if (auto v = verdicts.find(it->second.cred.hash); v != verdicts.end()) why = v->second;
    // The expiry known at the upgrade closes the stream even when the store could not answer
    // this time (gone_reason then says nothing): a store outage must not extend a credential.
    if (!why && it->second.cred.expires_at && it->second.cred.expires_at <= now)
      why = it->second.cred.session ? "the session expired; sign in again" : "the token expired";
    if (why) {
      ends.emplace_back(std::move(it->second.end), std::move(*why));
      it = w.streams.erase(it);
    } else {
      ++it;
    }
  }
  if (!ends.empty()) spdlog::info("live log streams: {} closed, their credential ended", ends.size());
  for (auto& [end, why] : ends) end(std::move(why));
}

asio::awaitable<void> run_watch(std::shared_ptr<server_state> self) {
  auto& s = *self;
  auto& w = s.stream_credentials;
  asio::steady_timer timer(s.ex);
  bool woken = false;
  w.wake = [&timer, &woken] {
    woken = true;
    timer.cancel();
  };
  while (!s.stopping && !w.streams.empty()) {
    if (!woken) {
      timer.expires_after(stream_recheck_interval);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    woken = false;
    if (s.stopping) break;
    co_await recheck(s);
  }
  w.wake = nullptr;
  w.running = false;
}

}  // namespace

std::uint64_t watch_stream(const std::shared_ptr<server_state>& s, stream_credential cred,
                           std::function<void(std::string)> end) {
  auto& w = s->stream_credentials;
  const auto id = ++w.next_id;
  w.streams.emplace(id, stream_watch::entry{std::move(cred), std::move(end)});
  if (!w.running) {
    w.running = true;
    asio::co_spawn(s->ex, run_watch(s), report_unexpected("live log stream credential watcher"));
  }
  return id;
}

void unwatch_stream(server_state& s, std::uint64_t id) { s.stream_credentials.streams.erase(id); }

void recheck_streams_now(server_state& s) {
  if (s.stream_credentials.wake) s.stream_credentials.wake();
}

}  // namespace certfleet::api
