// The DNS wire format (dns_message.hpp): encoding and decoding messages, and TSIG, which signs
// and verifies their bytes. Pure code; OpenSSL only for the HMAC and for wiping secrets. The
// names, records and builders the wire carries are dns_records.cpp's.
#include "certfleet/acme/dns_message.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <map>

#include "certfleet/core/base64.hpp"
#include "dns_message_common.hpp"

namespace certfleet::acme::dns {

using namespace detail;

namespace {

constexpr std::string_view message_field = "dns_message";
constexpr std::size_t header_size = 12;
constexpr std::size_t max_pointer_hops = 128;
constexpr std::size_t sha256_size = 32;

error bad_message(std::string what) { return make_error(errc::invalid_argument, std::move(what), std::string(message_field)); }

void put_u16(bytes& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}
void put_u32(bytes& out, std::uint32_t v) {
  put_u16(out, static_cast<std::uint16_t>(v >> 16));
  put_u16(out, static_cast<std::uint16_t>(v));
}
void put_u48(bytes& out, std::uint64_t v) {
  put_u16(out, static_cast<std::uint16_t>(v >> 32));
  put_u32(out, static_cast<std::uint32_t>(v));
}
void set_u16(bytes& out, std::size_t at, std::uint16_t v) {
  out[at] = static_cast<std::uint8_t>(v >> 8);
  out[at + 1] = static_cast<std::uint8_t>(v);
}
std::uint16_t get_u16(std::span<const std::uint8_t> in, std::size_t at) {
  return static_cast<std::uint16_t>(in[at] << 8 | in[at + 1]);
}

void put_name_uncompressed(bytes& out, const domain_name& n) {
  for (const auto& l : n.labels()) {
    out.push_back(static_cast<std::uint8_t>(l.size()));
    out.insert(out.end(), l.begin(), l.end());
  }
  out.push_back(0);
}

// --- encoding ---

class writer {
 public:
  bytes out;

  // RFC 1035 §4.1.4: a name, or its longest suffix already written, as a pointer. Suffixes are
  // matched byte-exact (case included), so decoding gives back exactly the labels written.
  void name(const domain_name& n, bool compress = true) {
    const auto& labels = n.labels();
    for (std::size_t i = 0; i < labels.size(); ++i) {
      std::string key = suffix_key(labels, i);
      if (compress) {
        if (auto it = offsets_.find(key); it != offsets_.end()) {
          put_u16(out, static_cast<std::uint16_t>(0xC000 | it->second));
          return;
        }
        if (out.size() < 0x4000) offsets_.emplace(std::move(key), static_cast<std::uint16_t>(out.size()));
      }
      out.push_back(static_cast<std::uint8_t>(labels[i].size()));
      out.insert(out.end(), labels[i].begin(), labels[i].end());
    }
    out.push_back(0);
  }

 private:
  static std::string suffix_key(const std::vector<std::string>& labels, std::size_t from) {
    std::string k;
    for (std::size_t i = from; i < labels.size(); ++i) {
      k += static_cast<char>(labels[i].size());
      k += labels[i];
    }
    return k;
  }
  std::map<std::string, std::uint16_t> offsets_;
};

result<void> put_rdata(writer& w, const resource_record& rr) {
  auto& out = w.out;
  std::size_t len_at = out.size();
  put_u16(out, 0);
  std::size_t start = out.size();
  result<void> r;
  std::visit(
      [&](const auto& d) {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, raw_data>) {
          out.insert(out.end(), d.data.begin(), d.data.end());
        } else if constexpr (std::is_same_v<T, a_data> || std::is_same_v<T, aaaa_data>) {
          out.insert(out.end(), d.address.begin(), d.address.end());
        } else if constexpr (std::is_same_v<T, name_data>) {
          w.name(d.name);
        } else if constexpr (std::is_same_v<T, soa_data>) {
          w.name(d.mname);
          w.name(d.rname);
          put_u32(out, d.serial);
          put_u32(out, d.refresh);
          put_u32(out, d.retry);
          put_u32(out, d.expire);
          put_u32(out, d.minimum);
        } else if constexpr (std::is_same_v<T, txt_data>) {
          if (d.strings.empty()) r = bad_message(rr.owner.text() + ": a TXT record needs at least one string");
          for (const auto& s : d.strings) {
            if (s.size() > 255) {
              r = bad_message(rr.owner.text() + ": a TXT string is longer than 255 bytes");
              return;
            }
            out.push_back(static_cast<std::uint8_t>(s.size()));
            out.insert(out.end(), s.begin(), s.end());
          }
        }
      },
      rr.data);
  if (!r) return r;
  std::size_t len = out.size() - start;
  if (len > 0xFFFF) return bad_message(rr.owner.text() + ": record data is longer than 65535 bytes");
  set_u16(out, len_at, static_cast<std::uint16_t>(len));
  return {};
}

result<void> put_rr(writer& w, const resource_record& rr) {
  w.name(rr.owner);
  put_u16(w.out, static_cast<std::uint16_t>(rr.type));
  put_u16(w.out, static_cast<std::uint16_t>(rr.cls));
  put_u32(w.out, rr.ttl);
  return put_rdata(w, rr);
}

bytes tsig_rdata(const tsig_record& t) {
  bytes out;
  put_name_uncompressed(out, t.algorithm);
  put_u48(out, t.time_signed);
  put_u16(out, t.fudge);
  put_u16(out, static_cast<std::uint16_t>(t.mac.size()));
  out.insert(out.end(), t.mac.begin(), t.mac.end());
  put_u16(out, t.original_id);
  put_u16(out, t.error);
  put_u16(out, static_cast<std::uint16_t>(t.other_data.size()));
  out.insert(out.end(), t.other_data.begin(), t.other_data.end());
  return out;
}

// The TSIG record as the last additional record (RFC 8945 §4.2: names uncompressed).
void put_tsig(bytes& out, const tsig_record& t) {
  put_name_uncompressed(out, t.key_name);
  put_u16(out, static_cast<std::uint16_t>(rr_type::tsig));
  put_u16(out, static_cast<std::uint16_t>(rr_class::any));
  put_u32(out, 0);
  auto rd = tsig_rdata(t);
  put_u16(out, static_cast<std::uint16_t>(rd.size()));
  out.insert(out.end(), rd.begin(), rd.end());
}

std::uint16_t flags_of(const header& h) {
  return static_cast<std::uint16_t>((h.qr ? 0x8000 : 0) | (static_cast<unsigned>(h.op) & 0xF) << 11 |
                                    (h.aa ? 0x0400 : 0) | (h.tc ? 0x0200 : 0) | (h.rd ? 0x0100 : 0) |
                                    (h.ra ? 0x0080 : 0) | (h.z ? 0x0040 : 0) | (h.ad ? 0x0020 : 0) |
                                    (h.cd ? 0x0010 : 0) | (h.rcode & 0xF));
}

// --- decoding ---

class reader {
 public:
  explicit reader(std::span<const std::uint8_t> in) : in_(in) {}

  std::size_t pos = 0;
  std::size_t size() const { return in_.size(); }
  bool has(std::size_t n) const { return pos <= in_.size() && in_.size() - pos >= n; }
  std::uint8_t u8() { return in_[pos++]; }
  std::uint16_t u16() {
    auto v = get_u16(in_, pos);
    pos += 2;
    return v;
  }
  std::uint32_t u32() {
    std::uint32_t hi = u16();
    return hi << 16 | u16();
  }
  std::uint64_t u48() {
    std::uint64_t hi = u16();
    return hi << 32 | u32();
  }

  // A name at `pos`, following compression pointers; `limit` is where the name's own bytes must
  // end (the end of an RR's data, or of the message). Pointers must point strictly backwards, so
  // a chain of them cannot loop; labels add length, so a loop through labels hits the 255 cap.
  result<domain_name> name(std::size_t limit, const std::string& where) {
    std::vector<std::string> labels;
    std::size_t p = pos, wire_len = 1, hops = 0;
    std::optional<std::size_t> resume;  // where reading goes on after the first pointer
    for (;;) {
      if (p >= in_.size()) return bad_message(where + ": name runs past the end of the message");
      if (!resume && p >= limit) return bad_message(where + ": name runs past its record");
      std::uint8_t len = in_[p];
      if ((len & 0xC0) == 0xC0) {
        if (p + 1 >= in_.size() || (!resume && p + 1 >= limit))
          return bad_message(where + ": compression pointer runs past the end");
        std::size_t target = static_cast<std::size_t>((len & 0x3F) << 8 | in_[p + 1]);
        if (target >= p) return bad_message(where + ": compression pointer does not point backwards");
        if (++hops > max_pointer_hops) return bad_message(where + ": too many compression pointers");
        if (!resume) resume = p + 2;
        p = target;
        continue;
      }
      if (len & 0xC0) return bad_message(where + ": unsupported label type");
      if (len == 0) {
        if (!resume) resume = p + 1;
        break;
      }
      if (p + 1 + len > in_.size() || (!resume && p + 1 + len > limit))
        return bad_message(where + ": label runs past the end");
      wire_len += 1 + len;
      if (wire_len > max_name_length) return bad_message(where + ": name is longer than 255 bytes");
      labels.emplace_back(reinterpret_cast<const char*>(in_.data() + p + 1), len);
      p += 1 + len;
    }
    pos = *resume;
    return domain_name::from_labels(std::move(labels));
  }

  std::span<const std::uint8_t> take(std::size_t n) {
    auto s = in_.subspan(pos, n);
    pos += n;
    return s;
  }

 private:
  std::span<const std::uint8_t> in_;
};

struct decoded {
  message msg;
  std::size_t tsig_offset = 0;  // where the TSIG record starts (0: none)
};

result<tsig_record> read_tsig(reader& r, domain_name owner, std::size_t end, const std::string& where) {
  tsig_record t;
  t.key_name = std::move(owner);
  auto alg = r.name(end, where + " algorithm");
  if (!alg) return std::move(alg).error();
  t.algorithm = std::move(*alg);
  if (!r.has(10) || r.pos + 10 > end) return bad_message(where + ": record data is too short");
  t.time_signed = r.u48();
  t.fudge = r.u16();
  std::size_t mac_len = r.u16();
  if (r.pos + mac_len + 6 > end) return bad_message(where + ": MAC runs past the record");
  auto mac = r.take(mac_len);
  t.mac.assign(mac.begin(), mac.end());
  t.original_id = r.u16();
  t.error = r.u16();
  std::size_t other_len = r.u16();
  if (r.pos + other_len != end) return bad_message(where + ": other data does not fill the record");
  auto other = r.take(other_len);
  t.other_data.assign(other.begin(), other.end());
  return t;
}

result<rdata> read_rdata(reader& r, rr_type type, std::size_t len, const std::string& where) {
  const std::size_t end = r.pos + len;
  auto exact = [&](const char* what) -> result<void> {
    if (r.pos != end) return bad_message(where + ": " + what + " data does not fill its length");
    return {};
  };
  if (len == 0) return rdata{raw_data{}};
  switch (type) {
    case rr_type::a: {
      if (len != 4) return bad_message(where + ": A data is not 4 bytes");
      a_data d;
      auto s = r.take(4);
      std::copy(s.begin(), s.end(), d.address.begin());
      return rdata{d};
    }
    case rr_type::aaaa: {
      if (len != 16) return bad_message(where + ": AAAA data is not 16 bytes");
      aaaa_data d;
      auto s = r.take(16);
      std::copy(s.begin(), s.end(), d.address.begin());
      return rdata{d};
    }
    case rr_type::ns:
    case rr_type::cname: {
      auto n = r.name(end, where);
      if (!n) return std::move(n).error();
      if (auto e = exact(type == rr_type::ns ? "NS" : "CNAME"); !e) return std::move(e).error();
      return rdata{name_data{std::move(*n)}};
    }
    case rr_type::soa: {
      soa_data d;
      auto m = r.name(end, where + " SOA mname");
      if (!m) return std::move(m).error();
      auto rn = r.name(end, where + " SOA rname");
      if (!rn) return std::move(rn).error();
      if (r.pos + 20 != end) return bad_message(where + ": SOA data does not fill its length");
      d.mname = std::move(*m);
      d.rname = std::move(*rn);
      d.serial = r.u32();
      d.refresh = r.u32();
      d.retry = r.u32();
      d.expire = r.u32();
      d.minimum = r.u32();
      return rdata{std::move(d)};
    }
    case rr_type::txt: {
      txt_data d;
      while (r.pos < end) {
        std::size_t n = r.u8();
        if (r.pos + n > end) return bad_message(where + ": TXT string runs past its record");
        auto s = r.take(n);
        d.strings.emplace_back(reinterpret_cast<const char*>(s.data()), s.size());
      }
      return rdata{std::move(d)};
    }
    default: {
      auto s = r.take(len);
      return rdata{raw_data{bytes(s.begin(), s.end())}};
    }
  }
}

result<decoded> decode_with_offsets(std::span<const std::uint8_t> wire) {
  if (wire.size() > max_message_size) return bad_message("message is longer than 65535 bytes");
  if (wire.size() < header_size) return bad_message("message is shorter than a DNS header (12 bytes)");
  decoded out;
  reader r(wire);
  auto& h = out.msg.header;
  h.id = r.u16();
  std::uint16_t flags = r.u16();
  h.qr = flags & 0x8000;
  h.op = static_cast<opcode>((flags >> 11) & 0xF);
  h.aa = flags & 0x0400;
  h.tc = flags & 0x0200;
  h.rd = flags & 0x0100;
  h.ra = flags & 0x0080;
  h.z = flags & 0x0040;
  h.ad = flags & 0x0020;
  h.cd = flags & 0x0010;
  h.rcode = static_cast<std::uint8_t>(flags & 0xF);
  std::size_t qd = r.u16(), an = r.u16(), ns = r.u16(), ar = r.u16();

  // Counts come from the peer: the loops below stop at the first record that does not fit, and
  // nothing is reserved from them.
  for (std::size_t i = 0; i < qd; ++i) {
    std::string where = "question " + std::to_string(i + 1);
    auto n = r.name(wire.size(), where);
    if (!n) return std::move(n).error();
    if (!r.has(4)) return bad_message(where + ": type and class run past the end");
    question q;
    q.name = std::move(*n);
    q.type = static_cast<rr_type>(r.u16());
    q.cls = static_cast<rr_class>(r.u16());
    out.msg.questions.push_back(std::move(q));
  }
  struct section {
    std::size_t count;
    std::vector<resource_record>* into;
    const char* name;
  };
  const section sections[] = {{an, &out.msg.answers, "answer"},
                              {ns, &out.msg.authorities, "authority"},
                              {ar, &out.msg.additionals, "additional"}};
  for (const auto& s : sections) {
    for (std::size_t i = 0; i < s.count; ++i) {
      std::string where = std::string(s.name) + " " + std::to_string(i + 1);
      std::size_t rr_start = r.pos;
      auto owner = r.name(wire.size(), where);
      if (!owner) return std::move(owner).error();
      if (!r.has(10)) return bad_message(where + ": record header runs past the end");
      resource_record rr;
      rr.owner = std::move(*owner);
      rr.type = static_cast<rr_type>(r.u16());
      rr.cls = static_cast<rr_class>(r.u16());
      rr.ttl = r.u32();
      std::size_t len = r.u16();
      if (!r.has(len)) return bad_message(where + ": record data runs past the end");
      if (rr.type == rr_type::tsig) {
        // RFC 8945 §5.2: the TSIG record is the last one, class ANY, TTL 0.
        if (s.into != &out.msg.additionals || i + 1 != s.count)
          return bad_message(where + ": a TSIG record that is not the last record");
        if (rr.cls != rr_class::any || rr.ttl != 0) return bad_message(where + ": TSIG record with a class other than ANY or a TTL");
        auto t = read_tsig(r, std::move(rr.owner), r.pos + len, where + " (TSIG)");
        if (!t) return std::move(t).error();
        out.msg.tsig = std::move(*t);
        out.tsig_offset = rr_start;
        continue;
      }
      auto d = read_rdata(r, rr.type, len, where + " (" + rr_type_name(rr.type) + ")");
      if (!d) return std::move(d).error();
      rr.data = std::move(*d);
      s.into->push_back(std::move(rr));
    }
  }
  if (r.pos != wire.size())
    return bad_message(std::to_string(wire.size() - r.pos) + " bytes after the last record");
  return out;
}

// --- TSIG ---

// RFC 8945 §4.3.3: the TSIG variables in canonical form.
bytes tsig_variables(const domain_name& key_name, const domain_name& algorithm, std::uint64_t time_signed,
                     std::uint16_t fudge, std::uint16_t error, std::span<const std::uint8_t> other) {
  bytes v = key_name.canonical_wire();
  put_u16(v, static_cast<std::uint16_t>(rr_class::any));
  put_u32(v, 0);
  auto alg = algorithm.canonical_wire();
  v.insert(v.end(), alg.begin(), alg.end());
  put_u48(v, time_signed);
  put_u16(v, fudge);
  put_u16(v, error);
  put_u16(v, static_cast<std::uint16_t>(other.size()));
  v.insert(v.end(), other.begin(), other.end());
  return v;
}

bytes hmac_sha256(const std::string& key, const bytes& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  static const unsigned char empty = 0;
  const void* k = key.empty() ? &empty : static_cast<const void*>(key.data());
  if (!HMAC(EVP_sha256(), k, static_cast<int>(key.size()), data.data(), data.size(), md, &len)) return {};
  bytes out(md, md + len);
  OPENSSL_cleanse(md, sizeof md);
  return out;
}

// The MAC input: [request MAC, as size + bytes] · the message with `id` and ARCOUNT as given ·
// the variables.
bytes mac_input(std::span<const std::uint8_t> request_mac, std::span<const std::uint8_t> message, std::uint16_t id,
                std::uint16_t arcount, const bytes& variables) {
  bytes in;
  in.reserve(request_mac.size() + 2 + message.size() + variables.size());
  if (!request_mac.empty()) {
    put_u16(in, static_cast<std::uint16_t>(request_mac.size()));
    in.insert(in.end(), request_mac.begin(), request_mac.end());
  }
  std::size_t at = in.size();
  in.insert(in.end(), message.begin(), message.end());
  set_u16(in, at, id);
  set_u16(in, at + 10, arcount);
  in.insert(in.end(), variables.begin(), variables.end());
  return in;
}

std::string rcode_or_number(std::uint16_t code) { return rcode_name(code); }

}  // namespace

// --- messages ---

result<message> decode(std::span<const std::uint8_t> wire) {
  auto d = decode_with_offsets(wire);
  if (!d) return std::move(d).error();
  return std::move(d->msg);
}

result<bytes> encode(const message& m) {
  auto too_many = [](const char* what) { return bad_message(std::string("more than 65535 ") + what); };
  if (m.questions.size() > 0xFFFF) return too_many("questions");
  if (m.answers.size() > 0xFFFF) return too_many("answers");
  if (m.authorities.size() > 0xFFFF) return too_many("authority records");
  if (m.additionals.size() + (m.tsig ? 1 : 0) > 0xFFFF) return too_many("additional records");
  writer w;
  put_u16(w.out, m.header.id);
  put_u16(w.out, flags_of(m.header));
  put_u16(w.out, static_cast<std::uint16_t>(m.questions.size()));
  put_u16(w.out, static_cast<std::uint16_t>(m.answers.size()));
  put_u16(w.out, static_cast<std::uint16_t>(m.authorities.size()));
  put_u16(w.out, static_cast<std::uint16_t>(m.additionals.size() + (m.tsig ? 1 : 0)));
  for (const auto& q : m.questions) {
    w.name(q.name);
    put_u16(w.out, static_cast<std::uint16_t>(q.type));
    put_u16(w.out, static_cast<std::uint16_t>(q.cls));
  }
  for (const auto* section : {&m.answers, &m.authorities, &m.additionals})
    for (const auto& rr : *section) {
      if (auto r = put_rr(w, rr); !r) return std::move(r).error();
      if (w.out.size() > max_message_size) return bad_message("message is longer than 65535 bytes");
    }
  if (m.tsig) put_tsig(w.out, *m.tsig);
  if (w.out.size() > max_message_size) return bad_message("message is longer than 65535 bytes");
  return std::move(w.out);
}

// --- TSIG ---

tsig_key::~tsig_key() { OPENSSL_cleanse(secret.data(), secret.size()); }

const domain_name& hmac_sha256_name() {
  static const domain_name n = *domain_name::parse("hmac-sha256.");
  return n;
}

result<tsig_key> make_tsig_key(std::string_view name, std::string_view algorithm, std::string_view secret_base64) {
  auto n = domain_name::parse(name, "tsig_key_name");
  if (!n) return std::move(n).error();
  if (n->is_root()) return make_error(errc::invalid_argument, "tsig_key_name must not be the root", "tsig_key_name");
  std::string alg;
  for (char c : algorithm) alg += lower_ascii(c);
  if (!alg.empty() && alg.back() == '.') alg.pop_back();
  if (alg != "hmac-sha256")
    return make_error(errc::invalid_argument,
                      "tsig_algorithm must be hmac-sha256 (the one TSIG algorithm certfleet supports); got " +
                          quoted(algorithm.substr(0, 40)),
                      "tsig_algorithm");
  auto secret = base64_decode(secret_base64);
  if (!secret || secret->empty())
    return make_error(errc::invalid_argument,
                      "tsig_secret is not valid base64 (paste it exactly as tsig-keygen or keymgr printed it)",
                      "tsig_secret");
  return tsig_key(std::move(*n), std::move(*secret));
}

result<signed_message> tsig_sign(std::span<const std::uint8_t> wire, const tsig_key& key, std::uint64_t time_signed,
                                 std::uint16_t fudge) {
  if (wire.size() < header_size) return bad_message("message is shorter than a DNS header (12 bytes)");
  if (time_signed >> 48) return make_error(errc::invalid_argument, "time signed does not fit in 48 bits", "time_signed");
  const std::uint16_t id = get_u16(wire, 0);
  const std::uint16_t arcount = get_u16(wire, 10);
  if (arcount == 0xFFFF) return bad_message("no room for a TSIG record (65535 additional records)");
  auto vars = tsig_variables(key.name, hmac_sha256_name(), time_signed, fudge, 0, {});
  auto input = mac_input({}, wire, id, arcount, vars);
  tsig_record t;
  t.key_name = key.name;
  t.algorithm = hmac_sha256_name();
  t.time_signed = time_signed;
  t.fudge = fudge;
  t.mac = hmac_sha256(key.secret, input);
  if (t.mac.size() != sha256_size) return make_error(errc::invalid_argument, "HMAC-SHA256 failed", "tsig");
  t.original_id = id;
  signed_message out;
  out.wire.assign(wire.begin(), wire.end());
  set_u16(out.wire, 10, static_cast<std::uint16_t>(arcount + 1));
  put_tsig(out.wire, t);
  if (out.wire.size() > max_message_size) return bad_message("signed message is longer than 65535 bytes");
  out.mac = std::move(t.mac);
  return out;
}

tsig_verdict tsig_verify(std::span<const std::uint8_t> wire, const tsig_key& key, std::span<const std::uint8_t> request_mac,
                         std::uint64_t now) {
  using st = tsig_verdict::status;
  auto d = decode_with_offsets(wire);
  if (!d) return {st::malformed, 0, d.error().message};
  if (!d->msg.tsig) return {st::unsigned_message, 0, "the message carries no TSIG record"};
  const auto& t = *d->msg.tsig;
  if (t.error != 0)
    return {st::server_error, t.error, "the TSIG record reports error " + rcode_or_number(t.error)};
  if (!(t.key_name == key.name))
    return {st::wrong_key, 0, "signed with key '" + t.key_name.fqdn() + "', not '" + key.name.fqdn() + "'"};
  if (!(t.algorithm == hmac_sha256_name()))
    return {st::wrong_key, 0, "signed with algorithm " + t.algorithm.fqdn() + ", not hmac-sha256."};
  if (t.mac.size() != sha256_size)
    return {st::bad_mac, 0, "the MAC is " + std::to_string(t.mac.size()) + " bytes, not 32 (truncated MACs are not accepted)"};
  const std::uint16_t arcount = get_u16(wire, 10);
  auto vars = tsig_variables(t.key_name, t.algorithm, t.time_signed, t.fudge, t.error, t.other_data);
  auto input = mac_input(request_mac, wire.first(d->tsig_offset), t.original_id, static_cast<std::uint16_t>(arcount - 1), vars);
  auto expected = hmac_sha256(key.secret, input);
  if (expected.size() != sha256_size || CRYPTO_memcmp(expected.data(), t.mac.data(), sha256_size) != 0)
    return {st::bad_mac, 0, "the MAC does not match (another secret, or the message was altered)"};
  const std::uint64_t lo = t.time_signed > t.fudge ? t.time_signed - t.fudge : 0;
  if (now < lo || now > t.time_signed + t.fudge)
    return {st::bad_time, 0,
            "signed at " + std::to_string(t.time_signed) + " (unix seconds), more than " + std::to_string(t.fudge) +
                " s from our clock's " + std::to_string(now)};
  return {st::ok, 0, {}};
}

}  // namespace certfleet::acme::dns
