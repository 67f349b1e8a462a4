// Targets (catalog.hpp): the body of each delivery module's fields, the stored document and its
// stamps (SSH auth, file grant), the view.
#include "certfleet/catalog/catalog.hpp"

#include "certfleet/catalog/body_fields.hpp"
#include "certfleet/net/http.hpp"  // parse_url

#include <boost/asio/ip/address.hpp>

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace certfleet::catalog {

namespace json = boost::json;
using namespace body_fields;

std::string target_spec::lock_key() const {
  switch (module) {
    case delivery::module_kind::ssh: return fmt::format("{}:{}:{}", ssh.host, ssh.port, ssh.cert_path);
    case delivery::module_kind::file: return "file:" + file.cert_path;
    case delivery::module_kind::webhook: break;
  }
  return "webhook:" + webhook_url;
}

namespace {
// Stored documents only: parse_target_request's allowed members do not include it.
constexpr std::string_view file_grant_member = "created_by_system_admin";

result<target_spec> parse_target_fields(const json::object& o) {
  target_spec t;
  auto module_text = text(o, "module", true, 16);
  if (!module_text) return std::move(module_text).error();
  auto module = delivery::parse_module(*module_text);
  if (!module) return bad("module", "module must be " + delivery::module_choices());
  t.module = *module;
  const json::value* validate = o.if_contains("validate");
  auto only_one = [&](const char* which) -> result<void> {
    for (const auto& m : delivery::all_modules())
      if (m.name != which && o.if_contains(m.name))
        return bad(std::string(m.name), fmt::format("a {} target has no {} section", which, m.name));
    auto* s = o.if_contains(which);
    if (!s || !s->is_object()) return bad(which, fmt::format("{} must be an object", which));
    return {};
  };
  if (t.module == delivery::module_kind::ssh) {
    if (auto r = only_one("ssh"); !r) return std::move(r).error();
    json::object ssh = o.at("ssh").as_object();
    auto cred = id_field(ssh, "credential_id", true, "ssh.");
    if (!cred) return std::move(cred).error();
    t.credential_id = *cred;
    ssh.erase("credential_id");
    static constexpr std::string_view known[] = {"host", "port", "user", "auth", "host_key", "cert_path", "key_path",
                                                 "chain_path", "cert_mode", "key_mode", "owner", "sudo", "post_command"};
    for (const auto& [k, _] : ssh)
      if (std::find(std::begin(known), std::end(known), std::string_view(k)) == std::end(known))
        return bad("ssh." + std::string(k), fmt::format("unknown field \"ssh.{}\"", std::string_view(k)));
    json::value sv(std::move(ssh));
    auto parsed = delivery::parse_ssh_target(sv, validate);
    if (!parsed) return std::move(parsed).error();
    t.ssh = std::move(*parsed);
  } else if (t.module == delivery::module_kind::file) {
    if (auto r = only_one("file"); !r) return std::move(r).error();
    if (validate && !validate->is_null()) return bad("validate", "file targets validate by hash on their own");
    static constexpr std::string_view known[] = {"cert_path", "key_path", "chain_path", "cert_mode", "key_mode",
                                                 "post_command"};
    for (const auto& [k, _] : o.at("file").as_object())
      if (std::find(std::begin(known), std::end(known), std::string_view(k)) == std::end(known))
        return bad("file." + std::string(k), fmt::format("unknown field \"file.{}\"", std::string_view(k)));
    auto parsed = delivery::parse_file_target(o.at("file"));
    if (!parsed) return std::move(parsed).error();
    t.file = std::move(*parsed);
    if (auto* g = o.if_contains(file_grant_member); g && g->is_string()) t.created_by_system_admin = std::string(g->as_string());
  } else if (t.module == delivery::module_kind::webhook) {
    if (auto r = only_one("webhook"); !r) return std::move(r).error();
    if (validate && !validate->is_null()) return bad("validate", "webhook targets have no validation step");
    const auto& w = o.at("webhook").as_object();
    for (const auto& [k, _] : w)
      if (k != "url" && k != "secret_credential_id" && k != "allow_plain_http")
        return bad("webhook." + std::string(k), fmt::format("unknown field \"webhook.{}\"", std::string_view(k)));
    auto url = text(w, "url", true, 2048, "webhook.");
    if (!url) return std::move(url).error();
    auto u = net::parse_url(*url, "webhook.url");
    if (!u) return std::move(u).error();
    t.webhook_url = *url;
    auto cred = id_field(w, "secret_credential_id", true, "webhook.");
    if (!cred) return std::move(cred).error();
    t.credential_id = *cred;
    auto plain = boolean(w, "allow_plain_http", false);
    if (!plain) return std::move(plain).error();
    t.webhook_allow_http = *plain;
    if (!u->tls() && !t.webhook_allow_http)
      return bad("webhook.url", "webhook.url must be https:// (the body carries the private key); "
                                "set webhook.allow_plain_http for a receiver on a trusted host");
  } else {
    return bad("module", "module must be " + delivery::module_choices());
  }
  return t;
}
}  // namespace

result<new_target> parse_target_request(std::string_view body) {
  auto o = body_object(body, {"name", "module", "ssh", "file", "webhook", "validate"});
  if (!o) return std::move(o).error();
  new_target t;
  auto name = name_of(*o);
  if (!name) return std::move(name).error();
  t.name = std::move(*name);
  auto spec = parse_target_fields(*o);
  if (!spec) return std::move(spec).error();
  t.spec = std::move(*spec);
  o->erase("name");
  t.doc = json::serialize(*o);
  return t;
}

std::string stamp_ssh_auth(std::string_view doc, std::string_view auth) {
  boost::system::error_code ec;
  auto v = json::parse(doc, ec);
  if (ec || !v.is_object()) return std::string(doc);
  if (auto* ssh = v.as_object().if_contains("ssh"); ssh && ssh->is_object()) ssh->as_object()["auth"] = auth;
  return json::serialize(v);
}

std::string stamp_file_grant(std::string_view doc, std::string_view actor) {
  boost::system::error_code ec;
  auto v = json::parse(doc, ec);
  if (ec || !v.is_object()) return std::string(doc);
  v.as_object()[file_grant_member] = actor;
  return json::serialize(v);
}

result<target_spec> parse_target_doc(const store::catalog_object& o) {
  auto d = parse_doc(o);
  auto spec = parse_target_fields(d);
  if (!spec)
    return make_error(errc::store_failure, fmt::format("target {} ({}) is not valid any more: {}", o.name, o.id,
                                                       spec.error().message), "target_ids");
  return spec;
}

boost::json::object target_view(const store::catalog_object& o) {
  auto v = base_view(o);
  for (auto& [k, val] : parse_doc(o)) v[k] = val;
  return v;
}

}  // namespace certfleet::catalog
