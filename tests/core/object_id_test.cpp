// Object ids made without libbson: MongoDB's ObjectId layout (seconds, 5 random bytes of the
// process, a 3-byte counter) as 24 lowercase hex characters; unique across threads and across a
// fork, and ordered by their creation second.
#include "certfleet/core/object_id.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace certfleet;

namespace {

std::uint64_t field(const std::string& id, std::size_t at, std::size_t len) {
  return std::stoull(id.substr(at, len), nullptr, 16);
}
std::uint64_t seconds_of(const std::string& id) { return field(id, 0, 8); }
std::string process_part_of(const std::string& id) { return id.substr(8, 10); }
std::uint64_t counter_of(const std::string& id) { return field(id, 18, 6); }

}  // namespace

TEST(object_id, layout_is_seconds_process_random_and_a_counter_in_lowercase_hex) {
  const auto before = static_cast<std::uint64_t>(std::time(nullptr));
  const auto a = new_object_id();
  const auto b = new_object_id();
  const auto after = static_cast<std::uint64_t>(std::time(nullptr));
  for (const auto& id : {a, b}) {
    ASSERT_EQ(id.size(), 24u) << id;
    ASSERT_TRUE(is_object_id(id)) << id;
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    EXPECT_GE(seconds_of(id), before) << id;
    EXPECT_LE(seconds_of(id), after) << id;
  }
  EXPECT_EQ(process_part_of(a), process_part_of(b));
  EXPECT_EQ(counter_of(b), (counter_of(a) + 1) % 0x1000000);
}

TEST(object_id, unique_across_threads) {
  constexpr int threads = 8, per_thread = 20'000;
  std::vector<std::vector<std::string>> made(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      made[t].reserve(per_thread);
      for (int i = 0; i < per_thread; ++i) made[t].push_back(new_object_id());
    });
  for (auto& th : pool) th.join();
  std::set<std::string> seen;
  for (const auto& ids : made)
    for (const auto& id : ids) ASSERT_TRUE(seen.insert(id).second) << "duplicate " << id;
  EXPECT_EQ(seen.size(), std::size_t{threads} * per_thread);
}

// A forked child draws its own random bytes: its ids cannot repeat the parent's, although both
// continue the same counter.
TEST(object_id, a_forked_child_draws_its_own_process_bytes) {
  const auto parent = new_object_id();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto id = new_object_id();
    const bool ok = ::write(fds[1], id.data(), id.size()) == static_cast<ssize_t>(id.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  char buf[24];
  ssize_t got = 0;
  for (ssize_t n; got < 24 && (n = ::read(fds[0], buf + got, sizeof buf - got)) > 0;) got += n;
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(got, 24);
  const std::string in_child(buf, 24);
  EXPECT_NE(process_part_of(in_child), process_part_of(parent)) << parent << " " << in_child;
  EXPECT_EQ(process_part_of(new_object_id()), process_part_of(parent)) << "the parent keeps its bytes";
}

// Over a second boundary the time prefix moves on and never goes back, so ids sort by the second
// they were made in.
TEST(object_id, the_time_prefix_is_monotonic_across_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2'500);
  const auto first = new_object_id();
  auto prev = first;
  while (seconds_of(prev) < seconds_of(first) + 2 && std::chrono::steady_clock::now() < deadline) {
    const auto id = new_object_id();
    ASSERT_GE(seconds_of(id), seconds_of(prev)) << prev << " then " << id;
    if (seconds_of(id) > seconds_of(prev)) EXPECT_GT(id, prev) << "a later second sorts after";
    prev = id;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(seconds_of(prev), seconds_of(first) + 2) << "the clock did not move on in 2.5 s";
}
