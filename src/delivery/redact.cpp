// Redaction of command output (redact.hpp). Pure: the text and the key in, the redacted text out.
#include "certfleet/delivery/redact.hpp"

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "delivery/codec.hpp"

namespace certfleet::delivery {
namespace {

constexpr std::string_view begin_tag = "-----BEGIN ";
constexpr std::string_view end_tag = "-----END ";
constexpr std::string_view dashes = "-----";
constexpr std::string_view key_label_end = "PRIVATE KEY";
constexpr std::string_view block_marker = "[private key redacted]";
constexpr std::string_view bytes_marker = "[redacted]";

struct span {
  std::size_t from = 0, to = 0;  // [from, to)
  bool block = false;            // a PEM private-key block (else: matched key bytes)
};

// The next "<tag><label>-----" at or after `from` whose label (one line) ends in PRIVATE KEY;
// [pos, stop) covers the whole marker.
struct marker {
  std::size_t pos = std::string_view::npos, stop = 0;
};
marker find_key_marker(std::string_view text, std::size_t from, std::string_view tag) {
  while (from < text.size()) {
    auto at = text.find(tag, from);
    if (at == std::string_view::npos) return {};
    auto label_at = at + tag.size();
    auto close = text.find(dashes, label_at);
    auto eol = text.find('\n', label_at);
    if (close != std::string_view::npos && (eol == std::string_view::npos || close < eol)) {
      auto label = text.substr(label_at, close - label_at);
      if (label.ends_with(key_label_end)) return {at, close + dashes.size()};
    }
    from = at + 1;
  }
  return {};
}

// PEM private-key blocks, a block cut off at either end included.
void find_blocks(std::string_view text, std::vector<span>& out) {
  std::size_t pos = 0;
  auto first_begin = find_key_marker(text, 0, begin_tag);
  auto first_end = find_key_marker(text, 0, end_tag);
  if (first_end.pos != std::string_view::npos && first_end.pos < first_begin.pos) {
    // The text is the tail of the output: its start may be the middle of a block.
    out.push_back({0, first_end.stop, true});
    pos = first_end.stop;
  } else {
    // The tail may even start inside the END line itself ("…E KEY-----"): a first line that
    // ends a private-key marker without starting one is such a remnant.
    constexpr std::string_view tail_of_end = "PRIVATE KEY-----";
    auto at = text.find(tail_of_end);
    auto eol = text.find('\n');
    if (at != std::string_view::npos && (eol == std::string_view::npos || at < eol) &&
        text.substr(0, at).find(begin_tag) == std::string_view::npos && at < first_begin.pos) {
      out.push_back({0, at + tail_of_end.size(), true});
      pos = at + tail_of_end.size();
    }
  }
  for (;;) {
    auto b = find_key_marker(text, pos, begin_tag);
    if (b.pos == std::string_view::npos) break;
    auto e = find_key_marker(text, b.stop, end_tag);
    if (e.pos == std::string_view::npos) {  // cut off (or never ended): the rest is key
      out.push_back({b.pos, text.size(), true});
      break;
    }
    out.push_back({b.pos, e.stop, true});
    pos = e.stop;
  }
}

bool is_base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

// The key's PEM body with line breaks, header lines and padding removed, and its DER.
struct key_material {
  std::string b64, der;
};
key_material material_of(std::string_view pem) {
  key_material m;
  std::size_t pos = 0;
  bool in_body = false;
  while (pos < pem.size()) {
    auto eol = pem.find('\n', pos);
    auto line = pem.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    pos = eol == std::string_view::npos ? pem.size() : eol + 1;
    if (line.starts_with(begin_tag)) { in_body = true; continue; }
    if (line.starts_with(end_tag)) { in_body = false; continue; }
    // RFC 1421 headers of an encrypted traditional key (Proc-Type:, DEK-Info:) are not key bytes.
    if (!in_body || line.find(':') != std::string_view::npos) continue;
    for (char c : line)
      if (is_base64_char(c)) m.b64.push_back(c);
  }
  std::string padded = m.b64;
  while (padded.size() % 4) padded.push_back('=');
  if (auto der = base64_decode(padded)) m.der = std::move(*der);
  return m;
}

// Every redact_min_run-long window of `text` that occurs in `secret`, as spans (overlapping
// windows are merged by the caller).
void find_windows(std::string_view text, std::string_view secret, std::vector<span>& out) {
  const std::size_t n = redact_min_run;
  if (secret.size() < n || text.size() < n) return;
  std::unordered_set<std::string_view> windows;
  windows.reserve(secret.size());
  for (std::size_t i = 0; i + n <= secret.size(); ++i) windows.insert(secret.substr(i, n));
  const std::size_t first = out.size();  // spans of this scan only are extended
  for (std::size_t i = 0; i + n <= text.size(); ++i)
    if (windows.count(text.substr(i, n))) {
      if (out.size() > first && out.back().to >= i) out.back().to = i + n;
      else out.push_back({i, i + n, false});
    }
}

// One pass: the spans found in `text`, merged and replaced.
std::optional<std::string> redact_once(std::string_view text, const std::vector<key_material>& keys) {
  std::vector<span> spans;
  find_blocks(text, spans);
  for (const auto& key : keys) {
    find_windows(text, key.b64, spans);
    find_windows(text, key.der, spans);
  }
  if (spans.empty()) return std::nullopt;
  std::sort(spans.begin(), spans.end(), [](const span& a, const span& b) { return a.from < b.from; });
  std::vector<span> merged;
  for (const auto& s : spans) {
    if (!merged.empty() && s.from <= merged.back().to) {
      merged.back().to = std::max(merged.back().to, s.to);
      merged.back().block = merged.back().block || s.block;
    } else {
      merged.push_back(s);
    }
  }
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  for (const auto& s : merged) {
    out.append(text.substr(at, s.from - at));
    out.append(s.block ? block_marker : bytes_marker);
    at = s.to;
  }
  out.append(text.substr(at));
  return out;
}

}  // namespace

std::string redact_command_output(std::string_view text, std::span<const std::string_view> key_pems) {
  std::vector<key_material> key;
  for (auto pem : key_pems)
    if (!pem.empty()) key.push_back(material_of(pem));
  std::string out(text);
  // A replacement can, in contrived text, join what surrounds it into a new marker or window:
  // repeat until nothing changes (a few passes at most; each one removes what it matched).
  for (int pass = 0; pass < 8; ++pass) {
    auto next = redact_once(out, key);
    if (!next || *next == out) break;
    out = std::move(*next);
  }
  return out;
}

}  // namespace certfleet::delivery
