// Every catalog request body (targets, credentials, distributions, channels, rules, certificates),
// the distribution job payload and the retry-targets body: any input gets a value or an error
// naming a field, never a crash; an accepted target reads back through the stored-document parser.
#include "certfleet/lifecycle/approval.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/notify/channel.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/distribution/redrive.hpp"
#include "certfleet/distribution/request.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <string_view>

using namespace certfleet;
using namespace certfleet::distribution;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  auto must_name_field = [](const error& e) {
    if (e.field.empty()) std::abort();
  };
  switch (data[0] % 9) {
    case 0: {
      auto t = catalog::parse_target_request(in);
      if (!t) {
        must_name_field(t.error());
        break;
      }
      store::catalog_object o;
      o.kind = "target";
      o.doc = t->doc;
      auto back = catalog::parse_target_doc(o);
      if (!back || back->module != t->spec.module || back->lock_key() != t->spec.lock_key()) std::abort();
      break;
    }
    case 1:
      if (auto c = catalog::parse_credential_request(in); !c) must_name_field(c.error());
      break;
    case 2:
      if (auto d = parse_distribution_request(in); !d) must_name_field(d.error());
      else if (d->target_ids.empty() || !std::is_sorted(d->target_ids.begin(), d->target_ids.end())) std::abort();
      break;
    case 3: {
      auto c = notify::parse_channel_request(in);
      if (!c) {
        must_name_field(c.error());
        break;
      }
      // An accepted channel reads back through the stored-document parser as the same kind.
      store::catalog_object o;
      o.kind = "notification_channel";
      o.doc = notify::channel_doc_json(c->spec);
      if (!c->secret.empty()) o.sealed = "sealed";
      auto back = notify::parse_channel_doc(o);
      if (!back || back->kind != c->spec.kind || back->email.to != c->spec.email.to) std::abort();
      break;
    }
    case 4:
      if (auto r = notify::parse_rule_request(in); !r) must_name_field(r.error());
      break;
    case 5:
      if (auto c = catalog::parse_certificate_request(in, 1'800'000'000'000); !c) must_name_field(c.error());
      break;
    case 6: {
      auto p = parse_payload(in);
      if (!p) {
        must_name_field(p.error());
        break;
      }
      auto again = parse_payload(to_payload(*p));
      if (!again || again->target_ids != p->target_ids || again->run_no != p->run_no) std::abort();
      break;
    }
    case 7: {
      // retry-targets: exactly one of a job id and 1-1000 distinct target ids (in the client's order).
      auto r = parse_redrive_request(in);
      if (!r) {
        must_name_field(r.error());
        break;
      }
      if (r->job_id.empty() == r->target_ids.empty() || r->target_ids.size() > max_redrive_targets) std::abort();
      auto ids = r->target_ids;
      std::sort(ids.begin(), ids.end());
      if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) std::abort();
      break;
    }
    case 8: {
      // reject (issuance approval): a reason of 1-500 characters, trimmed, no control characters.
      auto r = lifecycle::parse_reject_request(in);
      if (!r) {
        must_name_field(r.error());
        break;
      }
      if (r->empty() || r->size() > lifecycle::max_reject_reason_length || r->front() == ' ' || r->back() == ' ' ||
          std::any_of(r->begin(), r->end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
        std::abort();
      break;
    }
  }
  return 0;
}
