#include "certfleet/core/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace certfleet::log {

void init(std::string_view level) {
  auto logger = spdlog::stderr_color_mt("certfleet");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%P] %v");
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

}  // namespace certfleet::log
