// Credentials (catalog.hpp): the body, the sealed secret, the view.
#include "certfleet/catalog/catalog.hpp"

#include "certfleet/catalog/body_fields.hpp"
#include "certfleet/catalog/kinds.hpp"

#include "certfleet/delivery/pem.hpp"

#include <boost/asio/ip/address.hpp>

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace certfleet::catalog {

namespace json = boost::json;
using namespace body_fields;

result<new_credential> parse_credential_request(std::string_view body) {
  auto o = body_object(body, {"name", "kind", "private_key_pem", "passphrase", "password"});
  if (!o) return std::move(o).error();
  new_credential c;
  auto name = name_of(*o);
  if (!name) return std::move(name).error();
  c.name = std::move(*name);
  auto kind = text(*o, "kind", true, 16);
  if (!kind) return std::move(kind).error();
  c.kind = *kind;
  auto pem = text(*o, "private_key_pem", false);
  if (!pem) return std::move(pem).error();
  auto pass = text(*o, "passphrase", false, 1024);
  if (!pass) return std::move(pass).error();
  auto pw = text(*o, "password", false, 1024);
  if (!pw) return std::move(pw).error();
  if (c.kind == "ssh_key") {
    if (pem->empty()) return bad("private_key_pem", "private_key_pem is required for kind ssh_key");
    if (!pw->empty()) return bad("password", "password is for kind password, not ssh_key");
    auto info = delivery::parse_ssh_private_key(*pem, *pass);
    if (!info) return std::move(info).error();
    c.public_key_fingerprint = info->fingerprint;
    c.public_key = info->public_line;
    c.key_type = info->type;
    c.secret.private_key_pem = std::move(*pem);
    c.secret.passphrase = std::move(*pass);
  } else if (c.kind == "password") {
    if (pw->empty()) return bad("password", "password is required for kind password");
    if (!pem->empty()) return bad("private_key_pem", "private_key_pem is for kind ssh_key, not password");
    c.secret.password = std::move(*pw);
  } else {
    return bad("kind", "kind must be \"ssh_key\" or \"password\"");
  }
  return c;
}

result<store::catalog_object> make_credential_object(const new_credential& c, const kek& key, std::string id,
                                                     std::string project_id, time_ms now) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_credential);
  o.name = c.name;
  json::object doc{{"kind", c.kind}};
  if (!c.public_key_fingerprint.empty()) {
    doc["public_key_fingerprint"] = c.public_key_fingerprint;
    doc["public_key"] = c.public_key;
    doc["key_type"] = c.key_type;
  }
  o.doc = json::serialize(doc);
  o.created_at = now;
  auto secret = json::serialize(json::object{{"private_key_pem", c.secret.private_key_pem},
                                             {"passphrase", c.secret.passphrase},
                                             {"password", c.secret.password}});
  auto sealed = seal(key, secret, aad_for(o, sealed_secret));
  std::fill(secret.begin(), secret.end(), '\0');
  if (!sealed) return std::move(sealed).error();
  o.sealed = std::move(*sealed);
  return o;
}

result<credential_secret> open_credential(const kek& key, const store::catalog_object& o) {
  auto plain = open_sealed(key, o.sealed, aad_for(o, sealed_secret));
  if (!plain) return std::move(plain).error();
  boost::system::error_code ec;
  auto v = json::parse(*plain, ec);
  std::fill(plain->begin(), plain->end(), '\0');
  if (ec || !v.is_object()) return make_error(errc::store_failure, fmt::format("credential {} is damaged", o.id), "credential_id");
  credential_secret s;
  const auto& so = v.as_object();
  auto get = [&](const char* k) { auto* p = so.if_contains(k); return p && p->is_string() ? std::string(p->as_string()) : std::string(); };
  s.private_key_pem = get("private_key_pem");
  s.passphrase = get("passphrase");
  s.password = get("password");
  return s;
}

boost::json::object credential_view(const store::catalog_object& o) {
  auto v = base_view(o);
  auto d = parse_doc(o);
  for (const char* k : {"kind", "public_key_fingerprint", "public_key", "key_type"})
    if (auto* p = d.if_contains(k)) v[k] = *p;
  return v;
}

}  // namespace certfleet::catalog
