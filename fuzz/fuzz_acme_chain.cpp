// The CA's certificate download (application/pem-certificate-chain) read into leaf and chain
// and matched to our key, and the ARI certID of whatever certificate it holds
// (certfleet/acme/keys.hpp, renewal_info.hpp): any text gets a result or an error naming the field.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "certfleet/acme/keys.hpp"
#include "certfleet/acme/renewal_info.hpp"

using namespace certfleet::acme;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string key = [] {
    auto k = generate_private_key(key_type::ecdsa_p256);
    if (!k) std::abort();
    return *k;
  }();
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto chain = read_issued_chain(in, key);
  if (!chain) {
    if (chain.error().field != "certificate" && chain.error().field != "key_pem") std::abort();
  } else if (chain->leaf_pem.empty()) {
    std::abort();
  }
  auto id = ari_cert_id_of(in);
  if (id && id->find('.') == std::string::npos) std::abort();
  if (!id && id.error().field != "cert_pem") std::abort();
  return 0;
}
