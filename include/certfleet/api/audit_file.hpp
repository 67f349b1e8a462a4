#pragma once
// The audit log's file copy (setting audit_log_file): each entry the API records is also one
// JSON line in a file beside it, for a SIEM or log shipper. The file is 0600; at
// audit_log_max_bytes it is renamed to FILE.1 (the previous FILE.1 goes) and a new one begun.
#include "certfleet/core/error.hpp"
#include "certfleet/store/auth.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace certfleet::api {

// An entry as its JSON line (no newline): the members GET …/audit shows but seq (the store
// numbers entries as it commits them), and project_id.
std::string audit_json_line(const store::audit_entry& e);

class audit_file {
 public:
  audit_file() = default;
  audit_file(const audit_file&) = delete;
  audit_file& operator=(const audit_file&) = delete;
  ~audit_file();

  // Opens (creates 0600, appends) `path`; an empty path: the sink is off. An error names the
  // setting audit_log_file.
  result<void> open(std::string path, std::int64_t max_bytes);
  bool is_open() const noexcept { return fd_ >= 0; }
  // One entry, one line. A write that fails is logged, never thrown: the store holds the entry.
  void write(const store::audit_entry& e);

 private:
  void rotate();
  std::string path_;
  std::int64_t max_bytes_ = 0;
  std::int64_t size_ = 0;
  int fd_ = -1;
};

}  // namespace certfleet::api
