#pragma once
// The SMTP protocol's pure parts (RFC 5321, RFC 3207 STARTTLS, RFC 4954 AUTH): the reply parser
// fed with the bytes a server sent, EHLO capabilities, dot-stuffing of DATA, the AUTH PLAIN /
// LOGIN encodings and the error class of a reply. No I/O: the client (smtp.hpp) drives them, and
// fuzz/fuzz_smtp_reply.cpp feeds the parser whatever a server could send.
#include "certfleet/net/error_class.hpp"

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::net {

inline constexpr std::size_t smtp_max_reply_line = 2048;  // RFC 5321 says 512; servers exceed it
inline constexpr std::size_t smtp_max_reply_lines = 128;

struct smtp_reply {
  int code = 0;                    // 200-599
  std::vector<std::string> lines;  // the text after "NNN-" / "NNN ", one per line, printable ASCII
  // The first line as "NNN text", for operators (printable ASCII, at most 200 characters).
  std::string summary() const;
};

enum class reply_status { incomplete, complete, malformed };

struct reply_parse {
  reply_status status = reply_status::incomplete;
  smtp_reply reply;          // complete: the reply
  std::size_t consumed = 0;  // complete: bytes of the input it took (the rest is the next reply)
  std::string error;         // malformed: what is wrong (no input bytes quoted beyond printable ASCII)
};

// Parses the first reply in `input` (lines ending in CRLF; a bare LF is accepted). Incomplete
// when its last line has not arrived; malformed on a line without a 2xx-5xx code, codes that
// differ within one reply, a separator other than '-' or ' ', or a line/line count beyond the
// limits above.
reply_parse parse_reply(std::string_view input);

// What an EHLO reply says the server supports.
struct ehlo_capabilities {
  bool starttls = false;
  bool smtputf8 = false;
  bool eight_bit_mime = false;
  std::set<std::string> auth;  // mechanisms, upper case ("PLAIN", "LOGIN", …)
  std::size_t size_limit = 0;  // SIZE, 0: none announced
};
ehlo_capabilities parse_ehlo(const smtp_reply& r);

// The DATA payload of `message`: line endings made CRLF, a '.' at the start of a line doubled,
// ending in CRLF "." CRLF.
std::string dot_stuff(std::string_view message);

// RFC 4954 AUTH PLAIN initial response: base64("" NUL user NUL password).
std::string auth_plain(std::string_view user, std::string_view password);
// AUTH LOGIN: base64 of the user name, then of the password.
std::string auth_login_step(std::string_view text);

// Whether an address is a plain RFC 5321 mailbox certfleet can put in MAIL FROM / RCPT TO and a
// header: local@domain, printable ASCII, no spaces, quotes, angle brackets, commas or
// semicolons, at most 254 characters, a domain of dot-separated labels.
bool valid_mailbox(std::string_view address);

// The step a reply answered, for its error class.
enum class smtp_step { greeting, ehlo, starttls, auth, mail_from, rcpt_to, data, data_end };
std::string_view smtp_step_name(smtp_step s) noexcept;

// The class of a refusal (docs/notifications.md#errors): 4xx is transient (retried), 421 too;
// 530/534/535/538 and any 5xx to AUTH are auth; a 5xx to RCPT TO is a refused recipient and
// any other 5xx is permanent: validation (not retried).
error_class classify_smtp_reply(smtp_step step, int code) noexcept;

// A reply line with every occurrence of each secret (and its base64 forms) replaced by "***":
// a server may echo what it was sent.
std::string scrub(std::string_view text, const std::vector<std::string>& secrets);

}  // namespace certfleet::net
