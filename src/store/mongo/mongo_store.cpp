// The whole store on MongoDB (DESIGN §10): one connection (client pool), one set of store
// threads, and the pieces over them — the job queue, the catalog (bound to the queue's terminal
// hooks so a transition and what its hook writes commit together), auth, observe, leases,
// maintenance, session slots, the worker registry — plus the change-stream watcher that wakes
// workers.
#include "certfleet/store/auth.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/maintenance.hpp"
#include "certfleet/store/mongodb.hpp"
#include "certfleet/store/session_slots.hpp"
#include "change_stream.hpp"
#include "client.hpp"
#include "mongo_auth.hpp"
#include "mongo_catalog.hpp"
#include "queue.hpp"
#include "schema.hpp"

#include <stdexcept>

namespace certfleet::store {
namespace mongo {
namespace {

class mongo_store final : public store {
 public:
  explicit mongo_store(std::unique_ptr<connection> c)
      : c_(std::move(c)),
        ex_(*c_, c_->options().threads),
        catalog_factory_([c = c_.get()](mongoc_client_t* client, mongoc_client_session_t* s, mongo_job_tx& jobs) {
          return make_catalog_tx(*c, client, s, jobs);
        }),
        queue_(make_job_queue(*c_, ex_, catalog_factory_)),
        catalog_(make_catalog_store(*c_, ex_, catalog_factory_)),
        auth_(make_auth_store(*c_, ex_)),
        observe_(make_observe_store(*c_, ex_)),
        leases_(make_lease_store(*c_, ex_)),
        maintenance_(make_maintenance_store(*c_, ex_)),
        slots_(make_session_slot_store(*c_, ex_)),
        workers_(make_worker_store(*c_, ex_, *queue_)) {
    if (!catalog_ || !auth_ || !observe_ || !leases_ || !maintenance_ || !slots_ || !workers_)
      throw std::logic_error("a part of the MongoDB store is not built");
  }
  ~mongo_store() override { close(); }

  job_store& jobs() override { return *queue_; }
  project_store& projects() override { return *queue_; }
  auth_store& auth() override { return *auth_; }
  observe_store& observe() override { return *observe_; }
  lease_store& leases() override { return *leases_; }
  maintenance_store& maintenance() override { return *maintenance_; }
  catalog_store& catalog() override { return *catalog_; }
  session_slot_store& session_slots() override { return *slots_; }
  worker_store& workers() override { return *workers_; }
  task<void> ping() override { return queue_->ping(); }

  void watch_claimable(std::function<void(std::string_view lane)> on_claimable) override {
    if (!c_->options().change_stream || watcher_) return;
    watcher_ = std::make_unique<claimable_watcher>(*c_, std::move(on_claimable));
  }

  void close() override {
    watcher_.reset();
    ex_.close();
  }

 private:
  std::unique_ptr<connection> c_;
  executor ex_;
  catalog_tx_factory catalog_factory_;
  std::unique_ptr<job_queue> queue_;
  std::unique_ptr<catalog_store> catalog_;
  std::unique_ptr<auth_store> auth_;
  std::unique_ptr<observe_store> observe_;
  std::unique_ptr<lease_store> leases_;
  std::unique_ptr<maintenance_store> maintenance_;
  std::unique_ptr<session_slot_store> slots_;
  std::unique_ptr<worker_store> workers_;
  std::unique_ptr<claimable_watcher> watcher_;
};

}  // namespace
}  // namespace mongo

result<std::unique_ptr<store>> open_mongodb(const mongodb_options& options) {
  auto c = mongo::connection::open(options);
  if (!c) return std::move(c).error();
  if (auto ok = mongo::prepare_schema(**c); !ok) return std::move(ok).error();
  return std::unique_ptr<store>(std::make_unique<mongo::mongo_store>(std::move(*c)));
}

}  // namespace certfleet::store
