// Domain registration data (domain_registry.hpp), the pure half: IANA's RDAP bootstrap, RDAP domain
// answers, WHOIS answers and registry dates, read without I/O (domain_registry.cpp does the
// lookups).
#include "certfleet/net/domain_registry.hpp"

#include "net/domain_names.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <array>
#include <set>
#include <stdexcept>

#include "certfleet/core/json.hpp"
#include "certfleet/core/time_text.hpp"
#include "certfleet/net/http.hpp"  // parse_url

namespace certfleet::net {

namespace detail {
extern const std::string_view rdap_bootstrap_snapshot_text;  // data/rdap_bootstrap_dns.json, embedded by cmake/embed_file.cmake
}

namespace asio = boost::asio;
namespace bj = boost::json;
using detail::is_ip_literal;
using detail::normalize_domain;
using detail::parse_referral;

namespace {

char lower_char(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = lower_char(c);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower_char(a[i]) != lower_char(b[i])) return false;
  return true;
}

// `needle` must be lower-case.
bool contains_ci(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    std::size_t j = 0;
    while (j < needle.size() && lower_char(hay[i + j]) == needle[j]) ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Text a peer wrote, kept for operators: control characters become spaces, and it is bounded so
// a hostile server cannot make a stored field or log line grow.
std::string printable(std::string_view s, std::size_t max = 256) {
  std::string out;
  for (char c : s.substr(0, max)) {
    auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? ' ' : c;
  }
  return std::string(trim(out));
}

std::string_view sv(const bj::string& s) { return {s.data(), s.size()}; }


// ---- dates ----------------------------------------------------------------------------------

// Days from 1970-01-01 to a proleptic Gregorian date (shifting the year to start in March puts
// the leap day last, so the day of the year is a closed formula).
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t mp = m > 2 ? m - 3 : m + 9;
  const std::int64_t doy = (153 * mp + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool valid_date(int y, int m, int d) {
  static constexpr std::array<int, 12> days{31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1900 || y > 9999 || m < 1 || m > 12 || d < 1 || d > days[static_cast<std::size_t>(m - 1)]) return false;
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return !(m == 2 && d == 29 && !leap);
}

// A small cursor over a date text.
struct scanner {
  std::string_view s;
  std::size_t i = 0;

  bool done() const { return i >= s.size(); }
  char peek() const { return done() ? '\0' : s[i]; }
  // 1..max digits; nullopt (nothing consumed) when none.
  std::optional<int> number(std::size_t min, std::size_t max) {
    std::size_t start = i;
    int v = 0;
    while (!done() && is_digit(s[i]) && i - start < max) v = v * 10 + (s[i++] - '0');
    if (i - start < min) { i = start; return std::nullopt; }
    return v;
  }
  void skip_spaces() {
    while (!done() && is_space(s[i])) ++i;
  }
  bool take(char c) {
    if (peek() != c) return false;
    ++i;
    return true;
  }
};

std::optional<int> month_of(std::string_view name) {
  static constexpr std::array<std::string_view, 12> names{"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
  if (name.size() < 3) return std::nullopt;
  auto l = lower(name.substr(0, 3));
  for (std::size_t k = 0; k < names.size(); ++k)
    if (l == names[k]) return static_cast<int>(k + 1);
  return std::nullopt;
}

// After the date: an optional time ("T04:00:00", " 04:00", ".123") and zone ("Z", "UTC",
// "+03:00", "+0300", "+03"); an unknown zone word ("JST") counts as UTC — a few hours do not
// matter to an expiry measured in days. Anything else left over makes the text unreadable.
std::optional<std::int64_t> time_of_day_ms(scanner& sc) {
  std::int64_t ms = 0;
  std::size_t before = sc.i;
  if (sc.peek() == 'T' || sc.peek() == 't') ++sc.i;
  else sc.skip_spaces();
  if (auto h = sc.number(2, 2)) {
    if (!sc.take(':')) return std::nullopt;
    auto mi = sc.number(2, 2);
    if (!mi) return std::nullopt;
    int sec = 0;
    if (sc.take(':')) {
      auto se = sc.number(2, 2);
      if (!se) return std::nullopt;
      sec = *se;
    }
    if (*h > 23 || *mi > 59 || sec > 60) return std::nullopt;
    ms = ((*h * 60LL + *mi) * 60 + std::min(sec, 59)) * 1000;
    if (sc.take('.') || sc.take(',')) {
      std::size_t start = sc.i;
      int scale = 100;
      while (!sc.done() && is_digit(sc.peek())) {
        ms += (sc.peek() - '0') * scale;
        scale /= 10;
        ++sc.i;
      }
      if (sc.i == start) return std::nullopt;
    }
  } else {
    sc.i = before;
  }
  sc.skip_spaces();
  if (sc.done()) return ms;
  char c = sc.peek();
  if ((c == 'Z' || c == 'z') && sc.i + 1 == sc.s.size()) return ms;
  if (c == '+' || c == '-') {
    ++sc.i;
    auto oh = sc.number(2, 2);
    if (!oh || *oh > 23) return std::nullopt;
    int om = 0;
    sc.take(':');
    if (auto m = sc.number(2, 2)) om = *m;
    if (om > 59) return std::nullopt;
    sc.skip_spaces();
    if (!sc.done()) return std::nullopt;
    std::int64_t off = (*oh * 60LL + om) * 60 * 1000;
    return c == '+' ? ms - off : ms + off;
  }
  // A zone word, maybe in parentheses: "UTC", "GMT", "(JST)".
  std::string_view rest = sc.s.substr(sc.i);
  if (rest.front() == '(' && rest.back() == ')') rest = rest.substr(1, rest.size() - 2);
  if (rest.empty() || rest.size() > 6 || !std::all_of(rest.begin(), rest.end(), is_alpha)) return std::nullopt;
  return ms;
}

std::optional<time_ms> at(int y, int m, int d, scanner& sc) {
  if (!valid_date(y, m, d)) return std::nullopt;
  auto tod = time_of_day_ms(sc);
  if (!tod) return std::nullopt;
  return days_from_civil(y, m, d) * 86'400'000LL + *tod;
}

// Separators between a date's parts: "-", "/", "." with optional spaces (".kr": "2026. 08. 13.").
bool date_separator(scanner& sc) {
  char c = sc.peek();
  if (c != '-' && c != '/' && c != '.') return false;
  ++sc.i;
  while (sc.peek() == ' ') ++sc.i;
  return true;
}

}  // namespace

namespace detail {

// Lower-case, one trailing dot dropped, a valid host name: the form every lookup uses.
std::optional<std::string> normalize_domain(std::string_view domain) {
  domain = trim(domain);
  if (!domain.empty() && domain.back() == '.') domain.remove_suffix(1);
  std::string d = lower(domain);
  if (!valid_dns_name(d)) return std::nullopt;
  return d;
}


bool is_ip_literal(std::string_view host) {
  if (host.empty() || host.size() > 64) return false;
  boost::system::error_code ec;
  (void)asio::ip::make_address(std::string(host), ec);
  return !ec;
}

}  // namespace detail

std::optional<time_ms> parse_registry_date(std::string_view text) {
  text = trim(text);
  if (text.empty() || text.size() > 64) return std::nullopt;
  if (auto t = parse_rfc3339(text)) return t;
  scanner sc{text};
  if (auto y = sc.number(4, 4)) {
    if (date_separator(sc)) {  // 2026-08-13, 2026.08.13, 2026/08/13
      auto m = sc.number(1, 2);
      if (!m || !date_separator(sc)) return std::nullopt;
      auto d = sc.number(1, 2);
      if (!d) return std::nullopt;
      if (sc.peek() == '.') ++sc.i;  // "2026. 08. 13."
      return at(*y, *m, *d, sc);
    }
    sc.i = 0;  // 20260813
    auto all = sc.number(8, 8);
    if (!all || (!sc.done() && is_digit(sc.peek()))) return std::nullopt;
    return at(*all / 10000, *all / 100 % 100, *all % 100, sc);
  }
  auto d = sc.number(1, 2);
  if (!d) return std::nullopt;
  if (!date_separator(sc) && !(sc.take(' '))) return std::nullopt;
  std::optional<int> m;
  if (is_alpha(sc.peek())) {  // 13-aug-2026, 13 August 2026
    std::size_t start = sc.i;
    while (!sc.done() && is_alpha(sc.peek())) ++sc.i;
    m = month_of(text.substr(start, sc.i - start));
  } else {  // 13.08.2026: day first, as registries outside the US write it
    m = sc.number(1, 2);
  }
  if (!m || (!date_separator(sc) && !sc.take(' '))) return std::nullopt;
  auto y = sc.number(4, 4);
  if (!y) return std::nullopt;
  return at(*y, *m, *d, sc);
}

// ---- RDAP bootstrap ---------------------------------------------------------------------------

result<rdap_bootstrap> parse_rdap_bootstrap(std::string_view json_text, std::string_view what) {
  const std::string w(what);
  if (json_text.size() > max_rdap_bootstrap_bytes)
    return make_error(errc::payload_too_large,
                      w + " is larger than " + std::to_string(max_rdap_bootstrap_bytes) + " bytes", w);
  auto doc = json::parse_value(json_text, w, 8);
  if (!doc) return std::move(doc).error();
  auto bad = [](std::string field, std::string message) {
    return make_error(errc::invalid_argument, field + " " + message, field);
  };
  const auto* root = doc->if_object();
  if (!root) return bad(w, "must be a JSON object (IANA's dns.json)");
  rdap_bootstrap out;
  if (const auto* v = root->if_contains("version")) {
    // RFC 9224 knows only 1.0; a later format could mean something else by the same members.
    if (!v->is_string() || v->as_string() != "1.0") return bad(w + ".version", "must be \"1.0\"");
  }
  if (const auto* p = root->if_contains("publication"); p && !p->is_null()) {
    if (!p->is_string()) return bad(w + ".publication", "must be a string");
    out.publication = printable(sv(p->as_string()), 64);
  }
  const auto* services = root->if_contains("services");
  if (!services) return bad(w + ".services", "is missing");
  if (!services->is_array()) return bad(w + ".services", "must be an array");
  const auto& list = services->as_array();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at_i = w + ".services[" + std::to_string(i) + "]";
    const auto* entry = list[i].if_array();
    if (!entry || entry->size() != 2) return bad(at_i, "must be [[labels…], [urls…]]");
    const auto* labels = (*entry)[0].if_array();
    const auto* urls = (*entry)[1].if_array();
    if (!labels) return bad(at_i + "[0]", "must be an array of domain labels");
    if (!urls) return bad(at_i + "[1]", "must be an array of URLs");
    std::vector<std::string> https, http;
    for (std::size_t j = 0; j < urls->size(); ++j) {
      const std::string at_j = at_i + "[1][" + std::to_string(j) + "]";
      const auto* u = (*urls)[j].if_string();
      if (!u) return bad(at_j, "must be a string");
      auto parsed = parse_url(sv(*u), at_j);
      if (!parsed) return std::move(parsed).error();
      std::string base(*u);
      if (base.find_first_of("?#") != std::string::npos) return bad(at_j, "must be a base URL without query");
      if (base.back() != '/') base += '/';  // RFC 9224: base URLs end with '/'; be kind to overrides
      (parsed->tls() ? https : http).push_back(std::move(base));
    }
    if (https.empty() && http.empty()) return bad(at_i + "[1]", "lists no URL");
    // RFC 9224 §3: prefer https where a service offers both.
    https.insert(https.end(), http.begin(), http.end());
    for (std::size_t j = 0; j < labels->size(); ++j) {
      const std::string at_j = at_i + "[0][" + std::to_string(j) + "]";
      const auto* l = (*labels)[j].if_string();
      if (!l) return bad(at_j, "must be a string");
      auto name = normalize_domain(sv(*l));
      if (!name) return bad(at_j, "is not a domain label (A-labels for IDNs)");
      out.services.emplace(std::move(*name), https);  // first service for a label wins
    }
  }
  return out;
}

const rdap_bootstrap& shipped_rdap_bootstrap() {
  static const rdap_bootstrap table = [] {
    auto parsed = parse_rdap_bootstrap(detail::rdap_bootstrap_snapshot_text, "shipped rdap bootstrap");
    // The snapshot is part of the build and a test parses it: failing here is a bug.
    if (!parsed) throw std::logic_error("shipped RDAP bootstrap does not parse: " + parsed.error().message);
    return std::move(parsed).value();
  }();
  return table;
}

std::optional<std::string> rdap_base_for(const rdap_bootstrap& table, std::string_view domain) {
  domain = trim(domain);
  if (!domain.empty() && domain.back() == '.') domain.remove_suffix(1);
  if (domain.empty() || domain.size() > 253) return std::nullopt;
  const std::string d = lower(domain);
  // Longest suffix first: the whole name, then without its first label, and so on.
  for (std::size_t start = 0; start < d.size();) {
    auto it = table.services.find(std::string_view(d).substr(start));
    if (it != table.services.end() && !it->second.empty()) return it->second.front();
    auto dot = d.find('.', start);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return std::nullopt;
}

// ---- RDAP domain ------------------------------------------------------------------------------

namespace {

std::string json_text_of(const bj::value* v) {
  if (!v) return {};
  if (const auto* s = v->if_string()) return printable(sv(*s));
  if (v->is_int64()) return std::to_string(v->as_int64());
  if (v->is_uint64()) return std::to_string(v->as_uint64());
  return {};
}

// The registrar's display name: vcardArray ["vcard", [["fn", {}, "text", "Name"], …]].
std::string vcard_fn(const bj::object& entity) {
  const auto* vc = entity.if_contains("vcardArray");
  if (!vc || !vc->is_array() || vc->as_array().size() < 2) return {};
  const auto* props = vc->as_array()[1].if_array();
  if (!props) return {};
  for (const auto& p : *props) {
    const auto* prop = p.if_array();
    if (!prop || prop->size() < 4) continue;
    const auto* name = (*prop)[0].if_string();
    if (name && iequals(sv(*name), "fn")) return json_text_of(&(*prop)[3]);
  }
  return {};
}

bool has_role(const bj::object& entity, std::string_view role) {
  const auto* roles = entity.if_contains("roles");
  if (!roles || !roles->is_array()) return false;
  for (const auto& r : roles->as_array())
    if (const auto* s = r.if_string(); s && iequals(sv(*s), role)) return true;
  return false;
}

}  // namespace

result<rdap_domain_info> parse_rdap_domain(std::string_view json_text, std::string_view domain) {
  if (json_text.size() > max_rdap_bytes)
    return make_error(errc::payload_too_large, "RDAP answer is larger than " + std::to_string(max_rdap_bytes) + " bytes",
                      "rdap");
  auto doc = json::parse_value(json_text, "rdap", 64);
  if (!doc) return std::move(doc).error();
  auto bad = [](std::string field, std::string message) {
    return make_error(errc::invalid_argument, "RDAP answer: " + field + " " + message, field);
  };
  const auto* root = doc->if_object();
  if (!root) return bad("rdap", "must be a JSON object");

  // RFC 9083 §6: an error document instead of the object.
  if (const auto* code = root->if_contains("errorCode")) {
    std::int64_t n = 0;
    if (code->is_int64()) n = code->as_int64();
    else if (code->is_uint64()) n = static_cast<std::int64_t>(std::min<std::uint64_t>(code->as_uint64(), 999));
    else return bad("rdap.errorCode", "must be a number");
    std::string text = "RDAP error " + std::to_string(n);
    if (auto title = json_text_of(root->if_contains("title")); !title.empty()) text += ": " + title;
    if (const auto* desc = root->if_contains("description"); desc && desc->is_array()) {
      std::string joined;
      for (const auto& line : desc->as_array())
        if (auto t = json_text_of(&line); !t.empty()) joined += (joined.empty() ? "" : " ") + t;
      if (!joined.empty()) text += " (" + printable(joined, 512) + ")";
    }
    if (n == 404) return make_error(errc::not_found, text);
    if (n == 429) return make_error(errc::rate_limited, text);
    return make_error(errc::invalid_argument, text, "rdap.errorCode");
  }

  const auto* cls = root->if_contains("objectClassName");
  if (!cls || !cls->is_string() || cls->as_string() != "domain")
    return bad("rdap.objectClassName", "must be \"domain\"");
  rdap_domain_info out;
  const auto* ldh = root->if_contains("ldhName");
  if (!ldh || !ldh->is_string()) return bad("rdap.ldhName", "is missing");
  out.ldh_name = printable(sv(ldh->as_string()));
  std::string_view want = trim(domain), got = out.ldh_name;
  if (!want.empty() && want.back() == '.') want.remove_suffix(1);
  if (!got.empty() && got.back() == '.') got.remove_suffix(1);
  if (!iequals(want, got))
    return bad("rdap.ldhName", "names " + out.ldh_name + ", not the domain asked for (" + printable(want) + ")");

  if (const auto* events = root->if_contains("events"); events && !events->is_null()) {
    if (!events->is_array()) return bad("rdap.events", "must be an array");
    const auto& list = events->as_array();
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string at_i = "rdap.events[" + std::to_string(i) + "]";
      const auto* ev = list[i].if_object();
      if (!ev) return bad(at_i, "must be an object");
      const auto* action = ev->if_contains("eventAction");
      if (!action || !action->is_string()) return bad(at_i + ".eventAction", "must be a string");
      const auto* date = ev->if_contains("eventDate");
      std::optional<time_ms> when;
      if (date && date->is_string()) when = parse_registry_date(sv(date->as_string()));
      std::string_view a = sv(action->as_string());
      if (iequals(a, "expiration")) {
        // The one date the check needs: an unreadable one is an error, not "unknown".
        if (!when) return bad(at_i + ".eventDate", "is not an RFC 3339 date");
        if (!out.expires_at_ms) out.expires_at_ms = when;
      } else if (iequals(a, "registration")) {
        if (!out.registered_at_ms) out.registered_at_ms = when;
      } else if (iequals(a, "last changed")) {
        if (!out.last_changed_at_ms) out.last_changed_at_ms = when;
      }
    }
  }

  if (const auto* status = root->if_contains("status"); status && !status->is_null()) {
    if (!status->is_array()) return bad("rdap.status", "must be an array");
    const auto& list = status->as_array();
    for (std::size_t i = 0; i < list.size() && out.statuses.size() < 64; ++i) {
      const auto* s = list[i].if_string();
      if (!s) return bad("rdap.status[" + std::to_string(i) + "]", "must be a string");
      auto t = printable(sv(*s), 64);
      if (!t.empty() && std::find(out.statuses.begin(), out.statuses.end(), t) == out.statuses.end())
        out.statuses.push_back(std::move(t));
    }
  }

  if (const auto* entities = root->if_contains("entities"); entities && entities->is_array()) {
    for (const auto& e : entities->as_array()) {
      const auto* entity = e.if_object();
      if (!entity || !has_role(*entity, "registrar")) continue;
      out.registrar = vcard_fn(*entity);
      if (out.registrar.empty()) out.registrar = json_text_of(entity->if_contains("handle"));
      if (const auto* ids = entity->if_contains("publicIds"); ids && ids->is_array()) {
        for (const auto& id : ids->as_array()) {
          const auto* o = id.if_object();
          if (!o) continue;
          const auto* type = o->if_contains("type");
          if (type && type->is_string() && iequals(sv(type->as_string()), "IANA Registrar ID")) {
            out.registrar_iana_id = json_text_of(o->if_contains("identifier"));
            break;
          }
        }
      }
      break;
    }
  }
  return out;
}

// ---- WHOIS answers ----------------------------------------------------------------------------

namespace {

// Keys name what a line holds; the registry's own expiry outranks the registrar's copy.
struct expiry_key {
  std::string_view key;
  int rank;  // lower wins
};
constexpr std::array<expiry_key, 20> expiry_keys{{
    {"registry expiry date", 0}, {"registry expiration date", 0}, {"expiry date", 1}, {"expiration date", 1},
    {"domain expiration date", 1}, {"expiration time", 1}, {"expire date", 1}, {"expires", 1},
    {"expires on", 1}, {"expires at", 1}, {"expire", 1}, {"expiry", 1}, {"paid-till", 1},
    {"valid until", 1}, {"renewal date", 1}, {"domain expires", 1}, {"record expires on", 1},
    {"registration expiration date", 2}, {"registrar registration expiration date", 2}, {"free-date", 3},
}};
constexpr std::array<std::string_view, 10> created_keys{
    "creation date", "created", "created on", "registered on", "registration time", "registered",
    "domain registration date", "registration date", "record created on", "domain name commencement date"};
constexpr std::array<std::string_view, 4> registrar_keys{"registrar", "sponsoring registrar", "registrar name",
                                                          "registrar organization"};
constexpr std::array<std::string_view, 4> status_keys{"domain status", "status", "state", "epp status"};
constexpr std::array<std::string_view, 5> referral_keys{"registrar whois server", "whois server", "refer", "whois",
                                                         "referralserver"};

constexpr std::array<std::string_view, 11> rate_limit_phrases{
    "exceeded", "rate limit", "query limit", "request limit", "limit reached", "too many",
    "try again later", "try again in", "please wait", "temporarily denied", "quota"};
constexpr std::array<std::string_view, 15> not_found_phrases{
    "no match", "not found", "no data found", "no entries found", "no matching record", "does not exist",
    "no object found", "nothing found", "not registered", "no information available", "is available for",
    "status: free", "status: available", "no such domain", "object not found"};

template <std::size_t N>
bool one_of(std::string_view key, const std::array<std::string_view, N>& keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}


// "clientTransferProhibited https://icann.org/epp#clientTransferProhibited" → the code alone;
// "REGISTERED, DELEGATED, VERIFIED" (.ru) → three.
void add_statuses(std::string_view v, std::vector<std::string>& out) {
  for (std::string_view cut : {" http", "\thttp", " (", " -"})
    if (auto k = v.find(cut); k != std::string_view::npos) v = v.substr(0, k);
  while (!v.empty() && out.size() < 32) {
    auto comma = v.find(',');
    auto item = printable(trim(v.substr(0, comma)), 64);
    if (!item.empty() && std::find(out.begin(), out.end(), item) == out.end()) out.push_back(std::move(item));
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

}  // namespace

namespace detail {

// "whois.example.net", "whois://whois.example.net:4343/", "127.0.0.1:4343" → host and port.
bool parse_referral(std::string_view v, std::string& host, std::uint16_t& port) {
  v = trim(v);
  for (std::string_view scheme : {"rwhois://", "whois://", "https://", "http://"})
    if (v.size() >= scheme.size() && iequals(v.substr(0, scheme.size()), scheme)) v.remove_prefix(scheme.size());
  v = v.substr(0, std::min(v.find('/'), v.size()));
  if (v.empty() || v.find_first_of(" \t") != std::string_view::npos) return false;  // a sentence, not a host
  std::string_view h = v, p;
  if (!v.empty() && v.front() == '[') {
    auto close = v.find(']');
    if (close == std::string_view::npos) return false;
    h = v.substr(1, close - 1);
    auto after = v.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      p = after.substr(1);
    }
  } else if (std::count(v.begin(), v.end(), ':') == 1) {
    h = v.substr(0, v.find(':'));
    p = v.substr(v.find(':') + 1);
  }
  if (!h.empty() && h.back() == '.') h.remove_suffix(1);
  std::string lh = lower(h);
  if (!valid_dns_name(lh) && !is_ip_literal(lh)) return false;
  std::uint16_t n = 0;
  if (!p.empty()) {
    if (p.size() > 5 || !std::all_of(p.begin(), p.end(), is_digit)) return false;
    unsigned long x = std::stoul(std::string(p));
    if (x < 1 || x > 65535) return false;
    n = static_cast<std::uint16_t>(x);
  }
  host = std::move(lh);
  port = n;
  return true;
}

}  // namespace detail

result<whois_info> parse_whois(std::string_view text) {
  if (text.size() > max_whois_bytes)
    return make_error(errc::payload_too_large,
                      "WHOIS answer is larger than " + std::to_string(max_whois_bytes) + " bytes", "whois");
  whois_info out;
  int expiry_rank = 1000;
  bool registrar_next_line = false;  // .uk: "Registrar:" then the name indented on the next line
  bool free_status = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    std::string_view raw = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    std::string_view line = trim(raw);
    if (registrar_next_line) {
      if (line.empty()) continue;
      registrar_next_line = false;
      if (line.find(": ") == std::string_view::npos && out.registrar.empty()) {
        auto tag = line.find(" [Tag");  // ".uk": "Example Ltd [Tag = EXAMPLE]"
        out.registrar = printable(trim(line.substr(0, tag)));
        continue;
      }
    }
    if (line.empty() || line.front() == '%' || line.front() == '#' || line.rfind(">>>", 0) == 0) continue;
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon > 60) continue;
    // Keys in one spelling: lower-case, runs of spaces and dots as one space ("Expiry date......").
    std::string key;
    for (char c : line.substr(0, colon)) {
      char l = lower_char(c);
      if (l == '.' || is_space(l)) {
        if (!key.empty() && key.back() != ' ') key += ' ';
      } else {
        key += l;
      }
    }
    while (!key.empty() && key.back() == ' ') key.pop_back();
    std::string_view value = trim(line.substr(colon + 1));

    if (auto e = std::find_if(expiry_keys.begin(), expiry_keys.end(), [&](const expiry_key& k) { return k.key == key; });
        e != expiry_keys.end()) {
      auto t = e->rank < expiry_rank ? parse_registry_date(value) : std::nullopt;
      if (t) {
        out.expires_at_ms = t;
        expiry_rank = e->rank;
      }
    } else if (one_of(key, created_keys)) {
      if (!out.registered_at_ms) out.registered_at_ms = parse_registry_date(value);
    } else if (one_of(key, registrar_keys)) {
      if (value.empty()) registrar_next_line = out.registrar.empty();
      else if (out.registrar.empty()) out.registrar = printable(value);
    } else if (one_of(key, status_keys)) {
      if (iequals(value, "free") || iequals(value, "available") || iequals(value, "not registered"))
        free_status = true;
      else
        add_statuses(value, out.statuses);
    } else if (one_of(key, referral_keys)) {
      if (out.referral_host.empty() && !value.empty()) (void)parse_referral(value, out.referral_host, out.referral_port);
    }
  }
  // A "free-date" (.ru: when the name is released) only stands in when nothing better is there.
  bool has_data = out.expires_at_ms || !out.registrar.empty() || !out.statuses.empty() || !out.referral_host.empty();
  if (has_data && !free_status) return out;
  for (auto phrase : rate_limit_phrases)
    if (contains_ci(text, phrase))
      return make_error(errc::rate_limited, "WHOIS server refused the query for now: " + printable(text, 200));
  if (free_status) return make_error(errc::not_found, "WHOIS: the domain is not registered");
  for (auto phrase : not_found_phrases)
    if (contains_ci(text, phrase)) return make_error(errc::not_found, "WHOIS: " + printable(text, 200));
  return make_error(errc::invalid_argument,
                    "WHOIS answer has no registration data (no expiry date, registrar, status or referral)", "whois");
}

}  // namespace certfleet::net
