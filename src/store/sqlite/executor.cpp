#include "executor.hpp"

#include <spdlog/spdlog.h>

#include <chrono>


namespace certfleet::store::sqlite {

writer::writer(const std::string& path, int busy_timeout_ms, bool synchronous_full,
               const std::function<void(db&)>& init, int max_batch, bool read_only)
    : db_(std::make_unique<db>(path, read_only, busy_timeout_ms)), max_batch_(max_batch) {
  if (read_only) {
    init(*db_);
    thread_ = std::thread([this] { loop(); });
    return;
  }
  // Switching a new file to WAL needs an exclusive lock and SQLite does not call the busy
  // handler for it: two processes opening a fresh store at once must wait for each other here.
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);;) {
    try {
      db_->exec("PRAGMA journal_mode=WAL");
      break;
    } catch (const db_error& e) {
      if (!is_busy(e.code()) || std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  db_->exec(synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  db_->exec("PRAGMA cache_size=-65536");
  db_->exec("PRAGMA mmap_size=268435456");
  db_->exec("PRAGMA wal_autocheckpoint=10000");
  db_->exec("PRAGMA temp_store=MEMORY");
  init(*db_);
  job_counts_.install(*db_);
  db_->set_job_counts(&job_counts_);
  thread_ = std::thread([this] { loop(); });
}

writer::~writer() { close(); }

void writer::submit(std::unique_ptr<write_task> t) {
  {
    std::lock_guard lk(m_);
    if (!stop_) {
      q_.push_back(std::move(t));
      cv_.notify_one();
      return;
    }
  }
  t->complete(make_error(errc::shutting_down, "the store is closed"));
}

void writer::close() {
  {
    std::lock_guard lk(m_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void writer::loop() {
  std::vector<std::unique_ptr<write_task>> batch;
  for (;;) {
    {
      std::unique_lock lk(m_);
      cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;  // stopping, and everything queued is done
      while (!q_.empty() && static_cast<int>(batch.size()) < max_batch_) {
        batch.push_back(std::move(q_.front()));
        q_.pop_front();
      }
    }
    std::optional<error> failure;
    const auto full_before = db_->disk_full_errors();
    const auto changes_before = db_->total_changes();
    try {
      db_->prepare("BEGIN IMMEDIATE")->run();
    } catch (const db_error& e) {
      failure = to_error(*db_, e);
    }
    if (!failure) {
      for (auto& t : batch) t->execute(*db_);
      try {
        job_counts_.flush(*db_);
        db_->prepare("COMMIT")->run();
      } catch (const db_error& e) {
        job_counts_.discard();
        failure = to_error(*db_, e);
        // An operation that hit a full disk may have made SQLite roll the transaction back, so
        // COMMIT fails with "no transaction is active": the cause the client must hear is the disk.
        if (!failure->is(errc::store_disk_full) && db_->disk_full_errors() > full_before)
          failure = to_error(db_error(SQLITE_FULL, db_->last_disk_full()));
        try {
          db_->exec("ROLLBACK");
        } catch (...) {
        }
      }
    }
    if (auto full = db_->disk_full_errors() - full_before; full > 0) {
      // A failed BEGIN/COMMIT refuses every operation of the batch; else only those that failed.
      bool all = failure && failure->is(errc::store_disk_full);
      disk_full_refusals_ += all ? static_cast<std::int64_t>(batch.size()) : full;
      if (!disk_full_.exchange(true))
        spdlog::error("store: the disk is full ({}): writes are refused until space is freed", db_->last_disk_full());
    } else if (!failure && db_->total_changes() > changes_before && disk_full_.exchange(false)) {
      spdlog::info("store: writes succeed again (disk space was freed)");
    }
    for (auto& t : batch) t->complete(failure);
    batch.clear();
  }
}

reader_pool::reader_pool(const std::string& path, int threads, int busy_timeout_ms, bool read_only) {
  for (int i = 0; i < threads; ++i) {
    auto d = std::make_unique<db>(path, read_only, busy_timeout_ms);
    d->exec("PRAGMA query_only=1");
    d->exec("PRAGMA temp_store=MEMORY");
    dbs_.push_back(std::move(d));
  }
  for (auto& d : dbs_) threads_.emplace_back([this, p = d.get()] { loop(*p); });
}

reader_pool::~reader_pool() { close(); }

void reader_pool::submit(std::unique_ptr<read_task> t) {
  {
    std::lock_guard lk(m_);
    if (!stop_) {
      q_.push_back(std::move(t));
      cv_.notify_one();
      return;
    }
  }
  t->abandon();
}

void reader_pool::close() {
  {
    std::lock_guard lk(m_);
    stop_ = true;
    cv_.notify_all();
  }
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void reader_pool::loop(db& d) {
  for (;;) {
    std::unique_ptr<read_task> t;
    {
      std::unique_lock lk(m_);
      cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;
      t = std::move(q_.front());
      q_.pop_front();
    }
    t->run(d);
  }
}

}  // namespace certfleet::store::sqlite
