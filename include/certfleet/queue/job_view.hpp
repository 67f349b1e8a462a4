#pragma once
// The JSON shape of a job and of log lines, shared by the API and the CLI (one place).
#include "certfleet/store/job.hpp"

#include <boost/json/object.hpp>

namespace certfleet::queue {

boost::json::object to_json(const store::job_record& j);
boost::json::object to_json(const store::log_line& l);

}  // namespace certfleet::queue
