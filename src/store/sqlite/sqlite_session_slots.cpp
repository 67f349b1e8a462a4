#include "sqlite_session_slots.hpp"

namespace certfleet::store::sqlite {

namespace {

// A slot is live while its expiry is ahead and its attempt still holds its job: the job is
// active under that fence and its lease has not run out (a worker that stopped heartbeating —
// killed, hung — frees its slots with its lease, before any reaper has run). NOW is the
// statement's parameter that holds the caller's time.
#define SLOT_LIVE(NOW)                                                                                  \
  "s.expires_at > " NOW " AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = s.job_id AND j.fence = s.fence " \
  "AND j.status = 'active' AND j.locked_until > " NOW ")"

class impl final : public session_slot_store {
 public:
  impl(writer& w, reader_pool& r) : writer_(w), readers_(r) {}

  task<slot_grant> acquire(std::string destination, slot_holder holder, int limit, time_ms now, time_ms ttl) override {
    return run_write<result<slot_grant>>(
        writer_, [destination = std::move(destination), holder = std::move(holder), limit, now, ttl](db& d) -> result<slot_grant> {
          if (limit < 1) return make_error(errc::invalid_argument, "a session limit is 1 or more", "limit");
          {
            auto del = d.prepare("DELETE FROM session_slots AS s WHERE s.destination = ?1 AND NOT (" SLOT_LIVE("?2") ")");
            del->bind(1, destination).bind(2, now).run();
          }
          slot_grant g;
          {
            auto n = d.prepare("SELECT count(*) FROM session_slots WHERE destination = ?1");
            n->bind(1, destination);
            if (n->step()) g.in_use = n->int64(0);
          }
          if (g.in_use >= limit) return g;
          auto ins = d.prepare(
              "INSERT INTO session_slots (destination, job_id, fence, acquired_at, expires_at) "
              "VALUES (?1, ?2, ?3, ?4, ?4 + ?5) RETURNING id");
          ins->bind(1, destination).bind(2, holder.job_id).bind(3, holder.fence).bind(4, now).bind(5, ttl);
          if (!ins->step()) throw db_error(0, "session slot insert returned no row");
          g.slot_id = ins->int64(0);
          ins->run();
          ++g.in_use;
          return g;
        });
  }

  task<int> renew(slot_holder holder, time_ms now, time_ms ttl) override {
    return run_write<result<int>>(writer_, [holder = std::move(holder), now, ttl](db& d) -> result<int> {
      auto s = d.prepare("UPDATE session_slots SET expires_at = ?3 + ?4 WHERE job_id = ?1 AND fence = ?2 RETURNING id");
      s->bind(1, holder.job_id).bind(2, holder.fence).bind(3, now).bind(4, ttl);
      int n = 0;
      while (s->step()) ++n;
      return n;
    });
  }

  task<void> release(std::int64_t slot_id, slot_holder holder) override {
    return run_write<result<void>>(writer_, [slot_id, holder = std::move(holder)](db& d) -> result<void> {
      auto s = d.prepare("DELETE FROM session_slots WHERE id = ?1 AND job_id = ?2 AND fence = ?3");
      s->bind(1, slot_id).bind(2, holder.job_id).bind(3, holder.fence).run();
      return {};
    });
  }

  task<std::vector<std::pair<std::string, std::int64_t>>> live(time_ms now) override {
    return run_read<result<std::vector<std::pair<std::string, std::int64_t>>>>(
        readers_, [now](db& d) -> result<std::vector<std::pair<std::string, std::int64_t>>> {
          auto s = d.prepare("SELECT s.destination, count(*) FROM session_slots AS s WHERE " SLOT_LIVE("?1")
                             " GROUP BY s.destination ORDER BY s.destination");
          s->bind(1, now);
          std::vector<std::pair<std::string, std::int64_t>> out;
          while (s->step()) out.emplace_back(s->text(0), s->int64(1));
          return out;
        });
  }

 private:
  writer& writer_;
  reader_pool& readers_;
};

#undef SLOT_LIVE

}  // namespace

std::unique_ptr<session_slot_store> make_session_slot_store(writer& w, reader_pool& r) {
  return std::make_unique<impl>(w, r);
}

}  // namespace certfleet::store::sqlite
