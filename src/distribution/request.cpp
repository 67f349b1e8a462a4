// Distributions (request.hpp): the request body.
#include "certfleet/distribution/request.hpp"

#include "certfleet/catalog/body_fields.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace certfleet::distribution {

namespace json = boost::json;
using namespace catalog::body_fields;

result<store::distribution_record> parse_distribution_request(std::string_view body, bool* auto_execute_given) {
  auto o = body_object(body,
                       {"name", "certificate_id", "target_ids", "canary", "failure_tolerance", "fail_fast", "auto_execute"});
  if (!o) return std::move(o).error();
  store::distribution_record d;
  auto name = name_of(*o);
  if (!name) return std::move(name).error();
  d.name = std::move(*name);
  auto cert = id_field(*o, "certificate_id", true);
  if (!cert) return std::move(cert).error();
  d.certificate_id = *cert;
  auto* ids = o->if_contains("target_ids");
  if (!ids || !ids->is_array() || ids->as_array().empty())
    return bad("target_ids", "target_ids must be a non-empty array of target ids");
  if (ids->as_array().size() > max_distribution_targets)
    return bad("target_ids", fmt::format("target_ids has more than {} entries", max_distribution_targets));
  for (const auto& e : ids->as_array()) {
    if (!e.is_string() || !valid_id(e.as_string())) return bad("target_ids", "target_ids must hold target ids (strings)");
    d.target_ids.emplace_back(e.as_string());
  }
  std::sort(d.target_ids.begin(), d.target_ids.end());
  d.target_ids.erase(std::unique(d.target_ids.begin(), d.target_ids.end()), d.target_ids.end());
  auto canary = boolean(*o, "canary", false);
  if (!canary) return std::move(canary).error();
  d.canary = *canary;
  auto ff = boolean(*o, "fail_fast", false);
  if (!ff) return std::move(ff).error();
  d.fail_fast = *ff;
  if (auto* t = o->if_contains("failure_tolerance"); t && !t->is_null()) {
    if (!t->is_number()) return bad("failure_tolerance", "failure_tolerance must be a number from 0 to 1");
    double v = t->is_double() ? t->as_double() : t->is_int64() ? static_cast<double>(t->as_int64()) : static_cast<double>(t->as_uint64());
    if (!(v >= 0 && v <= 1)) return bad("failure_tolerance", "failure_tolerance must be a number from 0 to 1");
    d.failure_tolerance = v;
  }
  auto* ae = o->if_contains("auto_execute");
  if (auto_execute_given) *auto_execute_given = ae && !ae->is_null();
  auto auto_execute = boolean(*o, "auto_execute", false);
  if (!auto_execute) return std::move(auto_execute).error();
  d.auto_execute = *auto_execute;
  return d;
}

}  // namespace certfleet::distribution
