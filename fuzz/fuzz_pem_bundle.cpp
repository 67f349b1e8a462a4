// The certificate bundle parser, as the catalog API feeds it: any three texts get a value or an
// error naming one of the three fields, never a crash. The input is split into cert_pem,
// chain_pem and key_pem on "\n--8<--\n".
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "certfleet/delivery/pem.hpp"

using namespace certfleet::delivery;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::string_view sep = "\n--8<--\n";
  constexpr std::int64_t now_ms = 1'750'000'000'000;  // fixed: the corpus stays valid over time
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string_view parts[3];
  int n = 0;
  for (auto at = in.find(sep); n < 2 && at != std::string_view::npos; at = in.find(sep)) {
    parts[n++] = in.substr(0, at);
    in.remove_prefix(at + sep.size());
  }
  parts[n] = in;
  auto r = parse_certificate_bundle(parts[0], parts[1], parts[2], now_ms);
  if (r) {
    if (r->fingerprint_sha256.size() != 64 || r->chain_length > max_chain_certs || r->not_after_ms <= now_ms) std::abort();
  } else {
    const auto& f = r.error().field;
    if (!r.error().is(certfleet::errc::invalid_argument) || (f != "cert_pem" && f != "chain_pem" && f != "key_pem"))
      std::abort();
  }
  return 0;
}
