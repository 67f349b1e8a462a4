#pragma once
// The stored system settings as the settings table's map, in one place for every reader (the
// API's settings cache, the distribution jobs and routes).
#include "certfleet/core/settings.hpp"

#include <boost/asio/awaitable.hpp>

#include <map>
#include <string>

namespace certfleet::store {

class store;

// Every known setting: its stored value, or its default when unset or when the stored value no
// longer validates (a rule tightened since it was written: a stale invalid value falls back to
// its default rather than failing every reader).
settings_map to_settings_map(const std::map<std::string, std::string>& stored);

// Reads and converts them; when the read fails, every default. For readers that go on with the
// defaults (a job, a route's check); a reader that keeps a cache converts the rows itself.
boost::asio::awaitable<settings_map> read_settings(store& st);

}  // namespace certfleet::store
