#pragma once
// Host-name resolution off the event loop: getaddrinfo on a thread pool, under a deadline (the
// loop waits on a timer; a late answer is dropped). The one resolver of the project: the HTTP and
// SMTP clients, the probes, SSH delivery and TLS validation, and the DNS-01 client
// (certfleet/acme/dns.hpp) resolve names with it.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "certfleet/net/error_class.hpp"

namespace certfleet::net {

struct resolve_result {
  std::vector<boost::asio::ip::tcp::endpoint> endpoints;  // every IPv4/IPv6 address, with `port`
  // none on success; network for "no such name", a resolver failure or the deadline.
  error_class cls = error_class::none;
  std::string error;  // "cannot resolve ns1.example.net: Name or service not known"
  bool ok() const { return cls == error_class::none; }
};

// `pool` nullptr: the resolver's own two-thread pool.
boost::asio::awaitable<resolve_result> resolve_host(std::string host, std::uint16_t port,
                                                    boost::asio::thread_pool* pool,
                                                    std::chrono::milliseconds timeout);

}  // namespace certfleet::net
