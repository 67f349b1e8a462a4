#include "certfleet/core/build_info.hpp"

namespace certfleet {

#ifndef CERTFLEET_VERSION
#define CERTFLEET_VERSION "0.0.0"
#endif
#ifndef CERTFLEET_COMMIT
#define CERTFLEET_COMMIT "unknown"
#endif
#ifndef CERTFLEET_COMMIT_DATE
#define CERTFLEET_COMMIT_DATE "unknown"
#endif

const build_info& this_build() noexcept {
#if defined(__clang__)
  static constexpr build_info info{CERTFLEET_VERSION, CERTFLEET_COMMIT, CERTFLEET_COMMIT_DATE, "clang " __clang_version__};
#else
  static constexpr build_info info{CERTFLEET_VERSION, CERTFLEET_COMMIT, CERTFLEET_COMMIT_DATE, "gcc " __VERSION__};
#endif
  return info;
}

}  // namespace certfleet
