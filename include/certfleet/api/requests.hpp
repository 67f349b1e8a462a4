#pragma once
// Parsing of request bodies and query parameters into checked values. Pure (no I/O): each parser
// has a fuzz target. Every error names the field it is about.
#include "certfleet/api/router.hpp"
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/job.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace certfleet::api {

// One query parameter a route reads: what the parsers below accept, and what the OpenAPI
// document says (its parameters are generated from route_query_params, and a parser's "this
// route takes …" list is the same table's names, so the two cannot drift).
struct query_param_def {
  std::string_view name;
  std::string_view schema;       // JSON Schema text of the value
  std::string_view description;
};
// The parameters a route reads; empty: it reads none (and ignores any it is given).
std::span<const query_param_def> route_query_params(route_id id) noexcept;

inline constexpr int max_page_size = 200;
inline constexpr int max_page = 1'000'000;
inline constexpr int max_log_limit = 1000;

// The request's Transfer-Encoding (its fields' values joined with ", ") on an HTTP/`version`
// request (10 or 11): nullopt when the body can be framed, else why not. RFC 9112 §6.1: the
// only coding this server decodes is a lone "chunked"; anything else (gzip, "chunked, identity",
// chunked on HTTP/1.0) leaves the body's end unknown, and reading it as empty would parse the
// body as the next request (request smuggling).
std::optional<std::string> transfer_encoding_problem(unsigned version, std::string_view values);

// X-Request-Id: a client's id is kept when it is 1-64 characters of [A-Za-z0-9._-] (it goes into
// a response header and a log line as it is, so nothing else may pass); otherwise, and when
// there is none, a new one (an object id: unique across processes, ordered by time).
inline constexpr std::size_t max_request_id = 64;
bool is_valid_request_id(std::string_view id) noexcept;
std::string request_id_for(std::string_view supplied);

// POST …/jobs
struct enqueue_body {
  std::string type;
  std::string payload = "{}";
  std::optional<std::string> idempotency_key;
  time_ms run_at = 0;  // 0: now
};
result<enqueue_body> parse_enqueue_body(std::string_view body);

// PUT /api/v1/settings (system scope) and PUT /api/v1/projects/{p}/settings (project scope):
// setting name -> canonical value, every one validated against the settings table and of that
// scope. Nothing is returned unless all of it is valid.
result<std::map<std::string, std::string>> parse_settings_body(std::string_view body,
                                                               setting_scope scope = setting_scope::system);

// Project names: 1-63 characters of [a-z0-9-], starting with a letter or digit, not ending with
// '-' (they appear unescaped in every route: /api/v1/projects/{p}/…). invalid_argument naming
// `field` otherwise.
result<std::string> check_project_name(std::string_view name, std::string_view field = "name");
// POST /api/v1/projects {name}: exactly that member.
result<std::string> parse_project_body(std::string_view body);

// POST …/tokens {name, role, ttl_s}: a project token. ttl_s 0 never expires; absent: 90 days.
inline constexpr std::int64_t token_ttl_default_s = 90LL * 86400;
inline constexpr std::int64_t token_ttl_min_s = 60;
inline constexpr std::int64_t token_ttl_max_s = 2LL * 366 * 86400;
inline constexpr std::size_t token_name_max = 100;
struct token_body {
  std::string name;
  store::role token_role = store::role::viewer;
  std::int64_t ttl_s = token_ttl_default_s;
};
result<token_body> parse_token_body(std::string_view body);

// GET …/jobs?status=&type=&page=&page_size=
struct job_list_query {
  std::optional<store::job_status> status;  // nullopt: all
  std::string type;
  int page = 1;
  int page_size = 0;  // 0: the default from settings
  std::string cursor; // a previous answer's next_cursor (a job id); empty: use page
};
result<job_list_query> parse_job_list_query(const query_params& q);

// The web UI's session cookie (DESIGN §8): its name, and its value in a Cookie header (empty
// when there is none).
inline constexpr std::string_view session_cookie_name = "certfleet_session";
std::string_view session_cookie_in(std::string_view cookie_header) noexcept;

// GET …/logs?after=&limit=   and   …/logs/stream?after=
struct log_query {
  std::int64_t after = 0;
  int limit = 100;
};
result<log_query> parse_log_query(const query_params& q, bool stream);

// GET …/audit?page=&page_size=
struct page_query {
  int page = 1;
  int page_size = 50;
};
result<page_query> parse_audit_query(const query_params& q);
// Catalog and distribution lists: GET …?page=&page_size= (the same parameters).
inline result<page_query> parse_page_query(const query_params& q) { return parse_audit_query(q); }

// GET …/distributions/{id}/results?run=&page=&page_size=
struct results_query {
  std::int64_t run = 0;  // 0: the current run
  int page = 1;
  int page_size = 50;
  // Filters, as given (empty: none); the distribution module checks the values
  // (distribution::parse_result_filter).
  std::string status;
  std::string error_class;
};
result<results_query> parse_results_query(const query_params& q);

// GET …/discovered-certificates?source=&finding=&page=&page_size=
struct discovered_query {
  int page = 1;
  int page_size = 50;
  // Filters, as given (empty: none); the distribution module checks them (an unknown finding or
  // a source id that is not an id is a 400 naming the parameter).
  std::string source;
  std::string finding;
};
result<discovered_query> parse_discovered_query(const query_params& q);
// GET …/msca-cas/{id}/templates: ?refresh=0|1 (absent: 0).
result<bool> parse_refresh_query(const query_params& q);

// "2026-11-29T09:05:18Z" / "…18.123Z" / "…+01:00" -> ms since the epoch.
std::optional<time_ms> parse_iso8601(std::string_view s) noexcept;

}  // namespace certfleet::api
