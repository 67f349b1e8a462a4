// The AD CS catalog bodies (POST …/msca-cas with each authentication kind, POST
// …/certificates/enroll) and the msca_poll_pending payload: any input gets a value or an error
// naming a field, never a crash; an accepted CA reads back through the stored-document parser
// unchanged, holds exactly one credential, and its document has no member for a secret.
#include "certfleet/lifecycle/msca_catalog.hpp"

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace certfleet;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  auto must_name_field = [](const error& e) {
    if (e.field.empty()) std::abort();
  };
  switch (data[0] % 3) {
    case 0: {
      // Far in the past: a client certificate in the input is judged valid or not, both paths run.
      auto c = lifecycle::parse_msca_ca_request(in, 1'700'000'000'000);
      if (!c) {
        must_name_field(c.error());
        break;
      }
      store::catalog_object o;
      o.kind = "msca_ca";
      o.doc = lifecycle::msca_ca_doc_json(c->spec);
      auto back = lifecycle::parse_msca_ca_doc(o);
      if (!back || back->cep_url != c->spec.cep_url || back->ces_url != c->spec.ces_url ||
          back->auth_kind != c->spec.auth_kind || back->username != c->spec.username ||
          back->principal != c->spec.principal || back->realm != c->spec.realm || back->kdc != c->spec.kdc ||
          back->krb_credential != c->spec.krb_credential || back->renewal_mode != c->spec.renewal_mode ||
          back->default_template != c->spec.default_template)
        std::abort();
      // Exactly one credential for the kind it belongs to.
      const auto& s = c->secret;
      const int given = !s.password.empty() + !s.client_key_pem.empty() + !s.keytab.empty();
      if (given != 1) std::abort();
      if (c->spec.auth_kind == "kerberos" && (s.password.empty() ? "keytab" : "password") != c->spec.krb_credential)
        std::abort();
      // The document has no member that could hold a secret (a secret's value may still occur in
      // it by chance, as another field's).
      const auto doc = boost::json::parse(o.doc).as_object();
      const auto& auth = doc.at("auth").as_object();
      for (const char* k : {"password", "key_pem", "client_key_pem", "keytab_b64", "keytab"})
        if (auth.contains(k) || doc.contains(k)) std::abort();
      break;
    }
    case 1: {
      auto r = lifecycle::parse_msca_enroll_request(in);
      if (!r) must_name_field(r.error());
      break;
    }
    case 2: {
      auto p = lifecycle::parse_msca_poll_payload(in);
      if (!p) {
        must_name_field(p.error());
        break;
      }
      auto back = lifecycle::parse_msca_poll_payload(lifecycle::msca_poll_payload(*p));
      if (!back || back->certificate_id != p->certificate_id || back->request_id != p->request_id || back->n != p->n)
        std::abort();
      break;
    }
  }
  return 0;
}
