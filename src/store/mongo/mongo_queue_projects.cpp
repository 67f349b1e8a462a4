// Projects on MongoDB (project_store, collection `projects`): the job queue's second interface
// (mongo_queue_detail.hpp). Apart from the jobs because a project's life (ensure, create, remove
// with its jobs, logs and rate windows) shares only the connection and the transaction helper
// with theirs.
#include "mongo_queue_detail.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/store/catalog.hpp"
#include "commands.hpp"

#include <fmt/format.h>

namespace certfleet::store::mongo::detail {

project mongo_queue::read_project(const bson_t* b) {
  view v(b);
  return project{v.str("_id"), v.str("name"), v.i64("created_at")};
}

task<std::pair<project, bool>> mongo_queue::ensure(std::string name, time_ms now) {
  return run<result<std::pair<project, bool>>>(
      ex_, [this, name = std::move(name), now](mongoc_client_t* client) -> result<std::pair<project, bool>> {
        doc q;
        q.str("name", name);
        doc on_insert;
        on_insert.str("_id", new_object_id()).i64("created_at", now);
        doc update;
        update.sub("$setOnInsert", on_insert);
        doc cmd;
        cmd.str("findAndModify", "projects").sub("query", q).sub("update", update).boolean("upsert", true);
        cmd.boolean("new", true).sub("writeConcern", write_concern(*c_)).i32("maxTimeMS", c_->max_time_ms());
        // Two upserts of one name race to the unique index: the loser reads the winner's.
        for (int attempt = 0; attempt < 2; ++attempt) {
          doc reply;
          auto f = c_->command(client, cmd, reply);
          if (f && (is_duplicate_key(*f) || f->network)) continue;
          if (f) return to_error(*f, "ensure project");
          view v(reply.get());
          auto value = v.sub("value");
          if (!value) break;
          const bool created = !v.boolean("lastErrorObject.updatedExisting");
          return std::pair{read_project(value->get()), created};
        }
        doc found;
        if (auto f = c_->command(client, find_command("projects", q, nullptr, 1, 0, c_->max_time_ms(), true), found))
          return to_error(*f, "ensure project");
        auto batch = first_batch(found);
        if (batch.empty()) return make_error(errc::store_failure, fmt::format("project {} could not be created", name));
        return std::pair{read_project(batch.front().get()), false};
      });
}

task<project> mongo_queue::find_by_name(std::string name) {
  return run<result<project>>(ex_, [this, name = std::move(name)](mongoc_client_t* client) -> result<project> {
    doc q;
    q.str("name", name);
    doc reply;
    if (auto f = c_->command(client, find_command("projects", q, nullptr, 1, 0, c_->max_time_ms(), false), reply))
      return to_error(*f, "find project");
    auto batch = first_batch(reply);
    if (batch.empty()) return make_error(errc::not_found, fmt::format("project {} not found", name), "project");
    return read_project(batch.front().get());
  });
}

task<project> mongo_queue::create(std::string name, time_ms now) {
  return run<result<project>>(ex_, [this, name = std::move(name), now](mongoc_client_t* client) -> result<project> {
    doc p;
    p.str("_id", new_object_id()).str("name", name).i64("created_at", now);
    doc cmd;
    cmd.str("insert", "projects").array("documents", {p}).sub("writeConcern", write_concern(*c_));
    cmd.i32("maxTimeMS", c_->max_time_ms());
    doc reply;
    if (auto f = c_->command(client, cmd, reply)) {
      if (is_duplicate_key(*f))
        return make_error(errc::conflict, fmt::format("a project named {} already exists", name), "name");
      return to_error(*f, "create project");
    }
    return read_project(p.get());
  });
}

task<project> mongo_queue::remove(std::string name, time_ms now) {
  return run<result<project>>(ex_, [this, name = std::move(name), now](mongoc_client_t* client) {
    return in_transaction<project>(
        client, "remove project", [&](mongoc_client_session_t* s, std::optional<failure>& f) -> result<project> {
          doc q;
          q.str("name", name);
          doc reply;
          if ((f = c_->command(client, find_in_txn("projects", q, 1, c_->max_time_ms()), reply, s)))
            return to_error(*f, "remove project");
          auto batch = first_batch(reply);
          if (batch.empty()) return make_error(errc::not_found, fmt::format("project {} not found", name), "project");
          auto p = read_project(batch.front().get());
          doc live_status;
          live_status.str_array("$in", {"pending", "active", "failed"});
          doc live;
          live.str("project_id", p.id).sub("status", live_status);
          // count is not allowed in a transaction; an aggregate with $count is.
          doc m;
          m.sub("$match", live);
          doc c;
          c.str("$count", "n");
          doc agg;
          agg.str("aggregate", "jobs").array("pipeline", {m, c}).sub("cursor", doc{}).i32("maxTimeMS", c_->max_time_ms());
          if ((f = c_->command(client, agg, reply, s))) return to_error(*f, "remove project");
          auto counted = first_batch(reply);
          const auto n = counted.empty() ? 0 : view(counted.front().get()).i64("n");
          if (n > 0)
            return make_error(errc::conflict,
                              fmt::format("project {} still has {} jobs that are not finished (cancel them or let them end)",
                                          name, n),
                              "project");
          // The project's jobs, their logs (each line names its project) and its rate windows go
          // with it.
          doc in_project;
          in_project.str("project_id", p.id);
          for (const char* coll : {"job_logs", "jobs", "rate_windows"}) {
            doc del;
            del.sub("q", in_project).i32("limit", 0);
            doc cmd;
            cmd.str("delete", coll).array("deletes", {del}).i32("maxTimeMS", c_->max_time_ms());
            if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "remove project");
          }
          {  // its settings object (PUT …/projects/{p}/settings) is part of the project, not content
            doc settings;
            settings.str("project_id", p.id).str("kind", std::string(kind_project_settings));
            doc del;
            del.sub("q", settings).i32("limit", 0);
            doc cmd;
            cmd.str("delete", "objects").array("deletes", {del}).i32("maxTimeMS", c_->max_time_ms());
            if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "remove project");
          }
          doc by_id;
          by_id.str("_id", p.id);
          doc del;
          del.sub("q", by_id).i32("limit", 1);
          doc cmd;
          cmd.str("delete", "projects").array("deletes", {del}).i32("maxTimeMS", c_->max_time_ms());
          if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "remove project");
          (void)now;
          return p;
        });
  });
}

task<std::vector<project>> mongo_queue::list() {
  return run<result<std::vector<project>>>(ex_, [this](mongoc_client_t* client) -> result<std::vector<project>> {
    doc sort;
    sort.i32("name", 1);
    doc reply;
    if (auto f = c_->command(client, find_command("projects", doc{}, &sort, 10'000, 0, c_->max_time_ms(), false), reply))
      return to_error(*f, "list projects");
    std::vector<project> out;
    for (const auto& d : first_batch(reply)) out.push_back(read_project(d.get()));
    return out;
  });
}

}  // namespace certfleet::store::mongo::detail
