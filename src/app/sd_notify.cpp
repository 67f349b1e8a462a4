#include "sd_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

namespace certfleet::app {

namespace {
std::optional<long long> env_number(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  long long n = 0;
  auto [p, ec] = std::from_chars(v, v + std::strlen(v), n);
  if (ec != std::errc() || *p != '\0') return std::nullopt;
  return n;
}
}  // namespace

bool sd_notify(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (!path || !*path) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::size_t len = std::strlen(path);
  if (len >= sizeof addr.sun_path || (path[0] != '/' && path[0] != '@')) return false;
  std::memcpy(addr.sun_path, path, len);
  if (path[0] == '@') addr.sun_path[0] = '\0';  // the abstract namespace
  const auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // A datagram socket never blocks the loop for long: systemd reads its socket at once, and a
  // full one fails the send (MSG_DONTWAIT) rather than waiting.
  const auto sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
                             reinterpret_cast<const sockaddr*>(&addr), addr_len);
  ::close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

std::optional<std::chrono::microseconds> sd_watchdog_interval() {
  auto usec = env_number("WATCHDOG_USEC");
  if (!usec || *usec <= 0) return std::nullopt;
  if (auto pid = env_number("WATCHDOG_PID"); pid && *pid != static_cast<long long>(::getpid())) return std::nullopt;
  return std::chrono::microseconds(*usec / 2);
}

}  // namespace certfleet::app
