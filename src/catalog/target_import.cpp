// The bulk target import's two formats (target_import.hpp). Each row becomes the same JSON body
// POST …/targets takes and goes through the same parser, so an imported target and a created one
// are refused for the same things with the same words.
#include "certfleet/catalog/target_import.hpp"

#include "certfleet/delivery/ssh_target.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <unordered_map>

namespace certfleet::catalog {

namespace json = boost::json;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Keeps a row when it parses and its name is new; a problem otherwise.
struct row_sink {
  target_import& out;
  const import_row_sink* keep;
  std::unordered_map<std::string, std::size_t> names;

  void add(std::size_t line, std::string_view body) {
    auto t = parse_target_request(body);
    if (!t) {
      out.add_problem(line, t.error().field.empty() ? std::string("body") : t.error().field, t.error().message);
      return;
    }
    auto [it, fresh] = names.emplace(t->name, line);
    if (!fresh) {
      out.add_problem(line, "name", fmt::format("name \"{}\" is already on line {}", t->name, it->second));
      return;
    }
    if (keep && *keep) {
      if (auto p = (*keep)(import_row{line, std::move(*t)})) out.add_problem(line, std::move(p->field), std::move(p->message));
    } else if (out.problem_count == 0) {
      out.rows.push_back(import_row{line, std::move(*t)});
    }
  }
  // Past the cap nothing more is read: the answer is a refusal either way.
  bool full(std::size_t line) {
    if (names.size() + out.problem_count < max_import_rows) return false;
    out.add_problem(line, "body", fmt::format("more than {} targets in one import: split it", max_import_rows));
    return true;
  }
};

void parse_json_lines(std::string_view body, target_import& out, const import_row_sink* keep) {
  row_sink sink{out, keep, {}};
  std::size_t line = 0;
  while (!body.empty()) {
    ++line;
    const auto nl = body.find('\n');
    std::string_view text = body.substr(0, nl);
    body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
    if (trim(text).empty()) continue;
    if (sink.full(line)) return;
    sink.add(line, text);
  }
}

// RFC 4180 records: quoted cells may hold commas, quotes ("") and line breaks; LF or CRLF ends a
// record. `line` is where the record starts, for problems.
class csv_reader {
 public:
  explicit csv_reader(std::string_view text) : s_(text) {}

  // The next record's cells; false at the end or on a malformed record (error() says why).
  bool next(std::vector<std::string>& cells, std::size_t& line) {
    cells.clear();
    // Blank lines between records are skipped, not read as one empty cell.
    while (i_ < s_.size() && (s_[i_] == '\n' || (s_[i_] == '\r' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n'))) {
      i_ += s_[i_] == '\r' ? 2 : 1;
      ++line_;
    }
    if (i_ >= s_.size()) return false;
    line = line_;
    for (;;) {
      std::string cell;
      if (i_ < s_.size() && s_[i_] == '"') {
        ++i_;
        for (;;) {
          if (i_ >= s_.size()) {
            error_ = "a quoted cell is not closed";
            return false;
          }
          const char c = s_[i_++];
          if (c == '"') {
            if (i_ < s_.size() && s_[i_] == '"') {
              cell.push_back('"');
              ++i_;
              continue;
            }
            break;
          }
          if (c == '\n') ++line_;
          cell.push_back(c);
        }
        const bool line_end = i_ < s_.size() && (s_[i_] == '\n' || (s_[i_] == '\r' && (i_ + 1 == s_.size() || s_[i_ + 1] == '\n')));
        if (i_ < s_.size() && s_[i_] != ',' && !line_end) {
          error_ = "a quoted cell must end at a comma or the end of the line";
          return false;
        }
      } else {
        const auto end = s_.find_first_of(",\n", i_);
        cell.assign(s_.substr(i_, end == std::string_view::npos ? std::string_view::npos : end - i_));
        if (!cell.empty() && cell.back() == '\r') cell.pop_back();
        if (cell.find('"') != std::string::npos) {
          error_ = "a quote inside an unquoted cell: quote the whole cell and double the quote (\"\")";
          return false;
        }
        i_ = end == std::string_view::npos ? s_.size() : end;
      }
      cells.push_back(std::move(cell));
      if (i_ < s_.size() && s_[i_] == '\r') ++i_;
      if (i_ >= s_.size()) return true;
      if (s_[i_] == '\n') {
        ++i_;
        ++line_;
        return true;
      }
      ++i_;  // the comma
    }
  }
  const std::string& error() const { return error_; }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
  std::size_t line_ = 1;
  std::string error_;
};

// The members whose JSON value is not a string: a CSV cell holds text, the body wants these typed.
// A cell that does not read as its type is passed on as text, so the target parser names the
// field and says what it must be.
constexpr std::string_view integer_columns[] = {"ssh.port", "validate.tls.port"};
constexpr std::string_view boolean_columns[] = {"ssh.sudo", "webhook.allow_plain_http", "validate.remote_hash"};
constexpr std::string_view top_members[] = {"name", "module", "ssh", "file", "webhook", "validate"};

json::value cell_value(std::string_view column, std::string_view cell) {
  if (std::find(std::begin(integer_columns), std::end(integer_columns), column) != std::end(integer_columns)) {
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), n);
    if (ec == std::errc() && p == cell.data() + cell.size()) return json::value(n);
  }
  if (std::find(std::begin(boolean_columns), std::end(boolean_columns), column) != std::end(boolean_columns)) {
    if (iequals(cell, "true")) return json::value(true);
    if (iequals(cell, "false")) return json::value(false);
  }
  return json::value(json::string(cell));
}

void parse_csv(std::string_view body, target_import& out, const import_row_sink* keep) {
  csv_reader in(body);
  std::vector<std::string> header, cells;
  std::size_t line = 1;
  if (!in.next(header, line)) {
    out.add_problem(line, "body", in.error().empty() ? "the CSV has no header row (name,module,ssh.host,…)" : in.error());
    return;
  }
  // Each column a path into the body: "ssh.host" -> {"ssh": {"host": …}}.
  std::vector<std::vector<std::string>> paths;
  for (std::size_t c = 0; c < header.size(); ++c) {
    const std::string column(trim(header[c]));
    std::vector<std::string> path;
    std::size_t start = 0;
    for (;;) {
      const auto dot = column.find('.', start);
      path.push_back(column.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    const bool known = std::find(std::begin(top_members), std::end(top_members), path.front()) != std::end(top_members);
    const bool empty_part = std::any_of(path.begin(), path.end(), [](const std::string& p) { return p.empty(); });
    if (!known || empty_part || path.size() > 3) {
      out.add_problem(line, column.empty() ? std::string("header") : column.substr(0, 64),
                      fmt::format("column {} \"{}\" is not a target member (name, module, ssh.…, file.…, webhook.…, "
                                  "validate.…)", c + 1, column.substr(0, 64)));
      return;
    }
    for (std::size_t d = 0; d < c; ++d)
      if (trim(header[d]) == column) {
        out.add_problem(line, column, fmt::format("column \"{}\" appears twice in the header", column));
        return;
      }
    paths.push_back(std::move(path));
  }
  row_sink sink{out, keep, {}};
  for (;;) {
    std::size_t row_line = line;
    if (!in.next(cells, row_line)) {
      if (!in.error().empty()) out.add_problem(row_line, "body", in.error());
      return;
    }
    if (sink.full(row_line)) return;
    if (cells.size() != header.size()) {
      out.add_problem(row_line, "body", fmt::format("the row has {} cells, the header {}", cells.size(), header.size()));
      continue;
    }
    json::object row;
    bool clash = false;
    for (std::size_t c = 0; c < cells.size() && !clash; ++c) {
      if (cells[c].empty()) continue;  // an empty cell: the member is left out
      const auto& path = paths[c];
      json::object* at = &row;
      for (std::size_t d = 0; d + 1 < path.size(); ++d) {
        auto& next = (*at)[path[d]];
        if (next.is_null()) next = json::object();
        if (!next.is_object()) {
          // "ssh" and "ssh.host" both given: the cell and the section cannot both be the member.
          out.add_problem(row_line, path[d], fmt::format("{} is both a cell and a section of cells", path[d]));
          clash = true;
          break;
        }
        at = &next.as_object();
      }
      if (clash) break;
      std::string column;
      for (const auto& p : path) column += (column.empty() ? "" : ".") + p;
      (*at)[path.back()] = cell_value(column, cells[c]);
    }
    if (!clash) sink.add(row_line, json::serialize(row));
  }
}

}  // namespace

void target_import::add_problem(std::size_t line, std::string field, std::string message) {
  ++problem_count;
  rows.clear();
  if (problems.size() < max_import_problems) problems.push_back(import_problem{line, std::move(field), std::move(message)});
}

std::optional<import_format> import_format_of(std::string_view content_type) {
  const auto media = trim(content_type.substr(0, content_type.find(';')));
  if (iequals(media, "application/x-ndjson") || iequals(media, "application/jsonl")) return import_format::json_lines;
  if (iequals(media, "text/csv")) return import_format::csv;
  return std::nullopt;
}

namespace {
target_import parse_rows(std::string_view body, import_format format, const import_row_sink* keep) {
  target_import out;
  if (body.starts_with("\xEF\xBB\xBF")) body.remove_prefix(3);  // a UTF-8 byte-order mark (spreadsheets write one)
  std::size_t kept = 0;
  import_row_sink counted;
  if (keep)
    counted = [&](import_row&& r) {
      ++kept;
      return (*keep)(std::move(r));
    };
  if (format == import_format::json_lines) parse_json_lines(body, out, keep ? &counted : nullptr);
  else parse_csv(body, out, keep ? &counted : nullptr);
  if (out.problem_count == 0 && out.rows.empty() && kept == 0) out.add_problem(0, "body", "the import holds no targets");
  return out;
}
}  // namespace

target_import parse_target_import(std::string_view body, import_format format) { return parse_rows(body, format, nullptr); }

target_import parse_target_import(std::string_view body, import_format format, const import_row_sink& keep) {
  return parse_rows(body, format, &keep);
}

namespace {
// Host variables that set an ssh member, as a fleet's inventory carries per-host paths.
constexpr std::pair<std::string_view, std::string_view> host_var_members[] = {
    {"certfleet_cert_path", "cert_path"}, {"certfleet_key_path", "key_path"},   {"certfleet_chain_path", "chain_path"},
    {"certfleet_owner", "owner"},         {"certfleet_post_command", "post_command"},
    {"certfleet_credential_id", "credential_id"}};

std::string_view first_var(const inventory_host& h, std::initializer_list<std::string_view> names) {
  for (auto n : names)
    if (auto v = h.var(n); !v.empty()) return v;
  return {};
}
}  // namespace

result<std::string> inventory_import_lines(const inventory& inv, std::string_view template_body,
                                           std::string_view known_hosts) {
  boost::system::error_code ec;
  auto tv = json::parse(template_body, ec);
  if (ec || !tv.is_object()) return make_error(errc::invalid_argument, "the template must be one JSON object: a target body without name", "template");
  auto& tmpl = tv.as_object();
  if (tmpl.contains("name"))
    return make_error(errc::invalid_argument, "the template has a name: each target is named after its inventory host",
                      "template.name");
  if (auto* m = tmpl.if_contains("module"); m && !(m->is_string() && m->as_string() == "ssh"))
    return make_error(errc::invalid_argument, "an inventory lists SSH hosts: the template's module must be \"ssh\"",
                      "template.module");
  tmpl["module"] = "ssh";
  if (auto* ssh = tmpl.if_contains("ssh"); ssh && !ssh->is_object())
    return make_error(errc::invalid_argument, "ssh must be an object", "template.ssh");
  if (inv.hosts.empty()) return make_error(errc::invalid_argument, "the inventory (or the group) has no hosts", "inventory");
  std::string out;
  for (const auto& h : inv.hosts) {
    const auto where = fmt::format("line {}", h.line);
    json::object body = tmpl;
    body["name"] = h.name;
    auto& ssh = body["ssh"].is_object() ? body["ssh"].as_object() : body["ssh"].emplace_object();
    const std::string address(first_var(h, {"ansible_host", "ansible_ssh_host"}).empty()
                                  ? std::string_view(h.name)
                                  : first_var(h, {"ansible_host", "ansible_ssh_host"}));
    ssh["host"] = address;
    std::uint16_t port = 22;
    if (auto* p = ssh.if_contains("port"); p && p->is_int64() && p->as_int64() > 0 && p->as_int64() < 65536)
      port = static_cast<std::uint16_t>(p->as_int64());
    if (auto text = first_var(h, {"ansible_port", "ansible_ssh_port"}); !text.empty()) {
      unsigned n = 0;
      auto [e, err] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (err != std::errc() || e != text.data() + text.size() || n < 1 || n > 65535)
        return make_error(errc::invalid_argument,
                          fmt::format("{}: host {}: ansible_port \"{}\" is not a port (1-65535)", where, h.name, text),
                          where);
      port = static_cast<std::uint16_t>(n);
      ssh["port"] = port;
    }
    if (auto user = first_var(h, {"ansible_user", "ansible_ssh_user"}); !user.empty()) ssh["user"] = user;
    for (const auto& [var, member] : host_var_members)
      if (auto v = h.var(var); !v.empty()) ssh[member] = v;
    std::optional<std::string> key;
    if (auto pinned = h.var("certfleet_host_key"); !pinned.empty()) key = std::string(pinned);
    if (!key) key = delivery::known_hosts_key(known_hosts, address, port);
    if (!key && address != h.name) key = delivery::known_hosts_key(known_hosts, h.name, port);
    if (key) ssh["host_key"] = *key;
    else if (!ssh.contains("host_key"))
      return make_error(errc::invalid_argument,
                        fmt::format("{}: host {}: no host key for {}{}: add it to the --known-hosts file (ssh-keyscan "
                                    "-p {} {}, after checking its fingerprint) or set certfleet_host_key",
                                    where, h.name, address, port == 22 ? std::string() : fmt::format(" port {}", port),
                                    port, address),
                        where);
    out += json::serialize(body);
    out += '\n';
  }
  return out;
}

std::string describe_import_problems(const target_import& t) {
  std::string text = fmt::format("{} {} invalid; nothing was imported.", t.problem_count,
                                 t.problem_count == 1 ? "row is" : "rows are");
  const std::size_t shown = std::min<std::size_t>(t.problems.size(), 5);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& p = t.problems[i];
    text += i == 0 ? " " : "; ";
    if (p.line > 0) text += fmt::format("line {}: ", p.line);
    text += fmt::format("{}: {}", p.field, p.message);
  }
  if (t.problem_count > shown) text += fmt::format("; and {} more (the answer's errors list)", t.problem_count - shown);
  return text;
}

}  // namespace certfleet::catalog
