#pragma once
// The process_* series every Prometheus client library exports (CPU, memory, file descriptors,
// start time), read from /proc/self. The parsing is pure: /proc text in, numbers out.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace certfleet::api {

struct process_stats {
  double cpu_seconds = 0;           // user + system
  std::int64_t resident_bytes = 0;
  std::int64_t virtual_bytes = 0;
  double start_time_seconds = 0;    // since the epoch
  std::int64_t open_fds = -1;       // -1: not known
  std::int64_t max_fds = -1;
};

// /proc/self/stat's line (the command name may hold spaces and parentheses: the fields start
// after the last ')'), with the clock's ticks per second, the page size and /proc/stat's btime.
// nullopt when the line is not one.
std::optional<process_stats> parse_proc_self_stat(std::string_view line, long ticks_per_second, long page_size,
                                                  std::int64_t boot_time_seconds);
// /proc/stat's "btime <seconds>" line; nullopt without one.
std::optional<std::int64_t> parse_boot_time(std::string_view proc_stat);

// /proc/self/status's "FDSize:" (the size of the descriptor table); nullopt without one.
std::optional<int> parse_fd_table_size(std::string_view proc_status);

// Reads /proc/self/stat, /proc/stat, /proc/self/fd and RLIMIT_NOFILE; nullopt off Linux or when
// /proc is not mounted (the series are then left out).
std::optional<process_stats> read_process_stats();

// The series, in the text exposition format (HELP and TYPE lines included).
std::string render_process_stats(const process_stats& s);

}  // namespace certfleet::api
