#include "certfleet/distribution/run_view.hpp"

#include "certfleet/net/error_class.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace certfleet::distribution {

namespace json = boost::json;

void strip_admin_detail(json::value& page) {
  auto* o = page.if_object();
  if (!o) return;
  auto* items = o->if_contains("items");
  if (!items || !items->is_array()) return;
  for (auto& item : items->as_array())
    if (auto* r = item.if_object()) r->erase("error_detail");
}

bool result_filter::matches(const store::target_result& r) const noexcept {
  return (status.empty() || r.status == status) && (error_class.empty() || r.error_class == error_class);
}

result<result_filter> parse_result_filter(std::string_view status, std::string_view error_class) {
  result_filter f;
  if (!status.empty()) {
    if (std::find(result_statuses.begin(), result_statuses.end(), status) == result_statuses.end())
      return make_error(errc::invalid_argument,
                        fmt::format("status must be one of {}", fmt::join(result_statuses, ", ")), "status");
    f.status = std::string(status);
  }
  if (!error_class.empty()) {
    auto c = net::parse_error_class(error_class);
    if (!c || *c == net::error_class::none) {
      std::vector<std::string_view> names;
      for (int i = 1; i <= static_cast<int>(net::error_class::unknown); ++i)
        names.emplace_back(net::error_class_name(static_cast<net::error_class>(i)));
      return make_error(errc::invalid_argument, fmt::format("error_class must be one of {}", fmt::join(names, ", ")),
                        "error_class");
    }
    f.error_class = std::string(error_class);
  }
  return f;
}

result_facets facet_counts(const std::vector<store::target_result>& results) {
  result_facets f;
  for (auto s : result_statuses) f.status[std::string(s)] = 0;
  for (const auto& r : results) {
    ++f.status[r.status];
    if (!r.error_class.empty()) ++f.error_class[r.error_class];
  }
  return f;
}

json::object facets_json(const result_facets& f) {
  json::object status, cls;
  // Statuses in their table's order (the filter menu's), any other stored one after them.
  for (auto s : result_statuses)
    if (auto it = f.status.find(std::string(s)); it != f.status.end()) status[s] = it->second;
  for (const auto& [k, v] : f.status)
    if (!status.contains(k)) status[k] = v;
  for (const auto& [k, v] : f.error_class) cls[k] = v;
  return json::object{{"status", std::move(status)}, {"error_class", std::move(cls)}};
}

std::int64_t percentile(const std::vector<std::int64_t>& sorted, double q) noexcept {
  if (sorted.empty()) return 0;
  // Nearest rank: the ceil(q × n)-th smallest (1-based), at least the first.
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

namespace {

struct timed_result {
  std::vector<std::pair<std::string, std::int64_t>> phases;
  std::int64_t session_wait_ms = 0;
};

// The timings the engine stored with a result; nullopt when there are none or they do not parse.
std::optional<timed_result> read_timings(const std::string& detail) {
  boost::system::error_code ec;
  auto v = json::parse(detail, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto& o = v.as_object();
  auto* t = o.if_contains("timings_ms");
  if (!t || !t->is_object()) return std::nullopt;
  timed_result out;
  for (const auto& [k, ms] : t->as_object()) {
    if (!ms.is_int64() || ms.as_int64() < 0) continue;
    out.phases.emplace_back(std::string(k), ms.as_int64());
  }
  if (auto* w = o.if_contains("session_wait_ms"); w && w->is_int64() && w->as_int64() > 0)
    out.session_wait_ms = w->as_int64();
  return out;
}

}  // namespace

long_tail compute_long_tail(const std::vector<store::target_result>& results, std::size_t top) {
  long_tail out;
  std::map<std::string_view, std::vector<std::int64_t>> samples;
  for (auto p : tail_phases) samples[p];
  std::vector<slow_target> all;
  for (const auto& r : results) {
    if (r.status == result_pending) continue;
    auto t = read_timings(r.detail);
    if (!t || t->phases.empty()) continue;
    ++out.timed;
    for (const auto& [phase, ms] : t->phases)
      if (auto it = samples.find(phase); it != samples.end()) it->second.push_back(ms);
    slow_target s;
    s.target_id = r.target_id;
    s.status = r.status;
    s.total_ms = std::max<std::int64_t>(0, r.finished_at - r.started_at);
    s.session_wait_ms = t->session_wait_ms;
    s.phases_ms = std::move(t->phases);
    all.push_back(std::move(s));
  }
  for (auto p : tail_phases) {
    auto& v = samples[p];
    std::sort(v.begin(), v.end());
    phase_spread ps;
    ps.phase = std::string(p);
    ps.count = static_cast<std::int64_t>(v.size());
    ps.p50_ms = percentile(v, 0.50);
    ps.p90_ms = percentile(v, 0.90);
    ps.p99_ms = percentile(v, 0.99);
    ps.max_ms = v.empty() ? 0 : v.back();
    out.phases.push_back(std::move(ps));
  }
  auto n = std::min(top, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const slow_target& a, const slow_target& b) {
                      return a.total_ms != b.total_ms ? a.total_ms > b.total_ms : a.target_id < b.target_id;
                    });
  all.resize(n);
  out.slowest = std::move(all);
  return out;
}

json::object long_tail_json(const long_tail& t) {
  json::array phases, slowest;
  for (const auto& p : t.phases)
    phases.push_back(json::object{{"phase", p.phase},   {"count", p.count},   {"p50_ms", p.p50_ms},
                                  {"p90_ms", p.p90_ms}, {"p99_ms", p.p99_ms}, {"max_ms", p.max_ms}});
  for (const auto& s : t.slowest) {
    json::object timings;
    for (const auto& [phase, ms] : s.phases_ms) timings[phase] = ms;
    json::object o{{"target_id", s.target_id}, {"status", s.status}, {"total_ms", s.total_ms},
                   {"timings_ms", std::move(timings)}};
    if (s.session_wait_ms) o["session_wait_ms"] = s.session_wait_ms;
    slowest.push_back(std::move(o));
  }
  return json::object{{"timed_targets", t.timed}, {"phases", std::move(phases)}, {"slowest", std::move(slowest)}};
}

}  // namespace certfleet::distribution
