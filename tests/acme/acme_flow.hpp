#pragma once
// The whole DNS-01 issuance as the tests drive it through the client: new order, authorizations
// (reused ones skipped), TXT records put into pebble-challtestsrv, challenges answered and polled,
// finalize with a fresh key's CSR, download, chain read and matched to the key. The job handlers
// do the same with a real DNS provider; here the client is tested on its own.
// `opt` by reference: callers await it in the same full-expression (testbed::run_sync), and an
// aggregate passed by value to a coroutine is destroyed twice by GCC 12.
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "certfleet/acme/client.hpp"
#include "certfleet/acme/keys.hpp"
#include "pebble.hpp"

namespace acme_test {

struct issued {
  std::string key_pem;
  certfleet::acme::issued_certificate cert;
  std::string order_url;
  int reused_authorizations = 0;  // already valid when the order came (pebble's authz reuse)
};

struct issue_options {
  certfleet::acme::key_type type = certfleet::acme::key_type::ecdsa_p256;
  std::string wrong_txt = {};  // non-empty: put this value instead of the right one (validation fails)
  std::string replaces = {};
  std::chrono::milliseconds poll{60000};
};

inline boost::asio::awaitable<certfleet::acme::outcome<issued>> issue(certfleet::acme::client& c,
                                                                      const certfleet::acme::account_key& account,
                                                                      testbed::challtestsrv& dns,
                                                                      std::vector<std::string> domains,
                                                                      const issue_options& opt = {}) {
  using namespace certfleet::acme;
  auto bad = [](std::string m) {
    failure f;
    f.kind = failure_kind::bad_input;
    f.cls = failure_class::permanent;
    f.message = std::move(m);
    return f;
  };
  issued out;
  auto o = co_await c.new_order({domains, opt.replaces, {}});
  if (!o) co_return std::move(o).failure();
  out.order_url = o->url;
  std::vector<std::string> pending;
  std::set<std::string> records;
  for (const auto& url : o->order.authorizations) {
    auto z = co_await c.get_authorization(url);
    if (!z) co_return std::move(z).failure();
    if (z->authorization.status == authorization_status::valid) {
      ++out.reused_authorizations;
      continue;
    }
    const challenge* ch = z->authorization.find("dns-01");
    if (!ch) co_return bad("no dns-01 challenge for " + z->authorization.ident.value);
    auto value = opt.wrong_txt.empty() ? dns01_txt_value(key_authorization(ch->token, account.thumbprint())) : opt.wrong_txt;
    auto name = dns01_record_name(z->authorization.ident.value);
    if (!dns.set_txt(name, value)) co_return bad("challtestsrv refused set-txt " + name);
    records.insert(name);
    auto answered = co_await c.respond_challenge(ch->url);
    if (!answered) co_return std::move(answered).failure();
    pending.push_back(url);
  }
  for (const auto& url : pending) {
    auto z = co_await c.poll_authorization(url, opt.poll);
    if (!z) {
      for (const auto& r : records) dns.clear_txt(r);
      co_return std::move(z).failure();
    }
  }
  for (const auto& r : records) dns.clear_txt(r);
  auto ready = co_await c.poll_order(o->url, opt.poll);
  if (!ready) co_return std::move(ready).failure();
  auto key = generate_private_key(opt.type);
  if (!key) co_return bad(key.error().message);
  auto csr = make_csr(*key, domains);
  if (!csr) co_return bad(csr.error().message);
  auto fin = co_await c.finalize(*ready, *csr);
  if (!fin) co_return std::move(fin).failure();
  auto valid = co_await c.poll_order(o->url, opt.poll);
  if (!valid) co_return std::move(valid).failure();
  if (valid->order.status != order_status::valid) co_return bad("order is " + std::string(order_status_name(valid->order.status)));
  auto pem = co_await c.download_certificate(valid->order.certificate);
  if (!pem) co_return std::move(pem).failure();
  auto chain = read_issued_chain(*pem, *key);
  if (!chain) {
    auto f = bad(chain.error().message);
    f.kind = failure_kind::key_mismatch;
    co_return f;
  }
  out.key_pem = std::move(*key);
  out.cert = std::move(*chain);
  co_return out;
}

}  // namespace acme_test
