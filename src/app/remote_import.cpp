// `certfleet targets import` (docs/targets-import.md): a fleet from a JSON-lines or CSV file, or
// from an Ansible INI inventory and a template body, sent as one POST …/targets:import — all of it
// stored, or nothing with every bad row named by its line.
#include "remote_catalog.hpp"

#include "certfleet/app/exit_codes.hpp"
#include "certfleet/catalog/ansible_inventory.hpp"
#include "certfleet/catalog/target_import.hpp"
#include "output.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <iostream>

namespace certfleet::app {

namespace {

// The file's format: --format, else its extension (.csv; anything else is JSON lines).
result<catalog::import_format> format_of(const catalog_args& a) {
  std::string_view f = a.format;
  if (f.empty()) f = a.from_file.ends_with(".csv") ? "csv" : "jsonl";
  if (f == "csv") return catalog::import_format::csv;
  if (f == "jsonl" || f == "ndjson") return catalog::import_format::json_lines;
  return make_error(errc::invalid_argument, fmt::format("--format {} is not jsonl or csv", a.format), "format");
}

}  // namespace

int import_targets(const remote_client* c, const catalog_args& a) {
  if (a.from_file.empty() == a.inventory.empty())
    return fail(make_error(errc::invalid_argument, "give one of --from-file (JSON lines or CSV) or --ansible (an INI inventory)",
                           "from_file"));
  std::string body;
  auto format = catalog::import_format::json_lines;
  if (!a.from_file.empty()) {
    auto f = format_of(a);
    if (!f) return fail(f.error());
    format = *f;
    auto text = read_input(a.from_file, "from_file");
    if (!text) return fail(text.error());
    body = std::move(*text);
  } else {
    if (a.template_file.empty())
      return fail(make_error(errc::invalid_argument,
                             "--ansible needs --template: a target body without name (module ssh, ssh.credential_id, "
                             "ssh.cert_path, ssh.key_path, …)",
                             "template"));
    auto inventory_text = read_input(a.inventory, "ansible");
    if (!inventory_text) return fail(inventory_text.error());
    auto inv = catalog::parse_ansible_ini_inventory(*inventory_text, a.group);
    if (!inv) {
      auto e = inv.error();
      e.message = fmt::format("{}: {}", a.inventory, e.message);
      return fail(e);
    }
    auto tmpl = read_input(a.template_file, "template");
    if (!tmpl) return fail(tmpl.error());
    std::string known_hosts;
    if (!a.known_hosts.empty()) {
      auto kh = read_input(a.known_hosts, "known_hosts");
      if (!kh) return fail(kh.error());
      known_hosts = std::move(*kh);
    }
    auto lines = catalog::inventory_import_lines(*inv, *tmpl, known_hosts);
    if (!lines) return fail(lines.error());
    body = std::move(*lines);
  }
  if (a.dry_run) {
    std::cout << body;
    if (!body.empty() && body.back() != '\n') std::cout << '\n';
    return 0;
  }
  if (!c) return to_int(exit_code::usage);
  auto path = project_path(a.project, "/targets:import");
  if (!path) return fail(path.error());
  const auto content_type = format == catalog::import_format::csv ? "text/csv" : "application/x-ndjson";
  boost::json::value refusal;
  auto r = c->send("POST", *path, content_type, std::move(body), &refusal);
  if (!r) {
    // Every bad row the server named, one per line, before the summary fail() prints.
    if (const auto* errors = refusal.is_object() ? refusal.as_object().if_contains("errors") : nullptr;
        errors && errors->is_array())
      for (const auto& v : errors->as_array()) {
        if (!v.is_object()) continue;
        const auto& o = v.as_object();
        const auto line = o.if_contains("line") && o.at("line").is_int64() ? o.at("line").as_int64() : 0;
        const auto text = [&](const char* k) {
          return o.if_contains(k) && o.at(k).is_string() ? std::string(o.at(k).as_string()) : std::string();
        };
        std::cerr << (line > 0 ? fmt::format("line {}: ", line) : std::string()) << text("field") << ": " << text("message")
                  << "\n";
      }
    return fail(r.error());
  }
  if (a.json) {
    print(r->body);
    return 0;
  }
  const auto* n = r->body.is_object() ? r->body.as_object().if_contains("imported") : nullptr;
  std::cout << fmt::format("imported {} targets into project {}\n", n && n->is_int64() ? n->as_int64() : 0, a.project);
  return 0;
}

}  // namespace certfleet::app
