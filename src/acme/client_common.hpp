#pragma once
// What client.cpp (the directory, nonces, the signed POST) and client_operations.cpp (the
// operations on top of it) share, private to src/acme: the answer a POST leaves, and the
// failures both build, so a failure reads the same whichever file made it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/acme/client.hpp"
#include "certfleet/core/error.hpp"

namespace certfleet::acme {

// What a successful exchange leaves for the operation.
struct client::answer {
  int status = 0;
  std::string body;
  std::string location;
  std::string content_type;
  std::optional<std::int64_t> retry_after_s;
  std::vector<std::string> links;
};

namespace detail {

failure make_failure(failure_kind kind, std::string message);
failure bad_input(std::string field, std::string message);
// No ACME answer (client.hpp): the same words whether nothing listened, TLS failed or a web
// page answered, so a directory URL cannot scan ports; the cause goes to the server's log only.
failure no_acme_answer(failure_kind kind, std::string_view step, const std::string& url, std::string detail);
std::string seconds_text(std::int64_t s);
// A document the CA answered that does not parse: the CA is not speaking ACME as expected (or
// the URL is some other service's: its content stays in the server's log).
failure bad_document(const std::string& step, const certfleet::error& e, int status, const std::string& url);

}  // namespace detail

}  // namespace certfleet::acme
