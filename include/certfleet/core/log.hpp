#pragma once
// Process logging: spdlog with one pattern; secrets never reach these calls.
#include <spdlog/spdlog.h>

#include <string_view>

namespace certfleet::log {

// Sets the level ("trace".."error") and the line pattern of the default logger.
void init(std::string_view level);

}  // namespace certfleet::log
