#include "change_stream.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace certfleet::store::mongo {

doc claimable_pipeline() {
  // A job is claimable after an insert with a lane in `q`, or an update that set `q` without
  // making the job active (a claim keeps q while attempts are left: no wake-up for that).
  doc exists;
  exists.boolean("$exists", true);
  doc inserted;
  inserted.str("operationType", "insert").sub("fullDocument.q", exists);
  doc not_active;
  not_active.str("$ne", "active");
  doc updated;
  updated.str("operationType", "update").sub("updateDescription.updatedFields.q", exists);
  updated.sub("updateDescription.updatedFields.status", not_active);
  std::vector<doc> either{inserted, updated};
  doc match_body;
  match_body.array("$or", either);
  doc match;
  match.sub("$match", match_body);
  doc fields;
  fields.i32("operationType", 1).i32("fullDocument.q", 1).i32("updateDescription.updatedFields.q", 1);
  doc project;
  project.sub("$project", fields);
  doc pipeline;
  pipeline.array("pipeline", {match, project});
  return pipeline;
}

claimable_watcher::claimable_watcher(connection& c, std::function<void(std::string_view lane)> on_claimable,
                                     std::int32_t max_await_ms)
    : c_(c), on_claimable_(std::move(on_claimable)), max_await_ms_(max_await_ms), thread_([this] { loop(); }) {}

claimable_watcher::~claimable_watcher() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void claimable_watcher::loop() {
  connection::lease l(c_);
  auto* coll = mongoc_client_get_collection(l.get(), c_.database().c_str(), "jobs");
  const auto pipeline = claimable_pipeline();
  doc opts;
  opts.i32("maxAwaitTimeMS", max_await_ms_);
  bool warned = false;
  auto backoff = std::chrono::seconds(1);
  while (!stop_) {
    auto* stream = mongoc_collection_watch(coll, pipeline.get(), opts.get());
    const bson_t* event = nullptr;
    bson_error_t err{};
    const bson_t* reply = nullptr;
    for (;;) {
      if (stop_) break;
      if (mongoc_change_stream_next(stream, &event)) {
        view v(event);
        auto lane = v.str("fullDocument.q");
        if (lane.empty()) lane = v.str("updateDescription.updatedFields.q");
        if (!lane.empty()) {
          ++events_;
          on_claimable_(lane);
        }
        backoff = std::chrono::seconds(1);
        continue;
      }
      if (mongoc_change_stream_error_document(stream, &err, &reply)) break;
      // No event within maxAwaitTimeMS: the stream stays open.
    }
    mongoc_change_stream_destroy(stream);
    if (stop_) break;
    // The stream could not be opened or broke past the driver's own resume (a standalone, a
    // user without the changeStream privilege, a long outage): say so once, poll meanwhile,
    // and try again later.
    if (!warned) {
      spdlog::warn("store: the change stream on {}.jobs is not available ({}); workers find new jobs by polling "
                   "(worker_poll_ms) until it is",
                   c_.database(), err.message);
      warned = true;
    }
    std::unique_lock lk(m_);
    cv_.wait_for(lk, backoff, [this] { return stop_.load(); });
    backoff = std::min(backoff * 2, std::chrono::seconds(60));
  }
  mongoc_collection_destroy(coll);
}

}  // namespace certfleet::store::mongo
