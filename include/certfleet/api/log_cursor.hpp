#pragma once
// The live log stream's cursor: which lines a subscriber has been sent, and what to do with the
// next frame the hub queued for it (send it, skip it, fill a gap from the store first, end) or
// with the next store page while catching up. Pure: the WebSocket session does the I/O and asks
// this; the unit tests and fuzz_log_cursor drive it without sockets.
//
// The invariant it keeps: the lines sent are exactly after+1, after+2, … with no gap and no
// repeat, whatever order, overlap or gaps the hub's frames arrive in.
#include <cstddef>
#include <cstdint>

namespace certfleet::api {

// What the cursor needs of a hub frame (log_frame without the text).
struct frame_header {
  std::int64_t first_seq = 0;  // lines first_seq..last_seq; 0/0 for an end frame
  std::int64_t last_seq = 0;
  bool end = false;   // the job is over; nothing follows
  bool sync = false;  // no lines: "the topic continues after last_seq"
  std::size_t bytes = 0;  // the frame's text size
};

enum class frame_step {
  skip,      // its lines were all sent already (from the store), or a sync the cursor is past
  catch_up,  // a gap before it (or a sync ahead): read the store up to its last_seq, then go on
  send,      // it continues the cursor: send it (merged with the following ones that join it)
  end,       // send it and close: the job finished
};

enum class page_step {
  more,  // a full page: read the next one
  done,  // caught up (to `upto`, or to what the store has of a running job)
  end,   // caught up with a finished job: send its end frame, then close
};

class log_cursor {
 public:
  // Store pages are read this many lines at a time.
  static constexpr int page_lines = 500;
  // Frames queued behind each other are merged into one message up to this size.
  static constexpr std::size_t merge_bytes = 1u << 20;

  explicit log_cursor(std::int64_t after) noexcept : sent_(after) {}

  // The last line sent (the reconnect position: after=sent()).
  std::int64_t sent() const noexcept { return sent_; }
  // `last_seq` (and all before it) has been sent.
  void advance(std::int64_t last_seq) noexcept { sent_ = last_seq; }

  // The frame at the head of the subscriber's queue.
  frame_step next(const frame_header& f) const noexcept;
  // Whether a frame starting at `first_seq` continues the cursor (may be written as it is, e.g.
  // by the hub straight to the socket).
  bool continues(std::int64_t first_seq) const noexcept { return first_seq == sent_ + 1; }
  // Whether `next` joins a merged message whose frames so far end at `last_seq` and hold
  // `bytes`: consecutive lines frames, within merge_bytes.
  static bool joins(std::int64_t last_seq, std::size_t bytes, const frame_header& next) noexcept;

  // Catching up from the store to `upto` (0: to the end of the log). The line limit of the next
  // page to read after sent(); 0 when the cursor has reached `upto` (nothing to read).
  int page_limit(std::int64_t upto) const noexcept;
  // After reading a page of `lines` lines asked with `limit` (and advancing over them): what
  // next. `job_terminal`/`log_last_seq` are the job's state as the page read it.
  page_step after_page(std::int64_t upto, int limit, std::size_t lines, bool job_terminal,
                       std::int64_t log_last_seq) const noexcept;

 private:
  std::int64_t sent_;
};

}  // namespace certfleet::api
