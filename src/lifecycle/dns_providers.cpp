// DNS-01 records through a provider of any kind (dns_providers.hpp).
#include "certfleet/lifecycle/dns_providers.hpp"

#include "certfleet/core/base64.hpp"
#include "certfleet/net/http.hpp"
#include "certfleet/delivery/local_command.hpp"
#include "certfleet/delivery/redact.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>

namespace certfleet::lifecycle {

namespace asio = boost::asio;
namespace json = boost::json;
using acme::dns::dns_errc;

namespace {

// An API's error text in a job error is cut to this.
constexpr std::size_t api_message_max = 300;

error permanent(std::string message, std::string field) {
  return make_error(errc::invalid_argument, std::move(message), std::move(field));
}

error dns_error(dns_errc code, std::string message) {
  return error{acme::dns::make_error_code(code), std::move(message), {}, 0};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string absolute(std::string_view name) {
  std::string n = lower(name);
  if (n.empty() || n.back() != '.') n += '.';
  return n;
}

std::string secret_of(const dns_provider_handle& p, std::string_view key) {
  for (const auto& [k, v] : p.secrets)
    if (k == key) return v;
  return {};
}

// ---- exec -----------------------------------------------------------------------------------

// Programs wait on a pool of their own: a call blocks a thread for up to its timeout (600 s at
// most), and the worker's CPU pool (key generation, name resolution) must not be the one that
// waits. Eight at once; more queue. Never destroyed: joining it at exit would wait for a hung
// program's timeout. The command is shared, not a by-value coroutine parameter: GCC 12 destroyed
// such a parameter (moved into the pool's lambda) twice here, and the worker crashed.
asio::thread_pool& program_pool() {
  static auto* pool = new asio::thread_pool(8);
  return *pool;
}

asio::awaitable<delivery::local_command_result> run_on_pool(std::shared_ptr<const delivery::local_command> c) {
  auto out = co_await asio::co_spawn(
      program_pool().get_executor(),
      [c]() -> asio::awaitable<delivery::local_command_result> { co_return delivery::run_local_command(*c); },
      asio::use_awaitable);
  co_return out;
}

asio::awaitable<result<std::string>> run_exec(const dns_provider_handle& p, std::string_view action, std::string fqdn,
                                              std::string value, const dns_call_options& o) {
  auto call = make_exec_call(p.spec, p.secrets, action, fqdn, value);
  auto c = std::make_shared<delivery::local_command>();
  c->program = p.spec.program;
  c->argv = std::move(call.argv);
  c->env = std::move(call.env);
  c->timeout = std::chrono::seconds(p.spec.timeout_s);
  c->max_output = exec_output_tail * 2;
  auto r = co_await run_on_pool(c);
  std::string output = redact_provider_output(r.output, p.secrets);
  if (output.size() > exec_output_tail) output = "…" + output.substr(output.size() - exec_output_tail);
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  if (o.log && !output.empty()) {
    std::string level = r.exit_status == 0 ? "info" : "warn";
    auto line = fmt::format("DNS: {} {} {} printed:\n{}", p.spec.program, action, fqdn, output);
    co_await o.log(std::move(level), std::move(line));
  }
  if (r.spawn_errno)
    co_return permanent(fmt::format("exec.program {} cannot be started: {} (it must exist on every worker host and be "
                                    "executable by certfleet's user)",
                                    p.spec.program, std::strerror(r.spawn_errno)),
                        "exec.program");
  if (r.timed_out)
    co_return dns_error(dns_errc::timeout, fmt::format("{} {} {} did not finish within exec.timeout_s = {} s and was killed",
                                                       p.spec.program, action, fqdn, p.spec.timeout_s));
  if (r.exit_status != 0) {
    auto nl = output.rfind('\n');
    std::string last = nl == std::string::npos ? output : output.substr(nl + 1);
    if (last.size() > api_message_max) last = "…" + last.substr(last.size() - api_message_max);
    std::string how = "was killed by a signal";
    if (r.exit_status >= 0) how = fmt::format("exited {}", r.exit_status);
    if (!last.empty()) how += ": " + last;
    auto msg = fmt::format("{} {} {} {}", p.spec.program, action, fqdn, how);
    co_return dns_error(dns_errc::server_failure, std::move(msg));
  }
  co_return std::string();
}

// ---- HTTP APIs (httpreq, powerdns) ----------------------------------------------------------

// What the API said, for a job error: its JSON "error"/"message" member when it has one, else
// the start of its body; secrets redacted, one line.
std::string api_message(const dns_provider_handle& p, const std::string& body) {
  std::string text;
  boost::system::error_code ec;
  auto v = json::parse(body, ec);
  if (!ec && v.is_object())
    for (const char* k : {"error", "message", "detail"})
      if (auto* m = v.as_object().if_contains(k); m && m->is_string()) {
        text = std::string(m->as_string());
        break;
      }
  if (text.empty()) text = body;
  text = redact_provider_output(text, p.secrets);
  for (auto& c : text)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (text.size() > api_message_max) text = text.substr(0, api_message_max) + "…";
  return text;
}

// One call; a transport failure or a status outside 2xx becomes the error to return.
asio::awaitable<result<net::http_response>> call_api(const dns_provider_handle& p, net::http_request req,
                                                          const dns_call_options& o, std::string what) {
  req.timeout = std::chrono::seconds(p.spec.timeout_s);
  req.egress = o.dns.egress;
  req.egress_setting = "acme_allow_list";
  req.ca_pem = p.spec.ca_bundle_pem;
  req.resolve_pool = o.cpu;
  auto r = co_await net::http_exchange(std::move(req));
  if (!r.ok()) {
    if (r.phase == "egress") co_return dns_error(dns_errc::not_allowed, fmt::format("{}: {}", what, r.error));
    if (r.timed_out) co_return dns_error(dns_errc::timeout, fmt::format("{}: {}", what, r.error));
    if (r.cls == net::error_class::validation || r.cls == net::error_class::auth)
      co_return dns_error(dns_errc::update_failed, fmt::format("{}: {}", what, r.error));
    co_return dns_error(dns_errc::network, fmt::format("{}: {}", what, r.error));
  }
  if (r.status >= 200 && r.status < 300) co_return r;
  auto said = api_message(p, r.body);
  auto msg = fmt::format("{}: HTTP {}", what, r.status);
  if (!said.empty()) msg += ": " + said;
  if (r.status == 401 || r.status == 403)
    msg += p.spec.powerdns() ? " (check powerdns.api_key against the server's api-key)"
                             : " (check httpreq.username and httpreq.password)";
  // A 5xx (and a 429) may pass; a 4xx is the request or the configuration, and says so again.
  if (r.status >= 500 || r.status == 429) co_return dns_error(dns_errc::server_failure, std::move(msg));
  co_return dns_error(dns_errc::update_failed, std::move(msg));
}

asio::awaitable<result<std::string>> run_httpreq(const dns_provider_handle& p, std::string_view action, std::string fqdn,
                                                 std::string value, const dns_call_options& o) {
  net::http_request req;
  req.method = net::http_method::post;
  req.url = p.spec.endpoint + "/" + std::string(action);
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
  if (!p.spec.username.empty())
    req.headers.emplace_back("Authorization",
                             "Basic " + base64_encode(p.spec.username + ":" + secret_of(p, "password")));
  req.body = json::serialize(json::object{{"fqdn", absolute(fqdn)}, {"value", value}});
  auto r = co_await call_api(p, std::move(req), o, fmt::format("POST {}/{}", p.spec.endpoint, action));
  if (!r) co_return std::move(r).error();
  co_return std::string();
}

// One read-modify-write at a time per (API, zone) in this process: an RRset must not lose a value
// another job of this worker adds at the same moment, and PowerDNS itself answers concurrent
// PATCHes of one zone with 500 (its sqlite3 backend: 5 of 50 certificates at once did, each
// then waiting the queue's 30 s backoff). Other zones proceed in parallel.
class name_locks {
 public:
  static name_locks& instance() {
    static name_locks l;
    return l;
  }
  bool try_lock(const std::string& k) {
    std::lock_guard g(m_);
    return busy_.insert(k).second;
  }
  void unlock(const std::string& k) {
    std::lock_guard g(m_);
    busy_.erase(k);
  }

 private:
  std::mutex m_;
  std::set<std::string> busy_;
};

struct name_lock_guard {
  std::string key;
  ~name_lock_guard() {
    if (!key.empty()) name_locks::instance().unlock(key);
  }
};

asio::awaitable<void> lock_name(name_lock_guard& g, std::string key) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer t(ex);
  while (!name_locks::instance().try_lock(key)) {
    t.expires_after(std::chrono::milliseconds(10));
    co_await t.async_wait(asio::use_awaitable);
  }
  g.key = std::move(key);
}

std::string url_path_segment(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '=') out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

asio::awaitable<result<std::string>> run_powerdns(const dns_provider_handle& p, bool add, std::string fqdn,
                                                  std::string value, std::uint32_t ttl, const dns_call_options& o) {
  const std::string base = p.spec.api_url + "/api/v1/servers/" + url_path_segment(p.spec.server_id);
  const std::vector<std::pair<std::string, std::string>> headers{{"X-API-Key", secret_of(p, "api_key")},
                                                                 {"Accept", "application/json"}};
  const std::string name = absolute(fqdn);
  powerdns_zone zone;
  if (!p.spec.zone.empty()) {
    zone.name = absolute(p.spec.zone);
    zone.id = zone.name;
    if (!name.ends_with("." + zone.name) && name != zone.name)
      co_return permanent(fmt::format("{} is not inside powerdns.zone {}", name, p.spec.zone), "powerdns.zone");
  } else {
    net::http_request list;
    list.url = base + "/zones";
    list.headers = headers;
    list.max_body = 8 * 1024 * 1024;
    auto zones = co_await call_api(p, std::move(list), o, fmt::format("GET {}/zones", base));
    if (!zones) co_return std::move(zones).error();
    auto found = powerdns_zone_for(zones->body, name);
    if (!found)
      co_return dns_error(dns_errc::zone_not_found,
                          fmt::format("PowerDNS at {} serves no zone containing {}: create the zone, or set "
                                      "powerdns.zone (and check powerdns.server_id)",
                                      p.spec.api_url, name));
    zone = std::move(*found);
  }
  name_lock_guard held;
  co_await lock_name(held, p.spec.api_url + " " + lower(zone.name));
  const std::string zone_url = base + "/zones/" + url_path_segment(zone.id);
  net::http_request get;
  get.url = zone_url + "?rrsets=true&rrset_name=" + url_path_segment(name) + "&rrset_type=TXT";
  get.headers = headers;
  get.max_body = 8 * 1024 * 1024;
  auto doc = co_await call_api(p, std::move(get), o, fmt::format("GET zone {} at {}", zone.name, p.spec.api_url));
  if (!doc) co_return std::move(doc).error();
  if (!doc->body_complete)
    co_return dns_error(dns_errc::malformed_answer,
                        fmt::format("PowerDNS at {}: zone {} was not read whole (larger than 8 MiB?)", p.spec.api_url, zone.name));
  auto current = powerdns_txt_of(doc->body, name);
  const std::string content = "\"" + value + "\"";
  auto contents = current.contents;
  auto at = std::find(contents.begin(), contents.end(), content);
  if (add && at != contents.end()) co_return lower(zone.name.substr(0, zone.name.size() - 1));  // there already
  if (!add && at == contents.end()) co_return lower(zone.name.substr(0, zone.name.size() - 1));  // gone already
  if (add) contents.push_back(content);
  else contents.erase(at);
  net::http_request patch;
  patch.method = net::http_method::patch;
  patch.url = zone_url;
  patch.headers = headers;
  patch.headers.emplace_back("Content-Type", "application/json");
  patch.body = powerdns_patch_body(name, contents, current.found ? current.ttl : ttl);
  auto r = co_await call_api(p, std::move(patch), o, fmt::format("PATCH zone {} at {}", zone.name, p.spec.api_url));
  if (!r) co_return std::move(r).error();
  co_return lower(zone.name.substr(0, zone.name.size() - 1));
}

}  // namespace

exec_call make_exec_call(const dns_provider_spec& spec, const std::vector<std::pair<std::string, std::string>>& env,
                         std::string_view action, std::string_view fqdn, std::string_view value) {
  exec_call c;
  std::string name(fqdn);
  if (name.empty() || name.back() != '.') name += '.';
  c.argv = {spec.program, std::string(action), std::move(name), std::string(value)};
  c.env = {std::string("PATH=") + delivery::local_command_path, "LC_ALL=C"};
  for (const auto& [k, v] : env) c.env.push_back(k + "=" + v);
  return c;
}

std::string redact_provider_output(std::string_view text, const std::vector<std::pair<std::string, std::string>>& secrets) {
  std::string out = delivery::redact_command_output(text);
  for (const auto& [k, v] : secrets) {
    if (v.size() < 4) continue;  // "1", "yes": replacing those would garble the text, not protect it
    for (auto at = out.find(v); at != std::string::npos; at = out.find(v, at + 10)) out.replace(at, v.size(), "[redacted]");
  }
  return out;
}

std::optional<powerdns_zone> powerdns_zone_for(std::string_view zones_json, std::string_view fqdn) {
  boost::system::error_code ec;
  auto v = json::parse(zones_json, ec);
  if (ec || !v.is_array()) return std::nullopt;
  const std::string name = absolute(fqdn);
  std::optional<powerdns_zone> best;
  for (const auto& z : v.as_array()) {
    if (!z.is_object()) continue;
    const auto* n = z.as_object().if_contains("name");
    const auto* id = z.as_object().if_contains("id");
    if (!n || !n->is_string()) continue;
    std::string zn = absolute(std::string_view(n->as_string()));
    if (name != zn && !name.ends_with("." + zn)) continue;
    if (best && best->name.size() >= zn.size()) continue;
    powerdns_zone found;
    found.name = std::string(n->as_string());
    found.id = id && id->is_string() ? std::string(id->as_string()) : found.name;
    best = std::move(found);
  }
  return best;
}

powerdns_rrset powerdns_txt_of(std::string_view zone_json, std::string_view fqdn) {
  powerdns_rrset out;
  boost::system::error_code ec;
  auto v = json::parse(zone_json, ec);
  if (ec || !v.is_object()) return out;
  const auto* rr = v.as_object().if_contains("rrsets");
  if (!rr || !rr->is_array()) return out;
  const std::string name = absolute(fqdn);
  for (const auto& s : rr->as_array()) {
    if (!s.is_object()) continue;
    const auto& o = s.as_object();
    const auto* n = o.if_contains("name");
    const auto* t = o.if_contains("type");
    if (!n || !n->is_string() || !t || !t->is_string() || t->as_string() != "TXT") continue;
    if (absolute(std::string_view(n->as_string())) != name) continue;
    out.found = true;
    if (const auto* ttl = o.if_contains("ttl"); ttl && ttl->is_int64() && ttl->as_int64() > 0)
      out.ttl = static_cast<std::uint32_t>(std::min<std::int64_t>(ttl->as_int64(), 86400));
    if (const auto* recs = o.if_contains("records"); recs && recs->is_array())
      for (const auto& r : recs->as_array())
        if (r.is_object())
          if (const auto* c = r.as_object().if_contains("content"); c && c->is_string()) out.contents.emplace_back(c->as_string());
  }
  return out;
}

std::string powerdns_patch_body(std::string_view fqdn, const std::vector<std::string>& contents, std::uint32_t ttl) {
  json::object set{{"name", absolute(fqdn)}, {"type", "TXT"}};
  if (contents.empty()) {
    set["changetype"] = "DELETE";
  } else {
    set["changetype"] = "REPLACE";
    set["ttl"] = ttl;
    json::array records;
    for (const auto& c : contents) records.emplace_back(json::object{{"content", c}, {"disabled", false}});
    set["records"] = std::move(records);
  }
  return json::serialize(json::object{{"rrsets", json::array{std::move(set)}}});
}

result<dns_provider_handle> open_dns_provider(const kek& key, const store::catalog_object& o, const dns_provider_spec& spec) {
  dns_provider_handle h;
  h.name = o.name;
  h.spec = spec;
  if (spec.manual()) return permanent(fmt::format("DNS provider {} is manual: the operator presents its records", o.name), "kind");
  if (spec.exec() && spec.created_by_system_admin.empty())
    return permanent(fmt::format("DNS provider {} is an exec provider no system admin created: it never runs; a "
                                 "system-admin token must create it again",
                                 o.name),
                     "kind");
  auto secret = open_dns_provider_secret(key, o);
  if (!secret) return permanent(fmt::format("DNS provider {}: {}", o.name, secret.error().message), "dns_provider_id");
  if (spec.through_api()) {
    auto fields = parse_provider_secrets(*secret);
    if (!fields) return permanent(fmt::format("DNS provider {}: {}", o.name, fields.error().message), "dns_provider_id");
    h.secrets = std::move(*fields);
    return h;
  }
  auto k = acme::dns::make_tsig_key(spec.tsig_key_name, spec.tsig_algorithm, *secret);
  if (!k) return permanent(fmt::format("DNS provider {}: {}", o.name, k.error().message), "rfc2136.tsig_secret");
  h.tsig = std::move(*k);
  return h;
}

asio::awaitable<result<std::string>> present_dns_record(const dns_provider_handle& p, std::string zone, std::string fqdn,
                                                        std::string value, std::uint32_t ttl, const dns_call_options& o) {
  if (p.spec.exec()) co_return co_await run_exec(p, "present", std::move(fqdn), std::move(value), o);
  if (p.spec.httpreq()) co_return co_await run_httpreq(p, "present", std::move(fqdn), std::move(value), o);
  if (p.spec.powerdns()) co_return co_await run_powerdns(p, true, std::move(fqdn), std::move(value), ttl, o);
  if (!p.tsig) co_return permanent(fmt::format("DNS provider {} has no TSIG key", p.name), "rfc2136.tsig_secret");
  co_return co_await acme::dns::present_txt(p.spec.server, std::move(zone), *p.tsig, std::move(fqdn), std::move(value), ttl,
                                            o.dns);
}

asio::awaitable<result<std::string>> remove_dns_record(const dns_provider_handle& p, std::string zone, std::string fqdn,
                                                       std::string value, const dns_call_options& o) {
  if (p.spec.exec()) co_return co_await run_exec(p, "cleanup", std::move(fqdn), std::move(value), o);
  if (p.spec.httpreq()) co_return co_await run_httpreq(p, "cleanup", std::move(fqdn), std::move(value), o);
  if (p.spec.powerdns()) co_return co_await run_powerdns(p, false, std::move(fqdn), std::move(value), 60, o);
  if (!p.tsig) co_return permanent(fmt::format("DNS provider {} has no TSIG key", p.name), "rfc2136.tsig_secret");
  co_return co_await acme::dns::remove_txt(p.spec.server, std::move(zone), *p.tsig, std::move(fqdn), std::move(value), o.dns);
}

}  // namespace certfleet::lifecycle
