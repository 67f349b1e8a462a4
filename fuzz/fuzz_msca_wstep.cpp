// What a CES answers to RequestSecurityToken (certfleet/msca/protocol.hpp): any bytes give an
// issued, pending or refused answer, or an error naming what is wrong; the PKCS#7 and certificate
// decoding never crash. An issued answer has a certificate and a chain without it, a pending one
// a request id, a refused one a fault code, and every fault classifies and prints.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "certfleet/msca/protocol.hpp"

using namespace certfleet::msca;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = parse_enrollment_response(in);
  if (!r) {
    const auto& e = r.error();
    if (e.message.empty() || e.field.empty() || e.message.size() > 4096) std::abort();
    return 0;
  }
  switch (r->status) {
    case disposition::issued:
      if (r->certificate_der.empty()) std::abort();
      for (const auto& c : r->chain_der)
        if (c.empty() || c == r->certificate_der) std::abort();
      break;
    case disposition::pending:
      if (r->request_id.empty() || !r->certificate_der.empty()) std::abort();
      break;
    case disposition::refused:
      if (r->fault.code.empty()) std::abort();
      break;
  }
  const auto cls = classify_fault(r->fault);
  if (failure_class_name(cls).substr(0, 5) != "msca_") std::abort();
  if (r->fault.error_code && hresult_text(*r->fault.error_code).empty()) std::abort();
  return 0;
}
