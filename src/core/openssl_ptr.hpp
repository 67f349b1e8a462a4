#pragma once
// OpenSSL objects owned by std::unique_ptr, one deleter for every module that calls OpenSSL:
// `ossl_ptr<X509, X509_free>`. Private to src/ (include/ never names an OpenSSL type).
#include <memory>

namespace certfleet {

template <auto free_fn>
struct ossl_deleter {
  template <class T>
  void operator()(T* p) const noexcept {
    free_fn(p);
  }
};

template <class T, auto free_fn>
using ossl_ptr = std::unique_ptr<T, ossl_deleter<free_fn>>;

}  // namespace certfleet
