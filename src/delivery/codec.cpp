#include "delivery/codec.hpp"

namespace certfleet::delivery {
namespace {
constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
int value_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string base64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += alphabet[v >> 18];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  if (i + 1 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16;
    out += alphabet[v >> 18];
    out += alphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += alphabet[v >> 18];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view in) {
  if (in.empty() || in.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    bool last = i + 4 == in.size();
    int a = value_of(in[i]), b = value_of(in[i + 1]);
    if (a < 0 || b < 0) return std::nullopt;
    int c = in[i + 2] == '=' && last ? -2 : value_of(in[i + 2]);
    int d = in[i + 3] == '=' && last ? -2 : value_of(in[i + 3]);
    if (c == -1 || d == -1 || (c == -2 && d != -2)) return std::nullopt;
    unsigned v = unsigned(a) << 18 | unsigned(b) << 12 | (c >= 0 ? unsigned(c) << 6 : 0) | (d >= 0 ? unsigned(d) : 0);
    out += char(v >> 16);
    if (c >= 0) out += char((v >> 8) & 0xff);
    if (d >= 0) out += char(v & 0xff);
  }
  return out;
}

std::string shell_quote(std::string_view in) {
  std::string out = "'";
  for (char c : in) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += '\'';
  return out;
}

}  // namespace certfleet::delivery
