#include "certfleet/api/audit_file.hpp"

#include "certfleet/core/clock.hpp"

#include <boost/json.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace certfleet::api {

std::string audit_json_line(const store::audit_entry& e) {
  boost::json::object o{{"at", format_iso8601(e.at)}, {"project_id", e.project_id}, {"actor", e.actor},
                        {"action", e.action},         {"object", e.object},         {"outcome", e.outcome}};
  boost::system::error_code ec;
  auto d = e.detail.empty() ? boost::json::value(nullptr) : boost::json::parse(e.detail, ec);
  o["detail"] = ec ? boost::json::value(e.detail) : d;
  return boost::json::serialize(o);
}

audit_file::~audit_file() {
  if (fd_ >= 0) ::close(fd_);
}

result<void> audit_file::open(std::string path, std::int64_t max_bytes) {
  if (path.empty()) return {};
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0)
    return make_error(errc::config_invalid, fmt::format("audit_log_file: cannot open {}: {}", path, std::strerror(errno)),
                      "audit_log_file");
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    ::close(fd);
    return make_error(errc::config_invalid, fmt::format("audit_log_file: {} is not a regular file", path),
                      "audit_log_file");
  }
  // An existing file keeps its lines, not a looser mode.
  if ((sb.st_mode & 0077) != 0) ::fchmod(fd, 0600);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  path_ = std::move(path);
  max_bytes_ = max_bytes;
  size_ = sb.st_size;
  return {};
}

void audit_file::rotate() {
  const auto old = path_ + ".1";
  if (std::rename(path_.c_str(), old.c_str()) != 0) {
    spdlog::error("audit log file {}: rotating to {} failed: {}", path_, old, std::strerror(errno));
    return;  // keep appending to the one we have
  }
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::error("audit log file {}: reopening after rotation failed: {}", path_, std::strerror(errno));
    return;
  }
  ::close(fd_);
  fd_ = fd;
  size_ = 0;
}

void audit_file::write(const store::audit_entry& e) {
  if (fd_ < 0) return;
  auto line = audit_json_line(e);
  line.push_back('\n');
  if (size_ > 0 && size_ + static_cast<std::int64_t>(line.size()) > max_bytes_) rotate();
  // O_APPEND: one write call per line, so a line is never split by another writer.
  const auto n = ::write(fd_, line.data(), line.size());
  if (n < 0) {
    spdlog::error("audit log file {}: write failed: {}", path_, std::strerror(errno));
    return;
  }
  size_ += n;
}

}  // namespace certfleet::api
