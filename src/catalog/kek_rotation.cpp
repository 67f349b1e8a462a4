#include "certfleet/catalog/kek_rotation.hpp"

#include "certfleet/core/crash.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace certfleet::catalog {

namespace asio = boost::asio;
namespace json = boost::json;

std::string kek_orchestrate_key(std::uint32_t from, std::uint32_t to) { return fmt::format("kek:{}:{}", from, to); }

std::string kek_batch_key(std::uint32_t to, std::string_view collection, std::string_view cursor) {
  return fmt::format("kek:{}:{}:{}", to, collection, cursor);
}

std::string kek_orchestrate_payload(std::uint32_t from, std::uint32_t to) {
  return json::serialize(json::object{{"from", from}, {"to", to}});
}

std::vector<collection_progress> rotation_progress(const std::vector<store::sealed_count>& counts,
                                                   std::uint32_t primary, std::span<const kind> kinds) {
  std::vector<collection_progress> out;
  for (const auto& k : kinds)
    if (!k.sealed.empty()) out.push_back({std::string(k.name), 0, 0, {}});
  for (const auto& n : counts) {
    auto it = std::find_if(out.begin(), out.end(), [&](const collection_progress& p) { return p.collection == n.kind; });
    if (it == out.end()) it = out.insert(out.end(), collection_progress{n.kind, 0, 0, {}});
    it->total += n.count;
    if (n.version == primary) it->done += n.count;
    it->by_version.push_back(n);
  }
  return out;
}

namespace {

struct rotation_payload {
  std::uint32_t from = 0, to = 0;
  std::string collection;  // collection jobs
  std::string cursor;      // collection jobs: the last id of the previous batch ("" first)
};

// The additional data of a sealed row of `k`: "<kind>:<id>:<what>", as its owner sealed it.
std::string sealed_aad(const kind& k, std::string_view id) { return fmt::format("{}:{}:{}", k.name, id, k.sealed); }

result<rotation_payload> parse_rotation_payload(std::string_view text, bool collection, std::span<const kind> kinds) {
  auto v = certfleet::json::parse_value(text, "payload", 4);
  if (!v) return std::move(v).error();
  if (!v->is_object()) return make_error(errc::invalid_argument, "payload must be a JSON object", "payload");
  const auto& o = v->as_object();
  rotation_payload p;
  auto version = [&](std::string_view name, std::uint32_t& out) -> result<void> {
    const auto* f = o.if_contains(name);
    if (!f || !f->is_int64() || f->as_int64() < 1 || f->as_int64() > 0xffffffffLL)
      return make_error(errc::invalid_argument, fmt::format("{} must be a key version (an integer >= 1)", name),
                        std::string(name));
    out = static_cast<std::uint32_t>(f->as_int64());
    return {};
  };
  if (auto r = version("to", p.to); !r) return std::move(r).error();
  if (auto r = version("from", p.from); !r) return std::move(r).error();
  if (collection) {
    const auto* c = o.if_contains("collection");
    if (!c || !c->is_string() || !find_sealed(kinds, c->as_string()))
      return make_error(errc::invalid_argument, "collection must name a collection of sealed envelopes", "collection");
    p.collection = std::string(c->as_string());
    if (const auto* cur = o.if_contains("cursor")) {
      if (!cur->is_string() || cur->as_string().size() > 64)
        return make_error(errc::invalid_argument, "cursor must be an object id", "cursor");
      p.cursor = std::string(cur->as_string());
    }
  }
  return p;
}

std::string collection_payload(const rotation_payload& p, std::string_view collection, std::string_view cursor) {
  return json::serialize(json::object{
      {"from", p.from}, {"to", p.to}, {"collection", collection}, {"cursor", cursor}});
}

queue::enqueue_request rotation_job(const store::job_record& parent, std::string_view type, std::string payload,
                                    std::string key, time_ms run_at) {
  queue::enqueue_request j;
  j.project_id = parent.project_id;
  j.type = std::string(type);
  j.payload = std::move(payload);
  j.idempotency_key = std::move(key);
  j.parent_job_id = parent.id;
  j.triggered_by = queue::triggers::kek_rotation;
  j.run_at = run_at;
  return j;
}

// The worker's ring must hold `to` as its primary (it reads the key file again first).
result<void> check_ring(const kek* key, const rotation_payload& p) {
  if (!key) return make_error(errc::config_invalid, "no key-encryption key is loaded in this process", "key_file");
  if (auto r = key->reload(); !r) return std::move(r).error();
  if (!key->has_version(p.to))
    return make_error(errc::config_invalid,
                      fmt::format("the key file {} of this worker does not hold key version {}: give every process the "
                                  "key file `certfleet kek rotate` wrote",
                                  key->file().string(), p.to),
                      "key_file");
  return {};
}

asio::awaitable<queue::outcome> orchestrate(queue::job_context& ctx, std::shared_ptr<const kek_rotation_options> o) {
  auto p = parse_rotation_payload(ctx.payload(), false, o->kinds);
  if (!p) co_return queue::outcome::permanent_failure(p.error());
  if (auto ok = check_ring(o->key, *p); !ok) co_return queue::outcome::failure(ok.error());
  if (o->key->version() != p->to) {
    std::string line = fmt::format("superseded: the primary key version is now {}, whose rotation re-seals everything",
                                   o->key->version());
    co_await ctx.log("info", std::move(line));
    co_return queue::outcome::ok();
  }
  const auto now = ctx.clock().now_ms();
  auto planned = std::make_shared<std::vector<std::string>>();
  auto unknown = std::make_shared<std::vector<std::string>>();
  const auto job = ctx.job();
  const auto settle = o->settle.count();
  const auto payload = *p;
  const auto kinds = o->kinds;
  store::tx_fn plan = [planned, unknown, job, payload, now, settle, kinds](store::catalog_tx& tx) -> result<void> {
    auto counts = tx.sealed_versions();
    if (!counts) return std::move(counts).error();
    std::map<std::string, std::int64_t> left;
    for (const auto& c : *counts)
      if (c.version != payload.to) left[c.kind] += c.count;
    for (const auto& [kind, n] : left) {
      if (!find_sealed(kinds, kind)) {
        unknown->push_back(fmt::format("{} ({})", kind, n));
        continue;
      }
      auto j = rotation_job(job, queue::job_names::kek_rotation_collection, collection_payload(payload, kind, ""),
                            kek_batch_key(payload.to, kind, ""), now + settle);
      if (auto e = queue::enqueue_in(tx.jobs(), j, now); !e) return std::move(e).error();
      planned->push_back(fmt::format("{} ({} envelopes)", kind, n));
    }
    return {};
  };
  if (auto w = co_await ctx.store().catalog().transact(std::move(plan)); !w)
    co_return queue::outcome::failure(w.error());
  crash_point("kek_rotation_planned");
  std::string list;
  for (const auto& s : *planned) list += (list.empty() ? "" : ", ") + s;
  // Lines are built before co_await: GCC 12 destroys temporaries of a conditional inside a
  // co_await expression twice.
  std::string line = planned->empty() ? fmt::format("nothing to re-seal: every envelope is at key version {}", p->to)
                                      : fmt::format("re-sealing to key version {}: {}", p->to, list);
  co_await ctx.log("info", std::move(line));
  for (const auto& u : *unknown) {
    std::string warn = fmt::format("envelopes of a kind no collection is registered for are left as they are: {}", u);
    co_await ctx.log("warn", std::move(warn));
  }
  co_return queue::outcome::ok();
}

asio::awaitable<queue::outcome> collection(queue::job_context& ctx, std::shared_ptr<const kek_rotation_options> o) {
  auto p = parse_rotation_payload(ctx.payload(), true, o->kinds);
  if (!p) co_return queue::outcome::permanent_failure(p.error());
  if (auto ok = check_ring(o->key, *p); !ok) co_return queue::outcome::failure(ok.error());
  if (o->key->version() != p->to) {
    std::string line = fmt::format("superseded: the primary key version is now {}", o->key->version());
    co_await ctx.log("info", std::move(line));
    co_return queue::outcome::ok();
  }
  auto settings = co_await store::read_settings(ctx.store());
  const int batch = static_cast<int>(settings.integer("kek_rotation_batch"));
  // The batch: the next `batch` envelopes of the collection after the cursor, whatever their
  // version, so a retry after a crash reads the same batch and names the same next one.
  const auto kind = p->collection;
  const auto cursor = p->cursor;
  const auto* row = find_sealed(o->kinds, kind);  // the payload names one: parse_rotation_payload
  store::read_value_fn<std::vector<store::sealed_row>> page = [kind, cursor, batch](store::catalog_read& rd) {
    return rd.sealed_page(kind, "", cursor, batch);
  };
  auto rows = co_await store::read_value(ctx.store().catalog(), std::move(page));
  if (!rows) co_return queue::outcome::failure(rows.error());

  const std::string at_to = fmt::format("cfs1:{}:", p->to);
  struct change {
    std::string id, old_sealed, new_sealed;
  };
  auto changes = std::make_shared<std::vector<change>>();
  std::int64_t unreadable = 0;
  for (auto& r : *rows) {
    if (r.sealed.starts_with(at_to)) continue;
    const auto aad = sealed_aad(*row, r.id);
    auto plain = open_sealed(*o->key, r.sealed, aad);
    if (!plain) {
      // Left as it is (a later read reports it the same way); retire refuses while it names a version.
      ++unreadable;
      std::string line = fmt::format("{} {}: {}", kind, r.id, plain.error().message);
      co_await ctx.log("error", std::move(line));
      continue;
    }
    auto sealed = seal(*o->key, *plain, aad);
    std::fill(plain->begin(), plain->end(), '\0');
    if (!sealed) co_return queue::outcome::failure(sealed.error());
    changes->push_back({r.id, std::move(r.sealed), std::move(*sealed)});
  }
  // Tests: leave the first envelope of each batch behind, as if it was written with the old key
  // while the chain passed it; the final sweep must re-seal it.
  if (fault_point("kek_rotation_leave_first") && !changes->empty()) changes->erase(changes->begin());
  const bool more = static_cast<int>(rows->size()) == batch;
  const std::string next_cursor = rows->empty() ? cursor : rows->back().id;
  const auto now = ctx.clock().now_ms();
  const auto job = ctx.job();
  const auto payload = *p;
  auto resealed = std::make_shared<std::int64_t>(0);
  auto swept = std::make_shared<std::int64_t>(0);
  const kek* key = o->key;
  store::tx_fn write = [changes, resealed, swept, more, next_cursor, job, payload, now, key, at_to, batch,
                        row](store::catalog_tx& tx) -> result<void> {
    std::size_t i = 0;
    for (const auto& c : *changes) {
      auto r = tx.reseal_object(c.id, c.old_sealed, c.new_sealed);
      if (!r) return std::move(r).error();
      if (*r) ++*resealed;
      if (++i == changes->size() / 2) crash_point("kek_rotation_batch_half");
    }
    if (!more) {
      // The chain's last batch: a final sweep of the whole collection, in this same transaction,
      // for envelopes written with the old key behind the cursor while the chain ran (a process
      // that had not yet seen the new key file). Those that do not open are left (and logged by
      // the batch that met them).
      auto left = tx.sealed_page(payload.collection, at_to, "", batch);
      if (!left) return std::move(left).error();
      for (auto& r : *left) {
        const auto aad = sealed_aad(*row, r.id);
        auto plain = open_sealed(*key, r.sealed, aad);
        if (!plain) continue;
        auto sealed = seal(*key, *plain, aad);
        std::fill(plain->begin(), plain->end(), '\0');
        if (!sealed) return std::move(sealed).error();
        auto u = tx.reseal_object(r.id, r.sealed, *sealed);
        if (!u) return std::move(u).error();
        if (*u) ++*swept;
      }
    }
    if (more) {
      auto j = rotation_job(job, queue::job_names::kek_rotation_collection,
                            collection_payload(payload, payload.collection, next_cursor),
                            kek_batch_key(payload.to, payload.collection, next_cursor), 0);
      if (auto e = queue::enqueue_in(tx.jobs(), j, now); !e) return std::move(e).error();
    }
    crash_point("kek_rotation_before_commit");
    return {};
  };
  if (auto w = co_await ctx.store().catalog().transact(std::move(write)); !w)
    co_return queue::outcome::failure(w.error());
  crash_point("kek_rotation_batch_committed");
  const auto skipped = static_cast<std::int64_t>(changes->size()) - *resealed;
  std::string skipped_text, unreadable_text;
  if (skipped) skipped_text = fmt::format(", {} changed meanwhile (left to their writer)", skipped);
  if (unreadable) unreadable_text = fmt::format(", {} do not open", unreadable);
  std::string tail = more ? std::string("; next batch enqueued") : std::string("; collection done");
  if (*swept) tail += fmt::format(" (the final sweep re-sealed {} left behind the cursor)", *swept);
  std::string line = fmt::format("{}: examined {} envelopes after \"{}\", re-sealed {} to key version {}{}{}{}", kind,
                                 rows->size(), cursor, *resealed, p->to, skipped_text, unreadable_text, tail);
  co_await ctx.log("info", std::move(line));
  if (unreadable) {
    std::string why = fmt::format("{} envelopes of {} do not open", unreadable, kind);
    co_return queue::outcome::partial(std::move(why));
  }
  co_return queue::outcome::ok();
}

}  // namespace

void register_kek_rotation_handlers(queue::handler_registry& r, std::shared_ptr<const kek_rotation_options> options) {
  namespace n = queue::job_names;
  r.add(std::string(n::kek_rotation_orchestrate),
        [options](queue::job_context& ctx) { return orchestrate(ctx, options); },
        [kinds = options->kinds](const std::string& payload) -> result<void> {
          auto p = parse_rotation_payload(payload, false, kinds);
          if (!p) return std::move(p).error();
          return {};
        });
  r.add(std::string(n::kek_rotation_collection),
        [options](queue::job_context& ctx) { return collection(ctx, options); },
        [kinds = options->kinds](const std::string& payload) -> result<void> {
          auto p = parse_rotation_payload(payload, true, kinds);
          if (!p) return std::move(p).error();
          return {};
        });
}

}  // namespace certfleet::catalog
