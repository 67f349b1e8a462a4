#include "certfleet/api/tokens.hpp"

#include "certfleet/core/json.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <stdexcept>

namespace certfleet::api {

namespace {
constexpr char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr std::size_t token_bytes = 32;
constexpr std::size_t token_chars = 3 + 43;  // "cf_" + unpadded base64url of 32 bytes
}  // namespace

std::string generate_token_text() {
  std::array<unsigned char, token_bytes> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1)
    throw std::runtime_error("the system random generator failed");  // a broken host: a bug to surface
  std::string out = "cf_";
  std::uint32_t acc = 0;
  int bits = 0;
  for (auto b : raw) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(b64url[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(b64url[(acc << (6 - bits)) & 0x3f]);
  return out;
}

std::string hash_token(std::string_view text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(text.data(), text.size(), md, &n, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  static constexpr char hexd[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (unsigned i = 0; i < n; ++i) {
    out.push_back(hexd[md[i] >> 4]);
    out.push_back(hexd[md[i] & 0xf]);
  }
  return out;
}

bool looks_like_token(std::string_view text) noexcept {
  if (text.size() != token_chars || text.substr(0, 3) != "cf_") return false;
  for (char c : text.substr(3))
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return false;
  return true;
}

store::task<std::optional<issued_token>> issue_token(store::auth_store& auth, std::string project_id, store::role r,
                                                     bool system, std::string name, std::string created_by,
                                                     const clock_source& clock, bool first_only,
                                                     time_ms expires_at) {
  auto text = generate_token_text();
  store::new_token t{std::move(project_id), r, system, std::move(name), std::move(created_by), hash_token(text),
                     expires_at};
  if (first_only) {
    auto rec = co_await auth.create_first_token(std::move(t), clock.now_ms());
    if (!rec) co_return std::move(rec).error();
    if (!*rec) co_return std::optional<issued_token>{};
    co_return std::optional<issued_token>(issued_token{std::move(text), std::move(**rec)});
  }
  auto rec = co_await auth.create_token(std::move(t), clock.now_ms());
  if (!rec) co_return std::move(rec).error();
  co_return std::optional<issued_token>(issued_token{std::move(text), std::move(*rec)});
}

std::string_view token_status(const store::token_record& t, time_ms now) noexcept {
  if (t.revoked_at) return "revoked";
  if (t.expires_at && t.expires_at <= now) return "expired";
  return "active";
}

boost::json::object token_answer(const store::token_record& t, time_ms now) {
  return boost::json::object{{"id", t.id},
                             {"project_id", t.project_id},
                             {"name", t.name},
                             {"role", std::string(store::to_string(t.token_role))},
                             {"system", t.system},
                             {"status", std::string(token_status(t, now))},
                             {"created_by", t.created_by},
                             {"created_at", json::time_value(t.created_at)},
                             {"expires_at", json::time_value(t.expires_at)},
                             {"last_used_at", json::time_value(t.last_used_at)},
                             {"revoked_at", json::time_value(t.revoked_at)}};
}

}  // namespace certfleet::api
