// The console's landing page in one answer (issue 31): jobs per status, and per type with its
// lane (the store's exact tab counts: one read for the project, one per job type of the type
// table), and the catalog's overview (service/overview.hpp).
#include "certfleet/core/json.hpp"
#include "certfleet/queue/job_types.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <boost/json.hpp>

#include <map>
#include <string>

namespace certfleet::api {

boost::asio::awaitable<reply> get_dashboard(server_state& s, const route_call& call) {
  const std::string pid = call.who.project->id;
  const auto now = s.clock.now_ms();
  // Named, not a temporary in the co_await: GCC 12 frees such a temporary twice.
  store::job_filter every_type{pid, std::nullopt, "", 1, 1, ""};
  auto all = co_await s.timed("job_list", s.st.jobs().list(every_type));
  if (!all) co_return error_reply(all.error());
  boost::json::array by_type;
  std::map<std::string, store::status_counts> lanes;
  for (const auto& t : queue::all_job_types()) {
    store::job_filter f{pid, std::nullopt, std::string(t.name), 1, 1, ""};
    auto p = co_await s.timed("job_list", s.st.jobs().list(f));
    if (!p) co_return error_reply(p.error());
    std::int64_t n = 0;
    for (auto c : p->counts) n += c;
    if (n == 0) continue;  // types this project never ran
    by_type.push_back(boost::json::object{{"type", t.name}, {"lane", t.lane}, {"counts", tab_counts_json(p->counts)}});
    auto& lane = lanes[std::string(t.lane)];
    for (std::size_t i = 0; i < lane.size(); ++i) lane[i] += p->counts[i];
  }
  boost::json::array by_lane;
  for (const auto& [lane, counts] : lanes) by_lane.push_back(boost::json::object{{"lane", lane}, {"counts", tab_counts_json(counts)}});
  auto catalog = co_await s.catalog.overview(pid);
  if (!catalog) co_return error_reply(catalog.error());
  auto out = std::move(catalog->as_object());
  out["jobs"] = boost::json::object{{"counts", tab_counts_json(all->counts)},
                                    {"by_type", std::move(by_type)},
                                    {"by_lane", std::move(by_lane)}};
  out["generated_at"] = certfleet::json::time_value(now);
  co_return json_reply(200, out);
}

}  // namespace certfleet::api
