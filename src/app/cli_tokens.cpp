// `certfleet token …`: create, list, revoke, over the store or the API.
#include "cli_common.hpp"

namespace certfleet::app::detail {

namespace {

boost::json::object token_json(const store::token_record& t, const std::string& project_name) {
  auto o = api::token_answer(t, system_clock().now_ms());
  o["project"] = project_name;
  return o;
}

// --ttl: seconds, or a number with s, m, h or d; 0 never expires. The API's range.
result<std::int64_t> parse_ttl(std::string_view text) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  std::int64_t scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  else if (unit == "d") scale = 86400;
  const auto bad = make_error(errc::invalid_argument,
                              fmt::format("--ttl is 0 (never expires) or 60s-{}d, like 3600, 12h or 90d",
                                          api::token_ttl_max_s / 86400),
                              "ttl");
  if (ec != std::errc() || end == text.data() || scale == 0 || n < 0 || n > api::token_ttl_max_s) return bad;
  n *= scale;
  if (n != 0 && (n < api::token_ttl_min_s || n > api::token_ttl_max_s)) return bad;
  return n;
}

// Remote mode (--server): the token routes of the API, for one project.
int run_remote_token(const std::string& cmd, common_flags& flags, const token_args& a) {
  auto c = remote_client::open(flags.remote);
  if (!c) return fail(c.error());
  remote_token_args r{a.project, a.role, a.name, a.id, std::nullopt, a.system, a.all, a.json, a.wide};
  if (!a.ttl.empty()) {
    auto ttl = parse_ttl(a.ttl);
    if (!ttl) return fail(ttl.error());
    r.ttl_s = *ttl;
  }
  return remote_token(*c, cmd, r);
}


}  // namespace

// `certfleet token create|list|revoke`: tokens are managed on the store directly (whoever can
// read the data directory owns the store anyway); each change is audited with actor "cli".
int run_token(const std::string& cmd, common_flags& flags, token_args& a) {
  if (auto refused = refuse_both_modes(flags)) return *refused;
  if (flags.remote.wanted()) return run_remote_token(cmd, flags, a);
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  store::store& store = *cli->store;
  const auto& clock = system_clock();
  auto projects = run_sync([&] { return store.projects().list(); });
  if (!projects) return fail(projects.error());
  auto name_of = [&](const std::string& id) {
    for (const auto& p : *projects)
      if (p.id == id) return p.name;
    return id;
  };
  auto audit = [&](const std::string& project_id, const std::string& action, const std::string& object,
                   const std::string& outcome) {
    store::audit_entry e;
    e.project_id = project_id;
    e.actor = "cli";
    e.action = action;
    e.object = object;
    e.outcome = outcome;
    e.at = clock.now_ms();
    auto r = run_sync([&] { return store.auth().append_audit(e); });
    if (!r) print_error(r.error());
  };

  if (cmd == "create") {
    auto role = store::parse_role(a.role);
    if (!role) return fail(make_error(errc::invalid_argument, "role must be one of viewer, operator, admin, owner", "role"));
    if (a.system && *role < store::role::admin)
      return fail(make_error(errc::invalid_argument, "a --system token must have the admin or owner role", "role"));
    auto ttl = parse_ttl(a.ttl.empty() ? "0" : a.ttl);
    if (!ttl) return fail(ttl.error());
    const time_ms expires_at = *ttl ? clock.now_ms() + *ttl * 1000 : 0;
    auto project = run_sync([&] { return project_for_cli(store, a.project, clock.now_ms()); });
    if (!project) return fail(project.error());
    auto issued = run_sync([&] {
      return api::issue_token(store.auth(), project->id, *role, a.system, a.name, "cli", clock, false, expires_at);
    });
    if (!issued) return fail(issued.error());
    audit(project->id, "token.create", "token/" + (*issued)->record.id, "ok");
    auto o = token_json((*issued)->record, project->name);
    o["token"] = (*issued)->text;  // shown once; only its hash is stored
    print(o);
    return 0;
  }
  if (cmd == "list") {
    std::string pid;
    if (!a.all) {
      auto project = run_sync([&] { return store.projects().find_by_name(a.project); });
      if (!project) return fail(project.error());
      pid = project->id;
    }
    auto tokens = run_sync([&] { return store.auth().list_tokens(pid); });
    if (!tokens) return fail(tokens.error());
    boost::json::array items;
    for (const auto& t : *tokens) items.push_back(token_json(t, name_of(t.project_id)));
    if (a.json) print(boost::json::object{{"items", std::move(items)}});
    else print_token_table(items, a.project, a.wide);
    return 0;
  }
  if (cmd == "revoke") {
    auto r = run_sync([&] { return store.auth().revoke_token(a.id, clock.now_ms()); });
    if (!r) return fail(r.error());
    audit(r->project_id, "token.revoke", "token/" + r->id, "ok");
    print(token_json(*r, name_of(r->project_id)));
    return 0;
  }
  return to_int(exit_code::usage);
}

}  // namespace certfleet::app::detail
