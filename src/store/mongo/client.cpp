#include "client.hpp"

#include "certfleet/core/clock.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>

namespace certfleet::store {
namespace mongo {

namespace {

// The driver's own log lines go to the process log (not straight to stderr): its warnings and
// errors as warnings (each failure also comes back as an error value), the rest at debug.
void driver_log(mongoc_log_level_t level, const char* domain, const char* message, void*) {
  if (level <= MONGOC_LOG_LEVEL_WARNING) spdlog::warn("mongoc {}: {}", domain, message);
  else spdlog::debug("mongoc {}: {}", domain, message);
}

void init_driver() {
  static std::once_flag once;
  std::call_once(once, [] {
    mongoc_log_set_handler(driver_log, nullptr);
    mongoc_init();
  });
}

error uri_error(std::string message) { return make_error(errc::invalid_argument, std::move(message), "store"); }

struct uri_ptr {
  mongoc_uri_t* p = nullptr;
  ~uri_ptr() {
    if (p) mongoc_uri_destroy(p);
  }
};

// The URI parsed and checked; the caller owns the result.
result<mongoc_uri_t*> parse_uri(std::string_view text) {
  if (auto scheme = check_mongodb_scheme(text); !scheme) return std::move(scheme).error();
  init_driver();
  bson_error_t err{};
  uri_ptr uri{mongoc_uri_new_with_error(std::string(text).c_str(), &err)};
  if (!uri.p) return uri_error(fmt::format("store: not a MongoDB URI: {}", err.message));
  if (!mongoc_uri_get_hosts(uri.p) && !mongoc_uri_get_srv_hostname(uri.p))
    return uri_error("store: the MongoDB URI names no host");
  if (const auto* wc = mongoc_uri_get_write_concern(uri.p)) {
    const auto w = mongoc_write_concern_get_w(wc);
    if (w != MONGOC_WRITE_CONCERN_W_DEFAULT && w != MONGOC_WRITE_CONCERN_W_MAJORITY)
      return uri_error(fmt::format(
          "store: w={} in the URI: certfleet writes with w=majority so that an acknowledged job survives a failover; "
          "remove the w option",
          w));
  }
  if (const auto* rp = mongoc_uri_get_read_prefs_t(uri.p); rp && mongoc_read_prefs_get_mode(rp) != MONGOC_READ_PRIMARY)
    return uri_error("store: readPreference other than primary in the URI: claims and cursors read the primary; "
                     "remove the readPreference option");
  if (const char* db = mongoc_uri_get_database(uri.p)) {
    std::string_view name(db);
    if (name.empty() || name.size() > 38 || name.find_first_of("/\\. \"$") != std::string_view::npos)
      return uri_error(fmt::format("store: the database name '{}' in the URI is not valid for MongoDB", name));
  }
  auto* out = uri.p;
  uri.p = nullptr;
  return out;
}

bool has_label(const bson_t* reply, const char* label) { return reply && mongoc_error_has_label(reply, label); }

}  // namespace

doc majority_write_concern(std::int32_t wtimeout_ms) {
  doc wc;
  wc.str("w", "majority").i32("wtimeout", wtimeout_ms);
  return wc;
}

doc majority_read_concern() {
  doc rc;
  rc.str("level", "majority");
  return rc;
}

error to_error(const failure& f, std::string_view doing) {
  auto e = f.err;
  e.message = fmt::format("{}: {}", doing, f.err.message);
  return e;
}

namespace {

failure from_driver(const bson_error_t& err, const bson_t* reply) {
  failure f;
  f.code = err.domain == MONGOC_ERROR_SERVER || err.domain == MONGOC_ERROR_WRITE_CONCERN ? err.code : 0;
  // A stream error (the connection broke or timed out) leaves the outcome unknown; so does a
  // server selection that timed out after the command may have been sent. Both carry the label
  // the driver sets for transactions too.
  f.network = err.domain == MONGOC_ERROR_STREAM || err.domain == MONGOC_ERROR_SERVER_SELECTION ||
              has_label(reply, "NetworkError");
  f.transient_transaction = has_label(reply, "TransientTransactionError");
  f.unknown_commit_result = has_label(reply, "UnknownTransactionCommitResult");
  if (reply && !bson_empty(reply)) f.reply = doc::copy_of(reply);
  const auto kind = f.code == max_time_ms_expired ? errc::timeout : errc::store_failure;
  f.err = make_error(kind, f.code ? fmt::format("{} (code {})", err.message, f.code) : std::string(err.message));
  return f;
}

}  // namespace

std::optional<failure> reply_failure(const doc& reply) {
  // ok: 1 replies that still failed: a write error (the first says why) or a write concern
  // that was not satisfied.
  view v(reply.get());
  auto write_errors = v.docs("writeErrors");
  if (!write_errors.empty()) {
    view first(write_errors.front().get());
    failure f;
    f.code = first.i64("code");
    f.reply = reply;
    f.err = make_error(errc::store_failure, fmt::format("{} (code {})", first.str("errmsg"), f.code));
    return f;
  }
  if (auto wce = v.sub("writeConcernError")) {
    view w(wce->get());
    failure f;
    f.code = w.i64("code");
    f.reply = reply;
    f.err = make_error(errc::store_failure,
                       fmt::format("the write was not acknowledged by a majority: {} (code {})", w.str("errmsg"), f.code));
    return f;
  }
  return std::nullopt;
}

std::optional<failure> connection::command(mongoc_client_t* client, const doc& cmd, doc& reply,
                                           mongoc_client_session_t* session) const {
  doc opts;
  bson_error_t err{};
  if (session && !mongoc_client_session_append(session, opts.get(), &err)) return from_driver(err, nullptr);
  bson_t raw;
  const bool ok = mongoc_client_command_with_opts(client, database_.c_str(), cmd.get(), nullptr, opts.get(), &raw, &err);
  reply = doc::copy_of(&raw);
  bson_destroy(&raw);
  if (!ok) return from_driver(err, reply.get());
  return reply_failure(reply);
}

namespace {

struct txn_context {
  const std::function<std::optional<failure>(mongoc_client_session_t*)>* body;
  std::optional<failure> last;
};

bool txn_callback(mongoc_client_session_t* session, void* ctx, bson_t** reply, bson_error_t* error) {
  auto* c = static_cast<txn_context*>(ctx);
  c->last = (*c->body)(session);
  if (!c->last) return true;
  // with_transaction reads the labels from this reply to decide whether to run again.
  if (c->last->reply) *reply = bson_copy(c->last->reply->get());
  bson_set_error(error, MONGOC_ERROR_SERVER, static_cast<std::uint32_t>(c->last->code), "%s",
                 c->last->err.message.c_str());
  return false;
}

}  // namespace

std::optional<failure> connection::transaction(
    mongoc_client_t* client, const std::function<std::optional<failure>(mongoc_client_session_t*)>& body) const {
  bson_error_t err{};
  auto* sopts = mongoc_session_opts_new();
  auto* session = mongoc_client_start_session(client, sopts, &err);
  mongoc_session_opts_destroy(sopts);
  if (!session) return from_driver(err, nullptr);
  auto* topts = mongoc_transaction_opts_new();
  auto* wc = mongoc_write_concern_new();
  mongoc_write_concern_set_wmajority(wc, options_.operation_timeout_ms);
  mongoc_transaction_opts_set_write_concern(topts, wc);
  auto* rc = mongoc_read_concern_new();
  mongoc_read_concern_set_level(rc, MONGOC_READ_CONCERN_LEVEL_MAJORITY);
  mongoc_transaction_opts_set_read_concern(topts, rc);
  mongoc_transaction_opts_set_max_commit_time_ms(topts, options_.operation_timeout_ms);
  txn_context ctx{&body, std::nullopt};
  bson_t reply;
  const bool ok = mongoc_client_session_with_transaction(session, txn_callback, topts, &ctx, &reply, &err);
  std::optional<failure> out;
  if (!ok) {
    // The body's own failure when it gave up; otherwise the commit's.
    out = ctx.last ? std::move(ctx.last) : std::optional<failure>(from_driver(err, &reply));
  }
  bson_destroy(&reply);
  mongoc_read_concern_destroy(rc);
  mongoc_write_concern_destroy(wc);
  mongoc_transaction_opts_destroy(topts);
  mongoc_client_session_destroy(session);
  return out;
}

connection::~connection() {
  if (pool_) mongoc_client_pool_destroy(pool_);
  if (uri_) mongoc_uri_destroy(uri_);
}

result<std::unique_ptr<connection>> connection::open(const mongodb_options& o) {
  if (o.threads < 1 || o.threads > 64)
    return make_error(errc::invalid_argument, "store_threads must be 1..64", "store_threads");
  if (o.operation_timeout_ms < 100 || o.operation_timeout_ms > 600'000)
    return make_error(errc::invalid_argument, "store_timeout_ms must be 100..600000", "store_timeout_ms");
  auto parsed = parse_uri(o.uri);
  if (!parsed) return std::move(parsed).error();
  std::unique_ptr<connection> c(new connection(o));
  c->uri_ = *parsed;
  if (o.server_selection_timeout_ms < 100 || o.server_selection_timeout_ms > 600'000)
    return make_error(errc::invalid_argument, "store_timeout_ms must be 100..600000", "store_timeout_ms");
  // Timeouts the operator wrote in the URI win; the options give the rest.
  auto set_default = [&](const char* name, std::int32_t v) {
    if (!mongoc_uri_has_option(c->uri_, name)) mongoc_uri_set_option_as_int32(c->uri_, name, v);
  };
  set_default(MONGOC_URI_SERVERSELECTIONTIMEOUTMS, o.server_selection_timeout_ms);
  set_default(MONGOC_URI_CONNECTTIMEOUTMS, std::min(o.server_selection_timeout_ms, 10'000));
  set_default(MONGOC_URI_SOCKETTIMEOUTMS, o.operation_timeout_ms * 3 / 2);
  const auto selection_ms = mongoc_uri_get_option_as_int32(c->uri_, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
                                                          o.server_selection_timeout_ms);
  mongoc_uri_set_option_as_utf8(c->uri_, MONGOC_URI_APPNAME, "certfleet");
  const char* db = mongoc_uri_get_database(c->uri_);
  c->database_ = !o.database.empty() ? o.database : db && *db ? db : "certfleet";
  c->pool_ = mongoc_client_pool_new(c->uri_);
  if (!c->pool_) return make_error(errc::invalid_argument, "store: the MongoDB URI's options are not usable", "store");
  mongoc_client_pool_set_error_api(c->pool_, MONGOC_ERROR_API_VERSION_2);
  mongoc_client_pool_max_size(c->pool_, static_cast<std::uint32_t>(std::max(o.threads, 1) + 2));

  // What the server is: a replica-set member or a mongos, never a standalone.
  lease l(*c);
  doc hello;
  hello.i32("hello", 1);
  bson_t reply;
  bson_error_t err{};
  const auto before = system_clock().now_ms();
  const bool ok = mongoc_client_command_simple(l.get(), "admin", hello.get(), nullptr, &reply, &err);
  const auto after = system_clock().now_ms();
  auto r = doc::copy_of(&reply);
  bson_destroy(&reply);
  if (!ok)
    return make_error(errc::store_failure,
                      fmt::format("store: no MongoDB primary answered within {} ms: {}", selection_ms, err.message),
                      "store");
  view v(r.get());
  if (!v.has("setName") && v.str("msg") != "isdbgrid")
    return make_error(errc::store_failure,
                      "store: the MongoDB server is a standalone: certfleet needs a replica set (transactions, "
                      "majority writes, change streams); start mongod with --replSet and run rs.initiate(), even "
                      "for a single node (docs/operations-mongodb.md)",
                      "store");
  if (v.has("localTime")) c->offset_ms_ = v.i64("localTime") - (before + after) / 2;
  return c;
}

executor::executor(connection& c, int threads) : c_(c) {
  for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { loop(); });
}

executor::~executor() { close(); }

void executor::submit(std::function<void(mongoc_client_t*)> work, std::function<void()> abandon) {
  {
    std::lock_guard lk(m_);
    if (!stop_) {
      q_.push_back({std::move(work), std::move(abandon)});
      cv_.notify_one();
      return;
    }
  }
  abandon();
}

void executor::close() {
  {
    std::lock_guard lk(m_);
    if (stop_ && threads_.empty()) return;
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  std::deque<item> left;
  {
    std::lock_guard lk(m_);
    left.swap(q_);
  }
  for (auto& i : left) i.abandon();
}

void executor::loop() {
  for (;;) {
    item it;
    {
      std::unique_lock lk(m_);
      cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
      // Work queued before close() still runs: close() says "after the work queued so far".
      if (q_.empty()) return;
      it = std::move(q_.front());
      q_.pop_front();
    }
    connection::lease l(c_);
    it.work(l.get());
  }
}

}  // namespace mongo

result<void> drop_mongodb_database(const mongodb_options& options) {
  auto c = mongo::connection::open(options);
  if (!c) return std::move(c).error();
  mongo::connection::lease l(**c);
  mongo::doc cmd;
  cmd.i32("dropDatabase", 1).sub("writeConcern", mongo::majority_write_concern((*c)->max_time_ms()));
  mongo::doc reply;
  if (auto f = (*c)->command(l.get(), cmd, reply)) return mongo::to_error(*f, "drop database");
  return {};
}

std::string redacted_mongodb_uri(std::string_view uri) {
  auto parsed = mongo::parse_uri(uri);
  if (!parsed) return "mongodb://(invalid)";
  std::string out = "mongodb://";
  if (const char* srv = mongoc_uri_get_srv_hostname(*parsed)) {
    out = std::string("mongodb+srv://") + srv;
  } else {
    bool first = true;
    for (const auto* h = mongoc_uri_get_hosts(*parsed); h; h = h->next) {
      out += first ? "" : ",";
      out += h->host_and_port;
      first = false;
    }
  }
  const char* db = mongoc_uri_get_database(*parsed);
  out += "/";
  out += db && *db ? db : "certfleet";
  if (const char* rs = mongoc_uri_get_replica_set(*parsed)) out += std::string("?replicaSet=") + rs;
  mongoc_uri_destroy(*parsed);
  return out;
}

result<void> validate_mongodb_uri(std::string_view uri) {
  auto parsed = mongo::parse_uri(uri);
  if (!parsed) return std::move(parsed).error();
  mongoc_uri_destroy(*parsed);
  return {};
}

}  // namespace certfleet::store
