// HTTP Negotiate over MIT krb5 and GSSAPI (kerberos.hpp).
//
// The login and the service ticket are obtained here, with a krb5 context of our own (its profile
// naming the realm's KDC when the caller gave one), and stored in a MEMORY cache; GSSAPI then
// builds the SPNEGO token from that cache by the cache's name, so it never needs the KDC itself
// and never reads the process's default cache.
#include "certfleet/net/kerberos.hpp"

#include <fmt/format.h>
#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>
#include <krb5.h>
#include <openssl/evp.h>
#include <profile.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>

namespace certfleet::net {

namespace {

// A file that lives in memory only: the keytab (a secret) and the generated profile are handed
// to the library by path (/proc/self/fd/N), as it reads nothing else.
class memory_file {
 public:
  memory_file(const char* name, std::string_view bytes) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    for (std::size_t done = 0; fd_ >= 0 && done < bytes.size();) {
      const auto n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n <= 0) {
        ::close(fd_);
        fd_ = -1;
        break;
      }
      done += static_cast<std::size_t>(n);
    }
  }
  ~memory_file() {
    if (fd_ >= 0) ::close(fd_);
  }
  memory_file(const memory_file&) = delete;
  memory_file& operator=(const memory_file&) = delete;
  bool ok() const noexcept { return fd_ >= 0; }
  std::string path() const { return fmt::format("/proc/self/fd/{}", fd_); }

 private:
  int fd_ = -1;
};

// One login's krb5 objects, released in the right order whatever path returns.
struct krb5_session {
  krb5_context ctx = nullptr;
  krb5_ccache cache = nullptr;
  krb5_principal client = nullptr;
  krb5_principal service = nullptr;
  krb5_keytab keytab = nullptr;
  krb5_get_init_creds_opt* opts = nullptr;

  ~krb5_session() {
    if (!ctx) return;
    if (opts) krb5_get_init_creds_opt_free(ctx, opts);
    if (keytab) krb5_kt_close(ctx, keytab);
    if (service) krb5_free_principal(ctx, service);
    if (client) krb5_free_principal(ctx, client);
    if (cache) krb5_cc_destroy(ctx, cache);  // the tickets go with it
    krb5_free_context(ctx);
  }
  std::string message(krb5_error_code code) const {
    const char* m = krb5_get_error_message(ctx, code);
    std::string out = m ? m : fmt::format("krb5 error {}", code);
    krb5_free_error_message(ctx, m);
    return out;
  }
};

negotiate_result failed(kerberos_failure f, std::string text) {
  negotiate_result r;
  r.failure = f;
  r.error = std::move(text);
  return r;
}

// The library's code for a failed login or service ticket, as the operator has to act on it.
kerberos_failure classify(krb5_error_code code) {
  switch (code) {
    case KRB5KDC_ERR_PREAUTH_FAILED:
    case KRB5KRB_AP_ERR_BAD_INTEGRITY:
    case KRB5KDC_ERR_C_PRINCIPAL_UNKNOWN:
    case KRB5KDC_ERR_CLIENT_REVOKED:
    case KRB5KDC_ERR_KEY_EXP:
    case KRB5KDC_ERR_ETYPE_NOSUPP:
    case KRB5_KT_NOTFOUND:
    case KRB5_KT_KVNONOTFOUND:
    case KRB5_PREAUTH_FAILED:
    case KRB5_GET_IN_TKT_LOOP:
      return kerberos_failure::credentials;
    case KRB5KDC_ERR_S_PRINCIPAL_UNKNOWN:
      return kerberos_failure::service_unknown;
    case KRB5_KDC_UNREACH:
    case KRB5_REALM_CANT_RESOLVE:
    case KRB5_REALM_UNKNOWN:
    case KRB5KRB_ERR_RESPONSE_TOO_BIG:
      return kerberos_failure::kdc_unreachable;
    default:
      return kerberos_failure::other;
  }
}

std::string base64(const unsigned char* data, std::size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  const int len = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(len > 0 ? static_cast<std::size_t>(len) : 0);
  return out;
}

std::string gss_words(OM_uint32 major, OM_uint32 minor) {
  std::string out;
  for (auto [code, type] : {std::pair{major, GSS_C_GSS_CODE}, std::pair{minor, GSS_C_MECH_CODE}}) {
    if (code == 0) continue;
    OM_uint32 more = 0, ignored = 0;
    do {
      gss_buffer_desc text{0, nullptr};
      if (gss_display_status(&ignored, code, type, GSS_C_NO_OID, &more, &text) != GSS_S_COMPLETE) break;
      if (!out.empty()) out += ": ";
      out.append(static_cast<const char*>(text.value), text.length);
      gss_release_buffer(&ignored, &text);
    } while (more != 0);
  }
  return out.empty() ? "GSSAPI failure" : out;
}

// The SPNEGO token for `service` ("HTTP/host@REALM") from the tickets in cache `cache_name`.
negotiate_result spnego_token(const std::string& cache_name, const std::string& service) {
  OM_uint32 minor = 0;
  gss_key_value_element_desc element{"ccache", cache_name.c_str()};
  gss_key_value_set_desc store{1, &element};
  gss_cred_id_t cred = GSS_C_NO_CREDENTIAL;
  OM_uint32 major = gss_acquire_cred_from(&minor, GSS_C_NO_NAME, GSS_C_INDEFINITE, GSS_C_NO_OID_SET, GSS_C_INITIATE,
                                          &store, &cred, nullptr, nullptr);
  if (GSS_ERROR(major)) return failed(kerberos_failure::other, "GSSAPI: " + gss_words(major, minor));
  std::unique_ptr<gss_cred_id_t, void (*)(gss_cred_id_t*)> cred_guard(&cred, [](gss_cred_id_t* c) {
    OM_uint32 m = 0;
    gss_release_cred(&m, c);
  });

  gss_buffer_desc name_text{service.size(), const_cast<char*>(service.data())};
  gss_name_t target = GSS_C_NO_NAME;
  major = gss_import_name(&minor, &name_text, GSS_KRB5_NT_PRINCIPAL_NAME, &target);
  if (GSS_ERROR(major)) return failed(kerberos_failure::other, "GSSAPI: " + gss_words(major, minor));
  std::unique_ptr<gss_name_t, void (*)(gss_name_t*)> name_guard(&target, [](gss_name_t* n) {
    OM_uint32 m = 0;
    gss_release_name(&m, n);
  });

  // SPNEGO (1.3.6.1.5.5.2), the mechanism RFC 4559 names; it carries the Kerberos token.
  static gss_OID_desc spnego{6, const_cast<char*>("\x2b\x06\x01\x05\x05\x02")};
  gss_ctx_id_t context = GSS_C_NO_CONTEXT;
  gss_buffer_desc out{0, nullptr};
  major = gss_init_sec_context(&minor, cred, &context, target, &spnego, GSS_C_MUTUAL_FLAG, GSS_C_INDEFINITE,
                               GSS_C_NO_CHANNEL_BINDINGS, GSS_C_NO_BUFFER, nullptr, &out, nullptr, nullptr);
  negotiate_result r;
  if (GSS_ERROR(major) || out.length == 0) {
    r = failed(kerberos_failure::other, "GSSAPI: " + gss_words(major, minor));
  } else {
    r.header = "Negotiate " + base64(static_cast<const unsigned char*>(out.value), out.length);
  }
  gss_release_buffer(&minor, &out);
  if (context != GSS_C_NO_CONTEXT) gss_delete_sec_context(&minor, &context, GSS_C_NO_BUFFER);
  return r;
}

}  // namespace

bool valid_realm(std::string_view realm) noexcept {
  if (realm.empty() || realm.size() > 255) return false;
  for (char c : realm)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
          c == '_'))
      return false;
  return true;
}

bool looks_like_keytab(std::string_view bytes) noexcept {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x05 && static_cast<unsigned char>(bytes[1]) == 0x02;
}

negotiate_result negotiate_header(const kerberos_login& login, std::string_view service_host) {
  if (!valid_realm(login.realm)) return failed(kerberos_failure::other, "the realm is not a Kerberos realm name");
  if (login.password.empty() == login.keytab.empty())
    return failed(kerberos_failure::credentials, "exactly one of a password and a keytab is needed");

  krb5_session s;
  std::optional<memory_file> profile_file;
  if (!login.kdc.empty()) {
    // The caller checked the KDC's address; the realm and the address were checked for the
    // characters a profile could read as syntax.
    const auto text = fmt::format(
        "[libdefaults]\n default_realm = {0}\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
        " dns_canonicalize_hostname = false\n rdns = false\n udp_preference_limit = 1\n"
        "[realms]\n {0} = {{\n  kdc = {1}\n }}\n",
        login.realm, login.kdc);
    profile_file.emplace("certfleet-krb5.conf", text);
    if (!profile_file->ok()) return failed(kerberos_failure::other, "cannot make the Kerberos profile in memory");
    profile_t profile = nullptr;
    const auto path = profile_file->path();
    if (auto rc = profile_init_path(path.c_str(), &profile); rc != 0)
      return failed(kerberos_failure::other, fmt::format("cannot read the Kerberos profile (error {})", rc));
    const auto rc = krb5_init_context_profile(profile, 0, &s.ctx);
    profile_release(profile);
    if (rc != 0) return failed(kerberos_failure::other, fmt::format("cannot start krb5 (error {})", rc));
  } else if (auto rc = krb5_init_context(&s.ctx); rc != 0) {
    return failed(kerberos_failure::other, fmt::format("cannot start krb5 from krb5.conf (error {})", rc));
  }

  std::string client_name = login.principal;
  if (client_name.find('@') == std::string::npos) client_name += "@" + login.realm;
  if (auto rc = krb5_parse_name(s.ctx, client_name.c_str(), &s.client); rc != 0)
    return failed(kerberos_failure::credentials, fmt::format("principal {}: {}", client_name, s.message(rc)));
  const std::string service_name = fmt::format("HTTP/{}@{}", service_host, login.realm);
  if (auto rc = krb5_parse_name(s.ctx, service_name.c_str(), &s.service); rc != 0)
    return failed(kerberos_failure::other, fmt::format("service {}: {}", service_name, s.message(rc)));

  if (auto rc = krb5_cc_new_unique(s.ctx, "MEMORY", nullptr, &s.cache); rc != 0)
    return failed(kerberos_failure::other, "cannot make a credential cache: " + s.message(rc));
  if (auto rc = krb5_cc_initialize(s.ctx, s.cache, s.client); rc != 0)
    return failed(kerberos_failure::other, "cannot make a credential cache: " + s.message(rc));
  if (auto rc = krb5_get_init_creds_opt_alloc(s.ctx, &s.opts); rc != 0)
    return failed(kerberos_failure::other, s.message(rc));
  // The cache is ours and short-lived: let the library store the ticket in it.
  krb5_get_init_creds_opt_set_out_ccache(s.ctx, s.opts, s.cache);

  krb5_creds initial;
  std::memset(&initial, 0, sizeof initial);
  krb5_error_code rc = 0;
  std::optional<memory_file> keytab_file;
  if (!login.password.empty()) {
    rc = krb5_get_init_creds_password(s.ctx, &initial, s.client, login.password.c_str(), nullptr, nullptr, 0, nullptr,
                                      s.opts);
  } else {
    keytab_file.emplace("certfleet-keytab", login.keytab);
    if (!keytab_file->ok()) return failed(kerberos_failure::other, "cannot hand the keytab to krb5 in memory");
    const auto name = "FILE:" + keytab_file->path();
    if (rc = krb5_kt_resolve(s.ctx, name.c_str(), &s.keytab); rc == 0)
      rc = krb5_get_init_creds_keytab(s.ctx, &initial, s.client, s.keytab, 0, nullptr, s.opts);
  }
  if (rc != 0) {
    const auto cls = classify(rc);
    std::string hint;
    if (cls == kerberos_failure::credentials)
      hint = login.password.empty() ? " (does the keytab hold a current key of this principal?)"
                                    : " (is the password current, the account enabled and not locked?)";
    else if (cls == kerberos_failure::kdc_unreachable)
      hint = login.kdc.empty() ? fmt::format(" (no KDC of realm {} answered: check krb5.conf, or give the CA a kdc)",
                                             login.realm)
                               : fmt::format(" (the KDC {} did not answer)", login.kdc);
    return failed(cls, fmt::format("login of {} failed: {}{}", client_name, s.message(rc), hint));
  }
  krb5_free_cred_contents(s.ctx, &initial);

  // The service ticket, into the same cache, so GSSAPI finds it there.
  krb5_creds wanted;
  std::memset(&wanted, 0, sizeof wanted);
  wanted.client = s.client;
  wanted.server = s.service;
  krb5_creds* ticket = nullptr;
  if (rc = krb5_get_credentials(s.ctx, 0, s.cache, &wanted, &ticket); rc != 0) {
    const auto cls = classify(rc);
    return failed(cls == kerberos_failure::credentials ? kerberos_failure::other : cls,
                  fmt::format("no ticket for {}: {}{}", service_name, s.message(rc),
                              cls == kerberos_failure::service_unknown
                                  ? " (register this SPN on the account the CEP/CES application pool runs as)"
                                  : ""));
  }
  krb5_free_creds(s.ctx, ticket);

  const char* type = krb5_cc_get_type(s.ctx, s.cache);
  const char* name = krb5_cc_get_name(s.ctx, s.cache);
  return spnego_token(fmt::format("{}:{}", type ? type : "MEMORY", name ? name : ""), service_name);
}

}  // namespace certfleet::net
