// The SSH exec-outcome classification and the restore decision over arbitrary script output,
// exit statuses, timeouts and transport failures: total, deterministic, success exactly when the
// command ran to exit 0, a failure always of a named class with a bounded message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "certfleet/net/error_class.hpp"
#include "delivery/ssh/outcome.hpp"

using namespace certfleet::delivery;
using namespace certfleet::delivery::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // flags, exit status (4 bytes), then stdout NUL stderr.
  if (size < 5) return 0;
  const std::uint8_t flags = data[0];
  std::int32_t status = 0;
  std::memcpy(&status, data + 1, sizeof status);
  std::string_view rest(reinterpret_cast<const char*>(data + 5), size - 5);
  auto nul = rest.find('\0');
  exec_output out;
  out.exit_status = status;
  out.timed_out = flags & 4;
  out.out = std::string(rest.substr(0, nul));
  out.err = nul == std::string_view::npos ? std::string() : std::string(rest.substr(nul + 1));

  exec_context ctx{flags & 1 ? script_kind::restore : script_kind::install, "deploy", "host.example", 22,
                   static_cast<bool>(flags & 2), std::chrono::milliseconds(60000)};
  step transport;
  if (flags & 8) transport = failure{static_cast<error_class>((flags >> 4) % 7 + 1), "the channel closed"};
  const auto rep = parse_report(out.out);
  const auto f = exec_outcome(ctx, transport, out, rep);

  if (bool(f) != (transport || out.exit_status != 0)) std::abort();
  if (f) {
    if (f->cls == error_class::none || f->message.empty()) std::abort();
    if (!certfleet::net::parse_error_class(error_class_name(f->cls))) std::abort();
    if (transport && f->cls != transport->cls) std::abort();
    // At most the last 2000 characters of stderr, plus a fixed text.
    if (f->message.size() > 2000 + 512) std::abort();
    const auto again = exec_outcome(ctx, transport, out, rep);
    if (!again || again->cls != f->cls || again->message != f->message) std::abort();
  }
  if (trim_output(out.err).size() > 2000) std::abort();

  if (!restore_needed(failed_stage::validate, rep)) std::abort();
  if (restore_needed(failed_stage::install, rep) !=
      (rep.installed || rep.failed_step == static_cast<int>(remote_step::install)))
    std::abort();
  return 0;
}
