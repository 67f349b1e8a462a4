#include "certfleet/core/object_id.hpp"

#include <openssl/rand.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <ctime>
#include <stdexcept>

namespace certfleet {

namespace {

void random_fill(unsigned char* p, int n) {
  // OpenSSL's generator (seeded by the kernel, reseeded after fork) fails only on a broken
  // system, where no id could be unique.
  if (RAND_bytes(p, n) != 1) throw std::runtime_error("object id: RAND_bytes failed: no random bytes");
}

// The 5 random bytes of this process in the low 40 bits, the pid they were drawn for above them
// (pid_max is at most 2^22): a forked child sees another pid and draws its own, so parent and
// child never share a prefix. Two threads of a new child may both draw; either value is as good.
std::atomic<std::uint64_t> process_part{0};
constexpr int random_bits = 40;

std::uint64_t process_random() {
  const auto pid = static_cast<std::uint64_t>(::getpid());
  auto part = process_part.load(std::memory_order_relaxed);
  if ((part >> random_bits) == pid) return part & ((std::uint64_t{1} << random_bits) - 1);
  std::array<unsigned char, 5> bytes{};
  random_fill(bytes.data(), static_cast<int>(bytes.size()));
  std::uint64_t r = 0;
  for (auto b : bytes) r = (r << 8) | b;
  process_part.store((pid << random_bits) | r, std::memory_order_relaxed);
  return r;
}

std::uint32_t random_u32() {
  std::uint32_t v = 0;
  random_fill(reinterpret_cast<unsigned char*>(&v), sizeof v);
  return v;
}

}  // namespace

std::string new_object_id() {
  // MongoDB's ObjectId layout: seconds (4 bytes, big-endian, so ids sort by creation second),
  // the process's random bytes (5), a counter (3, big-endian).
  const auto seconds = static_cast<std::uint32_t>(std::time(nullptr));
  const auto random = process_random();
  // Starts at a random value, as MongoDB's drivers do; only its low 24 bits are used. A local
  // static: an id made during another file's static initialisation still gets a started counter.
  static std::atomic<std::uint32_t> counter{random_u32()};
  const auto count = counter.fetch_add(1, std::memory_order_relaxed) & 0xffffffu;
  std::array<unsigned char, 12> b{};
  for (int i = 0; i < 4; ++i) b[i] = static_cast<unsigned char>(seconds >> (24 - 8 * i));
  for (int i = 0; i < 5; ++i) b[4 + i] = static_cast<unsigned char>(random >> (32 - 8 * i));
  for (int i = 0; i < 3; ++i) b[9 + i] = static_cast<unsigned char>(count >> (16 - 8 * i));
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(24, '0');
  for (std::size_t i = 0; i < b.size(); ++i) {
    out[2 * i] = hex[b[i] >> 4];
    out[2 * i + 1] = hex[b[i] & 0xf];
  }
  return out;
}

bool is_object_id(std::string_view s) noexcept {
  if (s.size() != 24) return false;
  for (char c : s) {
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex) return false;
  }
  return true;
}

}  // namespace certfleet
