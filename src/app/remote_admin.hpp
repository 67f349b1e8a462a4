#pragma once
// `certfleet token …` and `certfleet project …` over a server's API (remote mode, remote.hpp).
#include "remote.hpp"

#include <boost/json/array.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace certfleet::app {

struct remote_token_args {
  std::string project = "default";
  std::string role, name, id;
  std::optional<std::int64_t> ttl_s;  // absent: the API's default (90 days)
  bool system = false, all = false, json = false, wide = false;
};

// `certfleet token list`'s table from the API's token answers (an item's "project", else
// `project`); -o wide adds who made each.
void print_token_table(const boost::json::array& items, std::string_view project, bool wide);

// Each prints its answer and returns the exit code (exit_codes.hpp).
int remote_token(const remote_client& c, const std::string& cmd, const remote_token_args& a);
int remote_project(const remote_client& c, const std::string& cmd, const std::string& name, bool json);

}  // namespace certfleet::app
