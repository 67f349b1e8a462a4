// process_* series (issue 36): /proc/self/stat and /proc/stat parsed without I/O.
#include "api/process_metrics.hpp"

#include <gtest/gtest.h>

namespace {

using certfleet::api::parse_boot_time;
using certfleet::api::parse_proc_self_stat;

// A real line's shape; the command name holds spaces and a ')' of its own.
constexpr std::string_view stat_line =
    "4242 (cert fleet) x) S 1 4242 4242 0 -1 4194560 2000 0 0 0 150 50 0 0 20 0 9 0 360000 "
    "734003200 12800 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";

TEST(process_metrics, the_stat_line_gives_cpu_memory_and_start_time) {
  auto s = parse_proc_self_stat(stat_line, 100, 4096, 1'700'000'000);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->cpu_seconds, 2.0);  // (150 + 50) ticks at 100/s
  EXPECT_EQ(s->virtual_bytes, 734003200);
  EXPECT_EQ(s->resident_bytes, 12800 * 4096);
  EXPECT_DOUBLE_EQ(s->start_time_seconds, 1'700'000'000 + 3600.0);  // 360000 ticks after boot
}

TEST(process_metrics, what_is_not_a_stat_line_is_refused) {
  EXPECT_FALSE(parse_proc_self_stat("", 100, 4096, 0));
  EXPECT_FALSE(parse_proc_self_stat("4242 (x) S 1 2 3", 100, 4096, 0));
  EXPECT_FALSE(parse_proc_self_stat("4242 no parenthesis S 1", 100, 4096, 0));
  std::string bad(stat_line);
  bad.replace(bad.find(" 150 "), 5, " 1x0 ");
  EXPECT_FALSE(parse_proc_self_stat(bad, 100, 4096, 0));
  EXPECT_FALSE(parse_proc_self_stat(stat_line, 0, 4096, 0));
}

TEST(process_metrics, boot_time_is_the_btime_line) {
  EXPECT_EQ(parse_boot_time("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"), 1'700'000'000);
  EXPECT_FALSE(parse_boot_time("cpu 1 2\n"));
  EXPECT_FALSE(parse_boot_time("btime soon\n"));
}

TEST(process_metrics, the_descriptor_table_size_is_the_fdsize_line) {
  EXPECT_EQ(certfleet::api::parse_fd_table_size("Name:\tcertfleet\nUmask:\t0077\nFDSize:\t256\nGroups:\n"), 256);
  EXPECT_FALSE(certfleet::api::parse_fd_table_size("Name:\tx\n"));
  EXPECT_FALSE(certfleet::api::parse_fd_table_size("Name:\tx\nFDSize:\tmany\n"));
}

TEST(process_metrics, this_process_reads_its_own) {
  auto s = certfleet::api::read_process_stats();
  ASSERT_TRUE(s);
  EXPECT_GT(s->resident_bytes, 0);
  EXPECT_GT(s->open_fds, 2);
  EXPECT_GT(s->max_fds, 0);
}

}  // namespace
