#include "process_metrics.hpp"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace certfleet::api {

namespace {

template <class T>
bool number(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::optional<process_stats> parse_proc_self_stat(std::string_view line, long ticks_per_second, long page_size,
                                                  std::int64_t boot_time_seconds) {
  if (ticks_per_second <= 0 || page_size <= 0) return std::nullopt;
  auto close = line.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // Fields after the name: 3 state, 4 ppid, … 14 utime, 15 stime, … 22 starttime, 23 vsize, 24 rss.
  std::vector<std::string_view> f;
  auto rest = line.substr(close + 1);
  while (!rest.empty()) {
    auto start = rest.find_first_not_of(" \n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    auto end = rest.find_first_of(" \n");
    f.push_back(rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end);
  }
  // f[0] is field 3.
  auto field = [&](int n) { return f[static_cast<std::size_t>(n - 3)]; };
  if (f.size() < 22) return std::nullopt;
  std::uint64_t utime = 0, stime = 0, starttime = 0, vsize = 0;
  std::int64_t rss = 0;
  if (!number(field(14), utime) || !number(field(15), stime) || !number(field(22), starttime) ||
      !number(field(23), vsize) || !number(field(24), rss))
    return std::nullopt;
  process_stats s;
  s.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks_per_second);
  s.virtual_bytes = static_cast<std::int64_t>(vsize);
  s.resident_bytes = rss * page_size;
  s.start_time_seconds =
      static_cast<double>(boot_time_seconds) + static_cast<double>(starttime) / static_cast<double>(ticks_per_second);
  return s;
}

std::optional<std::int64_t> parse_boot_time(std::string_view proc_stat) {
  std::size_t at = 0;
  while (at < proc_stat.size()) {
    auto end = proc_stat.find('\n', at);
    auto line = proc_stat.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (line.rfind("btime ", 0) == 0) {
      std::int64_t v = 0;
      if (number(line.substr(6), v)) return v;
      return std::nullopt;
    }
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<int> parse_fd_table_size(std::string_view proc_status) {
  auto at = proc_status.find("\nFDSize:");
  if (at == std::string_view::npos) return std::nullopt;
  auto rest = proc_status.substr(at + 8);
  auto end = rest.find('\n');
  rest = rest.substr(0, end);
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  int v = 0;
  if (!number(rest, v) || v < 0 || v > (1 << 24)) return std::nullopt;
  return v;
}

std::optional<process_stats> read_process_stats() {
  auto boot = parse_boot_time(slurp("/proc/stat"));
  if (!boot) return std::nullopt;
  auto s = parse_proc_self_stat(slurp("/proc/self/stat"), sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), *boot);
  if (!s) return std::nullopt;
  std::error_code ec;
  std::int64_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  // The directory listing holds one descriptor of its own while it runs.
  if (!ec) {
    s->open_fds = fds > 0 ? fds - 1 : 0;
  } else if (auto size = parse_fd_table_size(slurp("/proc/self/status"))) {
    // A process that is not dumpable (core_dumps = off) and not root cannot list /proc/self/fd
    // (it then belongs to root): ask each slot of the descriptor table instead.
    std::int64_t open = 0;
    for (int fd = 0; fd < *size; ++fd)
      if (::fcntl(fd, F_GETFD) != -1) ++open;
    s->open_fds = open;
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    s->max_fds = static_cast<std::int64_t>(lim.rlim_cur);
  return s;
}

std::string render_process_stats(const process_stats& s) {
  std::string out;
  auto one = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  one("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", s.cpu_seconds);
  one("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", s.resident_bytes);
  one("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", s.virtual_bytes);
  one("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
      fmt::format("{:.2f}", s.start_time_seconds));
  if (s.open_fds >= 0) one("process_open_fds", "gauge", "Number of open file descriptors.", s.open_fds);
  if (s.max_fds >= 0) one("process_max_fds", "gauge", "Maximum number of open file descriptors.", s.max_fds);
  return out;
}

}  // namespace certfleet::api
