#pragma once
// ALPN (RFC 7301): the protocol list a TLS client offers, as the wire carries it (each name one
// length byte then that many bytes). The listener answers "http/1.1" when offered (it speaks
// nothing else). Pure: the bytes come from the client's ClientHello, so it is fuzzed
// (fuzz/fuzz_api_alpn.cpp).
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace certfleet::api {

// The offset of `protocol`'s first byte in `list`, when the list offers it; nullopt when it does
// not, or the list ends in the middle of a name (the rest is not read).
std::optional<std::size_t> find_alpn_protocol(std::span<const unsigned char> list, std::string_view protocol);

}  // namespace certfleet::api
