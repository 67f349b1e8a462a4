#pragma once
// The JSON shape of a job and of log lines, shared by the API and the CLI (one place).
#include "certfleet/store/job.hpp"

#include <boost/json/object.hpp>

#include <optional>
#include <string_view>

namespace certfleet::queue {

boost::json::object to_json(const store::job_record& j);

// A system trigger (DESIGN §8 "Triggered By") in words (queue/triggers.hpp's table): "scheduler",
// "retry wave", …; nullopt for a token ("token:<id>", whose name the API looks up) and for an
// empty trigger.
std::optional<std::string_view> trigger_in_words(std::string_view triggered_by) noexcept;
boost::json::object to_json(const store::log_line& l);

}  // namespace certfleet::queue
