// The live log stream's cursor: the input scripts a growing store and the hub's frames to one
// subscriber (new lines, old lines again, lost frames, syncs, the end, direct writes while it is
// caught up); the session's loop runs on the cursor's decisions. Whatever the script, the lines
// sent are after+1, after+2, … each once, never a line the store does not have yet, and a
// catch-up reaches what it was asked for.
#include "certfleet/api/log_cursor.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace {

using namespace certfleet::api;

struct queued {
  frame_header f;
  std::int64_t stored;
};

struct model {
  std::int64_t stored = 0;   // lines in the store, as the session sees it
  std::int64_t expect = 0;   // the next line the peer must get
  log_cursor cursor{0};
  bool ended = false;

  void send(std::int64_t first, std::int64_t last) {
    if (first != expect || last < first || last > stored) __builtin_trap();
    expect = last + 1;
    cursor.advance(last);
  }
  void catch_up(std::int64_t upto) {
    for (int pages = 0;; ++pages) {
      if (pages > 100'000) __builtin_trap();  // a catch-up always ends
      const int limit = cursor.page_limit(upto);
      if (limit < 0 || limit > log_cursor::page_lines) __builtin_trap();
      if (limit == 0) return;
      const auto to = std::min<std::int64_t>(stored, cursor.sent() + limit);
      const auto n = static_cast<std::size_t>(std::max<std::int64_t>(0, to - cursor.sent()));
      if (n > 0) send(cursor.sent() + 1, to);
      const auto step = cursor.after_page(upto, limit, n, false, stored);
      if (step == page_step::end) __builtin_trap();  // the job never finished here
      if (step == page_step::done) {
        if (cursor.sent() < std::min(upto > 0 ? upto : stored, stored)) __builtin_trap();
        return;
      }
    }
  }
  void drain(std::deque<queued>& q) {
    while (!q.empty() && !ended) {
      auto [f, at] = q.front();
      q.pop_front();
      stored = std::max(stored, at);
      switch (cursor.next(f)) {
        case frame_step::skip:
          if (!f.sync && f.last_seq > cursor.sent()) __builtin_trap();
          break;
        case frame_step::catch_up: catch_up(f.last_seq); break;
        case frame_step::end: ended = true; break;
        case frame_step::send: {
          // One message, the frames' lines in order: each must continue the one before.
          std::vector<frame_header> message{f};
          auto bytes = f.bytes;
          while (!q.empty() && log_cursor::joins(message.back().last_seq, bytes, q.front().f)) {
            message.push_back(q.front().f);
            bytes += q.front().f.bytes;
            stored = std::max(stored, q.front().stored);
            q.pop_front();
          }
          if (bytes > log_cursor::merge_bytes && message.size() > 1) __builtin_trap();
          for (const auto& part : message) {
            if (part.end || part.sync) __builtin_trap();
            send(part.first_seq, part.last_seq);
          }
        }
      }
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  model m;
  const std::int64_t after = data[0];
  std::int64_t appended = after + (data[1] | (data[2] << 8));
  m.cursor = log_cursor(after);
  m.expect = after + 1;
  m.stored = appended;
  std::deque<queued> q;
  m.catch_up(0);  // the backlog
  for (std::size_t i = 3; i + 1 < size && !m.ended; i += 2) {
    const auto op = data[i] & 7;
    const std::int64_t arg = data[i + 1];
    const auto n = 1 + (arg & 31);
    switch (op) {
      case 0: q.push_back({frame_header{0, appended == 0 ? 0 : arg % (appended + 1), false, true, 0}, appended}); break;
      case 1:
        if (appended > 0) {
          const auto first = 1 + arg % appended;
          q.push_back({frame_header{first, std::min(appended, first + (data[i] >> 3)), false, false, 64}, appended});
        }
        break;
      case 2: appended += n; break;  // lines whose frame this subscriber never got
      case 3: q.push_back({frame_header{0, 0, true, false, 32}, appended}); break;
      case 4:  // caught up and waiting: the hub writes straight to the socket when it can
        appended += n;
        if (q.empty() && m.cursor.continues(appended - n + 1)) {
          m.stored = appended;
          m.send(appended - n + 1, appended);
        } else {
          q.push_back({frame_header{appended - n + 1, appended, false, false, 64}, appended});
        }
        break;
      case 5: m.drain(q); break;
      default: {
        const auto first = appended + 1;
        appended += n;
        q.push_back({frame_header{first, appended, false, false, static_cast<std::size_t>(arg) << 13}, appended});
      }
    }
  }
  m.drain(q);
  return 0;
}
