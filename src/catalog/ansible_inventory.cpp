// Ansible INI inventories (ansible_inventory.hpp): one pass over the lines records groups, hosts
// and variables as written; then the group graph is checked (undefined groups, cycles) and each
// wanted host's memberships and variables are merged the way Ansible merges them. Every step is
// linear in the input or bounded by the caps, so a hostile file costs an error, not the machine.
#include "certfleet/catalog/ansible_inventory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace certfleet::catalog {

std::string_view inventory_host::var(std::string_view key) const {
  auto it = std::lower_bound(vars.begin(), vars.end(), key,
                             [](const auto& kv, std::string_view k) { return kv.first < k; });
  return it != vars.end() && it->first == key ? std::string_view(it->second) : std::string_view();
}

namespace {

using kv_list = std::vector<std::pair<std::string, std::string>>;
constexpr std::uint32_t all_group = 0, ungrouped_group = 1;
// Host mentions, memberships walked and sorted, variables merged: a few KB can name a long chain
// of groups that every host inherits, which the host and byte caps alone would let through.
constexpr std::size_t max_work = 32'000'000;
constexpr std::string_view range_letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

struct group_rec {
  std::string name;
  bool declared = false;       // by [name] or [name:children]: [name:vars] alone is not enough (Ansible)
  std::size_t first_use = 0;   // while undeclared: the line of its first [name:vars] or child mention
  std::string first_parent;    // the [parent:children] of that mention, empty for [name:vars]
  kv_list vars;                // file order: the later wins
  long priority = 1;           // ansible_group_priority
  std::vector<std::pair<std::uint32_t, std::size_t>> children;  // (group, line naming it)
  std::vector<std::uint32_t> parents;
  int depth = 1;
};

struct host_rec {
  std::string name;
  std::size_t line = 0;
  std::vector<std::uint32_t> groups;     // direct, one entry a mention
  std::vector<std::uint32_t> var_lines;  // indexes into line_vars_, file order
};

struct host_range {
  std::size_t open = 0, close = 0;  // the brackets in the pattern
  std::uint64_t first = 0, step = 1, count = 0;
  std::size_t width = 0;  // zero padding, from a start written with a leading zero
  bool letters = false;

  std::string value(std::uint64_t k) const {
    std::uint64_t v = first + k * step;
    if (letters) return std::string(1, range_letters[v]);
    auto s = std::to_string(v);
    return s.size() < width ? std::string(width - s.size(), '0') + s : s;
  }
};

bool is_blank(char c) { return c == ' ' || c == '\t'; }

bool valid_key(std::string_view k) { return !k.empty() && std::none_of(k.begin(), k.end(), is_blank); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// Ansible reads values with literal_eval; of that only the quote stripping is kept.
std::string_view unquote(std::string_view v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) return v.substr(1, v.size() - 2);
  return v;
}

// Echoed input stays short: a message is one terminal line, and the input may be a 64 KiB line.
std::string shown(std::string_view s) {
  if (s.size() <= 60) return std::string(s);
  std::size_t cut = 57;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "...";
}

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    std::size_t n = (c >= 0xc2 && c <= 0xdf) ? 1 : (c >= 0xe0 && c <= 0xef) ? 2 : (c >= 0xf0 && c <= 0xf4) ? 3 : 0;
    if (n == 0 || s.size() - i <= n) return false;
    // The second byte's bounds refuse overlong forms, surrogates and code points past U+10FFFF.
    auto c1 = static_cast<unsigned char>(s[i + 1]);
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80, hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (c1 < lo || c1 > hi) return false;
    for (std::size_t k = 2; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n + 1;
  }
  return true;
}

error line_error(std::size_t n, std::string_view what) {
  return make_error(errc::invalid_argument, fmt::format("line {}: {}", n, what), fmt::format("line {}", n));
}

// Ansible's group name: no blanks, ':' or ']'; then only blanks or a # comment.
std::size_t group_name_end(std::string_view s, std::size_t i) {
  while (i < s.size() && s[i] != ':' && s[i] != ']' && !is_blank(s[i])) ++i;
  return i;
}
bool only_comment_after(std::string_view s) {
  s = trim(s);
  return s.empty() || s[0] == '#';
}

struct section {
  std::string_view name, kind;
};
std::optional<section> match_section(std::string_view s) {
  std::size_t i = group_name_end(s, 1);
  section r{s.substr(1, i - 1), "hosts"};
  if (r.name.empty()) return std::nullopt;
  if (i < s.size() && s[i] == ':') {
    std::size_t k = ++i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
    if (i == k) return std::nullopt;
    r.kind = s.substr(k, i - k);
  }
  if (i == s.size() || s[i] != ']' || !only_comment_after(s.substr(i + 1))) return std::nullopt;
  return r;
}

// Host lines are split the way Ansible's shlex does: quotes group and are removed, a backslash
// escapes the next character (inside "..." only \" and \\), a # starting a word ends the line.
// Unlike shlex, a # inside a word is kept: a password like pa#ss is not silently cut short.
result<std::vector<std::string>> split_host_line(std::string_view s, std::size_t n) {
  std::vector<std::string> words;
  for (std::size_t i = 0;;) {
    while (i < s.size() && is_blank(s[i])) ++i;
    if (i == s.size() || s[i] == '#') return words;
    std::string& w = words.emplace_back();
    while (i < s.size() && !is_blank(s[i])) {
      char c = s[i++];
      if (c == '\'') {
        auto end = s.find('\'', i);
        if (end == s.npos) return line_error(n, "a ' quote is not closed");
        w.append(s.substr(i, end - i));
        i = end + 1;
      } else if (c == '"') {
        for (;;) {
          if (i == s.size()) return line_error(n, "a \" quote is not closed");
          char d = s[i++];
          if (d == '"') break;
          if (d == '\\' && i < s.size() && (s[i] == '"' || s[i] == '\\')) d = s[i++];
          w += d;
        }
      } else if (c == '\\') {
        if (i == s.size()) return line_error(n, "the line ends in a backslash");
        w += s[i++];
      } else {
        w += c;
      }
    }
  }
}

std::optional<std::uint64_t> number(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty() || s.size() > 18) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

// Ansible's ranges: [start:end] or [start:end:step]; numbers (a start with a leading zero pads
// every name to its width, so the end must be as wide) or single letters (a..z then A..Z); an
// empty start is 0. Unlike Ansible (which yields no host), an end before the start is an error.
result<host_range> parse_range(std::string_view spec, std::string_view pattern, std::size_t n) {
  auto bad = [&](std::string_view why) {
    return line_error(n, fmt::format("bad host range [{}] in {}: {}", shown(spec), shown(pattern), why));
  };
  std::vector<std::string_view> parts;
  for (std::size_t from = 0;;) {
    auto colon = spec.find(':', from);
    parts.push_back(spec.substr(from, colon == spec.npos ? spec.npos : colon - from));
    if (colon == spec.npos) break;
    from = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3)
    return bad("write [start:end] or [start:end:step] (an IPv6 address is written without brackets or port)");
  host_range r;
  if (parts.size() == 3) {
    auto step = number(parts[2]);
    if (!step || *step == 0) return bad("the step must be a number of 1 or more");
    r.step = *step;
  }
  std::string_view b = parts[0].empty() ? std::string_view("0") : parts[0], e = parts[1];
  if (e.empty()) return bad("the end is missing");
  std::uint64_t last = 0;
  if (b.size() == 1 && e.size() == 1 && range_letters.find(b[0]) != range_letters.npos &&
      range_letters.find(e[0]) != range_letters.npos) {
    r.letters = true;
    r.first = range_letters.find(b[0]);
    last = range_letters.find(e[0]);
  } else {
    auto fb = number(b), fe = number(e);
    if (!fb || !fe) return bad("start and end must both be numbers or both single letters");
    r.first = *fb;
    last = *fe;
    if (b.size() > 1 && b[0] == '0') {
      if (e.size() != b.size()) return bad("a start with a leading zero needs an end of as many digits");
      r.width = b.size();
    }
  }
  if (last < r.first) return bad("the end comes before the start");
  r.count = (last - r.first) / r.step + 1;
  return r;
}

class parser {
 public:
  parser() {
    for (auto name : {"all", "ungrouped"}) groups_[group_of(name)].declared = true;
  }

  result<inventory> run(std::string_view text, std::string_view filter) {
    if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
    for (std::size_t n = 1; !text.empty(); ++n) {
      auto nl = text.find('\n');
      auto line = text.substr(0, nl);
      text.remove_prefix(nl == text.npos ? text.size() : nl + 1);
      if (line.size() > max_inventory_line)
        return line_error(n, fmt::format("the line is longer than {} bytes", max_inventory_line));
      if (line.ends_with('\r')) line.remove_suffix(1);
      line = trim(line);
      // Comments are skipped before the text checks: Ansible accepts non-UTF-8 comments.
      if (line.empty() || line[0] == '#' || line[0] == ';') continue;
      for (unsigned char c : line)
        if ((c < 0x20 && c != '\t') || c == 0x7f)
          return line_error(n, fmt::format("control character 0x{:02x}: is this a text inventory?", c));
      if (!valid_utf8(line)) return line_error(n, "the line is not UTF-8 text");
      if (auto r = parse_line(line, n); !r) return std::move(r).error();
    }
    if (auto r = check_groups(); !r) return std::move(r).error();
    return collect(filter);
  }

 private:
  std::uint32_t group_of(std::string_view name) {
    auto [it, fresh] = group_index_.try_emplace(std::string(name), static_cast<std::uint32_t>(groups_.size()));
    if (fresh) groups_.emplace_back().name = name;
    return it->second;
  }

  bool take(std::size_t bytes, std::size_t work) {
    bytes_ += bytes;
    work_ += work;
    return bytes_ <= max_inventory_bytes && work_ <= max_work;
  }
  static error too_large(std::size_t n) {
    return line_error(n, fmt::format("the inventory expands past {} MiB of names and variables or {} memberships "
                                     "and assignments", max_inventory_bytes >> 20, max_work));
  }

  result<void> parse_line(std::string_view line, std::size_t n) {
    if (line[0] == '[') {
      if (auto s = match_section(line)) return enter_section(*s, n);
      // Otherwise a host line may start with a range ([a:c].example.com), as in Ansible.
      if (line.back() == ']')
        return line_error(n, fmt::format("{} is not a section header: write [group], [group:vars] or "
                                         "[group:children], without blanks", shown(line)));
    }
    if (kind_ == "vars") return add_group_var(line, n);
    if (kind_ == "children") return add_child(line, n);
    return add_host_line(line, n);
  }

  result<void> enter_section(const section& s, std::size_t n) {
    if (s.kind != "hosts" && s.kind != "vars" && s.kind != "children")
      return line_error(n, fmt::format("section [{}:{}] has an unknown type: write :vars or :children", shown(s.name),
                                       shown(s.kind)));
    kind_ = s.kind;
    current_ = group_of(s.name);
    auto& g = groups_[current_];
    if (kind_ != "vars") g.declared = true;
    else if (!g.declared && g.first_use == 0) g.first_use = n;
    return {};
  }

  result<void> add_group_var(std::string_view line, std::size_t n) {
    auto& g = groups_[current_];
    auto eq = line.find('=');
    auto key = trim(line.substr(0, eq));
    if (eq == line.npos || !valid_key(key))
      return line_error(n, fmt::format("expected key=value in [{}:vars], got {}", shown(g.name), shown(line)));
    auto value = unquote(trim(line.substr(eq + 1)));
    if (key == "ansible_group_priority") {
      // Ansible reads it as an int and orders same-depth groups by it.
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), g.priority);
      if (ec != std::errc() || end != value.data() + value.size())
        return line_error(n, fmt::format("ansible_group_priority must be an integer, got {}", shown(value)));
    }
    g.vars.emplace_back(key, value);
    return {};
  }

  result<void> add_child(std::string_view line, std::size_t n) {
    auto end = group_name_end(line, 0);
    if (end == 0 || !only_comment_after(line.substr(end)))
      return line_error(n, fmt::format("expected a group name in [{}:children], got {}", shown(groups_[current_].name),
                                       shown(line)));
    auto name = line.substr(0, end);
    if (name == "all") return line_error(n, "all holds every group: it can't be a child");
    auto c = group_of(name);
    auto& child = groups_[c];
    if (!child.declared && child.first_use == 0) {
      child.first_use = n;
      child.first_parent = groups_[current_].name;
    }
    if (edges_.insert(std::uint64_t{current_} << 32 | c).second) {
      groups_[current_].children.emplace_back(c, n);
      child.parents.push_back(current_);
    }
    return {};
  }

  result<void> add_host_line(std::string_view line, std::size_t n) {
    auto words = split_host_line(line, n);
    if (!words) return std::move(words).error();
    if (words->empty() || words->front().empty()) return line_error(n, "the host name is empty");
    std::string_view pattern = words->front(), name = pattern;
    if (pattern == "---") return line_error(n, "--- starts a YAML document: this reads INI inventories");
    // Ansible would take it as a host name; it is almost always a variable out of place.
    if (pattern.find('=') != pattern.npos)
      return line_error(n, fmt::format("{} is not a host name: variables follow a host name, or go in a "
                                       "[group:vars] section", shown(pattern)));
    std::size_t colons = 0, last_colon = 0, depth = 0;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i] == '[') ++depth;
      else if (pattern[i] == ']' && depth > 0) --depth;
      else if (pattern[i] == ':' && depth == 0) ++colons, last_colon = i;
    }
    kv_list vars;
    if (colons == 1) {  // name:port; the name's own vars (later on the line) may still override
      name = pattern.substr(0, last_colon);
      auto port_text = pattern.substr(last_colon + 1);
      unsigned port = 0;
      auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
      if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535)
        return line_error(n, fmt::format("the port in {} must be a number from 1 to 65535", shown(pattern)));
      if (name.empty()) return line_error(n, "the host name is empty");
      vars.emplace_back("ansible_port", std::to_string(port));
    } else if (colons > 1) {  // an IPv6 address, which can't take a port here
      depth = 0;
      for (char c : pattern.substr(0, pattern.find('%'))) {
        if (c == '[') ++depth;
        else if (c == ']' && depth > 0) --depth;
        else if (depth == 0 && !std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.')
          return line_error(n, fmt::format("{} is neither name:port nor an IPv6 address", shown(pattern)));
      }
    }
    for (std::size_t i = 1; i < words->size(); ++i) {
      std::string_view w = (*words)[i];
      auto eq = w.find('=');
      if (eq == w.npos || !valid_key(w.substr(0, eq)))
        return line_error(n, fmt::format("expected key=value after the host name, got {}", shown(w)));
      vars.emplace_back(w.substr(0, eq), unquote(w.substr(eq + 1)));
    }
    std::optional<std::uint32_t> vars_at;
    if (!vars.empty()) {
      vars_at = static_cast<std::uint32_t>(line_vars_.size());
      line_vars_.push_back(std::move(vars));
    }
    return add_hosts(name, n, vars_at);
  }

  result<void> add_hosts(std::string_view pattern, std::size_t n, std::optional<std::uint32_t> vars_at) {
    std::vector<host_range> ranges;
    std::uint64_t total = 1;
    for (auto open = pattern.find('['); open != pattern.npos; open = pattern.find('[', open)) {
      auto close = pattern.find(']', open);
      if (close == pattern.npos || pattern.find('[', open + 1) < close)
        return line_error(n, fmt::format("a [ range in {} is not closed", shown(pattern)));
      auto r = parse_range(pattern.substr(open + 1, close - open - 1), pattern, n);
      if (!r) return std::move(r).error();
      r->open = open;
      r->close = close;
      // Counted before anything is expanded: the product of a few ranges is astronomical.
      if (r->count > max_inventory_hosts || total * r->count > max_inventory_hosts)
        return line_error(n, fmt::format("{} expands to more than {} hosts", shown(pattern), max_inventory_hosts));
      total *= r->count;
      ranges.push_back(*r);
      open = close + 1;
    }
    if (total * (pattern.size() + 32) > max_inventory_bytes - bytes_) return too_large(n);
    std::vector<std::uint64_t> at(ranges.size(), 0);
    for (std::uint64_t made = 0; made < total; ++made) {
      std::string name;
      std::size_t from = 0;
      for (std::size_t j = 0; j < ranges.size(); ++j) {
        name.append(pattern.substr(from, ranges[j].open - from)).append(ranges[j].value(at[j]));
        from = ranges[j].close + 1;
      }
      name.append(pattern.substr(from));
      auto [it, fresh] = host_index_.try_emplace(std::move(name), static_cast<std::uint32_t>(hosts_.size()));
      if (fresh) {
        if (hosts_.size() == max_inventory_hosts)
          return line_error(n, fmt::format("the inventory has more than {} hosts", max_inventory_hosts));
        hosts_.emplace_back().name = it->first;
        hosts_.back().line = n;
      }
      // Work by length too: a repeated line of long names costs its hashing even when no host is new.
      if (!take(fresh ? it->first.size() + 32 : 0, 1 + it->first.size() / 16)) return too_large(n);
      auto& h = hosts_[it->second];
      h.groups.push_back(current_);
      if (vars_at) h.var_lines.push_back(*vars_at);
      // The last range turns fastest, as Ansible's nested expansion orders them.
      for (std::size_t j = ranges.size(); j-- > 0;) {
        if (++at[j] < ranges[j].count) break;
        at[j] = 0;
      }
    }
    return {};
  }

  result<void> check_groups() {
    // Ansible's rule: a group must be declared by [g] or [g:children] somewhere; the first
    // reference to one that never is gets the error.
    const group_rec* undefined = nullptr;
    for (const auto& g : groups_)
      if (!g.declared && (!undefined || g.first_use < undefined->first_use)) undefined = &g;
    if (undefined) {
      auto name = shown(undefined->name);
      if (undefined->first_parent.empty())
        return line_error(undefined->first_use, fmt::format("[{0}:vars] is for group {0}, which is not defined: "
                                                            "add a [{0}] or [{0}:children] section", name));
      return line_error(undefined->first_use,
                        fmt::format("[{1}:children] names group {0}, which is not defined: add a [{0}] or "
                                    "[{0}:children] section", name, shown(undefined->first_parent)));
    }
    // Depth-first without recursion (a chain may be thousands deep); a child found on the
    // current path closes a cycle. Postorder reversed puts parents before children.
    std::vector<std::uint8_t> color(groups_.size(), 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::uint32_t> order;
    std::vector<std::pair<std::uint32_t, std::size_t>> path;
    for (std::uint32_t s = 0; s < groups_.size(); ++s) {
      if (color[s]) continue;
      color[s] = 1;
      path.emplace_back(s, 0);
      while (!path.empty()) {
        auto [g, k] = path.back();
        if (k == groups_[g].children.size()) {
          color[g] = 2;
          order.push_back(g);
          path.pop_back();
          continue;
        }
        ++path.back().second;
        auto [c, line] = groups_[g].children[k];
        if (color[c] == 1)
          return line_error(line, fmt::format("[{}:children] names {}, which contains it: groups form a cycle",
                                              shown(groups_[g].name), shown(groups_[c].name)));
        if (color[c] == 0) {
          color[c] = 1;
          path.emplace_back(c, 0);
        }
      }
    }
    groups_[all_group].depth = 0;
    for (auto it = order.rbegin(); it != order.rend(); ++it)
      for (auto [c, line] : groups_[*it].children) groups_[c].depth = std::max(groups_[c].depth, groups_[*it].depth + 1);
    // Ansible's merge order (depth, ansible_group_priority, name) as one number per group.
    std::vector<std::uint32_t> by_rank(groups_.size());
    for (std::uint32_t g = 0; g < by_rank.size(); ++g) by_rank[g] = g;
    std::sort(by_rank.begin(), by_rank.end(), [&](auto a, auto b) {
      const auto &x = groups_[a], &y = groups_[b];
      return std::tie(x.depth, x.priority, x.name) < std::tie(y.depth, y.priority, y.name);
    });
    rank_.resize(groups_.size());
    for (std::uint32_t r = 0; r < by_rank.size(); ++r) rank_[by_rank[r]] = r;
    std::sort(by_rank.begin(), by_rank.end(), [&](auto a, auto b) { return groups_[a].name < groups_[b].name; });
    name_rank_.resize(groups_.size());
    for (std::uint32_t r = 0; r < by_rank.size(); ++r) name_rank_[by_rank[r]] = r;
    return {};
  }

  result<inventory> collect(std::string_view filter) {
    std::vector<std::uint8_t> wanted(groups_.size(), 0);
    bool everyone = filter.empty() || filter == "all";
    if (!everyone) {
      auto it = group_index_.find(std::string(filter));
      if (it == group_index_.end())
        return make_error(errc::invalid_argument, fmt::format("the inventory has no group {}", shown(filter)), "group");
      std::vector<std::uint32_t> todo{it->second};
      wanted[it->second] = 1;
      while (!todo.empty()) {
        auto g = todo.back();
        todo.pop_back();
        for (auto [c, line] : groups_[g].children)
          if (!wanted[c]) wanted[c] = 1, todo.push_back(c);
      }
    }
    inventory out;
    std::vector<std::size_t> seen(groups_.size(), 0);  // the host's index + 1 once in its closure
    std::vector<std::uint32_t> closure;
    std::vector<std::pair<std::string_view, std::string_view>> merged;
    for (std::size_t hi = 0; hi < hosts_.size(); ++hi) {
      auto& h = hosts_[hi];
      auto& direct = h.groups;
      std::sort(direct.begin(), direct.end());
      direct.erase(std::unique(direct.begin(), direct.end()), direct.end());
      std::erase(direct, all_group);
      // Ansible's reconcile: ungrouped holds exactly the hosts that are in no other group.
      if (std::any_of(direct.begin(), direct.end(), [](auto g) { return g != ungrouped_group; }))
        std::erase(direct, ungrouped_group);
      else if (direct.empty())
        direct.push_back(ungrouped_group);
      if (!everyone && std::none_of(direct.begin(), direct.end(), [&](auto g) { return wanted[g] != 0; })) continue;

      closure.assign(1, all_group);
      seen[all_group] = hi + 1;
      for (auto g : direct)
        if (seen[g] != hi + 1) seen[g] = hi + 1, closure.push_back(g);
      for (std::size_t k = 0; k < closure.size(); ++k) {
        if (!take(0, groups_[closure[k]].parents.size() + 1)) return too_large(h.line);
        for (auto p : groups_[closure[k]].parents)
          if (seen[p] != hi + 1) seen[p] = hi + 1, closure.push_back(p);
      }
      if (!take(0, 2 * closure.size() * std::bit_width(closure.size()))) return too_large(h.line);  // the sorts
      std::sort(closure.begin(), closure.end(), [&](auto a, auto b) { return rank_[a] < rank_[b]; });

      merged.clear();
      for (auto g : closure)
        for (const auto& [k, v] : groups_[g].vars) merged.emplace_back(k, v);
      for (auto at : h.var_lines)
        for (const auto& [k, v] : line_vars_[at]) merged.emplace_back(k, v);
      if (!take(0, merged.size() * std::bit_width(merged.size()))) return too_large(h.line);
      std::stable_sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::size_t bytes = h.name.size(), winners = 0;
      for (std::size_t i = 0; i < merged.size(); ++i)
        if (i + 1 == merged.size() || merged[i + 1].first != merged[i].first)
          bytes += merged[i].first.size() + merged[i].second.size() + 64, ++winners;
      for (auto g : closure) bytes += groups_[g].name.size() + 32;
      if (!take(bytes, 0)) return too_large(h.line);

      auto& host = out.hosts.emplace_back();
      host.name = h.name;
      host.line = h.line;
      host.vars.reserve(winners);
      for (std::size_t i = 0; i < merged.size(); ++i)
        if (i + 1 == merged.size() || merged[i + 1].first != merged[i].first)
          host.vars.emplace_back(merged[i].first, merged[i].second);
      std::sort(closure.begin(), closure.end(), [&](auto a, auto b) { return name_rank_[a] < name_rank_[b]; });
      host.groups.reserve(closure.size() - 1);
      for (auto g : closure)
        if (g != all_group) host.groups.push_back(groups_[g].name);
    }
    return out;
  }

  std::vector<group_rec> groups_;
  std::unordered_map<std::string, std::uint32_t> group_index_;
  std::unordered_set<std::uint64_t> edges_;
  std::vector<host_rec> hosts_;
  std::unordered_map<std::string, std::uint32_t> host_index_;
  std::vector<kv_list> line_vars_;  // a host line's name:port and key=value, once per line
  std::vector<std::uint32_t> rank_, name_rank_;  // each group's place in the merge order, by name
  std::uint32_t current_ = ungrouped_group;
  std::string_view kind_ = "hosts";
  std::size_t bytes_ = 0, work_ = 0;
};

}  // namespace

result<inventory> parse_ansible_ini_inventory(std::string_view text, std::string_view group) {
  return parser().run(text, group);
}

}  // namespace certfleet::catalog
