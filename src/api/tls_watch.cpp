#include "tls_watch.hpp"

#include "server_state.hpp"
#include "tls_context.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

namespace certfleet::api {

namespace asio = boost::asio;

void tls_reload_failed(server_state& s, const error& e) {
  ++s.tls.reload_failures;
  if (s.tls.last_failure != e.message) {
    s.tls.last_failure = e.message;
    spdlog::error("{}; new connections keep getting the certificate {} (not after {})", e.message,
                  s.tls.identity.fingerprint_sha256, format_iso8601(s.tls.identity.not_after_ms));
  }
}

result<tls_identity> install_tls(server_state& s, const tls_material& m) {
  auto made = make_tls_context(m);
  if (!made) {
    tls_reload_failed(s, made.error());
    return std::move(made).error();
  }
  const bool first = !s.tls.context;
  s.tls.context = std::move(made->context);
  s.tls.identity = made->identity;
  s.tls.source = m.source;
  s.tls.last_failure.clear();
  if (!first) ++s.tls.reloads;
  spdlog::info("TLS: {}new connections get {} (sha256 {}, not after {}) from {}", first ? "" : "from now on, ",
               made->identity.subject, made->identity.fingerprint_sha256, format_iso8601(made->identity.not_after_ms),
               m.source);
  return made->identity;
}

asio::awaitable<void> watch_managed_certificate(std::shared_ptr<server_state> self, certificate_ref ref,
                                                std::chrono::milliseconds every) {
  auto& s = *self;
  asio::steady_timer timer(s.ex);
  bool woken = false;
  s.tls.wake = [&timer, &woken] {
    woken = true;
    timer.cancel();
  };
  while (!s.stopping) {
    if (!woken) {
      timer.expires_after(every);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    woken = false;
    if (s.stopping) break;
    auto next = co_await read_managed_certificate(s.st, s.opt.key, ref, s.tls.identity.fingerprint_sha256);
    if (!next) {
      tls_reload_failed(s, next.error());
      continue;
    }
    if (!*next) {
      s.tls.last_failure.clear();  // the served version is the current one again
      continue;
    }
    (void)install_tls(s, **next);
  }
  s.tls.wake = nullptr;
}

}  // namespace certfleet::api
