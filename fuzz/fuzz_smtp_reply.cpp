// What an SMTP server can send (net/smtp_protocol): the reply parser consumes any bytes
// reply by reply without a crash, with codes in 2xx-5xx and printable summaries; EHLO parsing of
// any reply; and for the other direction, dot-stuffing of any message leaves no line that ends
// DATA early, RFC 2047 header text stays one header, and secrets are scrubbed from any text.
#include "certfleet/net/mime.hpp"
#include "certfleet/net/smtp_protocol.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace certfleet::net;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);

  std::string_view rest = in;
  for (int guard = 0; guard < 10'000; ++guard) {
    auto r = parse_reply(rest);
    if (r.status != reply_status::complete) {
      if (r.status == reply_status::malformed && r.error.empty()) std::abort();
      break;
    }
    if (r.consumed == 0 || r.consumed > rest.size()) std::abort();
    if (r.reply.code < 200 || r.reply.code > 599 || r.reply.lines.empty()) std::abort();
    for (char c : r.reply.summary())
      if (c < 0x20 || c >= 0x7f) std::abort();
    (void)parse_ehlo(r.reply);
    (void)classify_smtp_reply(smtp_step::rcpt_to, r.reply.code);
    rest.remove_prefix(r.consumed);
  }

  auto stuffed = dot_stuff(in);
  if (stuffed.size() < 3 || stuffed.compare(stuffed.size() - 3, 3, ".\r\n") != 0) std::abort();
  // Every line is CRLF-terminated, and only the last one is a lone ".".
  std::size_t start = 0;
  while (start < stuffed.size()) {
    auto crlf = stuffed.find("\r\n", start);
    if (crlf == std::string::npos) std::abort();
    auto line = std::string_view(stuffed).substr(start, crlf - start);
    if (line.find_first_of("\r\n") != std::string_view::npos) std::abort();
    bool last = crlf + 2 == stuffed.size();
    if (line == "." && !last) std::abort();
    if (!last && !line.empty() && line[0] == '.' && (line.size() < 2 || line[1] != '.')) std::abort();
    start = crlf + 2;
  }

  auto header = encode_header_text(in);
  // Line breaks only as folding ("\r\n "), so the value stays one header.
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == '\r') {
      if (header.compare(i, 3, "\r\n ") != 0) std::abort();
      i += 2;
    } else if (header[i] == '\n') {
      std::abort();
    }
  }
  (void)valid_mailbox(in);
  (void)scrub(in, {std::string(in.substr(0, 8))});
  return 0;
}
