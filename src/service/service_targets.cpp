// Targets beyond their body (service.hpp): the rules create and the bulk import both apply — who
// may create a file target and where it may write, the login an SSH target defaults to, the kind
// of credential it needs, the destination the allow list lets it reach — and the import itself.
#include "certfleet/service/service.hpp"

#include "service/service_common.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/delivery/file.hpp"
#include "certfleet/delivery/ssh.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <set>

namespace certfleet::service {

namespace json = boost::json;
using store::catalog_object;
using namespace detail;

namespace detail {

result<std::string> admit_target(catalog::new_target& t, const requester& who, const std::vector<std::string>& base_dirs) {
  std::string doc = t.doc;
  if (t.spec.module == delivery::module_kind::file) {
    if (!who.system_admin)
      return make_error(errc::forbidden,
                        "file targets write files and run a command on the worker host as certfleet's user: only a "
                        "system-admin token may create one",
                        "module");
    if (auto ok = delivery::check_file_target_paths(t.spec.file, base_dirs); !ok) return std::move(ok).error();
    doc = catalog::stamp_file_grant(doc, who.actor.empty() ? std::string("system") : who.actor);
  }
  // A new target says how it logs in; left out, it is "key" (stored, so the view shows it).
  if (t.spec.module == delivery::module_kind::ssh && t.spec.ssh.auth == delivery::ssh_auth::derived) {
    t.spec.ssh.auth = delivery::ssh_auth::key;
    doc = catalog::stamp_ssh_auth(doc, "key");
  }
  return doc;
}

result<void> check_target_credential(store::catalog_read& rd, const std::string& project_id, delivery::module_kind module,
                                     const std::string& credential_id, delivery::ssh_auth auth) {
  const bool ssh = module == delivery::module_kind::ssh;
  if (auto r = check_ref(rd, project_id, store::kind_credential, credential_id,
                         ssh ? "ssh.credential_id" : "webhook.secret_credential_id");
      !r)
    return r;
  if (!ssh) return {};
  const bool key = auth == delivery::ssh_auth::key;
  auto cred = rd.get_object(project_id, store::kind_credential, credential_id);
  if (!cred) return std::move(cred).error();
  if (cred->doc.find(fmt::format(R"("kind":"{}")", key ? "ssh_key" : "password")) == std::string::npos)
    return make_error(errc::invalid_argument,
                      key ? fmt::format("ssh.auth is \"key\" (the default) but credential {} is a password credential: "
                                        "set ssh.auth to \"password\" to log in with a password", credential_id)
                          : fmt::format("ssh.auth is \"password\" but credential {} is an ssh_key credential",
                                        credential_id),
                      "ssh.auth");
  return {};
}

result<void> check_target_credential(store::catalog_read& rd, const std::string& project_id, const catalog::target_spec& spec) {
  return check_target_credential(rd, project_id, spec.module, spec.credential_id, spec.ssh.auth);
}

}  // namespace detail

namespace {
// What the import keeps of a parsed row beyond its stored object: what the checks after the parse
// read. A parsed target_spec is ~1.5 KiB with its strings; this is a tenth of it.
struct pending_target {
  std::size_t line = 0;
  delivery::module_kind module = delivery::module_kind::ssh;
  delivery::ssh_auth auth = delivery::ssh_auth::key;
  std::pair<std::string, std::uint16_t> destination;  // ssh: host and port, for the allow list's answer
};
}  // namespace

op<service::target_import_outcome> service::import_targets(std::string project_id, std::string body,
                                                           catalog::import_format format, requester who) {
  auto settings = co_await store::read_settings(st_);
  // Read only when a file row needs them; refused then as a create would be.
  std::optional<result<std::vector<std::string>>> base_dirs;
  auto now = clock_.now_ms();
  auto objects = std::make_shared<std::vector<catalog_object>>();
  auto pending = std::make_shared<std::vector<pending_target>>();
  std::set<std::pair<std::string, std::uint16_t>> destinations;
  std::optional<error> forbidden;  // a file row from a requester who may not: the whole import, 403
  catalog::import_row_sink keep = [&](catalog::import_row&& row) -> std::optional<catalog::import_problem> {
    static const std::vector<std::string> none;
    const std::vector<std::string>* dirs = &none;
    if (row.target.spec.module == delivery::module_kind::file && who.system_admin) {
      if (!base_dirs) base_dirs = parse_base_dirs(settings.text("file_target_base_dirs"));
      if (!*base_dirs) return catalog::import_problem{row.line, base_dirs->error().field, base_dirs->error().message};
      dirs = &**base_dirs;
    }
    auto doc = admit_target(row.target, who, *dirs);
    if (!doc) {
      if (doc.error().is(errc::forbidden) && !forbidden)
        forbidden = make_error(errc::forbidden, fmt::format("line {}: {}", row.line, doc.error().message), doc.error().field);
      return catalog::import_problem{row.line, doc.error().field, doc.error().message};
    }
    const auto& spec = row.target.spec;
    if (spec.module == delivery::module_kind::ssh) destinations.emplace(spec.ssh.host, spec.ssh.port);
    catalog_object o;
    o.id = new_object_id();
    o.project_id = project_id;
    o.kind = std::string(store::kind_target);
    o.name = std::move(row.target.name);
    o.doc = std::move(*doc);
    o.ref_id = spec.credential_id;
    o.created_at = now;
    objects->push_back(std::move(o));
    pending->push_back(pending_target{row.line, spec.module, spec.ssh.auth, {spec.ssh.host, spec.ssh.port}});
    return std::nullopt;
  };
  auto parsed = catalog::parse_target_import(body, format, keep);
  body.clear();
  body.shrink_to_fit();  // a 64 MiB body is not kept for the transaction's length
  if (forbidden) co_return std::move(*forbidden);
  if (parsed.problem_count > 0) co_return target_import_outcome{{}, std::move(parsed)};

  // Each destination once: a fleet shares hosts between targets (several paths on one server).
  if (!destinations.empty()) {
    auto allow = co_await read_ssh_allow_list(st_);
    if (!allow) co_return std::move(allow).error();
    auto so = ssh_dial_options(cpu_, *allow);
    std::map<std::pair<std::string, std::uint16_t>, error> refused;
    for (const auto& [host, port] : destinations) {
      std::string h = host, field = "ssh.host";  // named: GCC 12 and co_await temporaries
      auto ok = co_await delivery::check_ssh_destination(h, port, field, so);
      if (!ok) refused.emplace(std::pair{host, port}, std::move(ok).error());
    }
    if (!refused.empty()) {
      for (const auto& p : *pending)
        if (p.module == delivery::module_kind::ssh)
          if (auto it = refused.find(p.destination); it != refused.end())
            parsed.add_problem(p.line, it->second.field, it->second.message);
      co_return target_import_outcome{{}, std::move(parsed)};
    }
  }

  // One transaction: every credential checked once, every name checked free, every row stored;
  // a problem rolls all of it back and comes out through `problems`.
  auto problems = std::make_shared<catalog::target_import>();
  store::tx_fn op = [objects, pending, problems, project_id](store::catalog_tx& tx) -> result<void> {
    std::map<std::pair<std::string, int>, std::optional<error>> credentials;  // (id, auth) -> the check's answer
    for (std::size_t i = 0; i < objects->size(); ++i) {
      const auto& o = (*objects)[i];
      const auto& p = (*pending)[i];
      auto [it, fresh] = credentials.try_emplace({o.ref_id, static_cast<int>(p.auth)});
      if (fresh)
        if (auto ok = check_target_credential(tx, project_id, p.module, o.ref_id, p.auth); !ok)
          it->second = std::move(ok).error();
      if (it->second) {
        if (!it->second->is(errc::invalid_argument)) return *it->second;  // the store's failure, not the row's
        problems->add_problem(p.line, it->second->field, it->second->message);
        continue;
      }
      auto taken = tx.objects_named(project_id, store::kind_target, o.name, 1);
      if (!taken) return std::move(taken).error();
      if (!taken->empty() && taken->front().name == o.name) {
        problems->add_problem(p.line, "name", fmt::format("a target named \"{}\" already exists ({})", o.name, taken->front().id));
        continue;
      }
      if (problems->problem_count > 0) continue;  // still checking the rest, no longer storing
      if (auto ins = tx.insert_object(o); !ins) return std::move(ins).error();
    }
    if (problems->problem_count > 0)
      return make_error(errc::invalid_argument, describe_import_problems(*problems), "body");
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (problems->problem_count > 0) co_return target_import_outcome{{}, std::move(*problems)};
  if (!w) co_return std::move(w).error();
  target_import_outcome out;
  out.ids.reserve(objects->size());
  for (const auto& o : *objects) out.ids.push_back(o.id);
  co_return out;
}

namespace detail {

boost::asio::awaitable<result<new_object>> create_credential(const create_context& ctx, std::string body) {
  if (!ctx.key) co_return no_key();
  auto c = catalog::parse_credential_request(body);
  if (!c) co_return std::move(c).error();
  auto o = catalog::make_credential_object(*c, *ctx.key, ctx.id, ctx.project_id, ctx.now);
  if (!o) co_return std::move(o).error();
  co_return new_object{std::move(*o), {}};
}

boost::asio::awaitable<result<new_object>> create_target(const create_context& ctx, std::string body) {
  auto t = catalog::parse_target_request(body);
  if (!t) co_return std::move(t).error();
  std::vector<std::string> base_dirs;
  if (t->spec.module == delivery::module_kind::file && ctx.who.system_admin) {
    auto settings = co_await store::read_settings(ctx.st);
    auto dirs = parse_base_dirs(settings.text("file_target_base_dirs"));
    if (!dirs) co_return std::move(dirs).error();
    base_dirs = std::move(*dirs);
  }
  auto doc = admit_target(*t, ctx.who, base_dirs);
  if (!doc) co_return std::move(doc).error();
  auto out = blank_object(ctx, store::kind_target);
  out.obj.name = t->name;
  out.obj.doc = std::move(*doc);
  if (t->spec.module == delivery::module_kind::ssh) {
    auto allow = co_await read_ssh_allow_list(ctx.st);
    if (!allow) co_return std::move(allow).error();
    auto so = ssh_dial_options(ctx.cpu, *allow);
    // Named arguments: GCC 12 mishandles temporaries built inside a co_await expression.
    std::string host = t->spec.ssh.host, field = "ssh.host";
    auto ok = co_await delivery::check_ssh_destination(host, t->spec.ssh.port, field, so);
    if (!ok) co_return std::move(ok).error();
  }
  out.obj.ref_id = t->spec.credential_id;
  // Its credential is checked where it is inserted: one deleted meanwhile is refused.
  out.check_in_tx = [project_id = ctx.project_id, spec = std::move(t->spec)](store::catalog_tx& tx) {
    return check_target_credential(tx, project_id, spec);
  };
  co_return std::move(out);
}

}  // namespace detail

}  // namespace certfleet::service
