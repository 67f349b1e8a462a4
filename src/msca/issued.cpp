// The issued certificate as PEM with its chain ordered (issued.hpp).
#include "certfleet/msca/issued.hpp"

#include "core/openssl_ptr.hpp"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <vector>

namespace certfleet::msca {

namespace {

using x509_ptr = ossl_ptr<X509, X509_free>;

result<x509_ptr> read_der(const std::string& der, std::string_view what) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  x509_ptr c(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  if (!c || p != reinterpret_cast<const unsigned char*>(der.data()) + der.size())
    return make_error(errc::invalid_argument, std::string(what) + " is not a DER X.509 certificate", "certificate");
  return c;
}

std::string to_pem(X509* c) {
  ossl_ptr<BIO, BIO_free> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), c) != 1) return {};
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

}  // namespace

result<issued_pem> issued_certificate_pem(const enroll_response& r) {
  if (r.certificate_der.empty())
    return make_error(errc::invalid_argument, "the CA's answer holds no issued certificate", "certificate");
  auto leaf = read_der(r.certificate_der, "the issued certificate");
  if (!leaf) return std::move(leaf).error();
  std::vector<x509_ptr> others;
  for (const auto& der : r.chain_der) {
    auto c = read_der(der, "a certificate of the CA's PKCS#7 answer");
    if (!c) return std::move(c).error();
    // The PKCS#7 usually repeats the leaf.
    if (X509_cmp(c->get(), leaf->get()) == 0) continue;
    others.push_back(std::move(*c));
  }
  issued_pem out;
  out.leaf_pem = to_pem(leaf->get());
  X509* at = leaf->get();
  std::vector<bool> used(others.size(), false);
  // Each step finds the certificate whose subject is the current one's issuer; a path is at most
  // as long as the list, and a self-signed certificate ends it.
  for (std::size_t step = 0; step < others.size(); ++step) {
    if (X509_check_issued(at, at) == X509_V_OK) break;
    std::size_t found = others.size();
    for (std::size_t i = 0; i < others.size(); ++i)
      if (!used[i] && X509_check_issued(others[i].get(), at) == X509_V_OK) {
        found = i;
        break;
      }
    if (found == others.size()) break;
    used[found] = true;
    out.chain_pem += to_pem(others[found].get());
    at = others[found].get();
  }
  return out;
}

}  // namespace certfleet::msca
