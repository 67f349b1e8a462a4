#include "certfleet/core/spawn.hpp"

#include <spdlog/spdlog.h>

namespace certfleet {

std::string describe_exception(std::exception_ptr e) {
  if (!e) return {};
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

void report_unexpected::operator()(std::exception_ptr e) const {
  if (e) spdlog::error("{} ended by an unexpected exception: {}", context_, describe_exception(e));
  if (then_) then_(static_cast<bool>(e));
}

}  // namespace certfleet
