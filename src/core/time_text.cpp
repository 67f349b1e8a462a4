#include "certfleet/core/time_text.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <string>
#include <vector>

namespace certfleet {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool valid_date(int y, int mo, int d, int h, int mi, int s) {
  static constexpr int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1]) return false;
  if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return false;
  return h >= 0 && h <= 23 && mi >= 0 && mi <= 59 && s >= 0 && s <= 60;  // 60: a leap second
}

std::optional<int> digits(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::optional<int> month_of(std::string_view m) {
  static constexpr std::array<std::string_view, 12> names{"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
  auto l = lower(m);
  for (std::size_t i = 0; i < names.size(); ++i)
    if (l == names[i]) return static_cast<int>(i + 1);
  return std::nullopt;
}

std::optional<time_ms> to_ms(int y, int mo, int d, int h, int mi, int s) {
  if (!valid_date(y, mo, d, h, mi, s)) return std::nullopt;
  return (days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 + mi * 60 +
          std::min(s, 59)) *
         1000;
}

// "08:49:37"
bool read_clock(std::string_view t, int& h, int& mi, int& s) {
  if (t.size() != 8 || t[2] != ':' || t[5] != ':') return false;
  auto a = digits(t.substr(0, 2)), b = digits(t.substr(3, 2)), c = digits(t.substr(6, 2));
  if (!a || !b || !c) return false;
  h = *a;
  mi = *b;
  s = *c;
  return true;
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::optional<time_ms> parse_http_date(std::string_view v) {
  auto w = words(v);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (w.size() == 6 && w[0].size() == 4 && w[0].back() == ',' && w[5] == "GMT") {
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    auto dd = digits(w[1]);
    auto mm = month_of(w[2]);
    auto yy = w[3].size() == 4 ? digits(w[3]) : std::nullopt;
    if (!dd || !mm || !yy || w[1].size() != 2 || !read_clock(w[4], h, mi, s)) return std::nullopt;
    d = *dd;
    mo = *mm;
    y = *yy;
  } else if (w.size() == 4 && !w[0].empty() && w[0].back() == ',' && w[3] == "GMT") {
    // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
    auto date = w[1];
    if (date.size() != 9 || date[2] != '-' || date[6] != '-') return std::nullopt;
    auto dd = digits(date.substr(0, 2));
    auto mm = month_of(date.substr(3, 3));
    auto yy = digits(date.substr(7, 2));
    if (!dd || !mm || !yy || !read_clock(w[2], h, mi, s)) return std::nullopt;
    d = *dd;
    mo = *mm;
    y = *yy < 70 ? 2000 + *yy : 1900 + *yy;
  } else if (w.size() == 5 && w[0].size() == 3) {
    // asctime: "Sun Nov  6 08:49:37 1994"
    auto mm = month_of(w[1]);
    auto dd = digits(w[2]);
    auto yy = w[4].size() == 4 ? digits(w[4]) : std::nullopt;
    if (!mm || !dd || !yy || w[2].size() > 2 || !read_clock(w[3], h, mi, s)) return std::nullopt;
    d = *dd;
    mo = *mm;
    y = *yy;
  } else {
    return std::nullopt;
  }
  return to_ms(y, mo, d, h, mi, s);
}

std::optional<std::int64_t> parse_retry_after(std::string_view value, time_ms now) {
  constexpr std::int64_t cap = 86400;
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (value.size() > 12) return cap;
    std::int64_t s = 0;
    std::from_chars(value.data(), value.data() + value.size(), s);
    return std::min(s, cap);
  }
  auto t = parse_http_date(value);
  if (!t) return std::nullopt;
  if (*t <= now) return 0;
  return std::min<std::int64_t>((*t - now + 999) / 1000, cap);
}

std::optional<time_ms> parse_rfc3339(std::string_view t) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)
  if (t.size() < 20 || t.size() > 64) return std::nullopt;
  if (t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't' && t[10] != ' ') || t[13] != ':' || t[16] != ':')
    return std::nullopt;
  auto y = digits(t.substr(0, 4)), mo = digits(t.substr(5, 2)), d = digits(t.substr(8, 2));
  auto h = digits(t.substr(11, 2)), mi = digits(t.substr(14, 2)), s = digits(t.substr(17, 2));
  if (!y || !mo || !d || !h || !mi || !s) return std::nullopt;
  auto base = to_ms(*y, *mo, *d, *h, *mi, *s);
  if (!base) return std::nullopt;
  std::size_t i = 19;
  std::int64_t frac_ms = 0;
  if (i < t.size() && t[i] == '.') {
    ++i;
    std::size_t start = i;
    int scale = 100;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      frac_ms += (t[i] - '0') * scale;
      scale /= 10;
      ++i;
    }
    if (i == start) return std::nullopt;
  }
  if (i >= t.size()) return std::nullopt;
  std::int64_t offset_ms = 0;
  if (t[i] == 'Z' || t[i] == 'z') {
    ++i;
  } else if (t[i] == '+' || t[i] == '-') {
    if (t.size() - i != 6 || t[i + 3] != ':') return std::nullopt;
    auto oh = digits(t.substr(i + 1, 2)), om = digits(t.substr(i + 4, 2));
    if (!oh || !om || *oh > 23 || *om > 59) return std::nullopt;
    offset_ms = (*oh * 3600 + *om * 60) * 1000LL * (t[i] == '+' ? 1 : -1);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != t.size()) return std::nullopt;
  return *base + frac_ms - offset_ms;
}

}  // namespace certfleet
