#pragma once
// The delivery-module interface (DESIGN §4). Every module (ssh, file, webhook) takes one
// cert_bundle and a run id and answers with one delivery_result; its own header declares
// deliver_<module> (and rollback_<module> when the table says it rolls back) with these types.
// Callers pick a module by module_kind: a switch over it is checked by the compiler, so a new
// module is a new enumerator plus a row in the table, and every dispatch site is then told.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/error.hpp"
#include "certfleet/net/error_class.hpp"
#include "certfleet/net/phase_timing.hpp"

namespace certfleet::delivery {

// A delivery reports in net's terms (net/error_class.hpp, net/phase_timing.hpp): its modules speak
// net's protocols, and a target result's class is the class the protocol's failure has.
using net::cause;
using net::cause_kind;
using net::classify;
using net::describe;
using net::error_class;
using net::error_class_name;
using net::phase_timing;
using net::remote_step;
using net::retryable;

enum class module_kind : std::uint8_t { ssh, file, webhook };

struct module_info {
  module_kind kind;
  std::string_view name;  // a target's "module" member as sent and stored
  bool rolls_back;        // the module can put back what a run replaced (rollback_<module>)
};

// The one table of modules, in enum order.
std::span<const module_info> all_modules() noexcept;
const module_info& module_of(module_kind m) noexcept;
inline std::string_view module_name(module_kind m) noexcept { return module_of(m).name; }
std::optional<module_kind> parse_module(std::string_view name) noexcept;
// The names for an error message: "\"ssh\", \"file\" or \"webhook\"".
std::string module_choices();

struct cert_bundle {
  std::string cert_pem;   // the leaf
  std::string key_pem;    // its private key
  std::string chain_pem;  // intermediates; written only when the target has a chain_path
  // check_bundle's answer for this very bundle, when the caller (a job delivering one bundle to
  // many targets) already ran it: the PEM decoding is most of the client's CPU per target.
  std::string checked_fingerprint;
};

enum class delivery_status { succeeded, failed, skipped_by_hash };
const char* delivery_status_name(delivery_status s) noexcept;

struct delivery_result {
  delivery_status status = delivery_status::failed;
  error_class cls = error_class::none;
  std::string error;        // for operators; names the phase ("auth: …")
  // The precise cause behind an error that is uniform on purpose ("connect: could not connect
  // to HOST:PORT" for refused, timed out, no banner …): stored with the result and shown only to
  // admins, since every role of the project reads `error`. Empty when `error` says it all.
  std::string error_detail;
  std::string phase;        // the phase that failed; empty on success
  std::vector<phase_timing> timings;
  std::string fingerprint_sha256;  // of the delivered (or already present) leaf, lower-case hex
  bool restored = false;    // a failed install/validation put the backup back
  bool reused_connection = false;  // ssh: went over a connection an earlier target opened
  std::string remote_stderr;  // the install/restore script's stderr (trimmed), for the job log

  bool ok() const { return status != delivery_status::failed; }
};

// Pre-flight checks of a bundle without any I/O: PEM parses, the key belongs to the leaf.
// Returns the leaf's SHA-256 fingerprint (lower-case hex of the DER).
result<std::string> check_bundle(const cert_bundle& b);
// checked_fingerprint when set, else check_bundle.
result<std::string> bundle_fingerprint(const cert_bundle& b);

}  // namespace certfleet::delivery
