// The key file as a keyring (DESIGN §11): any bytes give a ring or a clear error (field
// key_file), never a crash; a ring parsed is written back to text that parses to the same ring,
// and it seals with its primary and opens with every version.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "certfleet/core/secrets.hpp"

using namespace certfleet;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto k = parse_key_file_text(in);
  if (!k) {
    if (k.error().field != "key_file") std::abort();
    return 0;
  }
  auto versions = k->versions();
  if (versions.empty() || !k->has_version(k->version())) std::abort();
  auto back = parse_key_file_text(key_file_text(*k));
  if (!back || back->versions() != versions || back->version() != k->version()) std::abort();
  for (auto v : versions)
    if (back->fingerprint(v) != k->fingerprint(v)) std::abort();
  auto env = seal(*k, "x", "fuzz");
  if (!env || sealed_kek_version(*env) != k->version()) std::abort();
  auto opened = open_sealed(*back, *env, "fuzz");
  if (!opened || *opened != "x") std::abort();
  return 0;
}
