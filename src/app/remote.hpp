#pragma once
// Remote mode of the CLI (issue 35 §2), as vault and nomad do it: the command talks to a
// certfleet server's HTTP API instead of opening the store. The server comes from --server or
// CERTFLEET_ADDR, the token from --token, CERTFLEET_TOKEN, --token-file or CERTFLEET_TOKEN_FILE,
// an extra CA to trust from --ca-cert or CERTFLEET_CACERT. The token goes only over HTTPS, or
// plain HTTP to a loopback address.
#include "certfleet/core/error.hpp"
#include "certfleet/store/job.hpp"

#include <boost/json/value.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace certfleet::app {

struct remote_flags {
  std::string server;      // --server / CERTFLEET_ADDR
  std::string token;       // --token / CERTFLEET_TOKEN
  std::string token_file;  // --token-file / CERTFLEET_TOKEN_FILE
  std::string ca_cert;     // --ca-cert / CERTFLEET_CACERT
  bool wanted() const { return !server.empty(); }
};

struct remote_answer {
  unsigned status = 0;
  boost::json::value body;  // null when the answer had none
};

class remote_client {
 public:
  // Checks the URL and reads the token and CA files; errors name the flag at fault.
  static result<remote_client> open(const remote_flags& f);

  // One API call. `body`: sent as JSON. A 2xx answer's JSON (null for none); an error answer
  // becomes the server's error (its errc, message and field), so the exit code is the one the
  // same failure has locally. No answer: unavailable, naming the server.
  result<remote_answer> call(std::string_view method, std::string_view path,
                                  const std::optional<boost::json::value>& body = std::nullopt) const;

  // A body that is not JSON (the target import's JSON lines or CSV), sent as `content_type`; an
  // error answer's whole document goes to `error_answer` when given (the import's `errors`).
  result<remote_answer> send(std::string_view method, std::string_view path, std::string_view content_type,
                             std::string body, boost::json::value* error_answer = nullptr) const;

  // call() for an answer that must be a JSON object (lists, objects, a run): that object.
  result<boost::json::value> call_object(std::string_view method, std::string_view path,
                                         const std::optional<boost::json::value>& body = std::nullopt) const;

  const std::string& server() const { return base_; }

 private:
  std::string base_;  // without a trailing '/'
  std::string token_;
  std::string ca_pem_;
};

// "/api/v1/projects/<p><rest>" with the project name checked (it goes into the path).
result<std::string> project_path(std::string_view project, std::string_view rest);
// A query parameter's value, percent-encoded.
std::string query_escape(std::string_view v);

// What the API answers, as the store's records (so a table prints the same from either mode).
result<store::job_record> job_from_json(const boost::json::value& v);
result<store::log_line> log_line_from_json(const boost::json::value& v);

}  // namespace certfleet::app
