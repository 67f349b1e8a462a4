// SMTP's pure parts (smtp_protocol.hpp).
#include "certfleet/net/smtp_protocol.hpp"

#include <algorithm>
#include <charconv>

#include "certfleet/core/base64.hpp"
#include "certfleet/core/digest.hpp"

namespace certfleet::net {

namespace {

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

}  // namespace

std::string smtp_reply::summary() const {
  std::string first = lines.empty() ? std::string() : lines.front();
  return printable(std::to_string(code) + (first.empty() ? "" : " " + first), 200);
}

reply_parse parse_reply(std::string_view input) {
  reply_parse out;
  auto malformed = [&](std::string why) {
    out.status = reply_status::malformed;
    out.error = std::move(why);
    out.reply = {};
    return out;
  };
  std::size_t pos = 0;
  while (true) {
    auto lf = input.find('\n', pos);
    if (lf == std::string_view::npos) {
      if (input.size() - pos > smtp_max_reply_line) return malformed("a reply line is longer than 2048 bytes");
      return out;  // incomplete
    }
    auto line = input.substr(pos, lf - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > smtp_max_reply_line) return malformed("a reply line is longer than 2048 bytes");
    if (line.size() < 3 || !std::all_of(line.begin(), line.begin() + 3, [](char c) { return c >= '0' && c <= '9'; }))
      return malformed("not an SMTP reply: \"" + printable(line, 60) + "\"");
    int code = 0;
    std::from_chars(line.data(), line.data() + 3, code);
    if (code < 200 || code > 599) return malformed("reply code " + std::to_string(code) + " is outside 2xx-5xx");
    if (out.reply.code != 0 && code != out.reply.code)
      return malformed("reply codes differ within one reply (" + std::to_string(out.reply.code) + " then " +
                       std::to_string(code) + ")");
    out.reply.code = code;
    bool last = true;
    std::string_view text;
    if (line.size() > 3) {
      if (line[3] == '-') last = false;
      else if (line[3] != ' ') return malformed("reply line has '" + printable(line.substr(3, 1), 1) + "' after its code");
      text = line.substr(4);
    }
    out.reply.lines.push_back(printable(text, smtp_max_reply_line));
    if (out.reply.lines.size() > smtp_max_reply_lines) return malformed("a reply has more than 128 lines");
    pos = lf + 1;
    if (last) {
      out.status = reply_status::complete;
      out.consumed = pos;
      return out;
    }
  }
}

ehlo_capabilities parse_ehlo(const smtp_reply& r) {
  ehlo_capabilities caps;
  // The first line is the server's greeting; each following one is "KEYWORD params".
  for (std::size_t i = 1; i < r.lines.size(); ++i) {
    std::string_view line = r.lines[i];
    auto sp = line.find(' ');
    auto keyword = upper(line.substr(0, sp));
    std::string_view params = sp == std::string_view::npos ? std::string_view{} : line.substr(sp + 1);
    if (keyword == "STARTTLS") caps.starttls = true;
    else if (keyword == "SMTPUTF8") caps.smtputf8 = true;
    else if (keyword == "8BITMIME") caps.eight_bit_mime = true;
    else if (keyword == "SIZE") {
      std::size_t n = 0;
      auto [p, ec] = std::from_chars(params.data(), params.data() + params.size(), n);
      if (ec == std::errc()) caps.size_limit = n;
    } else if (keyword == "AUTH" || keyword.rfind("AUTH=", 0) == 0) {
      // "AUTH PLAIN LOGIN" (and the old "AUTH=PLAIN LOGIN" form).
      std::string rest = keyword == "AUTH" ? std::string(params) : std::string(line.substr(5));
      std::size_t start = 0;
      while (start < rest.size()) {
        auto end = rest.find(' ', start);
        if (end == std::string::npos) end = rest.size();
        if (end > start && end - start <= 40) caps.auth.insert(upper(rest.substr(start, end - start)));
        start = end + 1;
      }
    }
  }
  return caps;
}

std::string dot_stuff(std::string_view message) {
  std::string out;
  out.reserve(message.size() + message.size() / 40 + 8);
  bool line_start = true;
  for (std::size_t i = 0; i < message.size(); ++i) {
    char c = message[i];
    if (c == '\r') {
      // CRLF and a lone CR both end a line.
      out += "\r\n";
      if (i + 1 < message.size() && message[i + 1] == '\n') ++i;
      line_start = true;
      continue;
    }
    if (c == '\n') {
      out += "\r\n";
      line_start = true;
      continue;
    }
    if (line_start && c == '.') out += '.';
    out += c;
    line_start = false;
  }
  if (!line_start) out += "\r\n";
  out += ".\r\n";
  return out;
}

std::string auth_plain(std::string_view user, std::string_view password) {
  std::string raw;
  raw += '\0';
  raw += user;
  raw += '\0';
  raw += password;
  auto out = base64_encode(raw);
  std::fill(raw.begin(), raw.end(), '\0');
  return out;
}

std::string auth_login_step(std::string_view text) { return base64_encode(text); }

bool valid_mailbox(std::string_view a) {
  if (a.empty() || a.size() > 254) return false;
  auto at = a.rfind('@');
  if (at == std::string_view::npos || at == 0 || at + 1 == a.size() || at > 64) return false;
  for (char c : a) {
    if (c <= 0x20 || c >= 0x7f) return false;
    if (std::string_view("<>()[]\\,;:\"").find(c) != std::string_view::npos) return false;
  }
  auto local = a.substr(0, at);
  if (local.front() == '.' || local.back() == '.' || local.find("..") != std::string_view::npos) return false;
  auto domain = a.substr(at + 1);
  if (domain.find('@') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (start <= domain.size()) {
    auto dot = domain.find('.', start);
    if (dot == std::string_view::npos) dot = domain.size();
    auto label = domain.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char c : label)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) return false;
    start = dot + 1;
  }
  return true;
}

std::string_view smtp_step_name(smtp_step s) noexcept {
  switch (s) {
    case smtp_step::greeting: return "greeting";
    case smtp_step::ehlo: return "EHLO";
    case smtp_step::starttls: return "STARTTLS";
    case smtp_step::auth: return "AUTH";
    case smtp_step::mail_from: return "MAIL FROM";
    case smtp_step::rcpt_to: return "RCPT TO";
    case smtp_step::data: return "DATA";
    case smtp_step::data_end: return "end of DATA";
  }
  return "SMTP";
}

error_class classify_smtp_reply(smtp_step step, int code) noexcept {
  if (code >= 200 && code < 400) return error_class::none;
  if (code >= 400 && code < 500) return error_class::io_transient;
  if (code == 530 || code == 534 || code == 535 || code == 538 || step == smtp_step::auth) return error_class::auth;
  return error_class::validation;
}

std::string scrub(std::string_view text, const std::vector<std::string>& secrets) {
  std::string out(text);
  for (const auto& s : secrets) {
    if (s.size() < 4) continue;  // too short to find without hiding innocent text
    for (const auto& form : {s, base64_encode(s)}) {
      for (auto at = out.find(form); at != std::string::npos; at = out.find(form, at + 3)) out.replace(at, form.size(), "***");
    }
  }
  return out;
}

}  // namespace certfleet::net
