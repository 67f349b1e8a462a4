// Webhook POSTs (webhook.hpp): the JSON body, its signature and the status rule of a webhook,
// over the one HTTP client (http.cpp), which owns the connection and the deadline.
#include "certfleet/delivery/webhook.hpp"

#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "certfleet/core/time_text.hpp"
#include "certfleet/net/phase_timing.hpp"
#include "certfleet/delivery/ssh_target.hpp"  // valid_run_id
#include "delivery/codec.hpp"

namespace certfleet::delivery {

using boost::asio::awaitable;
using steady = std::chrono::steady_clock;
using net::ms_since;

namespace {

constexpr std::size_t max_response_body = 64 * 1024;

bool is_signature_header(std::string_view name) {
  constexpr std::string_view sig = "x-certfleet-signature";
  if (name.size() != sig.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != sig[i]) return false;
  }
  return true;
}


webhook_result refused(error_class cls, std::string phase, std::string message, steady::time_point started) {
  webhook_result r;
  r.cls = cls;
  r.phase = phase;
  r.error = std::move(message);
  r.timings.push_back({std::move(phase), ms_since(started)});
  return r;
}

// A webhook's answer: 2xx is success; the rest by what a retry could change.
void classify_status(webhook_result& r, const std::string& where) {
  auto started = steady::now();
  int s = r.status;
  std::string what = where + " answered HTTP " + std::to_string(s);
  auto fail = [&](error_class cls, std::string message) {
    r.cls = cls;
    r.phase = "status";
    r.error = std::move(message);
  };
  if (s >= 200 && s < 300) {
  } else if (s == 401 || s == 403) {
    fail(error_class::auth, what + " (check the webhook secret/credentials)");
  } else if (s == 429 || s >= 500) {
    fail(error_class::io_transient, what);
  } else if (s >= 300 && s < 400) {
    fail(error_class::validation, what + " (redirects are not followed: use the final URL)");
  } else if (s >= 400) {
    fail(error_class::validation, what);
  } else {
    fail(error_class::unknown, what);  // 1xx as a final answer
  }
  r.timings.push_back({"status", ms_since(started)});
}

}  // namespace

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  // HMAC() with an empty key needs a non-null pointer on some OpenSSL builds.
  static const unsigned char empty = 0;
  const void* k = key.empty() ? &empty : static_cast<const void*>(key.data());
  if (!HMAC(EVP_sha256(), k, static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), md, &len))
    return {};
  return hex_encode(std::string_view(reinterpret_cast<const char*>(md), len));
}

awaitable<webhook_result> post_json(webhook_request req) {
  const auto started = steady::now();
  auto wipe = [&] { OPENSSL_cleanse(req.body.data(), req.body.size()); };
  // The webhook's own rules before the transport's: the egress list is required here (fail
  // closed), and the signature header is ours.
  for (const auto& [name, value] : req.headers)
    if (is_signature_header(name)) {
      wipe();
      co_return refused(error_class::validation, "check", "header " + name + " is set by certfleet", started);
    }
  if (!req.egress || req.egress->empty()) {
    auto url = net::parse_url(req.url);
    wipe();
    co_return refused(error_class::validation, "check",
                      url ? "egress_allow_list does not allow " + url->host : url.error().message, started);
  }

  net::http_request h;
  h.method = net::http_method::post;
  h.url = std::move(req.url);
  h.headers = std::move(req.headers);
  bool has_type = std::any_of(h.headers.begin(), h.headers.end(), [](const auto& kv) {
    std::string n = kv.first;
    for (auto& c : n)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return n == "content-type";
  });
  if (!has_type) h.headers.emplace_back("Content-Type", "application/json");
  if (!req.hmac_secret.empty()) h.headers.emplace_back("X-Certfleet-Signature", "sha256=" + hmac_sha256_hex(req.hmac_secret, req.body));
  h.body = std::move(req.body);
  h.cleanse_body = true;  // webhook delivery bodies carry the private key
  h.timeout = req.timeout;
  h.egress = req.egress;
  h.ca_pem = std::move(req.ca_pem);
  h.resolve_pool = req.resolve_pool;
  h.max_body = max_response_body;
  const auto where = net::parse_url(h.url);

  auto res = co_await net::http_exchange(std::move(h));
  webhook_result r;
  r.status = res.status;
  r.cls = res.cls;
  r.error = std::move(res.error);
  r.phase = std::move(res.phase);
  r.body = std::move(res.body);
  r.timings = std::move(res.timings);
  if (auto wait = parse_retry_after(res.header("Retry-After"), system_clock().now_ms())) r.retry_after = std::chrono::seconds(*wait);
  if (r.ok() && where) classify_status(r, where->authority());
  co_return r;
}

awaitable<delivery_result> deliver_webhook(std::string url_text, std::string secret, cert_bundle bundle,
                                           std::string run_id, webhook_options opts) {
  delivery_result out;
  auto started = steady::now();
  auto fail_check = [&](std::string message) -> delivery_result& {
    out.status = delivery_status::failed;
    out.cls = error_class::validation;
    out.phase = "check";
    out.error = "check: " + message;
    out.timings.push_back({"check", ms_since(started)});
    return out;
  };
  auto wipe = [&] { OPENSSL_cleanse(bundle.key_pem.data(), bundle.key_pem.size()); };
  if (!valid_run_id(run_id)) {
    wipe();
    co_return fail_check("run id must be 1-64 characters of [A-Za-z0-9._-]");
  }
  auto url = net::parse_url(url_text, "webhook.url");
  if (!url) {
    wipe();
    co_return fail_check(url.error().field + ": " + url.error().message);
  }
  if (!url->tls() && !opts.allow_plain_http) {
    wipe();
    co_return fail_check("webhook.url: the delivery carries the private key, so the url must be https://");
  }
  auto fp = bundle_fingerprint(bundle);
  if (!fp) {
    wipe();
    co_return fail_check(fp.error().message);
  }
  out.fingerprint_sha256 = *fp;

  boost::json::object doc;
  doc["certificate_pem"] = bundle.cert_pem;
  doc["chain_pem"] = bundle.chain_pem;
  doc["private_key_pem"] = bundle.key_pem;
  doc["fingerprint_sha256"] = *fp;
  doc["run_id"] = run_id;
  webhook_request req;
  req.url = std::move(url_text);
  req.body = boost::json::serialize(doc);
  // The JSON object's copy of the key, too.
  if (auto* k = doc.if_contains("private_key_pem"); k && k->is_string())
    OPENSSL_cleanse(k->as_string().data(), k->as_string().size());
  wipe();
  req.headers.emplace_back("X-Certfleet-Event-Id", run_id);
  req.hmac_secret = std::move(secret);
  req.timeout = opts.timeout;
  req.egress = opts.egress;
  req.ca_pem = std::move(opts.ca_pem);
  req.resolve_pool = opts.resolve_pool;
  out.timings.push_back({"check", ms_since(started)});

  auto r = co_await post_json(std::move(req));
  for (auto& t : r.timings)
    if (t.phase != "check") out.timings.push_back(std::move(t));
  if (r.ok()) {
    out.status = delivery_status::succeeded;
    spdlog::debug("webhook delivery[{}] run {}: succeeded ({}, HTTP {})", url->authority(), run_id, out.fingerprint_sha256,
                  r.status);
  } else {
    out.status = delivery_status::failed;
    out.cls = r.cls;
    out.phase = r.phase;
    out.error = r.phase + ": " + r.error;
    spdlog::debug("webhook delivery[{}] run {}: failed [{}] {}", url->authority(), run_id, error_class_name(out.cls),
                  out.error);
  }
  // r.body is never surfaced: a receiver may echo the request, private key included.
  OPENSSL_cleanse(r.body.data(), r.body.size());
  co_return out;
}

}  // namespace certfleet::delivery
