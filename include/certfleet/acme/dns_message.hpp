#pragma once
// The DNS wire format that DNS-01 needs (RFC 1035, RFC 2136 UPDATE, RFC 8945 TSIG), as pure code:
// bytes in, values out, no I/O, no C library in this header. Written here rather than taken from
// a C library (ldns, libknot) so the one parser of answers a DNS server sends is ours to fuzz
// (fuzz/fuzz_dns_message.cpp) and every failure is a value naming what was wrong.
//
// Scope: names (with compression on decode and on encode), the header, questions (the zone
// section of an UPDATE), resource records with typed data for A, AAAA, NS, CNAME, SOA and TXT and
// raw data for every other type, queries, UPDATE messages, and TSIG with hmac-sha256 (sign a
// request; verify an answer chained to the request's MAC, or a request on its own).
// Decoding is strict about structure (every count, length and pointer checked against the
// buffer; compression pointers must point backwards, so they cannot loop) and never trusts a
// count to size an allocation.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "certfleet/core/error.hpp"

namespace certfleet::acme::dns {

using bytes = std::vector<std::uint8_t>;

inline constexpr std::size_t max_label_length = 63;
inline constexpr std::size_t max_name_length = 255;  // wire form, with the root label
inline constexpr std::size_t max_message_size = 65535;
inline constexpr std::size_t max_udp_answer = 512;  // no EDNS: what a server may send over UDP

// A domain name as its labels, most specific first ("_acme-challenge", "example", "test"); the
// root name has no labels. Labels keep their bytes as sent; comparisons ignore ASCII case.
class domain_name {
 public:
  domain_name() = default;  // the root
  // Text as an operator writes it: "example.test" or "example.test." (the same name), "." for
  // the root. Labels of letters, digits, '-' and '_', or a lone '*'; each 1-63 characters, the
  // whole name at most 255 bytes on the wire. Errors are invalid_argument naming `field`.
  static result<domain_name> parse(std::string_view text, std::string_view field = "name");
  // From wire labels (a decoder's output or a test's): checks only the lengths.
  static result<domain_name> from_labels(std::vector<std::string> labels);

  const std::vector<std::string>& labels() const noexcept { return labels_; }
  bool is_root() const noexcept { return labels_.empty(); }
  std::size_t wire_length() const noexcept;  // with the root label's zero byte
  // "_acme-challenge.example.test" (no trailing dot; "." for the root): how messages and the
  // API name it. Bytes outside [A-Za-z0-9_*-] are escaped as dig does ("\." "\\" "\032").
  std::string text() const;
  // The same with the trailing dot: "example.test.".
  std::string fqdn() const;
  // The name without its first label; the root's parent is the root.
  domain_name parent() const;
  // `this` equals `ancestor` or lies below it (every name is below the root).
  bool is_at_or_below(const domain_name& ancestor) const noexcept;
  // Lower-case wire form, uncompressed: TSIG's canonical form of names (RFC 8945 §4.3.3).
  bytes canonical_wire() const;

  // Case-insensitive (ASCII) equality, as DNS compares names.
  friend bool operator==(const domain_name& a, const domain_name& b) noexcept;
  // Byte-exact equality (case included): what a decode/encode round trip must preserve.
  bool identical(const domain_name& other) const noexcept { return labels_ == other.labels_; }

 private:
  explicit domain_name(std::vector<std::string> labels) : labels_(std::move(labels)) {}
  std::vector<std::string> labels_;
};

// Types and classes are plain numbers on the wire; these enumerators name the ones certfleet
// uses, and any other value travels unchanged (the enums have a fixed underlying type).
enum class rr_type : std::uint16_t {
  a = 1, ns = 2, cname = 5, soa = 6, txt = 16, aaaa = 28, opt = 41, tsig = 250, any = 255,
};
enum class rr_class : std::uint16_t { in = 1, none = 254, any = 255 };
enum class opcode : std::uint8_t { query = 0, update = 5 };
// Header RCODEs (4 bits) and, from 16 on, the TSIG error field's values (RFC 8945 §4.3.3).
enum class rcode : std::uint16_t {
  noerror = 0, formerr = 1, servfail = 2, nxdomain = 3, notimp = 4, refused = 5,
  yxdomain = 6, yxrrset = 7, nxrrset = 8, notauth = 9, notzone = 10,
  badsig = 16, badkey = 17, badtime = 18, badtrunc = 22,
};
// "NOERROR", "NOTAUTH", "BADKEY", …; "RCODE42" for a number without a name.
std::string rcode_name(std::uint16_t code);
// "TXT", "SOA", …; "TYPE65" (RFC 3597 form) for a number without a name.
std::string rr_type_name(rr_type t);

struct header {
  std::uint16_t id = 0;
  bool qr = false;  // a response
  opcode op = opcode::query;
  bool aa = false, tc = false, rd = false, ra = false, z = false, ad = false, cd = false;
  std::uint8_t rcode = 0;  // 4 bits

  bool operator==(const header&) const = default;
};

// A question; in an UPDATE, the zone section's one entry (type SOA, the zone's name).
struct question {
  domain_name name;
  rr_type type = rr_type::a;
  rr_class cls = rr_class::in;
};

struct soa_data {
  domain_name mname, rname;
  std::uint32_t serial = 0, refresh = 0, retry = 0, expire = 0, minimum = 0;
};
struct a_data {
  std::array<std::uint8_t, 4> address{};
};
struct aaaa_data {
  std::array<std::uint8_t, 16> address{};
};
// NS and CNAME: one name.
struct name_data {
  domain_name name;
};
// TXT: one or more character-strings, each at most 255 bytes (RFC 1035 §3.3.14).
struct txt_data {
  std::vector<std::string> strings;
  // The strings joined: the record's value as ACME and most tools read it.
  std::string joined() const;
};
// Any other type, and any record with empty RDATA (an UPDATE's delete-RRset, class ANY).
struct raw_data {
  bytes data;
};
using rdata = std::variant<raw_data, a_data, aaaa_data, name_data, soa_data, txt_data>;

struct resource_record {
  domain_name owner;
  rr_type type = rr_type::a;
  rr_class cls = rr_class::in;
  std::uint32_t ttl = 0;
  rdata data;
};

// TXT data for one value: split into 255-byte character-strings (a 43-byte ACME value is one).
txt_data txt_value(std::string_view value);
// The address of an A or AAAA record as text ("127.0.0.1", "::1"); nullopt for other types.
std::optional<std::string> address_text(const resource_record& rr);

// The TSIG pseudo-record (RFC 8945 §4.2) as it was decoded; its owner is the key name.
struct tsig_record {
  domain_name key_name;
  domain_name algorithm;
  std::uint64_t time_signed = 0;  // 48 bits, seconds since the epoch
  std::uint16_t fudge = 0;
  bytes mac;
  std::uint16_t original_id = 0;
  std::uint16_t error = 0;  // rcode::badsig … as a number
  bytes other_data;         // BADTIME answers carry the server's time here (6 bytes)
};

struct message {
  dns::header header;
  std::vector<question> questions;  // UPDATE: the zone section
  std::vector<resource_record> answers;     // UPDATE: prerequisites
  std::vector<resource_record> authorities; // UPDATE: the update section
  std::vector<resource_record> additionals; // without the TSIG record
  std::optional<tsig_record> tsig;          // the last additional record, when it is a TSIG
};

// Structural equality, names compared byte-exact: decode(encode(m)) must give m back.
bool identical(const message& a, const message& b);

// Errors from decode are invalid_argument with a message saying where ("answer 2: rdata of
// SOA runs past its length") and field "dns_message".
result<message> decode(std::span<const std::uint8_t> wire);
// Names are compressed (RFC 1035 §4.1.4) except inside TSIG, whose names RFC 8945 forbids to
// compress; the TSIG record, when set, goes last. Errors (a TXT string over 255 bytes, a message
// over 65535 bytes) are invalid_argument.
result<bytes> encode(const message& m);

// A query for one name and type: RD as given (false for the authoritative checks of DNS-01).
message make_query(std::uint16_t id, const domain_name& name, rr_type type, bool recursion_desired = false);

// RFC 2136 UPDATE builders. The zone section names `zone` (type SOA); `name` must be at or below
// it (the server answers NOTZONE otherwise: checked here first, invalid_argument naming "fqdn").
struct update_builder {
  explicit update_builder(std::uint16_t id, domain_name zone);
  // Add one TXT RR (§2.5.1).
  result<void> add_txt(const domain_name& name, std::string_view value, std::uint32_t ttl);
  // Delete exactly one TXT RR, the one with this value (§2.5.4: class NONE, TTL 0): other values
  // at the name stay.
  result<void> delete_txt(const domain_name& name, std::string_view value);
  // Delete the whole RRset of `type` at `name` (§2.5.2: class ANY, TTL 0, no RDATA).
  result<void> delete_rrset(const domain_name& name, rr_type type);
  message msg;
};

// --- TSIG (RFC 8945) with hmac-sha256 -------------------------------------------------------

inline constexpr std::uint16_t default_tsig_fudge = 300;

// A TSIG key: its name (as the server's config spells it; case does not matter), algorithm
// hmac-sha256 (the one certfleet supports), and the raw secret bytes. The secret appears in no
// message, error or log line.
struct tsig_key {
  domain_name name;
  std::string secret;

  tsig_key() = default;
  tsig_key(domain_name n, std::string s) : name(std::move(n)), secret(std::move(s)) {}
  tsig_key(const tsig_key&) = default;
  tsig_key(tsig_key&&) noexcept = default;
  tsig_key& operator=(const tsig_key&) = default;
  tsig_key& operator=(tsig_key&&) noexcept = default;
  ~tsig_key();  // wipes the secret
};
// "hmac-sha256." as a name.
const domain_name& hmac_sha256_name();
// The provider's fields: the key name ("certfleet-key" or "certfleet-key."), the algorithm
// ("hmac-sha256", with or without the trailing dot, any case) and the secret in base64 (what
// `keymgr -t`, `tsig-keygen` and `knotc conf-read key` print). Errors are invalid_argument naming
// the field: tsig_key_name, tsig_algorithm or tsig_secret (never quoting the secret).
result<tsig_key> make_tsig_key(std::string_view name, std::string_view algorithm, std::string_view secret_base64);

// Signs an encoded message: appends the TSIG record (ARCOUNT + 1) with `time_signed` (seconds
// since the epoch), `fudge`, error 0 and the message's own id as the original id. Returns the
// MAC, which the answer's verification chains to.
struct signed_message {
  bytes wire;
  bytes mac;
};
result<signed_message> tsig_sign(std::span<const std::uint8_t> wire, const tsig_key& key, std::uint64_t time_signed,
                                 std::uint16_t fudge = default_tsig_fudge);

// What verifying a message's TSIG found. `ok` only when the record is there, names our key and
// algorithm, its MAC is right (over the request MAC when one is given, then the message with
// the original id and without the TSIG record, then the TSIG variables) and its time is within
// fudge of `now`.
struct tsig_verdict {
  enum class status {
    ok,
    unsigned_message,  // no TSIG record
    server_error,      // the record's error field is set (BADKEY/BADSIG/BADTIME…): the server
                       // refused OUR signature; `error` says which
    wrong_key,         // signed with another key name or algorithm
    bad_mac,           // the MAC does not match (wrong secret, altered message) or is truncated
    bad_time,          // the signature is valid but its time is outside fudge of `now`
    malformed,         // the message does not decode
  };
  status st = status::malformed;
  std::uint16_t error = 0;  // the record's error field, for server_error
  std::string detail;       // for a log line / error text; never carries the secret
  bool ok() const { return st == status::ok; }
};
// `request_mac`: the MAC of the request this answers (empty to verify a request on its own).
tsig_verdict tsig_verify(std::span<const std::uint8_t> wire, const tsig_key& key,
                         std::span<const std::uint8_t> request_mac, std::uint64_t now);

}  // namespace certfleet::acme::dns
