// What an ACME server answers, parsed (certfleet/acme/documents.hpp, renewal_info.hpp): the first
// byte picks the document (directory, account, order, authorization, challenge, problem,
// renewalInfo), the rest is the CA's JSON. Any text gets a document or an error naming a field
// of that document; a parsed problem renders on one line and has a class.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "certfleet/acme/documents.hpp"
#include "certfleet/acme/renewal_info.hpp"

using namespace certfleet::acme;

namespace {

template <class R>
void check_error(const R& r, std::string_view doc) {
  if (r) return;
  const auto& e = r.error();
  // Every error names the document or one of its members, and says something.
  if (e.field.rfind(doc, 0) != 0 || e.message.empty() || e.message.size() > 4096) std::abort();
}

void check_problem(const problem& p) {
  auto t = p.text();
  if (t.empty() || t.find('\n') != std::string::npos || t.find('\r') != std::string::npos) std::abort();
  (void)classify_problem(p);
  for (const auto& sp : p.subproblems)
    if (!sp.subproblems.empty()) std::abort();  // one level only
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 7) {
    case 0: {
      auto d = parse_directory(in);
      check_error(d, "directory");
      if (d && (d->new_nonce.empty() || d->new_account.empty() || d->new_order.empty() || d->revoke_cert.empty())) std::abort();
      break;
    }
    case 1: {
      auto a = parse_account(in);
      check_error(a, "account");
      break;
    }
    case 2: {
      auto o = parse_order(in);
      check_error(o, "order");
      if (o) {
        if (o->finalize.empty()) std::abort();
        if (o->status == order_status::valid && o->certificate.empty()) std::abort();
        if (order_status_name(o->status) == "?") std::abort();
        if (o->error) check_problem(*o->error);
      }
      break;
    }
    case 3: {
      auto z = parse_authorization(in);
      check_error(z, "authorization");
      if (z) {
        for (const auto& c : z->challenges) {
          if (c.url.empty()) std::abort();
          if (c.type == "dns-01" && c.token.size() < 22) std::abort();
          if (c.error) check_problem(*c.error);
        }
        if (authorization_status_name(z->status) == "?") std::abort();
      }
      break;
    }
    case 4: {
      auto c = parse_challenge(in);
      check_error(c, "challenge");
      break;
    }
    case 5: {
      auto p = parse_problem(in);
      check_error(p, "problem");
      if (p) check_problem(*p);
      break;
    }
    case 6: {
      auto r = parse_renewal_info(in);
      check_error(r, "renewalInfo");
      if (r) {
        if (r->suggested_window.end <= r->suggested_window.start) std::abort();
        renewal_inputs inputs;
        inputs.now = r->suggested_window.start;
        inputs.ari = r->suggested_window;
        inputs.seed = size;
        auto d = decide_renewal(inputs);
        if (d.renew_at < r->suggested_window.start || d.renew_at >= r->suggested_window.end) std::abort();
      }
      break;
    }
  }
  return 0;
}
