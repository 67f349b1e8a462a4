// The error classifier over arbitrary (kind, code) pairs and error codes: total, always one of
// the named classes, never throws.
#include <boost/asio/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "certfleet/net/error_class.hpp"

using namespace certfleet::net;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 + sizeof(long long)) return 0;
  long long code = 0;
  std::memcpy(&code, data + 1, sizeof code);
  cause c{static_cast<cause_kind>(data[0]), code};
  auto cls = classify(c);
  auto name = error_class_name(cls);
  auto back = parse_error_class(name);
  if (!back || *back != cls) std::abort();
  // The stored-name form reads the same table.
  if (retryable(std::string_view(name)) != retryable(cls)) std::abort();
  if (describe(c).empty()) std::abort();
  // The same code through each error category the transport can hand us.
  int v = static_cast<int>(code);
  for (const boost::system::error_category* cat :
       {&boost::system::system_category(), &boost::system::generic_category(), &boost::asio::error::get_netdb_category(),
        &boost::asio::error::get_addrinfo_category(), &boost::asio::error::get_misc_category()}) {
    auto k = classify(std::error_code(boost::system::error_code(v, *cat)));
    if (!parse_error_class(error_class_name(k))) std::abort();
  }
  if (!parse_error_class(error_class_name(classify(std::error_code(v, std::generic_category()))))) std::abort();
  if (size > 1 + sizeof code) (void)parse_error_class(std::string_view(reinterpret_cast<const char*>(data + 9), size - 9));
  return 0;
}
