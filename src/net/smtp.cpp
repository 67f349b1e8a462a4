// The SMTP submission client (smtp.hpp): Asio over a TCP socket, then an asio::ssl stream on
// the same socket after STARTTLS; every read, write and handshake under a step deadline that
// never passes the overall one.
#include "certfleet/net/smtp.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <memory>

#include "certfleet/net/smtp_protocol.hpp"
#include "certfleet/net/resolve.hpp"
#include "net/tls_client.hpp"

namespace certfleet::net {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
using steady = std::chrono::steady_clock;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t max_buffered = 64 * 1024;


std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

bool loopback(const asio::ip::address& a) {
  if (a.is_v4()) return a.to_v4().is_loopback();
  auto v6 = a.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6).is_loopback();
  return v6.is_loopback();
}

// Closes the socket when the deadline passes first (ends every operation pending on it, inside
// the SSL composed operations too); cancelled when the operation wins.
awaitable<void> watchdog(asio::steady_timer& timer, tcp::socket& sock) {
  auto [ec] = co_await timer.async_wait(tuple_awaitable);
  if (ec) co_return;
  boost::system::error_code ignored;
  sock.close(ignored);
}

struct io_outcome {
  bool timed_out = false;
  boost::system::error_code ec;
  std::size_t n = 0;
};

// One connection: the socket, the TLS stream once STARTTLS is done, unread bytes, deadlines.
struct connection {
  connection(asio::any_io_executor ex, const smtp_options& o)
      : sock(ex), timer(ex), opts(o), overall(steady::now() + o.total_timeout) {}

  tcp::socket sock;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
  asio::steady_timer timer;
  const smtp_options& opts;
  steady::time_point overall;
  std::string buf;

  void arm() { timer.expires_at(std::min(steady::now() + opts.step_timeout, overall)); }

  awaitable<io_outcome> write(std::string_view data) {
    arm();
    io_outcome out;
    if (tls) {
      auto r = co_await (asio::async_write(*tls, asio::buffer(data), tuple_awaitable) || watchdog(timer, sock));
      if (r.index() == 1) out.timed_out = true;
      else std::tie(out.ec, out.n) = std::get<0>(r);
    } else {
      auto r = co_await (asio::async_write(sock, asio::buffer(data), tuple_awaitable) || watchdog(timer, sock));
      if (r.index() == 1) out.timed_out = true;
      else std::tie(out.ec, out.n) = std::get<0>(r);
    }
    co_return out;
  }

  awaitable<io_outcome> read_some() {
    arm();
    char chunk[4096];
    io_outcome out;
    if (tls) {
      auto r = co_await (tls->async_read_some(asio::buffer(chunk), tuple_awaitable) || watchdog(timer, sock));
      if (r.index() == 1) out.timed_out = true;
      else std::tie(out.ec, out.n) = std::get<0>(r);
    } else {
      auto r = co_await (sock.async_read_some(asio::buffer(chunk), tuple_awaitable) || watchdog(timer, sock));
      if (r.index() == 1) out.timed_out = true;
      else std::tie(out.ec, out.n) = std::get<0>(r);
    }
    if (!out.timed_out && !out.ec) buf.append(chunk, out.n);
    co_return out;
  }
};

using recorder = phase_recorder<smtp_result>;

class client {
 public:
  client(asio::any_io_executor ex, const smtp_options& o) : c_(ex, o), opts_(o), where_(authority(o)) {
    secrets_ = {o.password};
    if (!o.password.empty()) secrets_.push_back(auth_plain(o.username, o.password));
  }

  awaitable<smtp_result> run(const smtp_envelope& env) {
    rec_.begin("check");
    if (env.to.empty()) co_return rec_.fail(error_class::validation, "no recipients");
    if (!valid_mailbox(env.from)) co_return rec_.fail(error_class::validation, "the sender address is not a valid mailbox");
    for (const auto& to : env.to)
      if (!valid_mailbox(to)) co_return rec_.fail(error_class::validation, "a recipient address is not a valid mailbox");
    std::shared_ptr<asio::ssl::context> ctx;
    if (opts_.starttls) {
      std::string why;
      ctx = detail::client_tls_context(opts_.ca_pem, why);
      if (!ctx) co_return rec_.fail(error_class::validation, why.empty() ? "TLS client context could not be set up" : why);
    }
    if (!opts_.egress || opts_.egress->empty())
      co_return rec_.fail(error_class::validation, "egress_allow_list does not allow " + opts_.host);
    rec_.end();

    std::vector<tcp::endpoint> eps;
    if (auto f = co_await resolve(eps)) co_return std::move(*f);
    if (auto f = co_await connect(eps)) co_return std::move(*f);

    // Greeting, EHLO, and with STARTTLS: the handshake and EHLO again.
    rec_.begin("greeting");
    auto greet = co_await expect(smtp_step::greeting, 220);
    if (!greet) co_return std::move(rec_.r);
    rec_.end();
    auto caps = co_await ehlo();
    if (!caps) co_return std::move(rec_.r);
    if (opts_.starttls) {
      rec_.begin("starttls");
      if (!caps->starttls)
        co_return rec_.fail(error_class::validation,
                            where_ + " does not offer STARTTLS: certfleet does not send mail or credentials in the clear "
                                     "(set starttls to false only for a relay on this host)");
      if (!co_await command("STARTTLS\r\n", smtp_step::starttls, 220)) co_return std::move(rec_.r);
      // RFC 3207: anything the server sent after its 220 came before TLS; it could have been
      // injected by whoever sits in the path, so it is refused, not read later as TLS data.
      if (!c_.buf.empty())
        co_return rec_.fail(error_class::validation, where_ + " sent data after its STARTTLS answer (refused: possible injection)");
      rec_.end();
      if (auto f = co_await handshake(*ctx)) co_return std::move(*f);
      caps = co_await ehlo();
      if (!caps) co_return std::move(rec_.r);
    }
    if (!opts_.username.empty())
      if (!co_await authenticate(*caps)) co_return std::move(rec_.r);

    rec_.begin("mail");
    if (!co_await command("MAIL FROM:<" + env.from + ">\r\n", smtp_step::mail_from, 250)) co_return std::move(rec_.r);
    rec_.end();
    rec_.begin("rcpt");
    for (const auto& to : env.to) {
      auto reply = co_await command("RCPT TO:<" + to + ">\r\n", smtp_step::rcpt_to, 250, 251);
      if (!reply) {
        rec_.r.refused_recipient = to;
        if (rec_.r.reply_code >= 400)
          rec_.r.error = where_ + (rec_.r.reply_code < 500 ? " deferred the recipient " : " refused the recipient ") + to +
                         ": " + rec_.r.reply;
        co_await quit();
        co_return std::move(rec_.r);
      }
    }
    rec_.end();
    rec_.begin("data");
    if (!co_await command("DATA\r\n", smtp_step::data, 354)) co_return std::move(rec_.r);
    auto w = co_await c_.write(dot_stuff(env.message));
    if (w.timed_out || w.ec) co_return fail_io(w, "sending the message");
    if (!co_await expect(smtp_step::data_end, 250)) co_return std::move(rec_.r);
    rec_.end();
    co_await quit();
    co_return std::move(rec_.r);
  }

 private:
  static std::string authority(const smtp_options& o) {
    bool v6 = o.host.find(':') != std::string::npos;
    return (v6 ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port);
  }

  awaitable<std::optional<smtp_result>> resolve(std::vector<tcp::endpoint>& eps) {
    rec_.begin("resolve");
    boost::system::error_code ec;
    auto literal = asio::ip::make_address(opts_.host, ec);
    if (!ec) {
      eps.emplace_back(literal, opts_.port);
    } else {
      const auto limit = std::max(std::chrono::milliseconds(1),
                                  std::min(opts_.step_timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                   c_.overall - steady::now())));
      auto r = co_await resolve_host(opts_.host, opts_.port, opts_.resolve_pool, limit);
      if (!r.ok()) co_return rec_.fail(r.cls, r.error);
      eps = std::move(r.endpoints);
    }
    rec_.end();
    rec_.begin("egress");
    std::vector<asio::ip::address> addrs;
    for (const auto& ep : eps) addrs.push_back(ep.address());
    if (!opts_.egress->allows(opts_.host, addrs))
      co_return rec_.fail(error_class::validation, "egress_allow_list does not allow " + opts_.host);
    if (!opts_.starttls && !std::all_of(addrs.begin(), addrs.end(), loopback))
      co_return rec_.fail(error_class::validation,
                          "starttls is off, so only a relay on this host (a loopback address) may be used, and " +
                              opts_.host + " is not one");
    rec_.end();
    co_return std::nullopt;
  }

  awaitable<std::optional<smtp_result>> connect(const std::vector<tcp::endpoint>& eps) {
    rec_.begin("connect");
    boost::system::error_code last;
    for (const auto& ep : eps) {
      boost::system::error_code ec;
      if (c_.sock.is_open()) c_.sock.close(ec);
      c_.arm();
      auto r = co_await (c_.sock.async_connect(ep, tuple_awaitable) || watchdog(c_.timer, c_.sock));
      if (r.index() == 1)
        co_return rec_.fail(error_class::network, "connecting to " + where_ + " timed out (" + ms_text(opts_.step_timeout) + ")");
      last = std::get<0>(std::get<0>(r));
      if (!last) {
        c_.sock.set_option(tcp::no_delay(true), ec);
        rec_.end();
        co_return std::nullopt;
      }
    }
    co_return rec_.fail(classify(last), "cannot connect to " + where_ + ": " + last.message());
  }

  awaitable<std::optional<smtp_result>> handshake(asio::ssl::context& ctx) {
    rec_.begin("tls");
    c_.tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(c_.sock, ctx);
    SSL* ssl = c_.tls->native_handle();
    boost::system::error_code ec;
    (void)asio::ip::make_address(opts_.host, ec);
    if (!ec) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), opts_.host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, opts_.host.c_str());
      SSL_set1_host(ssl, opts_.host.c_str());
    }
    c_.arm();
    auto h = co_await (c_.tls->async_handshake(asio::ssl::stream_base::client, tuple_awaitable) || watchdog(c_.timer, c_.sock));
    if (h.index() == 1)
      co_return rec_.fail(error_class::network, "TLS handshake with " + where_ + " timed out (" + ms_text(opts_.step_timeout) + ")");
    if (auto [hec] = std::get<0>(h); hec) {
      long vr = SSL_get_verify_result(ssl);
      ERR_clear_error();
      if (vr != X509_V_OK)
        co_return rec_.fail(error_class::auth, "TLS certificate of " + where_ + " is not trusted: " +
                                                   X509_verify_cert_error_string(vr));
      co_return rec_.fail(classify(cause_kind::tls_handshake), "TLS handshake with " + where_ + " failed: " + hec.message());
    }
    rec_.end();
    co_return std::nullopt;
  }

  awaitable<std::optional<ehlo_capabilities>> ehlo() {
    rec_.begin("ehlo");
    auto local = c_.sock.local_endpoint();
    std::string name = local.address().is_v6() ? "[IPv6:" + local.address().to_string() + "]"
                                                : "[" + local.address().to_string() + "]";
    auto reply = co_await command("EHLO " + name + "\r\n", smtp_step::ehlo, 250);
    if (!reply) co_return std::nullopt;
    rec_.end();
    co_return parse_ehlo(*reply);
  }

  awaitable<bool> authenticate(const ehlo_capabilities& caps) {
    rec_.begin("auth");
    if (caps.auth.count("PLAIN")) {
      auto r = co_await command("AUTH PLAIN " + auth_plain(opts_.username, opts_.password) + "\r\n", smtp_step::auth, 235);
      if (!r) co_return false;
    } else if (caps.auth.count("LOGIN")) {
      if (!co_await command("AUTH LOGIN\r\n", smtp_step::auth, 334)) co_return false;
      if (!co_await command(auth_login_step(opts_.username) + "\r\n", smtp_step::auth, 334)) co_return false;
      if (!co_await command(auth_login_step(opts_.password) + "\r\n", smtp_step::auth, 235)) co_return false;
    } else {
      std::string offered;
      for (const auto& m : caps.auth) offered += (offered.empty() ? "" : " ") + m;
      rec_.fail(error_class::auth, where_ + (offered.empty() ? std::string(" offers no AUTH")
                                                              : " offers AUTH " + offered + " but not PLAIN or LOGIN") +
                                       ": remove the username for a relay without authentication, or use another server");
      co_return false;
    }
    rec_.end();
    co_return true;
  }

  smtp_result& fail_io(const io_outcome& o, const std::string& doing) {
    if (o.timed_out) return rec_.fail(error_class::network, where_ + " did not answer in time while " + doing + " (" +
                                                                   ms_text(opts_.step_timeout) + ")");
    // The connection was up: a close or reset now is transient (a retry may get through).
    return rec_.fail(error_class::io_transient, "the connection to " + where_ + " broke while " + doing + ": " + o.ec.message());
  }

  // Reads one reply; nullopt after recording the failure.
  awaitable<std::optional<smtp_reply>> read_reply(smtp_step step) {
    const std::string doing = "waiting for the answer to " + std::string(smtp_step_name(step));
    while (true) {
      auto p = parse_reply(c_.buf);
      if (p.status == reply_status::complete) {
        c_.buf.erase(0, p.consumed);
        rec_.r.reply_code = p.reply.code;
        rec_.r.reply = scrub(p.reply.summary(), secrets_);
        co_return std::move(p.reply);
      }
      if (p.status == reply_status::malformed) {
        rec_.fail(error_class::validation, where_ + " sent a malformed reply (" + scrub(p.error, secrets_) + ")");
        co_return std::nullopt;
      }
      if (c_.buf.size() > max_buffered) {
        rec_.fail(error_class::validation, where_ + " sent a reply longer than 64 KiB");
        co_return std::nullopt;
      }
      auto r = co_await c_.read_some();
      if (r.timed_out || r.ec) {
        fail_io(r, doing);
        co_return std::nullopt;
      }
    }
  }

  // Reads a reply and checks its code is one of `ok`.
  awaitable<std::optional<smtp_reply>> expect(smtp_step step, int ok, int also_ok = 0) {
    auto reply = co_await read_reply(step);
    if (!reply) co_return std::nullopt;
    if (reply->code == ok || (also_ok && reply->code == also_ok)) co_return reply;
    auto cls = classify_smtp_reply(step, reply->code);
    if (cls == error_class::none) cls = error_class::validation;  // a 2xx/3xx where another was due
    rec_.fail(cls, where_ + " answered " + std::string(smtp_step_name(step)) + " with " + rec_.r.reply);
    co_return std::nullopt;
  }

  awaitable<std::optional<smtp_reply>> command(std::string line, smtp_step step, int ok, int also_ok = 0) {
    auto w = co_await c_.write(line);
    std::fill(line.begin(), line.end(), '\0');  // AUTH lines carry the password
    if (w.timed_out || w.ec) {
      fail_io(w, "sending " + std::string(smtp_step_name(step)));
      co_return std::nullopt;
    }
    co_return co_await expect(step, ok, also_ok);
  }

  // Best effort: the message (if any) is already accepted or refused.
  awaitable<void> quit() {
    auto saved_code = rec_.r.reply_code;
    auto saved_reply = rec_.r.reply;
    c_.overall = std::min(c_.overall, steady::now() + std::chrono::seconds(2));
    auto w = co_await c_.write("QUIT\r\n");
    if (!w.timed_out && !w.ec) {
      while (parse_reply(c_.buf).status == reply_status::incomplete) {
        auto r = co_await c_.read_some();
        if (r.timed_out || r.ec || c_.buf.size() > max_buffered) break;
      }
    }
    rec_.r.reply_code = saved_code;
    rec_.r.reply = saved_reply;
    boost::system::error_code ignored;
    c_.sock.close(ignored);
  }

  connection c_;
  const smtp_options& opts_;
  std::string where_;
  std::vector<std::string> secrets_;
  recorder rec_;
};

}  // namespace

awaitable<smtp_result> send_mail(smtp_envelope envelope, smtp_options options) {
  auto ex = co_await asio::this_coro::executor;
  client c(ex, options);
  auto r = co_await c.run(envelope);
  std::fill(options.password.begin(), options.password.end(), '\0');
  co_return r;
}

}  // namespace certfleet::net
