// DNS names, records and messages as values (dns_message.hpp): parsing and printing names, the
// names of numbers, record helpers, comparison, and building queries and UPDATEs. No bytes on
// the wire here: dns_message.cpp encodes and decodes these values.
#include "certfleet/acme/dns_message.hpp"

#include <algorithm>
#include <cstdio>

#include "dns_message_common.hpp"

namespace certfleet::acme::dns {

namespace detail {

char lower_ascii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text.substr(0, 300)) out += (c >= 0x20 && c < 0x7f && c != '"') ? c : '?';
  if (text.size() > 300) out += "…";
  return out + "\"";
}

}  // namespace detail

using namespace detail;

namespace {

constexpr std::size_t max_txt_value = 4096;  // far above any ACME value; keeps an UPDATE small

bool label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

}  // namespace

// --- names ---

result<domain_name> domain_name::parse(std::string_view text, std::string_view field_name) {
  const std::string field(field_name);
  auto bad = [&](std::string why) { return make_error(errc::invalid_argument, field + " " + why, field); };
  if (text.empty()) return bad("is empty");
  if (text == ".") return domain_name{};
  std::string_view t = text;
  if (t.back() == '.') t.remove_suffix(1);
  std::vector<std::string> labels;
  std::size_t wire = 1;
  while (true) {
    auto dot = t.find('.');
    auto label = t.substr(0, dot);
    if (label.empty()) return bad(quoted(text) + " has an empty label (two dots in a row, or a leading dot)");
    if (label.size() > max_label_length)
      return bad(quoted(text) + " has a label longer than 63 characters");
    if (label != "*" && !std::all_of(label.begin(), label.end(), label_char))
      return bad(quoted(text) + " is not a DNS name (labels of letters, digits, '-' and '_', or a lone '*')");
    wire += 1 + label.size();
    if (wire > max_name_length) return bad(quoted(text) + " is longer than 253 characters");
    labels.emplace_back(label);
    if (dot == std::string_view::npos) break;
    t.remove_prefix(dot + 1);
  }
  return domain_name(std::move(labels));
}

result<domain_name> domain_name::from_labels(std::vector<std::string> labels) {
  std::size_t wire = 1;
  for (const auto& l : labels) {
    if (l.empty() || l.size() > max_label_length)
      return make_error(errc::invalid_argument, "a label must be 1-63 bytes", "name");
    wire += 1 + l.size();
  }
  if (wire > max_name_length) return make_error(errc::invalid_argument, "a name must be at most 255 bytes", "name");
  return domain_name(std::move(labels));
}

std::size_t domain_name::wire_length() const noexcept {
  std::size_t n = 1;
  for (const auto& l : labels_) n += 1 + l.size();
  return n;
}

std::string domain_name::text() const {
  if (labels_.empty()) return ".";
  std::string out;
  for (std::size_t i = 0; i < labels_.size(); ++i) {
    if (i) out += '.';
    for (char c : labels_[i]) {
      auto u = static_cast<unsigned char>(c);
      if (label_char(c) || c == '*') {
        out += c;
      } else if (c == '.' || c == '\\') {
        out += '\\';
        out += c;
      } else {
        char buf[5];
        std::snprintf(buf, sizeof buf, "\\%03u", static_cast<unsigned>(u));
        out += buf;
      }
    }
  }
  return out;
}

std::string domain_name::fqdn() const { return labels_.empty() ? "." : text() + "."; }

domain_name domain_name::parent() const {
  if (labels_.empty()) return {};
  return domain_name(std::vector<std::string>(labels_.begin() + 1, labels_.end()));
}

namespace {
bool label_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower_ascii(x) == lower_ascii(y); });
}
}  // namespace

bool domain_name::is_at_or_below(const domain_name& ancestor) const noexcept {
  const auto& a = ancestor.labels_;
  if (a.size() > labels_.size()) return false;
  return std::equal(a.rbegin(), a.rend(), labels_.rbegin(), label_equal);
}

bytes domain_name::canonical_wire() const {
  bytes out;
  for (const auto& l : labels_) {
    out.push_back(static_cast<std::uint8_t>(l.size()));
    for (char c : l) out.push_back(static_cast<std::uint8_t>(lower_ascii(c)));
  }
  out.push_back(0);
  return out;
}

bool operator==(const domain_name& a, const domain_name& b) noexcept {
  return a.labels_.size() == b.labels_.size() &&
         std::equal(a.labels_.begin(), a.labels_.end(), b.labels_.begin(), label_equal);
}

// --- names of numbers ---

std::string rcode_name(std::uint16_t code) {
  switch (code) {
    case 0: return "NOERROR";
    case 1: return "FORMERR";
    case 2: return "SERVFAIL";
    case 3: return "NXDOMAIN";
    case 4: return "NOTIMP";
    case 5: return "REFUSED";
    case 6: return "YXDOMAIN";
    case 7: return "YXRRSET";
    case 8: return "NXRRSET";
    case 9: return "NOTAUTH";
    case 10: return "NOTZONE";
    case 16: return "BADSIG";
    case 17: return "BADKEY";
    case 18: return "BADTIME";
    case 19: return "BADMODE";
    case 20: return "BADNAME";
    case 21: return "BADALG";
    case 22: return "BADTRUNC";
    case 23: return "BADCOOKIE";
    default: return "RCODE" + std::to_string(code);
  }
}

std::string rr_type_name(rr_type t) {
  switch (t) {
    case rr_type::a: return "A";
    case rr_type::ns: return "NS";
    case rr_type::cname: return "CNAME";
    case rr_type::soa: return "SOA";
    case rr_type::txt: return "TXT";
    case rr_type::aaaa: return "AAAA";
    case rr_type::opt: return "OPT";
    case rr_type::tsig: return "TSIG";
    case rr_type::any: return "ANY";
  }
  return "TYPE" + std::to_string(static_cast<unsigned>(t));
}

// --- records ---

std::string txt_data::joined() const {
  std::string out;
  for (const auto& s : strings) out += s;
  return out;
}

txt_data txt_value(std::string_view value) {
  txt_data d;
  if (value.empty()) d.strings.emplace_back();
  for (std::size_t i = 0; i < value.size(); i += 255) d.strings.emplace_back(value.substr(i, 255));
  return d;
}

std::optional<std::string> address_text(const resource_record& rr) {
  if (const auto* a = std::get_if<a_data>(&rr.data)) {
    const auto& b = a->address;
    return std::to_string(b[0]) + "." + std::to_string(b[1]) + "." + std::to_string(b[2]) + "." + std::to_string(b[3]);
  }
  if (const auto* a6 = std::get_if<aaaa_data>(&rr.data)) {
    // RFC 5952 form: lower-case hex, the longest run (2+) of zero groups as "::".
    std::uint16_t g[8];
    for (int i = 0; i < 8; ++i) g[i] = static_cast<std::uint16_t>(a6->address[2 * i] << 8 | a6->address[2 * i + 1]);
    int best = -1, best_len = 0;
    for (int i = 0; i < 8;) {
      if (g[i] != 0) { ++i; continue; }
      int j = i;
      while (j < 8 && g[j] == 0) ++j;
      if (j - i > best_len && j - i >= 2) { best = i; best_len = j - i; }
      i = j;
    }
    std::string out;
    char buf[8];
    for (int i = 0; i < 8; ++i) {
      if (i == best) {
        out += "::";
        i += best_len - 1;
        continue;
      }
      if (!out.empty() && out.back() != ':') out += ':';
      std::snprintf(buf, sizeof buf, "%x", static_cast<unsigned>(g[i]));
      out += buf;
    }
    return out;
  }
  return std::nullopt;
}

namespace {
bool same_rdata(const rdata& a, const rdata& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const auto& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, raw_data>) return x.data == y.data;
        else if constexpr (std::is_same_v<T, a_data> || std::is_same_v<T, aaaa_data>) return x.address == y.address;
        else if constexpr (std::is_same_v<T, name_data>) return x.name.identical(y.name);
        else if constexpr (std::is_same_v<T, soa_data>)
          return x.mname.identical(y.mname) && x.rname.identical(y.rname) && x.serial == y.serial &&
                 x.refresh == y.refresh && x.retry == y.retry && x.expire == y.expire && x.minimum == y.minimum;
        else return x.strings == y.strings;
      },
      a);
}
bool same_rrs(const std::vector<resource_record>& a, const std::vector<resource_record>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const resource_record& x, const resource_record& y) {
    return x.owner.identical(y.owner) && x.type == y.type && x.cls == y.cls && x.ttl == y.ttl && same_rdata(x.data, y.data);
  });
}
}  // namespace

bool identical(const message& a, const message& b) {
  if (!(a.header == b.header)) return false;
  if (!std::equal(a.questions.begin(), a.questions.end(), b.questions.begin(), b.questions.end(),
                  [](const question& x, const question& y) {
                    return x.name.identical(y.name) && x.type == y.type && x.cls == y.cls;
                  }))
    return false;
  if (!same_rrs(a.answers, b.answers) || !same_rrs(a.authorities, b.authorities) || !same_rrs(a.additionals, b.additionals))
    return false;
  if (a.tsig.has_value() != b.tsig.has_value()) return false;
  if (!a.tsig) return true;
  const auto &x = *a.tsig, &y = *b.tsig;
  return x.key_name.identical(y.key_name) && x.algorithm.identical(y.algorithm) && x.time_signed == y.time_signed &&
         x.fudge == y.fudge && x.mac == y.mac && x.original_id == y.original_id && x.error == y.error &&
         x.other_data == y.other_data;
}

// --- messages ---

message make_query(std::uint16_t id, const domain_name& name, rr_type type, bool recursion_desired) {
  message m;
  m.header.id = id;
  m.header.op = opcode::query;
  m.header.rd = recursion_desired;
  m.questions.push_back({name, type, rr_class::in});
  return m;
}

update_builder::update_builder(std::uint16_t id, domain_name zone) {
  msg.header.id = id;
  msg.header.op = opcode::update;
  msg.questions.push_back({std::move(zone), rr_type::soa, rr_class::in});
}

namespace {
result<void> inside_zone(const domain_name& name, const domain_name& zone) {
  if (!name.is_at_or_below(zone))
    return make_error(errc::invalid_argument, "fqdn " + name.text() + " is not inside zone " + zone.text(), "fqdn");
  return {};
}
result<void> txt_value_ok(std::string_view value) {
  if (value.size() > max_txt_value)
    return make_error(errc::invalid_argument, "a TXT value longer than " + std::to_string(max_txt_value) + " bytes", "value");
  return {};
}
}  // namespace

result<void> update_builder::add_txt(const domain_name& name, std::string_view value, std::uint32_t ttl) {
  if (auto r = inside_zone(name, msg.questions.front().name); !r) return r;
  if (auto r = txt_value_ok(value); !r) return r;
  msg.authorities.push_back({name, rr_type::txt, rr_class::in, ttl, txt_value(value)});
  return {};
}

result<void> update_builder::delete_txt(const domain_name& name, std::string_view value) {
  if (auto r = inside_zone(name, msg.questions.front().name); !r) return r;
  if (auto r = txt_value_ok(value); !r) return r;
  msg.authorities.push_back({name, rr_type::txt, rr_class::none, 0, txt_value(value)});
  return {};
}

result<void> update_builder::delete_rrset(const domain_name& name, rr_type type) {
  if (auto r = inside_zone(name, msg.questions.front().name); !r) return r;
  msg.authorities.push_back({name, type, rr_class::any, 0, raw_data{}});
  return {};
}

}  // namespace certfleet::acme::dns
