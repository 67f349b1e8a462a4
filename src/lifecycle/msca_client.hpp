#pragma once
// The AD CS services over HTTPS (private to src/lifecycle): one SOAP call to a CA's policy (CEP)
// or enrollment (CES) service with the CA's authentication, under msca_allow_list and one
// deadline, its answer parsed by msca/protocol.hpp. What went wrong comes back classified
// (msca::failure_class) with words for the job's error and the API's answer; the password and
// the client key never reach them.
#include "certfleet/lifecycle/msca_catalog.hpp"
#include "certfleet/msca/protocol.hpp"
#include "certfleet/net/egress.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace certfleet::lifecycle::detail {

struct msca_connection {
  const msca_ca_spec* ca = nullptr;
  const msca_ca_secret* secret = nullptr;
  std::string extra_ca_pem;  // trust anchors next to the CA's bundle (tests: the test server's CA)
  boost::asio::thread_pool* cpu = nullptr;
  const net::egress_policy* egress = nullptr;  // msca_allow_list, parsed
  std::chrono::milliseconds timeout{30000};
};

struct msca_failure {
  msca::failure_class cls = msca::failure_class::other;
  // "AD CS [msca_auth]: …": the class's tag first, so the error-hint table finds it.
  std::string message;
  bool permanent = false;  // retrying cannot help (credentials, template, a denial)
  std::string error_code;  // the fault's HRESULT ("0x80094012") when there was one
  std::string request_id;  // the CA's request id when the fault names one (a denial)
  std::string field;       // the CA's field at fault when it is not the URL or the credential
};

template <class T>
struct msca_answer {
  std::optional<T> value;
  msca_failure failure;
  explicit operator bool() const noexcept { return value.has_value(); }
};

// "AD CS [<class name>]: <text>".
std::string msca_message(msca::failure_class c, std::string_view text);
// A failure of class `c` with msca_message's words.
msca_failure msca_fail(msca::failure_class c, std::string_view text, bool permanent);

boost::asio::awaitable<msca_answer<msca::enrollment_policy>> msca_get_policies(const msca_connection& c);
// A RequestSecurityToken (issue, renew or query) to `ces_url`. A refusal (SOAP fault) comes back
// as an answer with disposition refused, classified in `failure` as well.
boost::asio::awaitable<msca_answer<msca::enroll_response>> msca_enroll(const msca_connection& c,
                                                                       const std::string& ces_url,
                                                                       const msca::enroll_request& r);

}  // namespace certfleet::lifecycle::detail
