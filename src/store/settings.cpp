#include "certfleet/store/settings.hpp"

#include "certfleet/store/auth.hpp"

namespace certfleet::store {

settings_map to_settings_map(const std::map<std::string, std::string>& stored) {
  settings_map m;
  for (const auto& [k, v] : stored) (void)m.set(k, v);
  return m;
}

boost::asio::awaitable<settings_map> read_settings(store& st) {
  auto r = co_await st.auth().system_settings();
  if (!r) co_return settings_map{};
  co_return to_settings_map(*r);
}

}  // namespace certfleet::store
