#include "remote.hpp"

#include "output.hpp"

#include "certfleet/api/requests.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/core/errc_table.hpp"
#include "certfleet/core/time_text.hpp"
#include "certfleet/net/http.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace certfleet::app {

namespace {

namespace json = boost::json;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// This machine by address (a name such as 127.example.com could resolve anywhere) or by
// "localhost".
bool loopback(const net::http_url& u) {
  return u.host == "localhost" || (u.host_is_ip() && (u.host == "::1" || u.host.rfind("127.", 0) == 0));
}

std::optional<net::http_method> method_of(std::string_view m) {
  if (m == "GET") return net::http_method::get;
  if (m == "POST") return net::http_method::post;
  if (m == "PUT") return net::http_method::put;
  if (m == "DELETE") return net::http_method::delete_;
  return std::nullopt;
}

std::string text_at(const json::object& o, std::string_view k) {
  const auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}
std::int64_t int_at(const json::object& o, std::string_view k) {
  const auto* v = o.if_contains(k);
  if (!v) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  return 0;
}
time_ms time_at(const json::object& o, std::string_view k) {
  const auto* v = o.if_contains(k);
  if (!v || !v->is_string()) return 0;
  return parse_rfc3339(std::string_view(v->as_string())).value_or(0);
}

}  // namespace

result<remote_client> remote_client::open(const remote_flags& f) {
  auto url = net::parse_url(f.server, "server");
  if (!url)
    return make_error(errc::invalid_argument,
                      fmt::format("--server (CERTFLEET_ADDR) must be an https:// URL like https://certfleet.example.com:8443: "
                                  "{}",
                                  url.error().message),
                      "server");
  if (url->target != "/")
    return make_error(errc::invalid_argument, "--server is the server's address without a path, like https://host:8443",
                      "server");
  if (!url->tls() && !loopback(*url))
    return make_error(errc::invalid_argument,
                      fmt::format("--server {} is plain HTTP to a host that is not this machine: the token would cross "
                                  "the network in clear; use https://",
                                  url->authority()),
                      "server");
  remote_client c;
  c.base_ = fmt::format("{}://{}", url->scheme, url->host.find(':') != std::string::npos ? "[" + url->host + "]" : url->host);
  c.base_ += fmt::format(":{}", url->port);
  std::string token = f.token;
  if (token.empty() && !f.token_file.empty()) {
    auto text = read_input(f.token_file, "token_file");
    if (!text) return std::move(text).error();
    token = trim(std::move(*text));
  }
  if (token.empty())
    return make_error(errc::invalid_argument,
                      "remote mode needs a token: --token, CERTFLEET_TOKEN, --token-file or CERTFLEET_TOKEN_FILE", "token");
  if (!api::looks_like_token(token))
    return make_error(errc::invalid_argument, "the token is not a certfleet token (cf_ and 43 characters)", "token");
  c.token_ = std::move(token);
  if (!f.ca_cert.empty()) {
    auto pem = read_input(f.ca_cert, "ca_cert");
    if (!pem) return std::move(pem).error();
    c.ca_pem_ = std::move(*pem);
  }
  return c;
}

result<remote_answer> remote_client::call(std::string_view method, std::string_view path,
                                        const std::optional<json::value>& body) const {
  if (!body) return send(method, path, "", "");
  return send(method, path, "application/json", json::serialize(*body));
}

result<remote_answer> remote_client::send(std::string_view method, std::string_view path, std::string_view content_type,
                                          std::string body, json::value* error_answer) const {
  auto m = method_of(method);
  if (!m) throw std::logic_error(fmt::format("remote call with method {}", method));
  net::http_request req;
  req.method = *m;
  req.url = base_ + std::string(path);
  req.headers = {{"Authorization", "Bearer " + token_}, {"Accept", "application/json"}};
  if (!content_type.empty()) {
    req.headers.emplace_back("Content-Type", std::string(content_type));
    req.body = std::move(body);
  }
  req.ca_pem = ca_pem_;
  req.timeout = std::chrono::seconds(req.body.size() > (1u << 20) ? 300 : 30);  // a bulk import is one transaction
  req.max_body = 64 * 1024 * 1024;
  boost::asio::io_context ioc;
  auto fut = boost::asio::co_spawn(ioc, net::http_exchange(std::move(req)), boost::asio::use_future);
  ioc.run();
  auto res = fut.get();
  // No answer, or not the API's: store_busy, whose exit code (unavailable) says "try again".
  if (!res.ok())
    return make_error(errc::store_busy, fmt::format("{}: no answer: {}", base_, res.error), "server");
  json::value doc;
  if (!res.body.empty()) {
    boost::system::error_code ec;
    doc = json::parse(res.body, ec);
    if (ec)
      return make_error(errc::store_busy,
                        fmt::format("{} answered {} with a body that is not JSON: is --server a certfleet API?", base_,
                                    res.status),
                        "server");
  }
  if (!res.body_complete && !res.body.empty())
    return make_error(errc::store_busy, fmt::format("{}: the answer broke off", base_), "server");
  if (res.status >= 200 && res.status < 300) return remote_answer{static_cast<unsigned>(res.status), std::move(doc)};
  // The API's error: {"error": {code, message, field}}.
  const auto* e = doc.is_object() ? doc.as_object().if_contains("error") : nullptr;
  if (!e || !e->is_object())
    return make_error(errc::store_busy, fmt::format("{} answered HTTP {} without an error body", base_, res.status),
                      "server");
  const auto& eo = e->as_object();
  const auto code = text_at(eo, "code");
  errc which = errc::store_failure;
  for (const auto& row : errc_table)
    if (row.name == code) which = row.code;
  if (code == "method_not_allowed" || code == "unsupported_media_type") which = errc::invalid_argument;
  if (which == errc::ok) which = errc::store_failure;
  auto failure = make_error(which, text_at(eo, "message"), text_at(eo, "field"));
  if (error_answer) *error_answer = std::move(doc);
  return failure;
}

result<json::value> remote_client::call_object(std::string_view method, std::string_view path,
                                               const std::optional<json::value>& body) const {
  auto a = call(method, path, body);
  if (!a) return std::move(a).error();
  if (!a->body.is_object())
    return make_error(errc::store_busy, fmt::format("{} answered without a JSON object", base_), "server");
  return std::move(a->body);
}

result<std::string> project_path(std::string_view project, std::string_view rest) {
  auto name = api::check_project_name(project, "project");
  if (!name) return std::move(name).error();
  return fmt::format("/api/v1/projects/{}{}", *name, rest);
}

std::string query_escape(std::string_view v) {
  std::string out;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out.push_back(static_cast<char>(c));
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

result<store::job_record> job_from_json(const json::value& v) {
  if (!v.is_object()) return make_error(errc::store_busy, "the server's job answer is not an object", "server");
  const auto& o = v.as_object();
  store::job_record j;
  j.id = text_at(o, "id");
  j.project_id = text_at(o, "project_id");
  j.type = text_at(o, "type");
  j.lane = text_at(o, "lane");
  auto st = store::parse_job_status(text_at(o, "status"));
  if (j.id.empty() || !st) return make_error(errc::store_busy, "the server's job answer lacks its id or status", "server");
  j.status = *st;
  j.result_status = text_at(o, "result_status");
  j.attempts = static_cast<int>(int_at(o, "attempts"));
  j.max_attempts = static_cast<int>(int_at(o, "max_attempts"));
  j.fence = int_at(o, "fence");
  j.ready_at = time_at(o, "run_at");
  if (const auto* h = o.if_contains("held"); h && h->is_bool()) j.held = h->as_bool();
  j.locked_by = text_at(o, "worker");
  j.locked_until = time_at(o, "locked_until");
  j.idempotency_key = text_at(o, "idempotency_key");
  j.parent_job_id = text_at(o, "parent_job_id");
  j.certificate_id = text_at(o, "certificate_id");
  j.distribution_id = text_at(o, "distribution_id");
  j.triggered_by = text_at(o, "triggered_by");
  j.created_at = time_at(o, "created_at");
  j.started_at = time_at(o, "started_at");
  j.completed_at = time_at(o, "completed_at");
  j.error = text_at(o, "error");
  if (const auto* p = o.if_contains("progress"); p && p->is_object()) {
    j.progress_current = int_at(p->as_object(), "current");
    j.progress_total = int_at(p->as_object(), "total");
  }
  if (const auto* c = o.if_contains("cancel_requested"); c && c->is_bool()) j.cancel_requested = c->as_bool();
  if (const auto* p = o.if_contains("payload"); p && !p->is_null()) j.payload = json::serialize(*p);
  else j.payload = "{}";
  return j;
}

result<store::log_line> log_line_from_json(const json::value& v) {
  if (!v.is_object()) return make_error(errc::store_busy, "the server's log line is not an object", "server");
  const auto& o = v.as_object();
  store::log_line l;
  l.seq = int_at(o, "seq");
  l.ts = time_at(o, "ts");
  l.level = text_at(o, "level");
  l.message = text_at(o, "message");
  if (const auto* d = o.if_contains("detail"); d && !d->is_null())
    l.detail = d->is_string() ? std::string(d->as_string()) : json::serialize(*d);
  return l;
}

}  // namespace certfleet::app
