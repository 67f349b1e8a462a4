#pragma once
// The job operations of one MongoDB transaction (terminal hooks, fan-out enqueues): what
// job_tx offers, on a session whose transaction is open. The catalog side of the same
// transaction comes from the factory the store assembles (mongo_store.cpp).
#include "certfleet/store/store.hpp"
#include "client.hpp"

#include <functional>
#include <memory>
#include <optional>

namespace certfleet::store::mongo {

class mongo_job_tx;
using catalog_tx_factory =
    std::function<std::unique_ptr<catalog_tx>(mongoc_client_t*, mongoc_client_session_t*, mongo_job_tx&)>;

class mongo_job_tx final : public job_tx {
 public:
  mongo_job_tx(const connection& c, mongoc_client_t* client, mongoc_client_session_t* s,
               const catalog_tx_factory* catalog = nullptr);
  ~mongo_job_tx() override;

  result<enqueue_outcome> enqueue(const new_job& j, time_ms now) override;
  result<std::int64_t> append_log(const std::string& job_id, std::string_view level, std::string_view message,
                                  std::string_view detail, time_ms now) override;
  catalog_tx& catalog() override;

  // Records a failed command's failure, so its labels (TransientTransactionError…) reach
  // with_transaction, and returns the error callers see. Catalog operations of the same
  // transaction record theirs here too.
  error keep(const failure& f, std::string_view doing);
  // The failure that ended the transaction's body, if any.
  std::optional<failure> failed;

  const connection& conn() const noexcept { return c_; }
  mongoc_client_t* client() const noexcept { return client_; }
  mongoc_client_session_t* session() const noexcept { return s_; }

 private:
  const connection& c_;
  mongoc_client_t* client_;
  mongoc_client_session_t* s_;
  const catalog_tx_factory* catalog_factory_;
  std::unique_ptr<catalog_tx> catalog_;
};

}  // namespace certfleet::store::mongo
