#include "certfleet/core/error.hpp"

namespace certfleet {
namespace {

class category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "certfleet"; }
  std::string message(int v) const override {
    switch (static_cast<errc>(v)) {
      case errc::ok: return "success";
      case errc::invalid_argument: return "invalid argument";
      case errc::not_found: return "not found";
      case errc::conflict: return "conflict with the object's current state";
      case errc::unknown_job_type: return "unknown or unsupported job type";
      case errc::payload_too_large: return "payload too large";
      case errc::lease_lost: return "lease lost: another worker holds the job";
      case errc::cancelled: return "cancelled";
      case errc::rate_limited: return "rate limited";
      case errc::store_busy: return "store busy";
      case errc::store_failure: return "store failure";
      case errc::store_disk_full: return "the store's disk is full";
      case errc::unauthorized: return "unauthorized";
      case errc::forbidden: return "forbidden";
      case errc::shutting_down: return "shutting down";
      case errc::too_many_connections: return "too many connections";
      case errc::timeout: return "timed out";
      case errc::config_invalid: return "invalid configuration";
      case errc::ssh_unreachable: return "no SSH server answered";
    }
    return "unknown certfleet error";
  }
};

}  // namespace

const std::error_category& certfleet_category() noexcept {
  static const category_impl instance;
  return instance;
}

const char* errc_name(errc e) noexcept {
  switch (e) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid_argument";
    case errc::not_found: return "not_found";
    case errc::conflict: return "conflict";
    case errc::unknown_job_type: return "unknown_job_type";
    case errc::payload_too_large: return "payload_too_large";
    case errc::lease_lost: return "lease_lost";
    case errc::cancelled: return "cancelled";
    case errc::rate_limited: return "rate_limited";
    case errc::store_busy: return "store_busy";
    case errc::store_failure: return "store_failure";
    case errc::store_disk_full: return "store_disk_full";
    case errc::unauthorized: return "unauthorized";
    case errc::forbidden: return "forbidden";
    case errc::shutting_down: return "shutting_down";
    case errc::too_many_connections: return "too_many_connections";
    case errc::timeout: return "timeout";
    case errc::config_invalid: return "config_invalid";
    case errc::ssh_unreachable: return "ssh_unreachable";
  }
  return "unknown";
}

}  // namespace certfleet
