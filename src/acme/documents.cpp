// ACME documents and answer headers (documents.hpp): strict where the client depends on a member,
// silent about members it does not use.
#include "certfleet/acme/documents.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <tuple>

#include "certfleet/acme/jose.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/net/http.hpp"

namespace certfleet::acme {

namespace json = boost::json;

namespace {

constexpr std::size_t max_depth = 16;
constexpr std::size_t max_list = 1000;  // identifiers, authorizations, challenges, subproblems

error bad(std::string field, std::string message) {
  return make_error(errc::invalid_argument, field + " " + message, field);
}

// The document as a JSON object; `what` names it in errors.
result<json::object> parse_object(std::string_view text, std::string_view what) {
  if (text.size() > max_document_bytes)
    return make_error(errc::payload_too_large,
                      std::string(what) + " is larger than " + std::to_string(max_document_bytes) + " bytes",
                      std::string(what));
  auto trimmed = text;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.front()))) trimmed.remove_prefix(1);
  if (trimmed.empty()) return make_error(errc::invalid_argument, std::string(what) + " is empty, not a JSON object", std::string(what));
  if (trimmed.front() == '<')
    return make_error(errc::invalid_argument, std::string(what) + " is HTML or XML, not JSON", std::string(what));
  auto v = certfleet::json::parse_value(text, what, max_depth);
  if (!v) return std::move(v).error();
  if (!v->is_object()) return make_error(errc::invalid_argument, std::string(what) + " is not a JSON object", std::string(what));
  return std::move(v->as_object());
}

// A member read with its path for errors.
struct reader {
  const json::object& o;
  std::string path;  // "order"

  std::string field(std::string_view key) const { return path + "." + std::string(key); }

  const json::value* get(std::string_view key) const {
    auto* v = o.if_contains(key);
    return v && !v->is_null() ? v : nullptr;
  }

  result<std::string> string(std::string_view key, bool required) const {
    auto* v = get(key);
    if (!v) {
      if (required) return bad(field(key), "is missing");
      return std::string();
    }
    if (!v->is_string()) return bad(field(key), "must be a string");
    return std::string(v->as_string());
  }

  // An absolute http(s) URL (the client will send requests there).
  result<std::string> url(std::string_view key, bool required) const {
    auto s = string(key, required);
    if (!s || s->empty()) return s;
    if (!net::parse_url(*s, field(key))) return bad(field(key), "is not an absolute http(s) URL");
    return s;
  }

  result<bool> boolean(std::string_view key) const {
    auto* v = get(key);
    if (!v) return false;
    if (!v->is_bool()) return bad(field(key), "must be true or false");
    return v->as_bool();
  }

  result<const json::array*> array(std::string_view key, bool required) const {
    auto* v = get(key);
    if (!v) {
      if (required) return bad(field(key), "is missing");
      return static_cast<const json::array*>(nullptr);
    }
    if (!v->is_array()) return bad(field(key), "must be an array");
    if (v->as_array().size() > max_list)
      return bad(field(key), "has more than " + std::to_string(max_list) + " entries");
    return &v->as_array();
  }

  result<std::vector<std::string>> strings(std::string_view key, bool required, bool urls) const {
    auto a = array(key, required);
    if (!a) return std::move(a).error();
    std::vector<std::string> out;
    if (!*a) return out;
    for (std::size_t i = 0; i < (*a)->size(); ++i) {
      const auto& e = (**a)[i];
      std::string f = field(key) + "[" + std::to_string(i) + "]";
      if (!e.is_string()) return bad(f, "must be a string");
      if (urls && !net::parse_url(e.as_string(), f)) return bad(f, "is not an absolute http(s) URL");
      out.emplace_back(e.as_string());
    }
    return out;
  }
};

template <class E, std::size_t N>
std::optional<E> enum_of(std::string_view s, const std::array<std::pair<std::string_view, E>, N>& table) {
  for (const auto& [name, e] : table)
    if (name == s) return e;
  return std::nullopt;
}

template <class E, std::size_t N>
std::string_view name_of(E e, const std::array<std::pair<std::string_view, E>, N>& table) {
  for (const auto& [name, v] : table)
    if (v == e) return name;
  return "?";
}

template <class E, std::size_t N>
std::string choices(const std::array<std::pair<std::string_view, E>, N>& table) {
  std::string out;
  for (const auto& [name, e] : table) out += (out.empty() ? "" : "|") + std::string(name);
  return out;
}

constexpr std::array<std::pair<std::string_view, order_status>, 5> order_statuses{{
    {"pending", order_status::pending},
    {"ready", order_status::ready},
    {"processing", order_status::processing},
    {"valid", order_status::valid},
    {"invalid", order_status::invalid},
}};

constexpr std::array<std::pair<std::string_view, authorization_status>, 6> authorization_statuses{{
    {"pending", authorization_status::pending},
    {"valid", authorization_status::valid},
    {"invalid", authorization_status::invalid},
    {"deactivated", authorization_status::deactivated},
    {"expired", authorization_status::expired},
    {"revoked", authorization_status::revoked},
}};

constexpr std::array<std::pair<std::string_view, challenge_status>, 4> challenge_statuses{{
    {"pending", challenge_status::pending},
    {"processing", challenge_status::processing},
    {"valid", challenge_status::valid},
    {"invalid", challenge_status::invalid},
}};

bool base64url_decodable(std::string_view s) {
  if (s.size() % 4 == 1) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

result<identifier> read_identifier(const json::value& v, const std::string& path) {
  if (!v.is_object()) return bad(path, "must be an object");
  reader r{v.as_object(), path};
  auto type = r.string("type", true);
  if (!type) return std::move(type).error();
  auto value = r.string("value", true);
  if (!value) return std::move(value).error();
  return identifier{std::move(*type), std::move(*value)};
}

result<problem> read_problem(const json::object& o, const std::string& path, bool nested) {
  reader r{o, path};
  problem p;
  auto type = r.string("type", false);
  if (!type) return std::move(type).error();
  p.type = std::move(*type);
  auto detail = r.string("detail", false);
  if (!detail) return std::move(detail).error();
  p.detail = std::move(*detail);
  if (auto* s = r.get("status")) {
    if (!s->is_int64() || s->as_int64() < 100 || s->as_int64() > 599) return bad(r.field("status"), "must be an HTTP status (100-599)");
    p.status = static_cast<int>(s->as_int64());
  }
  if (auto* id = r.get("identifier")) {
    auto ident = read_identifier(*id, r.field("identifier"));
    if (!ident) return std::move(ident).error();
    p.ident = std::move(*ident);
  }
  if (!nested) {
    auto subs = r.array("subproblems", false);
    if (!subs) return std::move(subs).error();
    if (*subs) {
      for (std::size_t i = 0; i < (*subs)->size(); ++i) {
        std::string f = r.field("subproblems") + "[" + std::to_string(i) + "]";
        const auto& e = (**subs)[i];
        if (!e.is_object()) return bad(f, "must be an object");
        auto sp = read_problem(e.as_object(), f, true);
        if (!sp) return std::move(sp).error();
        p.subproblems.push_back(std::move(*sp));
      }
    }
  }
  return p;
}

// A problem nested in another document ("error" of an order or a challenge).
result<std::optional<problem>> optional_problem(const reader& r, std::string_view key) {
  auto* v = r.get(key);
  if (!v) return std::optional<problem>();
  if (!v->is_object()) return bad(r.field(key), "must be an object");
  auto p = read_problem(v->as_object(), r.field(key), false);
  if (!p) return std::move(p).error();
  return std::optional<problem>(std::move(*p));
}

result<challenge> read_challenge(const json::object& o, const std::string& path) {
  reader r{o, path};
  challenge c;
  auto type = r.string("type", true);
  if (!type) return std::move(type).error();
  c.type = std::move(*type);
  auto url = r.url("url", true);
  if (!url) return std::move(url).error();
  c.url = std::move(*url);
  auto status = r.string("status", true);
  if (!status) return std::move(status).error();
  auto st = enum_of(*status, challenge_statuses);
  if (!st) return bad(r.field("status"), "must be one of " + choices(challenge_statuses));
  c.status = *st;
  auto token = r.string("token", false);
  if (!token) return std::move(token).error();
  c.token = std::move(*token);
  // The token goes into a DNS record and a hash: only the base64url alphabet, ≥ 128 bits
  // (§8.1), for the token-based types this client answers.
  if (c.type == "dns-01" || c.type == "http-01" || c.type == "tls-alpn-01") {
    if (c.token.size() < 22 || c.token.size() > 512 || !base64url_decodable(c.token))
      return bad(r.field("token"), "must be a base64url string of at least 128 bits");
  }
  auto validated = r.string("validated", false);
  if (!validated) return std::move(validated).error();
  c.validated = std::move(*validated);
  auto err = optional_problem(r, "error");
  if (!err) return std::move(err).error();
  c.error = std::move(*err);
  return c;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Space-separated words (a rel="a b" list).
std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

// ---- problems ---------------------------------------------------------------------------------

std::string_view problem::acme_type() const {
  std::string_view t = type;
  if (t.substr(0, acme_error_prefix.size()) == acme_error_prefix) return t.substr(acme_error_prefix.size());
  return t;
}

std::string problem::text() const {
  auto one = [](const problem& p) {
    std::string s = p.type.empty() ? std::string("about:blank") : p.type;
    if (!p.detail.empty()) s += ": " + p.detail;
    return s;
  };
  std::string out = one(*this);
  for (const auto& sp : subproblems) {
    out += "; ";
    if (sp.ident) out += sp.ident->type + " " + sp.ident->value + ": ";
    out += one(sp);
  }
  // One line: a CA's detail may contain newlines; the log and the job error keep one line.
  for (auto& c : out)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return out;
}

result<problem> parse_problem(std::string_view text) {
  auto o = parse_object(text, "problem");
  if (!o) return std::move(o).error();
  return read_problem(*o, "problem", false);
}

std::string_view failure_class_name(failure_class c) noexcept {
  return c == failure_class::permanent ? "permanent" : "transient";
}

failure_class classify_problem(const problem& p) noexcept {
  // A later attempt may succeed: the CA's limit resets, its fault clears, a fresh nonce.
  static constexpr std::array<std::string_view, 3> transient{"rateLimited", "serverInternal", "badNonce"};
  auto t = p.acme_type();
  bool is_acme = std::string_view(p.type).substr(0, acme_error_prefix.size()) == acme_error_prefix;
  if (is_acme) {
    if (t == "compound") {
      for (const auto& sp : p.subproblems)
        if (classify_problem(sp) == failure_class::permanent) return failure_class::permanent;
      return p.subproblems.empty() ? failure_class::permanent : failure_class::transient;
    }
    for (auto name : transient)
      if (t == name) return failure_class::transient;
    // Every other ACME error type (RFC 8555 §6.7 and the registry) is about the request, the
    // account or the identifiers: the same request gets the same answer.
    return failure_class::permanent;
  }
  // Not an ACME type: judged by its status, like any HTTP answer.
  if (p.status >= 500 || p.status == 429 || p.status == 0) return failure_class::transient;
  return failure_class::permanent;
}

// ---- directory --------------------------------------------------------------------------------

result<directory> parse_directory(std::string_view text) {
  auto o = parse_object(text, "directory");
  if (!o) return std::move(o).error();
  reader r{*o, "directory"};
  directory d;
  for (auto [key, out, required] : {std::tuple{"newNonce", &d.new_nonce, true}, std::tuple{"newAccount", &d.new_account, true},
                                    std::tuple{"newOrder", &d.new_order, true}, std::tuple{"revokeCert", &d.revoke_cert, true},
                                    std::tuple{"keyChange", &d.key_change, false}, std::tuple{"newAuthz", &d.new_authz, false},
                                    std::tuple{"renewalInfo", &d.renewal_info, false}}) {
    auto u = r.url(key, required);
    if (!u) return std::move(u).error();
    *out = std::move(*u);
  }
  if (auto* m = r.get("meta")) {
    if (!m->is_object()) return bad("directory.meta", "must be an object");
    reader mr{m->as_object(), "directory.meta"};
    auto tos = mr.string("termsOfService", false);
    if (!tos) return std::move(tos).error();
    d.meta.terms_of_service = std::move(*tos);
    auto web = mr.string("website", false);
    if (!web) return std::move(web).error();
    d.meta.website = std::move(*web);
    auto caa = mr.strings("caaIdentities", false, false);
    if (!caa) return std::move(caa).error();
    d.meta.caa_identities = std::move(*caa);
    auto eab = mr.boolean("externalAccountRequired");
    if (!eab) return std::move(eab).error();
    d.meta.external_account_required = *eab;
    if (auto* pr = mr.get("profiles")) {
      if (!pr->is_object()) return bad("directory.meta.profiles", "must be an object of name: description");
      if (pr->as_object().size() > max_list) return bad("directory.meta.profiles", "has too many entries");
      for (const auto& [name, desc] : pr->as_object()) {
        std::string f = "directory.meta.profiles." + std::string(name);
        if (!desc.is_string()) return bad(f, "must be a string");
        d.meta.profiles.push_back({std::string(name), std::string(desc.as_string())});
      }
    }
  }
  return d;
}

// ---- account ----------------------------------------------------------------------------------

result<account> parse_account(std::string_view text) {
  auto o = parse_object(text, "account");
  if (!o) return std::move(o).error();
  reader r{*o, "account"};
  account a;
  auto status = r.string("status", true);
  if (!status) return std::move(status).error();
  if (*status != "valid" && *status != "deactivated" && *status != "revoked")
    return bad("account.status", "must be one of valid|deactivated|revoked");
  a.status = std::move(*status);
  auto contact = r.strings("contact", false, false);
  if (!contact) return std::move(contact).error();
  a.contact = std::move(*contact);
  auto orders = r.url("orders", false);
  if (!orders) return std::move(orders).error();
  a.orders = std::move(*orders);
  return a;
}

// ---- order ------------------------------------------------------------------------------------

std::string_view order_status_name(order_status s) noexcept { return name_of(s, order_statuses); }

result<order> parse_order(std::string_view text) {
  auto o = parse_object(text, "order");
  if (!o) return std::move(o).error();
  reader r{*o, "order"};
  order ord;
  auto status = r.string("status", true);
  if (!status) return std::move(status).error();
  auto st = enum_of(*status, order_statuses);
  if (!st) return bad("order.status", "must be one of " + choices(order_statuses));
  ord.status = *st;
  auto expires = r.string("expires", false);
  if (!expires) return std::move(expires).error();
  ord.expires = std::move(*expires);
  auto ids = r.array("identifiers", true);
  if (!ids) return std::move(ids).error();
  for (std::size_t i = 0; i < (*ids)->size(); ++i) {
    auto id = read_identifier((**ids)[i], "order.identifiers[" + std::to_string(i) + "]");
    if (!id) return std::move(id).error();
    ord.identifiers.push_back(std::move(*id));
  }
  auto authz = r.strings("authorizations", true, true);
  if (!authz) return std::move(authz).error();
  ord.authorizations = std::move(*authz);
  auto fin = r.url("finalize", true);
  if (!fin) return std::move(fin).error();
  ord.finalize = std::move(*fin);
  auto cert = r.url("certificate", ord.status == order_status::valid);
  if (!cert) return std::move(cert).error();
  ord.certificate = std::move(*cert);
  auto err = optional_problem(r, "error");
  if (!err) return std::move(err).error();
  ord.error = std::move(*err);
  auto replaces = r.string("replaces", false);
  if (!replaces) return std::move(replaces).error();
  ord.replaces = std::move(*replaces);
  auto profile = r.string("profile", false);
  if (!profile) return std::move(profile).error();
  ord.profile = std::move(*profile);
  return ord;
}

// ---- authorizations and challenges ------------------------------------------------------------

std::string_view authorization_status_name(authorization_status s) noexcept { return name_of(s, authorization_statuses); }
std::string_view challenge_status_name(challenge_status s) noexcept { return name_of(s, challenge_statuses); }

const challenge* authorization::find(std::string_view type) const {
  for (const auto& c : challenges)
    if (c.type == type) return &c;
  return nullptr;
}

result<challenge> parse_challenge(std::string_view text) {
  auto o = parse_object(text, "challenge");
  if (!o) return std::move(o).error();
  return read_challenge(*o, "challenge");
}

result<authorization> parse_authorization(std::string_view text) {
  auto o = parse_object(text, "authorization");
  if (!o) return std::move(o).error();
  reader r{*o, "authorization"};
  authorization a;
  auto* id = r.get("identifier");
  if (!id) return bad("authorization.identifier", "is missing");
  auto ident = read_identifier(*id, "authorization.identifier");
  if (!ident) return std::move(ident).error();
  a.ident = std::move(*ident);
  auto status = r.string("status", true);
  if (!status) return std::move(status).error();
  auto st = enum_of(*status, authorization_statuses);
  if (!st) return bad("authorization.status", "must be one of " + choices(authorization_statuses));
  a.status = *st;
  auto expires = r.string("expires", false);
  if (!expires) return std::move(expires).error();
  a.expires = std::move(*expires);
  auto chs = r.array("challenges", true);
  if (!chs) return std::move(chs).error();
  for (std::size_t i = 0; i < (*chs)->size(); ++i) {
    std::string f = "authorization.challenges[" + std::to_string(i) + "]";
    const auto& e = (**chs)[i];
    if (!e.is_object()) return bad(f, "must be an object");
    auto c = read_challenge(e.as_object(), f);
    if (!c) return std::move(c).error();
    a.challenges.push_back(std::move(*c));
  }
  auto wildcard = r.boolean("wildcard");
  if (!wildcard) return std::move(wildcard).error();
  a.wildcard = *wildcard;
  return a;
}

// ---- headers ----------------------------------------------------------------------------------


std::vector<std::string> link_targets(const std::vector<std::string>& link_values, std::string_view rel) {
  std::vector<std::string> out;
  for (const auto& value : link_values) {
    std::string_view v = value;
    std::size_t i = 0;
    while (i < v.size()) {
      auto open = v.find('<', i);
      if (open == std::string_view::npos) break;
      auto close = v.find('>', open);
      if (close == std::string_view::npos) break;
      std::string target(v.substr(open + 1, close - open - 1));
      // Parameters up to the next link (a ',' outside quotes).
      std::size_t j = close + 1;
      bool quoted = false;
      std::size_t end = j;
      while (end < v.size() && (quoted || v[end] != ',')) {
        if (v[end] == '"') quoted = !quoted;
        ++end;
      }
      std::string params = lower(v.substr(j, end - j));
      // rel="a b" may carry several relation types.
      std::size_t p = params.find("rel=");
      bool match = false;
      while (p != std::string::npos && !match) {
        std::size_t s = p + 4;
        std::string relv;
        if (s < params.size() && params[s] == '"') {
          auto q = params.find('"', s + 1);
          relv = params.substr(s + 1, (q == std::string::npos ? params.size() : q) - s - 1);
        } else {
          auto q = params.find_first_of("; ", s);
          relv = params.substr(s, (q == std::string::npos ? params.size() : q) - s);
        }
        for (auto w : words(relv))
          if (w == lower(rel)) match = true;
        p = params.find("rel=", s);
      }
      if (match) out.push_back(std::move(target));
      i = end + 1;
    }
  }
  return out;
}

result<std::string> revoke_cert_payload(std::string_view cert_der, std::optional<int> reason) {
  if (cert_der.empty()) return bad("certificate", "is empty: revokeCert needs the certificate's DER");
  if (reason && (*reason < 0 || *reason > 10 || *reason == 7))
    return bad("reason", "must be an RFC 5280 reason code (0-10, not 7), not " + std::to_string(*reason));
  json::object payload{{"certificate", base64url_encode(cert_der)}};
  if (reason) payload["reason"] = *reason;
  return json::serialize(payload);
}

}  // namespace certfleet::acme
