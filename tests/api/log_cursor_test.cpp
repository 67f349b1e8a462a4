// The live log stream's cursor decisions (send / skip / catch up / merge / end), without sockets.
#include "certfleet/api/log_cursor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace {

using certfleet::api::frame_header;
using certfleet::api::frame_step;
using certfleet::api::log_cursor;
using certfleet::api::page_step;

frame_header lines(std::int64_t first, std::int64_t last, std::size_t bytes = 100) {
  return frame_header{first, last, false, false, bytes};
}
frame_header sync_at(std::int64_t last) { return frame_header{0, last, false, true, 0}; }
frame_header end_frame() { return frame_header{0, 0, true, false, 30}; }

TEST(log_cursor, a_frame_that_continues_the_cursor_is_sent) {
  log_cursor c(10);
  EXPECT_EQ(c.next(lines(11, 15)), frame_step::send);
  EXPECT_TRUE(c.continues(11));
  EXPECT_FALSE(c.continues(12));
  c.advance(15);
  EXPECT_EQ(c.sent(), 15);
  EXPECT_EQ(c.next(lines(16, 16)), frame_step::send);
}

TEST(log_cursor, lines_already_sent_from_the_store_are_skipped) {
  log_cursor c(20);
  EXPECT_EQ(c.next(lines(11, 20)), frame_step::skip);
  EXPECT_EQ(c.next(lines(5, 5)), frame_step::skip);
}

TEST(log_cursor, a_gap_or_a_partly_sent_frame_is_caught_up_from_the_store) {
  log_cursor c(10);
  EXPECT_EQ(c.next(lines(13, 15)), frame_step::catch_up);  // 11-12 missing
  EXPECT_EQ(c.next(lines(8, 12)), frame_step::catch_up);   // 8-10 sent, 11-12 not
}

TEST(log_cursor, a_sync_ahead_is_caught_up_a_sync_behind_is_skipped) {
  log_cursor c(10);
  EXPECT_EQ(c.next(sync_at(11)), frame_step::catch_up);
  EXPECT_EQ(c.next(sync_at(10)), frame_step::skip);
  EXPECT_EQ(c.next(sync_at(3)), frame_step::skip);
}

TEST(log_cursor, an_end_frame_ends_the_stream) {
  log_cursor c(0);
  EXPECT_EQ(c.next(end_frame()), frame_step::end);
}

TEST(log_cursor, consecutive_lines_frames_merge_up_to_the_size_bound) {
  EXPECT_TRUE(log_cursor::joins(15, 100, lines(16, 20)));
  EXPECT_FALSE(log_cursor::joins(15, 100, lines(17, 20)));  // a gap
  EXPECT_FALSE(log_cursor::joins(15, 100, lines(15, 20)));  // an overlap
  EXPECT_FALSE(log_cursor::joins(15, 100, end_frame()));
  EXPECT_FALSE(log_cursor::joins(15, 100, sync_at(16)));
  EXPECT_TRUE(log_cursor::joins(15, log_cursor::merge_bytes - 100, lines(16, 20, 100)));
  EXPECT_FALSE(log_cursor::joins(15, log_cursor::merge_bytes - 99, lines(16, 20, 100)));
}

TEST(log_cursor, store_pages_are_bounded_and_stop_at_upto) {
  log_cursor c(100);
  EXPECT_EQ(c.page_limit(0), log_cursor::page_lines);       // to the end of the log
  EXPECT_EQ(c.page_limit(2000), log_cursor::page_lines);
  EXPECT_EQ(c.page_limit(103), 3);
  EXPECT_EQ(c.page_limit(100), 0);  // reached: nothing to read
  EXPECT_EQ(c.page_limit(50), 0);
}

TEST(log_cursor, after_a_page_more_done_or_end) {
  log_cursor c(500);
  EXPECT_EQ(c.after_page(0, 500, 500, false, 900), page_step::more);   // a full page
  EXPECT_EQ(c.after_page(0, 500, 499, false, 900), page_step::done);   // a running job's log so far
  EXPECT_EQ(c.after_page(0, 500, 0, false, 500), page_step::done);
  EXPECT_EQ(c.after_page(0, 500, 10, true, 500), page_step::end);      // finished and all sent
  EXPECT_EQ(c.after_page(0, 500, 10, true, 501), page_step::done);     // finished, a line not sent yet
  // Catching up to a frame's end is never the end of the stream: the frames go on.
  EXPECT_EQ(c.after_page(600, 100, 20, true, 500), page_step::done);
  EXPECT_EQ(c.after_page(600, 100, 100, true, 500), page_step::more);
}

// The session's loop with the cursor, over a store that grows while the hub's frames arrive
// (each frame is seen when the store holds `stored` lines: a line is stored before it is
// published), in any order, overlapping, with gaps (frames the subscriber never got): whatever
// the frames, the lines sent are after+1, after+2, … exactly once.
struct queued {
  frame_header f;
  std::int64_t stored;
};

struct stream_model {
  std::int64_t stored;
  log_cursor cursor;
  std::vector<std::int64_t> sent;
  int steps[4] = {};  // by frame_step
  int merged = 0;

  void send(std::int64_t first, std::int64_t last) {
    for (auto s = first; s <= last; ++s) sent.push_back(s);
    cursor.advance(last);
  }
  void catch_up(std::int64_t upto) {
    for (;;) {
      const int limit = cursor.page_limit(upto);
      if (limit == 0) return;
      const auto from = cursor.sent() + 1;
      const auto to = std::min<std::int64_t>(stored, cursor.sent() + limit);
      const auto n = static_cast<std::size_t>(std::max<std::int64_t>(0, to - from + 1));
      if (n > 0) send(from, to);
      if (cursor.after_page(upto, limit, n, false, stored) != page_step::more) return;
    }
  }
  void run(std::deque<queued> q) {
    catch_up(0);
    while (!q.empty()) {
      auto [f, at] = q.front();
      q.pop_front();
      stored = std::max(stored, at);
      const auto step = cursor.next(f);
      ++steps[static_cast<int>(step)];
      switch (step) {
        case frame_step::skip: break;
        case frame_step::catch_up: catch_up(f.last_seq); break;
        case frame_step::end: return;
        case frame_step::send: {
          // One message, the frames' lines in order.
          std::vector<frame_header> message{f};
          auto bytes = f.bytes;
          while (!q.empty() && log_cursor::joins(message.back().last_seq, bytes, q.front().f)) {
            message.push_back(q.front().f);
            bytes += q.front().f.bytes;
            stored = std::max(stored, q.front().stored);
            q.pop_front();
            ++merged;
          }
          EXPECT_TRUE(message.size() == 1 || bytes <= log_cursor::merge_bytes);
          for (const auto& part : message) send(part.first_seq, part.last_seq);
        }
      }
    }
  }
};

void expect_contiguous(const std::vector<std::int64_t>& sent, std::int64_t after) {
  for (std::size_t i = 0; i < sent.size(); ++i) ASSERT_EQ(sent[i], after + 1 + static_cast<std::int64_t>(i)) << "at " << i;
}

TEST(log_cursor, out_of_order_overlapping_and_gapped_frames_send_each_line_once_in_order) {
  std::mt19937 rng(1234);
  int steps[4] = {};
  int merged = 0;
  for (int round = 0; round < 2000; ++round) {
    const std::int64_t after = rng() % 50;
    std::int64_t appended = after + rng() % 600;  // in the store when the session starts
    const std::int64_t initial = appended;
    std::deque<queued> q;
    const int frames = static_cast<int>(rng() % 60);
    for (int i = 0; i < frames; ++i) {
      const auto kind = rng() % 10;
      if (kind == 0) {
        q.push_back({sync_at(static_cast<std::int64_t>(rng() % (appended + 1))), appended});
      } else if (kind == 1 && appended > 0) {  // an old range again
        const auto first = 1 + static_cast<std::int64_t>(rng() % appended);
        const auto last = std::min<std::int64_t>(appended, first + static_cast<std::int64_t>(rng() % 20));
        q.push_back({lines(first, last), appended});
      } else {
        const auto n = 1 + static_cast<std::int64_t>(rng() % 20);
        const auto first = appended + 1;
        appended += n;
        if (kind == 2) continue;  // a frame this subscriber never got: a gap
        q.push_back({lines(first, appended, 1 + rng() % 300'000), appended});
      }
    }
    stream_model m{initial, log_cursor(after), {}};
    m.run(q);
    expect_contiguous(m.sent, after);
    EXPECT_LE(m.cursor.sent(), appended);
    for (int k = 0; k < 4; ++k) steps[k] += m.steps[k];
    merged += m.merged;
  }
  // The rounds went through every decision, not only the backlog.
  EXPECT_GT(steps[static_cast<int>(frame_step::send)], 1000);
  EXPECT_GT(steps[static_cast<int>(frame_step::skip)], 1000);
  EXPECT_GT(steps[static_cast<int>(frame_step::catch_up)], 1000);
  EXPECT_GT(merged, 1000);
}

TEST(log_cursor, live_frames_after_the_backlog_are_sent_merged) {
  stream_model m{10, log_cursor(0), {}};
  m.run({{lines(5, 10), 10}, {lines(11, 20), 20}, {lines(21, 25), 25}, {lines(27, 30), 30}, {end_frame(), 30}});
  expect_contiguous(m.sent, 0);
  EXPECT_EQ(m.cursor.sent(), 30);  // 26 came from the store when 27-30 showed the gap
  EXPECT_EQ(m.merged, 1);          // 21-25 joined 11-20
  EXPECT_EQ(m.steps[static_cast<int>(frame_step::end)], 1);
}

}  // namespace
