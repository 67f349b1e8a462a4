#include "certfleet/api/requests.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/core/settings.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <cctype>
#include <algorithm>
#include <charconv>

namespace certfleet::api {

namespace {

bool parse_i64(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

result<int> int_param(std::string_view name, std::string_view value, int lo, int hi) {
  std::int64_t v = 0;
  if (!parse_i64(value, v) || v < lo || v > hi)
    return make_error(errc::invalid_argument, fmt::format("{} must be an integer from {} to {}", name, lo, hi),
                      std::string(name));
  return static_cast<int>(v);
}

// `page` and `page_size`, shared by every paged route: true when `name` was one of them.
result<bool> page_param(std::string_view name, std::string_view value, int& page, int& page_size) {
  int* target = name == "page" ? &page : name == "page_size" ? &page_size : nullptr;
  if (!target) return false;
  auto v = int_param(name, value, 1, name == "page" ? max_page : max_page_size);
  if (!v) return std::move(v).error();
  *target = *v;
  return true;
}

// The query parameter tables (route_query_params). Their bounds are the parsers' (max_page,
// max_page_size, max_log_limit): api_openapi.query_parameters_are_what_the_parsers_take tries each
// bound and the value past it against the parser.
#define CF_PAGE_PARAMS                                                                                        \
  {"page", R"json({"type":"integer","minimum":1,"maximum":1000000,"default":1})json",                         \
   "The page, from 1 (a page past the last is empty)"},                                                       \
  {"page_size", R"json({"type":"integer","minimum":1,"maximum":200})json",                                      \
   "Items per page (default: 50; jobs: the jobs_page_size_default setting)"}
constexpr query_param_def page_params[] = {CF_PAGE_PARAMS};
constexpr query_param_def job_list_params[] = {
    {"status", R"json({"enum":["all","pending","active","completed","failed","dead","cancelled"],"default":"all"})json",
     "Only jobs in this state (the Jobs page's tabs)"},
    {"type", R"json({"type":"string","maxLength":100})json", "Only jobs of this type"},
    CF_PAGE_PARAMS,
    {"cursor", R"json({"type":"string","pattern":"^[0-9a-fA-F]{24}$"})json",
     "Keyset paging: a previous page's next_cursor (then page is not used)"},
};
constexpr query_param_def log_params[] = {
    {"after", R"json({"type":"integer","minimum":0,"default":0})json", "A log cursor: lines after it (a previous answer's next_cursor)"},
    {"limit", R"json({"type":"integer","minimum":1,"maximum":1000,"default":100})json", "At most this many lines"},
};
constexpr query_param_def log_stream_params[] = {
    {"after", R"json({"type":"integer","minimum":0,"default":0})json", "A log cursor: the backlog starts after it"},
};
constexpr query_param_def results_params[] = {
    {"run", R"json({"type":"integer","minimum":1})json", "The run number (default: the current or last run)"},
    CF_PAGE_PARAMS,
    {"status", R"json({"type":"string"})json", "Only results in this state (succeeded, failed, skipped, …; a bad one is a 400 with the list)"},
    {"error_class", R"json({"type":"string"})json", "Only failures of this error class (auth, host_key, network, …; a bad one is a 400 with the list)"},
};
constexpr query_param_def discovered_params[] = {
    {"source", R"json({"type":"string","maxLength":64})json", "Only certificates found by this discovery source (its id)"},
    {"finding", R"json({"type":"string","maxLength":64})json", "Only certificates with this finding (expired, self_signed, …)"},
    CF_PAGE_PARAMS,
};
#undef CF_PAGE_PARAMS
constexpr query_param_def refresh_params[] = {
    {"refresh", R"json({"type":"string","enum":["0","1"]})json", "1: fetch the CA's enrollment policy again first"},
};

std::string names_of(std::span<const query_param_def> params) {
  std::string out;
  for (const auto& p : params) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

error unknown_param(std::string_view name, std::span<const query_param_def> allowed) {
  return make_error(errc::invalid_argument,
                    fmt::format("unknown query parameter {}; this route takes {}", name.substr(0, 64), names_of(allowed)),
                    std::string(name.substr(0, 64)));
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

std::optional<time_ms> parse_iso8601(std::string_view s) noexcept {
  int y, mo, d, h, mi, se;
  if (!digits(s, 0, 4, y) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, mo) || s[7] != '-' ||
      !digits(s, 8, 2, d) || (s[10] != 'T' && s[10] != 't') || !digits(s, 11, 2, h) || s[13] != ':' ||
      !digits(s, 14, 2, mi) || s[16] != ':' || !digits(s, 17, 2, se))
    return std::nullopt;
  static constexpr int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || se > 60) return std::nullopt;
  std::size_t pos = 19;
  int ms = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int n = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (n < 3) ms = ms * 10 + (s[pos] - '0');
      ++n;
      ++pos;
    }
    if (n == 0 || n > 9) return std::nullopt;
    for (int i = n; i < 3; ++i) ms *= 10;
  }
  std::int64_t offset_min = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!digits(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(s, pos + 4, 2, om) ||
        oh > 23 || om > 59)
      return std::nullopt;
    offset_min = (oh * 60 + om) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;  // a time without a zone is ambiguous
  }
  if (pos != s.size()) return std::nullopt;
  std::int64_t days = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  std::int64_t secs = days * 86400 + h * 3600 + mi * 60 + std::min(se, 59) - offset_min * 60;
  if (secs < 0) return std::nullopt;
  return secs * 1000 + ms;
}

result<enqueue_body> parse_enqueue_body(std::string_view body) {
  auto r = json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"type", "payload", "idempotency_key", "run_at"}); !ok) return std::move(ok).error();
  enqueue_body out;
  auto type = r->required_string("type");
  if (!type) return std::move(type).error();
  if (type->empty() || type->size() > 100)
    return make_error(errc::invalid_argument, "type must be 1 to 100 characters", "type");
  out.type = std::move(*type);
  // Absent means {} (DESIGN §6 lists payload without "?", but every type's fields are optional);
  // null is neither an object nor absent: refused rather than guessed at.
  if (r->is_null("payload"))
    return make_error(errc::invalid_argument, "payload must be an object, not null (leave it out for {})", "payload");
  auto payload = r->optional_raw("payload", true);
  if (!payload) return std::move(payload).error();
  if (*payload) out.payload = std::move(**payload);
  auto key = r->optional_string("idempotency_key");
  if (!key) return std::move(key).error();
  out.idempotency_key = std::move(*key);
  // run_at: ms since the epoch, or an ISO-8601 time with a zone.
  if (r->has("run_at")) {
    auto as_int = r->optional_int("run_at");
    if (as_int) {
      if (**as_int < 0) return make_error(errc::invalid_argument, "run_at must not be negative", "run_at");
      out.run_at = **as_int;
    } else {
      auto as_text = r->optional_string("run_at");
      if (!as_text)
        return make_error(errc::invalid_argument,
                          "run_at must be milliseconds since the epoch or an ISO-8601 time such as 2026-11-29T09:05:18Z",
                          "run_at");
      auto t = parse_iso8601(**as_text);
      if (!t)
        return make_error(errc::invalid_argument,
                          "run_at must be an ISO-8601 time with a zone, such as 2026-11-29T09:05:18Z", "run_at");
      out.run_at = *t;
    }
    if (out.run_at > 253'402'300'799'000)  // 9999-12-31
      return make_error(errc::invalid_argument, "run_at is too far in the future", "run_at");
  }
  return out;
}

result<std::map<std::string, std::string>> parse_settings_body(std::string_view body, setting_scope scope) {
  if (body.size() > json::max_payload_bytes)
    return make_error(errc::payload_too_large, "body is larger than 1 MiB", "body");
  auto parsed = json::parse_value(body, "body", 8);
  if (!parsed) return std::move(parsed).error();
  const auto& v = *parsed;
  if (!v.is_object()) return make_error(errc::invalid_argument, "body must be a JSON object of settings", "body");
  const auto& o = v.get_object();
  if (o.empty()) return make_error(errc::invalid_argument, "body names no setting", "body");
  std::map<std::string, std::string> out;
  for (const auto& kv : o) {
    std::string name(kv.key());
    std::string shown = name.substr(0, 64);
    const auto* def = find_setting(name);
    if (!def) return make_error(errc::invalid_argument, fmt::format("unknown setting {}", shown), shown);
    if (def->scope != scope) {
      // Where the setting is changed instead, by its scope.
      auto where = [](setting_scope s) {
        switch (s) {
          case setting_scope::process: return "a process setting (config file, environment or flag)";
          case setting_scope::system: return "a system-wide setting (PUT /api/v1/settings)";
          case setting_scope::project: break;
        }
        return "a project setting (PUT /api/v1/projects/{p}/settings)";
      };
      return make_error(errc::invalid_argument,
                        fmt::format("{} is {}, not a {} one", name, where(def->scope),
                                    scope == setting_scope::system ? "system-wide" : "project"),
                        name);
    }
    std::string text;
    const auto& val = kv.value();
    if (val.is_int64()) text = std::to_string(val.get_int64());
    else if (val.is_uint64()) text = std::to_string(val.get_uint64());
    else if (val.is_string()) text = std::string(val.get_string());
    else
      return make_error(errc::invalid_argument,
                        fmt::format("{} must be {}", name, def->type == setting_type::integer ? "an integer" : "a string"),
                        name);
    if (def->type != setting_type::integer && !val.is_string())
      return make_error(errc::invalid_argument, fmt::format("{} must be a string", name), name);
    auto canon = validate_setting(*def, text);
    if (!canon) return std::move(canon).error();
    out.emplace(std::move(name), std::move(*canon));
  }
  return out;
}

result<job_list_query> parse_job_list_query(const query_params& q) {
  job_list_query out;
  for (const auto& [k, v] : q) {
    if (k == "status") {
      if (v.empty() || v == "all") continue;
      auto s = store::parse_job_status(v);
      if (!s)
        return make_error(errc::invalid_argument,
                          "status must be one of all, pending, active, completed, failed, dead, cancelled", "status");
      out.status = s;
    } else if (k == "type") {
      if (v.size() > 100) return make_error(errc::invalid_argument, "type must be at most 100 characters", "type");
      out.type = v;
    } else if (k == "cursor") {
      if (!is_object_id(v))
        return make_error(errc::invalid_argument, "cursor must be the next_cursor of a previous page (a 24-character hex job id)",
                          "cursor");
      out.cursor = v;
    } else {
      auto paged = page_param(k, v, out.page, out.page_size);
      if (!paged) return std::move(paged).error();
      if (!*paged) return unknown_param(k, job_list_params);
    }
  }
  return out;
}

std::string_view session_cookie_in(std::string_view header) noexcept {
  // Cookie: a=1; certfleet_session=…; b=2 (RFC 6265 §5.4: "; "-separated name=value pairs).
  while (!header.empty()) {
    auto semi = header.find(';');
    auto pair = header.substr(0, semi);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    if (pair.size() > session_cookie_name.size() && pair.substr(0, session_cookie_name.size()) == session_cookie_name &&
        pair[session_cookie_name.size()] == '=')
      return pair.substr(session_cookie_name.size() + 1);
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return {};
}

result<log_query> parse_log_query(const query_params& q, bool stream) {
  log_query out;
  for (const auto& [k, v] : q) {
    if (k == "after") {
      std::int64_t a = 0;
      if (!parse_i64(v, a) || a < 0)
        return make_error(errc::invalid_argument, "after must be a log cursor: an integer >= 0", "after");
      out.after = a;
    } else if (k == "limit" && !stream) {
      auto l = int_param("limit", v, 1, max_log_limit);
      if (!l) return std::move(l).error();
      out.limit = *l;
    } else {
      return unknown_param(k, stream ? std::span<const query_param_def>(log_stream_params) : log_params);
    }
  }
  return out;
}

result<results_query> parse_results_query(const query_params& q) {
  results_query out;
  for (const auto& [k, v] : q) {
    if (k == "run") {
      std::int64_t r = 0;
      if (!parse_i64(v, r) || r < 1) return make_error(errc::invalid_argument, "run must be a run number (1 or more)", "run");
      out.run = r;
      continue;
    }
    if (k == "status" || k == "error_class") {
      (k == "status" ? out.status : out.error_class) = v;
      continue;
    }
    auto paged = page_param(k, v, out.page, out.page_size);
    if (!paged) return std::move(paged).error();
    if (!*paged) return unknown_param(k, results_params);
  }
  return out;
}

result<discovered_query> parse_discovered_query(const query_params& q) {
  discovered_query out;
  for (const auto& [k, v] : q) {
    if (k == "source" || k == "finding") {
      if (v.size() > 64) return make_error(errc::invalid_argument, fmt::format("{} is too long", k), std::string(k));
      (k == "source" ? out.source : out.finding) = v;
      continue;
    }
    auto paged = page_param(k, v, out.page, out.page_size);
    if (!paged) return std::move(paged).error();
    if (!*paged) return unknown_param(k, discovered_params);
  }
  return out;
}

result<bool> parse_refresh_query(const query_params& q) {
  bool refresh = false;
  for (const auto& [k, v] : q) {
    if (k != "refresh") return unknown_param(k, refresh_params);
    if (v != "0" && v != "1") return make_error(errc::invalid_argument, "refresh must be 0 or 1", "refresh");
    refresh = v == "1";
  }
  return refresh;
}

result<page_query> parse_audit_query(const query_params& q) {
  page_query out;
  for (const auto& [k, v] : q) {
    auto paged = page_param(k, v, out.page, out.page_size);
    if (!paged) return std::move(paged).error();
    if (!*paged) return unknown_param(k, page_params);
  }
  return out;
}

bool is_valid_request_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > max_request_id) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

std::string request_id_for(std::string_view supplied) {
  if (is_valid_request_id(supplied)) return std::string(supplied);
  return new_object_id();
}

std::optional<std::string> transfer_encoding_problem(unsigned version, std::string_view values) {
  if (version < 11) return std::string("Transfer-Encoding is not allowed in an HTTP/1.0 request; send Content-Length");
  auto v = values;
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  constexpr std::string_view chunked = "chunked";
  bool lone_chunked = v.size() == chunked.size();
  for (std::size_t i = 0; lone_chunked && i < chunked.size(); ++i)
    lone_chunked = std::tolower(static_cast<unsigned char>(v[i])) == chunked[i];
  if (lone_chunked) return std::nullopt;
  // The client's text, bounded and without control characters, so the message stays one line.
  std::string shown;
  for (char c : values.substr(0, 100)) shown += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return fmt::format("unsupported Transfer-Encoding \"{}\": only chunked is accepted", shown);
}

result<std::string> check_project_name(std::string_view name, std::string_view field) {
  auto ok_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
  bool ok = !name.empty() && name.size() <= 63 && name.front() != '-' && name.back() != '-' &&
            std::all_of(name.begin(), name.end(), ok_char);
  if (!ok)
    return make_error(errc::invalid_argument,
                      "a project name is 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit and not "
                      "ending with '-' (like team-web-01)",
                      std::string(field));
  return std::string(name);
}

result<std::string> parse_project_body(std::string_view body) {
  if (body.size() > json::max_payload_bytes)
    return make_error(errc::payload_too_large, "body is larger than 1 MiB", "body");
  boost::system::error_code ec;
  boost::json::parse_options opts;
  opts.max_depth = 4;
  auto v = boost::json::parse(boost::json::string_view(body.data(), body.size()), ec, {}, opts);
  if (ec) return make_error(errc::invalid_argument, fmt::format("body is not valid JSON: {}", ec.message()), "body");
  if (!v.is_object()) return make_error(errc::invalid_argument, "body must be a JSON object like {\"name\": \"team-a\"}", "body");
  const auto& o = v.get_object();
  for (const auto& kv : o)
    if (kv.key() != "name") {
      std::string k(kv.key().substr(0, 64));
      return make_error(errc::invalid_argument, fmt::format("unknown field \"{}\"", k), k.empty() ? "body" : k);
    }
  auto* n = o.if_contains("name");
  if (!n) return make_error(errc::invalid_argument, "name is required", "name");
  if (!n->is_string()) return make_error(errc::invalid_argument, "name must be a string", "name");
  return check_project_name(std::string_view(n->get_string().data(), n->get_string().size()));
}

result<token_body> parse_token_body(std::string_view body) {
  auto r = json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto only = r->only({"name", "role", "ttl_s"}); !only) return std::move(only).error();
  token_body out;
  auto name = r->required_string("name");
  if (!name) return std::move(name).error();
  const bool printable = std::all_of(name->begin(), name->end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
  });
  if (name->empty() || name->size() > token_name_max || !printable)
    return make_error(errc::invalid_argument,
                      fmt::format("name is 1-{} characters without control characters, saying what the token is for "
                                  "(like ci-deploy)",
                                  token_name_max),
                      "name");
  out.name = std::move(*name);
  auto role_text = r->required_string("role");
  if (!role_text) return std::move(role_text).error();
  auto role = store::parse_role(*role_text);
  if (!role) return make_error(errc::invalid_argument, "role must be one of viewer, operator, admin, owner", "role");
  out.token_role = *role;
  auto ttl = r->optional_int("ttl_s");
  if (!ttl) return std::move(ttl).error();
  if (*ttl) {
    if (**ttl != 0 && (**ttl < token_ttl_min_s || **ttl > token_ttl_max_s))
      return make_error(errc::invalid_argument,
                        fmt::format("ttl_s is 0 (never expires) or {}-{} seconds (1 minute to 2 years); absent: {} "
                                    "(90 days)",
                                    token_ttl_min_s, token_ttl_max_s, token_ttl_default_s),
                        "ttl_s");
    out.ttl_s = **ttl;
  }
  return out;
}

std::span<const query_param_def> route_query_params(route_id id) noexcept {
  switch (id) {
    case route_id::jobs_list: return job_list_params;
    case route_id::job_logs: return log_params;
    case route_id::job_log_stream: return log_stream_params;
    case route_id::distribution_results: return results_params;
    case route_id::discovered_certificates_list: return discovered_params;
    case route_id::msca_ca_templates: return refresh_params;
    case route_id::audit:
    case route_id::distributions_list:
    case route_id::certificates_list:
    case route_id::credentials_list:
    case route_id::targets_list:
    case route_id::channels_list:
    case route_id::rules_list:
    case route_id::acme_accounts_list:
    case route_id::msca_cas_list:
    case route_id::dns_providers_list:
    case route_id::domains_list:
    case route_id::discovery_sources_list: return page_params;
    default: return {};
  }
}

}  // namespace certfleet::api
