// Building and checking the listener's TLS context (tls_context.hpp, certfleet/api/tls.hpp).
#include "tls_context.hpp"

#include "certfleet/api/alpn.hpp"
#include "core/openssl_ptr.hpp"

#include "certfleet/core/secrets.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>
#include <ctime>
#include <fstream>
#include <sstream>

namespace certfleet::api {

namespace asio = boost::asio;

namespace {

// Mozilla's "intermediate" TLS 1.2 list without the finite-field DHE suites: ECDHE key exchange
// (forward secrecy) and AEAD ciphers only. TLS 1.3's suites are OpenSSL's defaults (all AEAD).
constexpr const char* tls12_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// OpenSSL queues errors per thread; a stale entry would confuse the next caller on this thread.
struct clear_errors_on_exit {
  ~clear_errors_on_exit() { ERR_clear_error(); }
};

// Never prompts: an encrypted key fails to load instead of blocking on a terminal.
int no_password(char*, int, int, void*) { return 0; }

error refused(const std::string& setting, std::string message) {
  return make_error(errc::config_invalid, std::move(message), setting);
}

// ALPN: the listener speaks HTTP/1.1 only; a client offering h2 first still gets http/1.1, and
// one offering no protocol we speak gets no ALPN answer (it then falls back to HTTP/1.1 itself).
int select_http11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen,
                  void*) {
  static constexpr std::string_view http11 = "http/1.1";
  auto at = find_alpn_protocol(std::span<const unsigned char>(in, inlen), http11);
  if (!at) return SSL_TLSEXT_ERR_NOACK;
  *out = in + *at;
  *outlen = static_cast<unsigned char>(http11.size());
  return SSL_TLSEXT_ERR_OK;
}

std::string hex(const unsigned char* p, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

tls_identity identity_of(X509* leaf) {
  tls_identity id;
  if (ossl_ptr<BIO, BIO_free> b(BIO_new(BIO_s_mem())); b) {
    X509_NAME_print_ex(b.get(), X509_get_subject_name(leaf), 0, XN_FLAG_RFC2253);
    char* data = nullptr;
    long n = BIO_get_mem_data(b.get(), &data);
    if (n > 0) id.subject.assign(data, static_cast<std::size_t>(n));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (X509_digest(leaf, EVP_sha256(), md, &len) == 1) id.fingerprint_sha256 = hex(md, len);
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) == 1) id.not_after_ms = static_cast<std::int64_t>(timegm(&tm)) * 1000;
  return id;
}

bool has_pem_block(std::string_view text, std::string_view label_part) {
  auto begin = text.find("-----BEGIN ");
  while (begin != std::string_view::npos) {
    auto end = text.find("-----", begin + 11);
    if (end == std::string_view::npos) return false;
    if (text.substr(begin + 11, end - begin - 11).find(label_part) != std::string_view::npos) return true;
    begin = text.find("-----BEGIN ", end + 5);
  }
  return false;
}

result<std::string> read_file(const std::string& path, const std::string& setting) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return refused(setting, fmt::format("{}: cannot read {}: {}", setting, path, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > (1u << 20))
    return refused(setting, fmt::format("{}: {} is larger than 1 MiB: not a certificate or key file", setting, path));
  return text.str();
}

}  // namespace

result<tls_server_context> make_tls_context(const tls_material& m) {
  clear_errors_on_exit clear;
  const auto& cs = m.cert_setting;
  const auto& ks = m.key_setting;
  if (!has_pem_block(m.chain_pem, "CERTIFICATE"))
    return refused(cs, fmt::format("{}: {} holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")", cs, m.source));
  if (!has_pem_block(m.key_pem, "PRIVATE KEY"))
    return refused(ks, fmt::format("{}: {} holds no PEM private key (\"-----BEGIN PRIVATE KEY-----\")", ks, m.source));

  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* h = ctx->native_handle();
  SSL_CTX_set_min_proto_version(h, TLS1_2_VERSION);
  SSL_CTX_set_options(h, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                             SSL_OP_SINGLE_ECDH_USE);
  if (SSL_CTX_set_cipher_list(h, tls12_ciphers) != 1)
    throw std::logic_error("the built-in TLS 1.2 cipher list is refused by this OpenSSL");
  SSL_CTX_set_alpn_select_cb(h, select_http11, nullptr);
  // Resumption by session id within this context (a new certificate version starts afresh).
  static constexpr unsigned char sid_ctx[] = "certfleet";
  SSL_CTX_set_session_id_context(h, sid_ctx, sizeof sid_ctx - 1);
  SSL_CTX_set_default_passwd_cb(h, no_password);

  // The chain: the leaf first, then its issuers, as a web server serves them.
  {
    ossl_ptr<BIO, BIO_free> b(BIO_new_mem_buf(m.chain_pem.data(), static_cast<int>(m.chain_pem.size())));
    ossl_ptr<X509, X509_free> leaf(PEM_read_bio_X509_AUX(b.get(), nullptr, no_password, nullptr));
    if (!leaf)
      return refused(cs, fmt::format("{}: the first PEM block of {} is not a certificate that parses", cs, m.source));
    if (SSL_CTX_use_certificate(h, leaf.get()) != 1)
      return refused(cs, fmt::format("{}: the certificate in {} cannot be used: {}", cs, m.source,
                                     ERR_reason_error_string(ERR_peek_last_error())));
    SSL_CTX_clear_chain_certs(h);
    while (X509* read = PEM_read_bio_X509(b.get(), nullptr, no_password, nullptr)) {
      ossl_ptr<X509, X509_free> ca(read);
      if (SSL_CTX_add0_chain_cert(h, ca.get()) != 1)
        return refused(cs, fmt::format("{}: a chain certificate in {} cannot be used", cs, m.source));
      ca.release();  // add0: the context owns it now
    }
    ERR_clear_error();  // the end of the chain reads as "no start line"
  }
  {
    ossl_ptr<BIO, BIO_free> b(BIO_new_mem_buf(m.key_pem.data(), static_cast<int>(m.key_pem.size())));
    ossl_ptr<EVP_PKEY, EVP_PKEY_free> key(PEM_read_bio_PrivateKey(b.get(), nullptr, no_password, nullptr));
    if (!key)
      return refused(ks, fmt::format("{}: the private key in {} does not parse (an encrypted key cannot be used: "
                                     "decrypt it with `openssl pkey -in KEY -out KEY.plain`)",
                                     ks, m.source));
    const bool used = SSL_CTX_use_PrivateKey(h, key.get()) == 1;
    if (!used || SSL_CTX_check_private_key(h) != 1)
      return refused(ks, fmt::format("{}: the private key in {} does not belong to the certificate of {}", ks, m.source,
                                     cs));
  }
  tls_server_context out;
  out.identity = identity_of(SSL_CTX_get0_certificate(h));
  out.context = std::move(ctx);
  return out;
}

result<tls_identity> check_tls_material(const tls_material& m) {
  auto c = make_tls_context(m);
  if (!c) return std::move(c).error();
  return c->identity;
}

result<tls_material> read_tls_files(const std::string& cert_file, const std::string& key_file) {
  tls_material m;
  auto cert = read_file(cert_file, "tls_cert_file");
  if (!cert) return std::move(cert).error();
  auto key = read_file(key_file, "tls_key_file");
  if (!key) return std::move(key).error();
  m.chain_pem = std::move(*cert);
  m.key_pem = std::move(*key);
  m.source = cert_file == key_file ? cert_file : cert_file + " / " + key_file;
  return m;
}

result<void> check_tls_settings(const settings_map& s) {
  const auto& cert = s.text("tls_cert_file");
  const auto& key = s.text("tls_key_file");
  const auto& managed = s.text("tls_certificate");
  if (!cert.empty() && key.empty())
    return refused("tls_key_file", "tls_key_file: tls_cert_file is set but tls_key_file is not: give both, or neither");
  if (cert.empty() && !key.empty())
    return refused("tls_cert_file", "tls_cert_file: tls_key_file is set but tls_cert_file is not: give both, or neither");
  if (!cert.empty() && !managed.empty())
    return refused("tls_certificate",
                   "tls_certificate: set either tls_certificate or tls_cert_file and tls_key_file, not both");
  return {};
}

asio::awaitable<result<std::optional<tls_material>>> read_managed_certificate(store::store& st, const kek* key,
                                                                             certificate_ref ref,
                                                                             std::string known_fingerprint) {
  const std::string name = ref.project + "/" + ref.id;
  auto fail = [&](std::string why) { return refused("tls_certificate", fmt::format("tls_certificate {}: {}", name, why)); };
  auto project = co_await st.projects().find_by_name(ref.project);
  if (!project) {
    if (project.error().is(errc::not_found)) co_return fail(fmt::format("there is no project named {}", ref.project));
    co_return fail(project.error().message);
  }
  store::read_value_fn<store::catalog_object> get = [pid = project->id, id = ref.id](store::catalog_read& rd) {
    return rd.get_object(pid, store::kind_certificate, id);
  };
  auto obj = co_await store::read_value(st.catalog(), std::move(get));
  if (!obj) {
    if (obj.error().is(errc::not_found))
      co_return fail(fmt::format("project {} has no certificate {}", ref.project, ref.id));
    co_return fail(obj.error().message);
  }
  auto doc = catalog::parse_certificate_doc(*obj);
  if (!doc) co_return fail(fmt::format("it holds no certificate yet ({})", doc.error().message));
  if (!known_fingerprint.empty() && doc->fingerprint_sha256 == known_fingerprint)
    co_return std::optional<tls_material>{};
  if (!key) co_return fail("no key-encryption key to open its private key");
  auto key_pem = catalog::open_certificate_key(*key, *obj);
  if (!key_pem) co_return fail(fmt::format("its private key does not open: {}", key_pem.error().message));
  tls_material m;
  m.chain_pem = doc->cert_pem;
  if (!doc->chain_pem.empty()) {
    if (m.chain_pem.back() != '\n') m.chain_pem += '\n';
    m.chain_pem += doc->chain_pem;
  }
  m.key_pem = std::move(*key_pem);
  m.cert_setting = "tls_certificate";
  m.key_setting = "tls_certificate";
  m.source = "certificate " + name;
  co_return std::optional<tls_material>(std::move(m));
}

}  // namespace certfleet::api
