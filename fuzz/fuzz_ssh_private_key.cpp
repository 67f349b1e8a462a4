// The SSH login key parser (OpenSSH container read by hand, PEM/PKCS#8 through OpenSSL): any
// bytes get a value or an error about private_key_pem, never a crash. Text after "\n--8<--\n"
// is the passphrase.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "certfleet/delivery/pem.hpp"
#include "certfleet/delivery/ssh_target.hpp"

using namespace certfleet::delivery;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::string_view sep = "\n--8<--\n";
  std::string_view in(reinterpret_cast<const char*>(data), size), passphrase;
  if (auto at = in.find(sep); at != std::string_view::npos) {
    passphrase = in.substr(at + sep.size());
    in = in.substr(0, at);
  }
  auto r = parse_ssh_private_key(in, passphrase);
  if (r) {
    // What we accept must be a key line the rest of the system accepts, with the same fingerprint.
    auto k = parse_host_key(r->public_line);
    if (!k || k->type != r->type || k->fingerprint() != r->fingerprint || k->to_line() != r->public_line) std::abort();
  } else if (r.error().field != "private_key_pem" || r.error().message.empty()) {
    std::abort();
  }
  return 0;
}
