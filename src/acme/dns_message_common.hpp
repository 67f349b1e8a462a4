#pragma once
// What dns_message.cpp (the wire format, TSIG) and dns_records.cpp (names, records, building
// messages) share, private to src/acme: names compare and fold case alike everywhere, and a name
// an operator typed is quoted alike in every error.
#include <string>
#include <string_view>

namespace certfleet::acme::dns::detail {

char lower_ascii(char c);

// A name an operator typed, for an error message: printable ASCII only, bounded.
std::string quoted(std::string_view text);

}  // namespace certfleet::acme::dns::detail
