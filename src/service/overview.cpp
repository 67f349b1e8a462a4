#include "certfleet/service/overview.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/checks/checks.hpp"
#include "certfleet/checks/discovery.hpp"
#include "certfleet/checks/gauges.hpp"
#include "certfleet/service/service.hpp"
#include "certfleet/store/settings.hpp"
#include "certfleet/store/states.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <map>
#include <string>

namespace certfleet::service {

namespace json = boost::json;

namespace {

json::object certificates_part(const std::vector<store::catalog_object>& certs, time_ms now, time_ms window) {
  std::int64_t expired = 0, soon = 0, not_issued = 0;
  std::vector<const store::catalog_object*> issued;
  for (const auto& o : certs) {
    if (o.not_after == 0) {
      ++not_issued;
      continue;
    }
    issued.push_back(&o);
    if (o.not_after <= now) ++expired;
    else if (o.not_after - now < window) ++soon;
  }
  const auto n = std::min(issued.size(), overview_list_max);
  std::partial_sort(issued.begin(), issued.begin() + static_cast<std::ptrdiff_t>(n), issued.end(),
                    [](const auto* a, const auto* b) { return a->not_after < b->not_after || (a->not_after == b->not_after && a->id < b->id); });
  json::array soonest;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& o = *issued[i];
    auto d = catalog::parse_certificate_doc(o, true);
    soonest.push_back(json::object{{"id", o.id},
                                   {"name", o.name},
                                   {"not_after", certfleet::json::time_value(o.not_after)},
                                   {"source", d ? d->source : std::string("uploaded")},
                                   {"status", d ? d->status : std::string("active")}});
  }
  return json::object{{"total", static_cast<std::int64_t>(certs.size())},
                      {"expired", expired},
                      {"expiring_soon", soon},
                      {"window_days", window / checks::day_ms},
                      {"not_issued", not_issued},
                      {"soonest", std::move(soonest)}};
}

json::object run_entry(const store::distribution_record& d) {
  return json::object{{"id", d.id},
                      {"name", d.name},
                      {"status", d.status},
                      {"run_no", d.run_no},
                      {"started_at", certfleet::json::time_value(d.run_started_at)},
                      {"finished_at", certfleet::json::time_value(d.run_finished_at)},
                      {"error", certfleet::json::text_value(d.error)}};
}

json::object distributions_part(const std::vector<store::distribution_record>& dists) {
  std::vector<const store::distribution_record*> running, failed;
  for (const auto& d : dists) {
    const auto st = store::parse_run_status(d.status);
    if (st == store::run_status::running) running.push_back(&d);
    else if (st == store::run_status::failed || st == store::run_status::partial) failed.push_back(&d);
  }
  // The longest running first; the latest failures first.
  std::sort(running.begin(), running.end(), [](auto* a, auto* b) { return a->run_started_at < b->run_started_at; });
  std::sort(failed.begin(), failed.end(), [](auto* a, auto* b) { return a->run_finished_at > b->run_finished_at; });
  auto list = [](const std::vector<const store::distribution_record*>& v) {
    json::array out;
    for (std::size_t i = 0; i < v.size() && i < overview_list_max; ++i) out.push_back(run_entry(*v[i]));
    return out;
  };
  return json::object{{"total", static_cast<std::int64_t>(dists.size())},
                      {"running", static_cast<std::int64_t>(running.size())},
                      {"failed", static_cast<std::int64_t>(failed.size())},
                      {"running_list", list(running)},
                      {"failed_list", list(failed)}};
}

json::object checks_part(const std::vector<store::catalog_object>& domains, const std::vector<store::catalog_object>& discovered) {
  std::map<std::string, std::int64_t> states{{"ok", 0}, {"expiring", 0}, {"error", 0}, {"unknown", 0}};
  for (const auto& o : domains) {
    auto v = checks::domain_view(o);
    ++states[std::string(v.at("state").as_string())];
  }
  json::object domain_counts{{"total", static_cast<std::int64_t>(domains.size())}};
  for (const auto& [k, n] : states) domain_counts[k] = n;
  std::int64_t with_findings = 0;
  std::map<std::string, std::pair<std::int64_t, std::string>> findings;  // name -> count, severity
  for (const auto& o : discovered) {
    auto v = checks::discovered_certificate_view(o);
    const auto& f = v.at("findings").as_array();
    if (!f.empty()) ++with_findings;
    for (const auto& x : f) {
      auto& e = findings[std::string(x.at("name").as_string())];
      ++e.first;
      e.second = std::string(x.at("severity").as_string());
    }
  }
  json::array finding_list;
  for (const auto& [name, e] : findings)
    finding_list.push_back(json::object{{"name", name}, {"severity", e.second}, {"count", e.first}});
  return json::object{{"domains", std::move(domain_counts)},
                      {"discovered", json::object{{"total", static_cast<std::int64_t>(discovered.size())},
                                                  {"with_findings", with_findings}}},
                      {"findings", std::move(finding_list)}};
}

// Every object of a kind in the project, page by page, at most overview_read_max.
result<std::vector<store::catalog_object>> all_objects(store::catalog_read& rd, const std::string& project_id,
                                                       std::string_view kind, bool& truncated) {
  constexpr int page_size = 1000;
  std::vector<store::catalog_object> out;
  for (int page = 1;; ++page) {
    auto p = rd.list_objects(project_id, kind, page, page_size);
    if (!p) return std::move(p).error();
    for (auto& o : p->items) out.push_back(std::move(o));
    if (static_cast<int>(p->items.size()) < page_size) return out;
    if (static_cast<int>(out.size()) >= overview_read_max) {
      truncated = true;
      return out;
    }
  }
}

}  // namespace

json::object overview_json(const overview_input& in, time_ms now, time_ms window) {
  return json::object{{"certificates", certificates_part(in.certificates, now, window)},
                      {"distributions", distributions_part(in.distributions)},
                      {"checks", checks_part(in.domains, in.discovered)},
                      {"truncated", in.truncated}};
}

op<json::value> service::overview(std::string project_id) {
  store::read_value_fn<overview_input> read = [project_id](store::catalog_read& rd) -> result<overview_input> {
    overview_input in;
    auto certs = all_objects(rd, project_id, store::kind_certificate, in.truncated);
    if (!certs) return std::move(certs).error();
    in.certificates = std::move(*certs);
    auto domains = all_objects(rd, project_id, store::kind_domain, in.truncated);
    if (!domains) return std::move(domains).error();
    in.domains = std::move(*domains);
    auto found = all_objects(rd, project_id, store::kind_discovered_certificate, in.truncated);
    if (!found) return std::move(found).error();
    in.discovered = std::move(*found);
    constexpr int page_size = 1000;
    for (int page = 1;; ++page) {
      auto p = rd.list_distributions(project_id, page, page_size);
      if (!p) return std::move(p).error();
      for (auto& d : p->items) in.distributions.push_back(std::move(d));
      if (static_cast<int>(p->items.size()) < page_size) break;
      if (static_cast<int>(in.distributions.size()) >= overview_read_max) {
        in.truncated = true;
        break;
      }
    }
    return in;
  };
  auto in = co_await store::read_value(st_.catalog(), std::move(read));
  if (!in) co_return std::move(in).error();
  const auto settings = co_await store::read_settings(st_);  // named: GCC 12 and co_await temporaries
  co_return json::value(overview_json(*in, clock_.now_ms(), checks::expiry_window_ms(settings)));
}

}  // namespace certfleet::service
