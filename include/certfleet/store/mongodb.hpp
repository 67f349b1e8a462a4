#pragma once
// The MongoDB backend (DESIGN §10): the connection (URI checks, a replica set required, indexes
// and schema version at start, a w:majority write that proves the cluster can acknowledge one)
// and every store interface on a mongoc client pool, calls offloaded to store threads.
// docs/operations-mongodb.md says what was verified here (wire shapes and fault paths against
// mockupdb) and what was not (a real replica set).
#include "certfleet/core/error.hpp"
#include "certfleet/store/store.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace certfleet::store {

// Which clock a lease is measured on. Production: the server's (`$$NOW` in the claim's update
// pipeline), so workers on several machines agree whatever their own clocks say; the due-time
// filters use the caller's time moved by the offset measured from the server's `hello`.
// Tests that step a synthetic clock use the caller's time everywhere.
enum class lease_clock { server, caller };

struct mongodb_options {
  std::string uri;                         // mongodb://… or mongodb+srv://…; the database is the URI's path (default certfleet)
  int threads = 4;                         // store threads, each with a client from the pool
  int server_selection_timeout_ms = 10'000;  // start fails within this when no primary answers
  int operation_timeout_ms = 10'000;       // maxTimeMS on every command; the socket timeout is 1.5×
  lease_clock clock = lease_clock::server;
  // Workers are woken by a change stream on the jobs collection (watch_claimable); off in tests
  // that count the commands a store sends.
  bool change_stream = true;
  // Overrides the URI's database (the conformance suite's and `store check`'s scratch databases).
  std::string database;
};

// Drops the options' database (scratch databases of tests and `store check`), w:majority.
result<void> drop_mongodb_database(const mongodb_options& options);

// mongodb:// or mongodb+srv://, checked without the driver; else invalid_argument naming "store".
result<void> check_mongodb_scheme(std::string_view uri);

// The URI's shape, without connecting: scheme, hosts, options the driver understands, and no
// option that would weaken what §10 needs (w below majority, a read preference other than
// primary). Errors are invalid_argument naming the field "store".
result<void> validate_mongodb_uri(std::string_view uri);

// The URI without its credentials and options, for logs: "mongodb://h1:27017,h2:27017/certfleet".
std::string redacted_mongodb_uri(std::string_view uri);

// The job queue on MongoDB alone (tests, benchmarks).
class mongodb_queue {
 public:
  virtual ~mongodb_queue() = default;
  virtual job_store& jobs() = 0;
  virtual project_store& projects() = 0;
  virtual task<void> ping() = 0;
  virtual void close() = 0;
  // The database's name and the server clock's offset from this machine's (ms, server − local).
  virtual std::string database() const = 0;
  virtual time_ms clock_offset_ms() const = 0;
};

// The whole store on MongoDB: the queue, the catalog, auth, observe, leases, maintenance and
// session slots. Connects as open_mongodb_queue does.
result<std::unique_ptr<store>> open_mongodb(const mongodb_options& options);

// Connects (within server_selection_timeout_ms), refuses a standalone server or a cluster without
// a primary, creates the indexes (idempotent) and records the schema version.
// Errors: invalid_argument (field "store") for the URI; store_failure with what the server said.
result<std::unique_ptr<mongodb_queue>> open_mongodb_queue(const mongodb_options& options);

// The certfleet executable does not link this backend: it loads it from a module
// (certfleet_store_mongo.so) only when the `store` setting is a MongoDB URI, so a process on
// SQLite never loads the MongoDB C driver (Debian's initialises itself when loaded). The module
// hands over this table from one exported C function; tests and benchmarks link the backend
// and call the functions above directly.
struct mongodb_backend {
  const char* version;       // the certfleet version the module was built as
  std::size_t options_size;  // sizeof(mongodb_options) there: a module of another build is refused
  result<void> (*validate_uri)(std::string_view uri);
  std::string (*redacted_uri)(std::string_view uri);
  result<std::unique_ptr<store>> (*open)(const mongodb_options& options);
  result<void> (*drop_database)(const mongodb_options& options);
};
#define CERTFLEET_MONGODB_BACKEND_ENTRY certfleet_store_mongodb_backend

// The backend for a `store` setting that is a MongoDB URI, with the URI validated: the module is
// loaded on the first call (once; never unloaded) from beside the executable (the build tree),
// else from ../lib/certfleet/ beside it (scripts/install.sh). Errors: invalid_argument (field
// "store") for another scheme, nothing loaded, or for the URI's shape (validate_mongodb_uri);
// config_invalid (field "store") naming each path tried and why it did not load.
result<const mongodb_backend*> mongodb_backend_for(std::string_view uri);

}  // namespace certfleet::store
