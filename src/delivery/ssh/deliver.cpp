// DESIGN §4 "SSH delivery of one target", step by step. Each phase is timed and has its own
// deadline (ssh_options); the first failure decides the result's class and message.
#include <openssl/x509.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "certfleet/delivery/pem.hpp"
#include "certfleet/delivery/ssh.hpp"
#include "certfleet/delivery/redact.hpp"
#include "core/openssl_ptr.hpp"
#include "delivery/codec.hpp"
#include "delivery/ssh/outcome.hpp"
#include "delivery/ssh/script.hpp"
#include "delivery/ssh/session.hpp"
#include "certfleet/net/x509.hpp"

namespace certfleet::delivery {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
using detail::failure;
using detail::recorder;
using detail::step;
using detail::steady;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// Where an exec of a script for target `t` ran, for exec_outcome's messages.
detail::exec_context exec_context_for(detail::script_kind script, const ssh_target& t, const ssh_options& opts) {
  return {script, t.user, t.host, t.port, t.sudo, opts.exec_timeout};
}

// The policy when the caller gives none: ssh_allow_list's default (src/core/settings.cpp), every
// public destination and none of this host's own or link-local addresses.
const egress_policy& default_ssh_allow_list() {
  static const egress_policy p = *parse_egress_allow_list(default_ssh_allow_list_text, "ssh_allow_list");
  return p;
}

// ssh_allow_list, applied to what the name resolved to (the only addresses then used), with the
// rule every egress list of certfleet shares (egress_allows: other spellings of loopback, and
// cloud metadata addresses such as fd00:ec2::254 only when listed by address). An empty list
// allows nothing; no list at all (opts.allow null) is the setting's default.
step check_allowed(const ssh_options& opts, const std::string& host, const std::vector<tcp::endpoint>& eps) {
  const egress_policy& allow = opts.allow ? *opts.allow : default_ssh_allow_list();
  std::vector<asio::ip::address> addrs;
  for (const auto& ep : eps) addrs.push_back(ep.address());
  if (net::egress_allows(allow, host, addrs)) return std::nullopt;
  return failure{error_class::validation, "ssh_allow_list does not allow " + host};
}

// Every way of not reaching an SSH (or TLS validation) server — refused, timed out, reset, no
// banner, a failed key exchange — reads the same in a result, which every role of the project
// sees: telling them apart would make delivery a port scanner of whatever the allow-list
// admits (scan-host-key hides it the same way). The cause goes to error_detail (admins only).
failure unreachable(const std::string& where, const failure& cause) {
  return failure{error_class::network, "could not connect to " + where, cause.message};
}

// A leaf certificate served on host:port (with SNI) once; its fingerprint or the failure.
awaitable<step> fetch_served_fingerprint(const ssh_options& opts, const tls_validation& tv, steady::time_point deadline,
                                         std::string& fingerprint) {
  auto ex = co_await asio::this_coro::executor;
  std::vector<tcp::endpoint> eps;
  if (auto f = co_await detail::resolve_on_pool(opts, tv.host, tv.port, eps)) co_return f;
  if (auto f = check_allowed(opts, tv.host, eps)) co_return f;
  const std::string where = "TLS endpoint " + tv.host + ":" + std::to_string(tv.port);
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  // We compare the exact leaf with the one we delivered: stronger than chain verification,
  // and it works for private CAs the machine does not trust.
  ctx.set_verify_mode(asio::ssl::verify_none);
  asio::ssl::stream<tcp::socket> stream(ex, ctx);
  asio::steady_timer timer(ex);
  const std::string& sni = tv.sni.empty() ? tv.host : tv.sni;
  SSL_set_tlsext_host_name(stream.native_handle(), sni.c_str());
  timer.expires_at(deadline);
  auto c = co_await (asio::async_connect(stream.lowest_layer(), eps, tuple_awaitable) || timer.async_wait(tuple_awaitable));
  if (c.index() == 1) co_return unreachable(where, {error_class::network, where + " did not accept in time"});
  if (auto [ec, ep] = std::get<0>(c); ec)
    co_return unreachable(where, {classify(ec), "cannot connect to " + where + ": " + ec.message()});
  timer.expires_at(deadline);
  auto h = co_await (stream.async_handshake(asio::ssl::stream_base::client, tuple_awaitable) || timer.async_wait(tuple_awaitable));
  if (h.index() == 1)
    co_return unreachable(where, {error_class::network, "TLS handshake with " + tv.host + ":" + std::to_string(tv.port) + " timed out"});
  if (auto [ec] = std::get<0>(h); ec)
    co_return unreachable(where, {classify(cause_kind::tls_handshake),
                                  "TLS handshake with " + tv.host + ":" + std::to_string(tv.port) + " failed: " + ec.message()});
  ossl_ptr<X509, X509_free> peer(SSL_get1_peer_certificate(stream.native_handle()));
  if (!peer) co_return failure{error_class::validation, "TLS endpoint sent no certificate"};
  fingerprint = net::fingerprint_sha256(peer.get());
  boost::system::error_code ec;
  stream.lowest_layer().close(ec);
  co_return std::nullopt;
}

// Polls the TLS endpoint until it serves `want` or the deadline passes: services reload
// asynchronously (nginx -s reload returns before the workers have the new certificate).
awaitable<step> validate_tls(const ssh_options& opts, const tls_validation& tv, const std::string& want) {
  auto deadline = steady::now() + opts.validate_timeout;
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer pause(ex);
  step last;
  std::string got;
  for (;;) {
    got.clear();
    last = co_await fetch_served_fingerprint(opts, tv, deadline, got);
    if (!last && got == want) co_return std::nullopt;
    if (!last)
      last = failure{classify(cause_kind::tls_mismatch),
                     tv.host + ":" + std::to_string(tv.port) + " serves certificate sha256 " + got + ", expected " + want};
    if (steady::now() + std::chrono::milliseconds(250) >= deadline) co_return last;
    pause.expires_after(std::chrono::milliseconds(250));
    co_await pause.async_wait(tuple_awaitable);
  }
}

std::vector<std::pair<std::string, unsigned>> target_files(const ssh_target& t) {
  std::vector<std::pair<std::string, unsigned>> v{{t.cert_path, t.cert_mode}, {t.key_path, t.key_mode}};
  if (!t.chain_path.empty()) v.emplace_back(t.chain_path, t.cert_mode);
  return v;
}

// Connect, verify the pinned host key, log in, start SFTP: the common first half.
awaitable<step> open_session(detail::session& s, recorder& rec, const ssh_target& t, const ssh_credential& cred,
                             const ssh_options& opts) {
  rec.begin("resolve");
  std::vector<tcp::endpoint> eps;
  if (auto f = co_await s.resolve(t.host, t.port, eps)) co_return f;
  if (auto f = check_allowed(opts, t.host, eps)) co_return f;
  rec.end();
  const std::string where = ssh_destination(t);
  const auto connect_started = steady::now();
  rec.begin("connect");
  if (auto f = co_await s.connect(eps)) co_return unreachable(where, *f);
  rec.end();
  rec.begin("handshake");
  // The pinned type first, then the others, so a server without that type still completes the
  // handshake and the error can say what it offers instead.
  std::string prefs = t.pinned.type;
  for (const auto& ty : supported_host_key_types())
    if (ty != t.pinned.type) prefs += "," + ty;
  if (auto f = co_await s.handshake(prefs)) {
    // Reported as the connect phase, timed from the connect: a failed banner must not read
    // differently from a refused connection (see unreachable).
    rec.r.timings.pop_back();
    rec.current = "connect";
    rec.started = connect_started;
    co_return unreachable(where, *f);
  }
  rec.end();
  rec.begin("host_key");
  auto offered = s.offered_host_key();
  if (!offered) co_return failure{error_class::auth, "the server's host key could not be read"};
  if (offered->type != t.pinned.type)
    co_return failure{classify(cause_kind::host_key_type), s.peer() + " offers no " + t.pinned.type + " host key (it offered " +
                                                             offered->type + " " + offered->fingerprint() + ")"};
  if (offered->blob != t.pinned.blob)
    co_return failure{classify(cause_kind::host_key_mismatch),
                      "host key mismatch for " + s.peer() + ": offered " + offered->fingerprint() + ", pinned " +
                          t.pinned.fingerprint()};
  rec.end();
  rec.begin("auth");
  // ssh.auth says which half of the credential may be used; the other is never offered.
  ssh_credential use = cred;
  if (t.auth == ssh_auth::key) {
    if (cred.private_key_pem.empty())
      co_return failure{error_class::auth, "ssh.auth is \"key\" but the credential holds no private key"};
    use.password.clear();
  } else if (t.auth == ssh_auth::password) {
    if (cred.password.empty())
      co_return failure{error_class::auth, "ssh.auth is \"password\" but the credential holds no password"};
    use.private_key_pem.clear();
    use.passphrase.clear();
  }
  if (auto f = co_await s.authenticate(t.user, use)) co_return f;
  rec.end();
  rec.begin("sftp");
  if (auto f = co_await s.sftp_start()) co_return f;
  rec.end();
  co_return std::nullopt;
}

// Runs the restore script for `run_id`; fills restored/stderr; returns the failure, if any.
// `secrets`: the private keys its output must not show (redact.hpp): the delivered one, the one
// put back, when known.
awaitable<step> run_restore(detail::session& s, const ssh_target& t, const std::string& run_id, delivery_result& r,
                            const ssh_options& opts, std::vector<std::string_view> secrets) {
  std::vector<std::string> paths;
  for (auto& [p, m] : target_files(t)) paths.push_back(p);
  detail::exec_output out;
  auto f = co_await s.exec(detail::wrap_command(detail::restore_script(paths, run_id, t.post_command), t.sudo), out);
  auto rep = detail::parse_report(out.out);
  // The post command's output joins stderr, which results and job logs keep: no key in it.
  out.err = redact_command_output(out.err, secrets);
  r.restored = rep.restored;
  if (!out.err.empty()) r.remote_stderr = detail::trim_output(r.remote_stderr.empty() ? out.err : r.remote_stderr + "\n" + out.err);
  co_return detail::exec_outcome(exec_context_for(detail::script_kind::restore, t, opts), std::move(f), out, rep);
}

// A failed delivery that may have changed files puts the backup back (detail::restore_needed
// decides); the restore's own failure joins the result's error.
awaitable<void> restore_after_failure(detail::session& s, recorder& rec, const ssh_target& t, const std::string& run_id,
                                      const ssh_options& opts, std::string_view delivered_key) {
  auto started = steady::now();
  // The restore's post command sees the key being put back: read it (best effort; a root-only
  // backup of a sudo target stays unread) so that a raw print of it is recognized too.
  std::string previous_key;
  detail::remote_read kb;
  if (!co_await s.read_file(detail::backup_path_for(t.key_path, run_id), kb) && !kb.missing && !kb.unreadable && !kb.too_big)
    previous_key = std::move(kb.data);
  std::vector<std::string_view> secrets;
  secrets.push_back(delivered_key);
  secrets.push_back(previous_key);
  auto rf = co_await run_restore(s, t, run_id, rec.r, opts, std::move(secrets));
  rec.add_timing("restore", started);
  if (rf) rec.r.error += "; restore: " + rf->message;
}

// The pre-flight checks delivery and rollback share: a run id fit for remote file names and a
// target that passes check_ssh_target (one built in code may not have come through the parser).
step check_request(const ssh_target& t, const std::string& run_id) {
  if (!valid_run_id(run_id)) return failure{error_class::validation, "run id must be 1-64 characters of [A-Za-z0-9._-]"};
  if (auto ok = check_ssh_target(t); !ok) return failure{error_class::validation, ok.error().field + ": " + ok.error().message};
  return std::nullopt;
}

// The delivery after login (hash check, upload, install, validate) over an open session.
// `wrote` turns true once something may have changed on the target.
awaitable<void> deliver_body(detail::session& s, recorder& rec, const ssh_target& t, const cert_bundle& bundle,
                             const std::string& run_id, const ssh_options& opts, const std::string& where, bool& wrote) {
  std::vector<std::pair<std::string, const std::string*>> files{{t.cert_path, &bundle.cert_pem}, {t.key_path, &bundle.key_pem}};
  if (!t.chain_path.empty()) files.emplace_back(t.chain_path, &bundle.chain_pem);

  // Hash-skip: delivery is idempotent; identical files on the host mean nothing to do.
  rec.begin("hash_check");
  bool all_same = true;
  for (auto& [path, data] : files) {
    detail::remote_read rr;
    if (auto f = co_await s.read_file(path, rr)) { rec.fail(*f); co_return; }
    // Unreadable (a root-owned key seen by a sudo target's user): cannot tell, so deliver.
    if (rr.missing || rr.too_big || rr.unreadable || sha256_hex(rr.data) != sha256_hex(*data)) { all_same = false; break; }
  }
  rec.end();
  if (all_same) {
    rec.r.status = delivery_status::skipped_by_hash;
    spdlog::debug("delivery[{}] run {}: files already match, nothing uploaded", where, run_id);
    co_return;
  }

  wrote = true;
  rec.begin("upload");
  std::vector<detail::remote_file> remote;
  for (auto& [path, mode] : target_files(t)) remote.push_back({path, detail::temp_path_for(path, run_id), mode, {}});
  if (t.sudo) {
    // The login user can rarely write where root-owned services read their keys: stage the
    // files in the user's own 0700 directory; the sudo'd script copies them next to their
    // destination, from where the mv -f into place stays one atomic rename.
    std::string home;
    if (auto f = co_await s.home_dir(home)) { rec.fail(*f); co_return; }
    std::string staging = detail::staging_dir_for(home, run_id);
    co_await s.make_dir(staging.substr(0, staging.rfind('/')), 0700);
    co_await s.make_dir(staging, 0700);
    for (std::size_t i = 0; i < remote.size(); ++i)
      remote[i].staged = staging + "/" + std::to_string(i) + "-" + remote[i].path.substr(remote[i].path.rfind('/') + 1);
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto& dest = remote[i].staged.empty() ? remote[i].temp : remote[i].staged;
    if (auto f = co_await s.write_file(dest, *files[i].second, remote[i].mode)) {
      rec.fail(*f);
      // Best effort: leave no temp (with key material) behind on a connection that still works.
      for (std::size_t j = 0; j <= i; ++j)
        (void)co_await s.remove_file(remote[j].staged.empty() ? remote[j].temp : remote[j].staged);
      co_return;
    }
  }
  rec.end();

  rec.begin("install");
  detail::exec_output out;
  auto f = co_await s.exec(detail::wrap_command(detail::install_script(remote, run_id, t.owner, t.post_command), t.sudo), out);
  auto rep = detail::parse_report(out.out);
  out.err = redact_command_output(out.err, bundle.key_pem);
  rec.r.remote_stderr = detail::trim_output(out.err);
  if (auto f2 = detail::exec_outcome(exec_context_for(detail::script_kind::install, t, opts), std::move(f), out, rep)) {
    rec.fail(*f2);
    if (detail::restore_needed(detail::failed_stage::install, rep)) co_await restore_after_failure(s, rec, t, run_id, opts, bundle.key_pem);
    co_return;
  }
  rec.end();

  if (t.validate_tls || t.validate_remote_hash) {
    rec.begin("validate");
    step vf;
    if (t.validate_tls) {
      vf = co_await validate_tls(opts, *t.validate_tls, rec.r.fingerprint_sha256);
    } else {
      for (auto& [path, data] : files) {
        detail::remote_read rr;
        if ((vf = co_await s.read_file(path, rr))) break;
        std::string got;
        if (rr.unreadable && t.sudo) {
          // The file is root's now: let sha256sum (under the same sudo) read it.
          detail::exec_output ho;
          if ((vf = co_await s.exec(detail::wrap_command("sha256sum -- " + shell_quote(path), true), ho))) break;
          got = ho.out.substr(0, ho.out.find(' '));
        } else if (!rr.missing && !rr.unreadable) {
          got = sha256_hex(rr.data);
        }
        if (got != sha256_hex(*data)) {
          vf = failure{classify(cause_kind::remote_hash_mismatch), path + " does not hold the delivered bytes"};
          break;
        }
      }
    }
    if (vf) {
      rec.fail(*vf);
      if (detail::restore_needed(detail::failed_stage::validate, rep)) co_await restore_after_failure(s, rec, t, run_id, opts, bundle.key_pem);
      co_return;
    }
    rec.end();
  }
  rec.r.status = delivery_status::succeeded;
}

// The rollback after login: read the backups, restore, validate.
awaitable<void> rollback_body(detail::session& s, recorder& rec, const ssh_target& t, const std::string& run_id,
                              const ssh_options& opts, const std::string&, bool& wrote) {
  // Read the backups first: their bytes are what validation must find afterwards.
  rec.begin("read_backup");
  std::vector<std::pair<std::string, detail::remote_read>> backups;
  for (auto& [path, mode] : target_files(t)) {
    detail::remote_read rr;
    if (auto f = co_await s.read_file(detail::backup_path_for(path, run_id), rr)) { rec.fail(*f); co_return; }
    backups.emplace_back(path, std::move(rr));
  }
  rec.end();
  wrote = true;
  rec.begin("restore");
  // The key being put back is the one its output must not show.
  std::string_view key_backup;
  if (backups.size() > 1 && !backups[1].second.missing && !backups[1].second.unreadable) key_backup = backups[1].second.data;
  // Named first: GCC 12 mishandles temporaries built inside a co_await expression.
  std::vector<std::string_view> secrets;
  secrets.push_back(key_backup);
  if (auto f = co_await run_restore(s, t, run_id, rec.r, opts, std::move(secrets))) {
    rec.fail(*f);
    co_return;
  }
  rec.end();
  const auto& cert_backup = backups.front().second;
  if (!cert_backup.missing && !cert_backup.too_big && !cert_backup.unreadable)
    if (auto fp = certificate_fingerprint(cert_backup.data)) rec.r.fingerprint_sha256 = *fp;
  rec.begin("validate");
  if (t.validate_tls && !rec.r.fingerprint_sha256.empty()) {
    if (auto f = co_await validate_tls(opts, *t.validate_tls, rec.r.fingerprint_sha256)) { rec.fail(*f); co_return; }
  } else {
    for (auto& [path, b] : backups) {
      // A root-only backup (sudo target) was restored by the sudo'd script; its exit status
      // is the check there.
      if (b.too_big || b.unreadable) continue;
      detail::remote_read now;
      if (auto f = co_await s.read_file(path, now)) { rec.fail(*f); co_return; }
      // A backup that does not exist is the ".absent" marker: the file must be gone again.
      if (now.missing != b.missing || now.data != b.data) {
        rec.fail({classify(cause_kind::remote_hash_mismatch), path + " does not hold the backed-up bytes after restore"});
        co_return;
      }
    }
  }
  rec.end();
  rec.r.status = delivery_status::succeeded;
}

}  // namespace

struct ssh_connection::state {
  ssh_options opts;  // the session keeps a reference: set before it is made, kept while it lives
  std::unique_ptr<detail::session> session;
  std::string key;
  int uses = 0;

  awaitable<void> close() {
    if (session) co_await session->close();
    session.reset();
    key.clear();
    uses = 0;
  }
};

ssh_connection::state& connection_state(ssh_connection& c) { return *c.s_; }

ssh_connection::ssh_connection(asio::any_io_executor ex) : ex_(std::move(ex)), s_(std::make_unique<state>()) {}
ssh_connection::~ssh_connection() = default;
bool ssh_connection::is_open() const noexcept { return s_->session != nullptr; }
const std::string& ssh_connection::key() const noexcept { return s_->key; }
int ssh_connection::uses() const noexcept { return s_->uses; }
awaitable<void> ssh_connection::close() { co_await s_->close(); }

std::string ssh_connection_key(const ssh_target& t, const ssh_credential& cred) {
  // Length-prefixed, so no two different secrets hash alike by moving a boundary.
  std::string secret;
  for (const auto* part : {&cred.private_key_pem, &cred.passphrase, &cred.password})
    secret += std::to_string(part->size()) + ":" + *part;
  return t.user + "@" + ssh_destination(t) + " " + ssh_auth_name(t.auth) + " " + t.pinned.to_line() + " " +
         sha256_hex(secret);
}

namespace {

using body_fn = std::function<awaitable<void>(detail::session&, recorder&, bool& wrote)>;

// The common frame of a delivery or rollback over `conn`: reuse or open the connection, run the
// body, hand the connection on after a success or close it after a failure.
awaitable<delivery_result> over_connection(recorder rec, const ssh_target& t, const ssh_credential& cred,
                                           const ssh_options& opts, ssh_connection& conn, const std::string& where,
                                           const body_fn& body) {
  auto& c = connection_state(conn);
  const auto key = ssh_connection_key(t, cred);
  const auto checked = rec;  // the pre-flight phase, for a second try on a new connection
  bool reused = c.session && c.key == key;
  for (;;) {
    if (!reused) {
      co_await c.close();
      c.opts = opts;
      auto ex = co_await asio::this_coro::executor;
      c.session = std::make_unique<detail::session>(ex, c.opts);
      if (auto f = co_await open_session(*c.session, rec, t, cred, c.opts)) {
        rec.fail(*f);
        break;
      }
      c.key = key;
    }
    bool wrote = false;
    co_await body(*c.session, rec, wrote);
    // A reused connection the server dropped while it sat idle fails at its first read, before
    // anything was written: that target gets a new connection instead of a failure.
    if (!rec.r.ok() && reused && !wrote && retryable(rec.r.cls)) {
      spdlog::debug("delivery[{}]: the reused connection failed ({}); opening a new one", where, rec.r.error);
      rec = checked;
      reused = false;
      continue;
    }
    break;
  }
  rec.r.reused_connection = reused;
  if (rec.r.ok()) {
    ++c.uses;
  } else {
    co_await c.close();
  }
  co_return std::move(rec.r);
}

}  // namespace

awaitable<delivery_result> deliver_ssh(ssh_target t, ssh_credential cred, cert_bundle bundle, std::string run_id,
                                       ssh_options opts, ssh_connection& conn) {
  recorder rec;
  rec.begin("check");
  if (auto f = check_request(t, run_id)) co_return rec.fail(*f);
  auto fp = bundle_fingerprint(bundle);
  if (!fp) co_return rec.fail({error_class::validation, fp.error().message});
  rec.r.fingerprint_sha256 = *fp;
  rec.end();

  const std::string where = t.user + "@" + t.host + ":" + std::to_string(t.port);
  spdlog::debug("delivery[{}] run {}: start ({} files)", where, run_id, t.chain_path.empty() ? 2 : 3);
  body_fn body = [&](detail::session& s, recorder& r, bool& wrote) {
    return deliver_body(s, r, t, bundle, run_id, opts, where, wrote);
  };
  auto r = co_await over_connection(std::move(rec), t, cred, opts, conn, where, body);
  if (r.ok())
    spdlog::debug("delivery[{}] run {}: {} ({}{})", where, run_id, delivery_status_name(r.status), r.fingerprint_sha256,
                  r.reused_connection ? ", reused connection" : "");
  else
    spdlog::debug("delivery[{}] run {}: failed [{}] {}{}", where, run_id, error_class_name(r.cls), r.error,
                  r.error_detail.empty() ? "" : " (" + r.error_detail + ")");
  co_return r;
}

awaitable<delivery_result> deliver_ssh(ssh_target t, ssh_credential cred, cert_bundle bundle, std::string run_id,
                                       ssh_options opts) {
  auto ex = co_await asio::this_coro::executor;
  ssh_connection conn(ex);
  auto r = co_await deliver_ssh(std::move(t), std::move(cred), std::move(bundle), std::move(run_id), std::move(opts), conn);
  co_await conn.close();
  co_return r;
}

awaitable<delivery_result> rollback_ssh(ssh_target t, ssh_credential cred, std::string run_id, ssh_options opts,
                                        ssh_connection& conn) {
  recorder rec;
  rec.begin("check");
  if (auto f = check_request(t, run_id)) co_return rec.fail(*f);
  rec.end();
  const std::string where = t.user + "@" + t.host + ":" + std::to_string(t.port);
  body_fn body = [&](detail::session& s, recorder& r, bool& wrote) {
    return rollback_body(s, r, t, run_id, opts, where, wrote);
  };
  auto r = co_await over_connection(std::move(rec), t, cred, opts, conn, where, body);
  spdlog::debug("rollback[{}] run {}: {} {}", where, run_id, delivery_status_name(r.status), r.error);
  co_return r;
}

awaitable<delivery_result> rollback_ssh(ssh_target t, ssh_credential cred, std::string run_id, ssh_options opts) {
  auto ex = co_await asio::this_coro::executor;
  ssh_connection conn(ex);
  auto r = co_await rollback_ssh(std::move(t), std::move(cred), std::move(run_id), std::move(opts), conn);
  co_await conn.close();
  co_return r;
}

awaitable<result<void>> check_ssh_destination(std::string host, std::uint16_t port, std::string field, ssh_options opts) {
  std::vector<tcp::endpoint> eps;
  if (auto f = co_await detail::resolve_on_pool(opts, host, port, eps))
    co_return make_error(errc::invalid_argument, "ssh_allow_list cannot be applied: " + f->message, field);
  if (auto f = check_allowed(opts, host, eps)) co_return make_error(errc::invalid_argument, f->message, field);
  co_return result<void>{};
}

awaitable<result<std::vector<scanned_host_key>>> scan_host_key(std::string host, std::uint16_t port, ssh_options opts) {
  if (!valid_host_name(host)) co_return make_error(errc::invalid_argument, "invalid host name", "host");
  if (port == 0) co_return make_error(errc::invalid_argument, "port must be 1-65535", "port");
  const std::string where = host + ":" + std::to_string(port);
  // One answer for every way of not finding an SSH server: the route must not tell a closed
  // port from a filtered one or from another service. The operator's log has the cause.
  auto no_answer = [&](const std::string& why) {
    spdlog::info("scan-host-key {}: {}", where, why);
    return make_error(errc::ssh_unreachable, "no SSH server answered at " + where, "host");
  };
  auto ex = co_await asio::this_coro::executor;
  std::vector<tcp::endpoint> eps;
  if (auto f = co_await detail::resolve_on_pool(opts, host, port, eps)) co_return no_answer(f->message);
  if (auto f = check_allowed(opts, host, eps)) co_return make_error(errc::invalid_argument, f->message, "ssh.host");
  std::vector<scanned_host_key> keys;
  std::string last_failure = "offered no host key libssh2 can verify (ed25519 or ECDSA)";
  // One handshake per key type, each offering only that type: a server shows one host key per
  // handshake, and an operator should see (and choose among) all of them.
  for (const auto& type : supported_host_key_types()) {
    detail::session s(ex, opts);
    std::vector<tcp::endpoint> copy = eps;
    auto f = co_await s.connect(copy);
    if (f) {
      co_await s.close();
      co_return no_answer(f->message);
    }
    f = co_await s.handshake(type);
    if (!f) {
      if (auto k = s.offered_host_key(); k && k->type == type) keys.push_back({k->to_line(), k->fingerprint()});
    } else {
      last_failure = f->message;
    }
    co_await s.close();
  }
  if (keys.empty()) co_return no_answer(last_failure);
  co_return keys;
}

}  // namespace certfleet::delivery
