// SSH session slots (session_slot_store) on MongoDB, mirroring sqlite_session_slots.cpp (DESIGN
// §10). Collection: session_slots {_id: destination, v, slots: [{id, job_id, fence, acquired_at,
// expires_at}]}.
#include "mongo_auth.hpp"
#include "auth_commands.hpp"
#include "commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <set>

namespace certfleet::store::mongo {

using namespace detail;

namespace {

struct slot {
  std::int64_t id = 0;
  std::string job_id;
  std::int64_t fence = 0;
  time_ms acquired_at = 0;
  time_ms expires_at = 0;
};

std::vector<slot> read_slots(const bson_t* d) {
  std::vector<slot> out;
  for (const auto& s : view(d).docs("slots")) {
    view v(s.get());
    out.push_back(slot{v.i64("id"), v.str("job_id"), v.i64("fence"), v.i64("acquired_at"), v.i64("expires_at")});
  }
  return out;
}

doc slot_doc(const slot& s) {
  doc d;
  d.i64("id", s.id).str("job_id", s.job_id).i64("fence", s.fence).i64("acquired_at", s.acquired_at);
  d.i64("expires_at", s.expires_at);
  return d;
}

doc holder_filter(const slot_holder& holder) {
  doc match;
  match.str("job_id", holder.job_id).i64("fence", holder.fence);
  doc f;
  f.sub("slots", op("$elemMatch", match));
  return f;
}

doc write_command(const std::string& destination, std::int64_t version, const std::vector<slot>& slots,
                  const connection& c) {
  doc q;
  q.str("_id", destination).i64("v", version);
  std::vector<doc> items;
  for (const auto& s : slots) items.push_back(slot_doc(s));
  doc set;
  set.i64("v", version + 1).array("slots", items);
  doc stmt;
  stmt.sub("q", q).sub("u", op("$set", set)).boolean("upsert", true);
  doc cmd;
  cmd.str("update", "session_slots").array("updates", {stmt});
  cmd.sub("writeConcern", write_concern(c)).i32("maxTimeMS", c.max_time_ms());
  return cmd;
}

doc renew_command(const slot_holder& holder, time_ms expires_at, const connection& c) {
  doc set;
  set.i64("slots.$[s].expires_at", expires_at);
  doc inc;
  inc.i64("v", 1);
  doc u;
  u.sub("$set", set).sub("$inc", inc);
  doc af;
  af.str("s.job_id", holder.job_id).i64("s.fence", holder.fence);
  doc stmt;
  stmt.sub("q", holder_filter(holder)).sub("u", u).array("arrayFilters", {af}).boolean("multi", true);
  doc cmd;
  cmd.str("update", "session_slots").array("updates", {stmt});
  cmd.sub("writeConcern", write_concern(c)).i32("maxTimeMS", c.max_time_ms());
  return cmd;
}

doc release_slot_command(std::int64_t slot_id, const slot_holder& holder, const connection& c) {
  doc match;
  match.i64("id", slot_id).str("job_id", holder.job_id).i64("fence", holder.fence);
  doc q;
  q.sub("slots", op("$elemMatch", match));
  doc pull;
  pull.sub("slots", match);
  doc inc;
  inc.i64("v", 1);
  doc u;
  u.sub("$pull", pull).sub("$inc", inc);
  doc stmt;
  stmt.sub("q", q).sub("u", u);
  doc cmd;
  cmd.str("update", "session_slots").array("updates", {stmt});
  cmd.sub("writeConcern", write_concern(c)).i32("maxTimeMS", c.max_time_ms());
  return cmd;
}

// ----------------------------------------------------------------------------------------------
// Session slots: one document per destination, {_id: destination, v, slots: [...]}. An acquire
// reads it and the jobs its slots belong to, decides which slots are dead (expired, or their
// attempt is over: the job is not active under that fence or its lease ran out — SQLite's
// SLOT_LIVE), and writes the pruned list plus the new slot with one update filtered on the version
// it read (upsert: a missing document is version 0). Any concurrent change (another acquire, a
// renew, a release) bumps v, so the write then misses: its upsert hits the existing _id (11000)
// and the acquire reads again. At most `limit` live slots per destination, whatever the number of
// processes.
class mongo_slots final : public session_slot_store {
 public:
  mongo_slots(connection& c, executor& ex) : c_(c), ex_(ex), rng_(std::random_device{}()) {}

  task<slot_grant> acquire(std::string destination, slot_holder holder, int limit, time_ms now, time_ms ttl) override {
    return run<result<slot_grant>>(
        ex_, [this, destination = std::move(destination), holder = std::move(holder), limit, now,
              ttl](mongoc_client_t* client) -> result<slot_grant> {
          if (limit < 1) return make_error(errc::invalid_argument, "a session limit is 1 or more", "limit");
          for (int attempt = 0; attempt < max_attempts; ++attempt) {
            doc q;
            q.str("_id", destination);
            doc reply;
            // The primary's latest (no majority): the write below is fenced on `v`, so a stale read
            // only costs another round.
            if (auto f = c_.command(client, find_cmd("session_slots", q, nullptr, nullptr, 1, 0, false, c_.max_time_ms()),
                                    reply))
              return to_error(*f, "acquire session slot");
            auto batch = first_batch(reply);
            std::int64_t version = 0;
            std::vector<slot> slots;
            if (!batch.empty()) {
              version = view(batch.front().get()).i64("v");
              slots = read_slots(batch.front().get());
            }
            std::vector<slot> live_slots;
            auto live = live_of(client, slots, now);
            if (!live) return std::move(live).error();
            for (std::size_t i = 0; i < slots.size(); ++i)
              if ((*live)[i]) live_slots.push_back(slots[i]);
            slot_grant g;
            g.in_use = static_cast<std::int64_t>(live_slots.size());
            const bool pruned = live_slots.size() != slots.size();
            if (g.in_use >= limit && !pruned) return g;
            slot mine;
            if (g.in_use < limit) {
              mine = slot{new_slot_id(), holder.job_id, holder.fence, now, now + ttl};
              live_slots.push_back(mine);
            }
            auto f = c_.command(client, write_command(destination, version, live_slots, c_), reply);
            if (f && is_duplicate_key(*f)) continue;  // changed since the read: read again
            if (f) return to_error(*f, "acquire session slot");
            if (view(reply.get()).i64("n") == 0) continue;
            if (mine.id != 0) {
              g.slot_id = mine.id;
              ++g.in_use;
            }
            return g;
          }
          return make_error(errc::store_busy,
                            fmt::format("the session slots of {} changed under {} acquires in a row; try again",
                                        destination, max_attempts),
                            "destination");
        });
  }

  task<int> renew(slot_holder holder, time_ms now, time_ms ttl) override {
    return run<result<int>>(ex_, [this, holder = std::move(holder), now, ttl](mongoc_client_t* client) -> result<int> {
      doc reply;
      if (auto f = c_.command(client, find_cmd("session_slots", holder_filter(holder), nullptr, nullptr, 0, 0, false,
                                               c_.max_time_ms()),
                              reply))
        return to_error(*f, "renew session slots");
      int n = 0;
      for (const auto& d : first_batch(reply))
        for (const auto& s : read_slots(d.get()))
          if (s.job_id == holder.job_id && s.fence == holder.fence) ++n;
      if (n == 0) return 0;
      if (auto f = c_.command(client, renew_command(holder, now + ttl, c_), reply)) return to_error(*f, "renew session slots");
      return n;
    });
  }

  task<void> release(std::int64_t slot_id, slot_holder holder) override {
    return run<result<void>>(ex_, [this, slot_id, holder = std::move(holder)](mongoc_client_t* client) -> result<void> {
      doc reply;
      if (auto f = c_.command(client, release_slot_command(slot_id, holder, c_), reply))
        return to_error(*f, "release session slot");
      return {};
    });
  }

  task<std::vector<std::pair<std::string, std::int64_t>>> live(time_ms now) override {
    return run<result<std::vector<std::pair<std::string, std::int64_t>>>>(
        ex_, [this, now](mongoc_client_t* client) -> result<std::vector<std::pair<std::string, std::int64_t>>> {
          doc unexpired;
          unexpired.sub("slots.expires_at", i64_op("$gt", now));
          doc sort;
          sort.i32("_id", 1);
          doc reply;
          if (auto f = c_.command(client, find_cmd("session_slots", unexpired, &sort, nullptr, 0, 0, false,
                                                   c_.max_time_ms()),
                                  reply))
            return to_error(*f, "live session slots");
          std::vector<std::pair<std::string, std::int64_t>> out;
          for (const auto& d : first_batch(reply)) {
            auto slots = read_slots(d.get());
            auto alive = live_of(client, slots, now);
            if (!alive) return std::move(alive).error();
            const auto n = std::count(alive->begin(), alive->end(), true);
            if (n > 0) out.emplace_back(view(d.get()).str("_id"), n);
          }
          return out;
        });
  }

 private:
  static constexpr int max_attempts = 16;

  // Which of `slots` are live at `now`: unexpired, and their job active under that fence with its
  // lease ahead (the lease is on the jobs' clock: the caller's time moved by the server offset
  // when leases come from the server's clock, as the queue's due-time filters do).
  result<std::vector<bool>> live_of(mongoc_client_t* client, const std::vector<slot>& slots, time_ms now) {
    std::vector<bool> out(slots.size(), false);
    std::vector<std::string> ids;
    for (const auto& s : slots)
      if (s.expires_at > now) ids.push_back(s.job_id);
    if (ids.empty()) return out;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    doc filter;
    filter.sub("_id", str_in(ids));
    doc proj;
    proj.i32("fence", 1).i32("status", 1).i32("locked_until", 1);
    doc reply;
    if (auto f = c_.command(client, find_cmd("jobs", filter, nullptr, &proj, 0, 0, false, c_.max_time_ms()), reply))
      return to_error(*f, "session slots: reading their jobs");
    struct attempt {
      std::int64_t fence;
      bool active;
      time_ms locked_until;
    };
    std::map<std::string, attempt> jobs;
    for (const auto& d : first_batch(reply)) {
      view v(d.get());
      jobs[v.str("_id")] = attempt{v.i64("fence"), v.str("status") == "active", v.i64("locked_until")};
    }
    const auto lease_now = c_.options().clock == lease_clock::server ? now + c_.clock_offset_ms() : now;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].expires_at <= now) continue;
      auto it = jobs.find(slots[i].job_id);
      out[i] = it != jobs.end() && it->second.fence == slots[i].fence && it->second.active &&
               it->second.locked_until > lease_now;
    }
    return out;
  }

  std::int64_t new_slot_id() {
    // Random, positive, never 0 (0 means "not granted"); unique among live slots in practice
    // (63 bits), and release also filters on the holder.
    std::lock_guard lk(rng_m_);
    std::int64_t id = 0;
    while (id == 0) id = static_cast<std::int64_t>(rng_() >> 1);
    return id;
  }

  connection& c_;
  executor& ex_;
  std::mutex rng_m_;
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<session_slot_store> make_session_slot_store(connection& c, executor& ex) {
  return std::make_unique<mongo_slots>(c, ex);
}

}  // namespace certfleet::store::mongo
