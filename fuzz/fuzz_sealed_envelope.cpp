// Sealed secrets read back from the store, and the key file text: any bytes get a value or a
// clear error, never a crash; whatever is sealed opens to itself. The first byte picks the part.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "certfleet/core/secrets.hpp"

using namespace certfleet;

namespace {
// A fixed test key (never a real one): the corpus holds envelopes sealed with it, aad "fuzz".
const kek& test_key() {
  static const kek k = parse_key_file_text("certfleet-kek v1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n").value();
  return k;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {  // an envelope as stored
      auto version = sealed_kek_version(in);
      auto r = open_sealed(test_key(), in, "fuzz");
      if (r && version != test_key().version()) std::abort();
      if (!r && r.error().field != "sealed" && r.error().field != "key_file") std::abort();
      break;
    }
    case 1: {  // seal then open: the round trip is exact, and another aad does not open it
      auto env = seal(test_key(), in, "fuzz");
      if (!env) std::abort();
      auto back = open_sealed(test_key(), *env, "fuzz");
      if (!back || *back != in || open_sealed(test_key(), *env, "fuzz2")) std::abort();
      break;
    }
    default: {  // the key file's text
      auto k = parse_key_file_text(in);
      if (k && (k->fingerprint().size() != 64 || k->version() == 0)) std::abort();
      if (!k && k.error().field != "key_file") std::abort();
      break;
    }
  }
  return 0;
}
