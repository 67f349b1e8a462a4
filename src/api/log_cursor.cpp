#include "certfleet/api/log_cursor.hpp"

#include <algorithm>

namespace certfleet::api {

frame_step log_cursor::next(const frame_header& f) const noexcept {
  // A sync ahead of the cursor: lines the topic counted before this subscriber joined (or a
  // poll found) are read from the store.
  if (f.sync) return f.last_seq > sent_ ? frame_step::catch_up : frame_step::skip;
  if (f.end) return frame_step::end;
  if (f.last_seq <= sent_) return frame_step::skip;  // already sent from the store
  if (f.first_seq != sent_ + 1) return frame_step::catch_up;  // fill the gap from the store
  return frame_step::send;
}

bool log_cursor::joins(std::int64_t last_seq, std::size_t bytes, const frame_header& next) noexcept {
  return !next.end && !next.sync && next.first_seq == last_seq + 1 && bytes + next.bytes <= merge_bytes;
}

int log_cursor::page_limit(std::int64_t upto) const noexcept {
  if (upto <= 0) return page_lines;
  if (sent_ >= upto) return 0;
  return static_cast<int>(std::min<std::int64_t>(page_lines, upto - sent_));
}

page_step log_cursor::after_page(std::int64_t upto, int limit, std::size_t lines, bool job_terminal,
                                 std::int64_t log_last_seq) const noexcept {
  if (lines != 0 && lines >= static_cast<std::size_t>(limit)) return page_step::more;
  if (upto == 0 && job_terminal && sent_ >= log_last_seq) return page_step::end;
  return page_step::done;
}

}  // namespace certfleet::api
