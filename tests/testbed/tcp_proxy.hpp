#pragma once
// A fault-injecting TCP proxy on 127.0.0.1, on its own thread and event loop:
//   forward      - pass bytes both ways;
//   reset_after  - forward, then reset both connections (RST) once the client sent K bytes;
//   blackhole    - accept and never answer (reads and drops what the client sends);
//   coalesce     - forward, but hold what the server sends until it has been quiet for 20 ms, then
//                  write it in one piece (a finished command's data, EOF, exit status and close
//                  arrive in one segment);
//   byte_split   - forward, writing what the server sends one byte per segment (every packet
//                  boundary, and every point inside one, becomes a separate read).
#include <cstdint>
#include <memory>

namespace testbed {

class tcp_proxy {
 public:
  enum class mode { forward, reset_after, blackhole, coalesce, byte_split };
  // `upstream_port` on 127.0.0.1; ignored for blackhole.
  tcp_proxy(mode m, std::uint16_t upstream_port, std::uint64_t reset_after_bytes = 0);
  ~tcp_proxy();
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  std::uint16_t port() const;
  std::uint64_t connections() const;  // accepted so far
  std::uint64_t resets() const;       // connections reset on purpose

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace testbed
