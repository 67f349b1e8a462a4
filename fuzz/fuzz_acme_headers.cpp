// Header values and encodings a CA controls (certfleet/acme/documents.hpp, jose.hpp): the first
// byte picks Retry-After, Link, an RFC 3339 time or base64url; the rest is the value. Answers stay
// inside their ranges and base64url round-trips.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "certfleet/acme/documents.hpp"
#include "certfleet/acme/jose.hpp"

using namespace certfleet::acme;
using certfleet::parse_retry_after;
using certfleet::parse_rfc3339;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto s = parse_retry_after(in, 1'800'000'000'000);
      if (s && (*s < 0 || *s > 86400)) std::abort();
      break;
    }
    case 1: {
      std::string value(in);
      for (auto rel : {"alternate", "up", "index"})
        for (const auto& t : link_targets({value}, rel))
          if (t.size() > value.size()) std::abort();
      break;
    }
    case 2: {
      auto t = parse_rfc3339(in);
      // 1970-01-01 − 23:59 offsets … 9999-12-31 + a day.
      if (t && (*t < -86400'000LL || *t > 253402387200000LL)) std::abort();
      break;
    }
    case 3: {
      auto d = base64url_decode(in);
      if (d && base64url_encode(*d) != in) std::abort();  // one encoding per byte string
      auto e = base64url_encode(in);
      auto back = base64url_decode(e);
      if (!back || *back != in) std::abort();
      break;
    }
  }
  return 0;
}
