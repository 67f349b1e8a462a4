#pragma once
// Owned BSON documents and typed reads, so the MongoDB store spells a command as a short chain
// instead of bson_append_* calls with lengths, and never leaks a bson_t on an early return.
#include <bson/bson.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace certfleet::store::mongo {

class doc {
 public:
  doc() { bson_init(&b_); }
  // Takes a copy of `b` (a reply or a driver-owned document).
  static doc copy_of(const bson_t* b) {
    doc d;
    bson_destroy(&d.b_);
    bson_copy_to(b, &d.b_);
    return d;
  }
  doc(const doc& o) { bson_copy_to(&o.b_, &b_); }
  // bson_t may point into itself (inline storage): moved with bson_steal, never by bytes.
  doc(doc&& o) noexcept {
    bson_steal(&b_, &o.b_);  // o.b_ is left destroyed: re-init it
    bson_init(&o.b_);
  }
  doc& operator=(doc o) noexcept {
    bson_destroy(&b_);
    bson_steal(&b_, &o.b_);
    bson_init(&o.b_);
    return *this;
  }
  ~doc() { bson_destroy(&b_); }

  bson_t* get() noexcept { return &b_; }
  const bson_t* get() const noexcept { return &b_; }

  doc& str(std::string_view k, std::string_view v) {
    bson_append_utf8(&b_, k.data(), static_cast<int>(k.size()), v.data(), static_cast<int>(v.size()));
    return *this;
  }
  // A string, or null when empty (the optional columns of the SQLite store).
  doc& str_or_null(std::string_view k, std::string_view v) { return v.empty() ? null(k) : str(k, v); }
  doc& i64(std::string_view k, std::int64_t v) {
    bson_append_int64(&b_, k.data(), static_cast<int>(k.size()), v);
    return *this;
  }
  doc& i32(std::string_view k, std::int32_t v) {
    bson_append_int32(&b_, k.data(), static_cast<int>(k.size()), v);
    return *this;
  }
  doc& boolean(std::string_view k, bool v) {
    bson_append_bool(&b_, k.data(), static_cast<int>(k.size()), v);
    return *this;
  }
  doc& null(std::string_view k) {
    bson_append_null(&b_, k.data(), static_cast<int>(k.size()));
    return *this;
  }
  doc& sub(std::string_view k, const doc& v) {
    bson_append_document(&b_, k.data(), static_cast<int>(k.size()), v.get());
    return *this;
  }
  doc& array(std::string_view k, const std::vector<doc>& items) {
    bson_t child;
    bson_append_array_begin(&b_, k.data(), static_cast<int>(k.size()), &child);
    char buf[16];
    for (std::size_t i = 0; i < items.size(); ++i) {
      const char* key = nullptr;
      auto n = bson_uint32_to_string(static_cast<std::uint32_t>(i), &key, buf, sizeof buf);
      bson_append_document(&child, key, static_cast<int>(n), items[i].get());
    }
    bson_append_array_end(&b_, &child);
    return *this;
  }
  doc& str_array(std::string_view k, const std::vector<std::string>& items) {
    bson_t child;
    bson_append_array_begin(&b_, k.data(), static_cast<int>(k.size()), &child);
    char buf[16];
    for (std::size_t i = 0; i < items.size(); ++i) {
      const char* key = nullptr;
      auto n = bson_uint32_to_string(static_cast<std::uint32_t>(i), &key, buf, sizeof buf);
      bson_append_utf8(&child, key, static_cast<int>(n), items[i].data(), static_cast<int>(items[i].size()));
    }
    bson_append_array_end(&b_, &child);
    return *this;
  }
  doc& arr(std::string_view k, const class list& l);

  std::string json() const {
    char* s = bson_as_relaxed_extended_json(&b_, nullptr);
    std::string out = s ? s : "";
    bson_free(s);
    return out;
  }

 private:
  bson_t b_;
};

// An array of mixed values (pipeline stages, expression operands).
class list {
 public:
  list() { bson_init(&b_); }
  list(const list&) = delete;
  list& operator=(const list&) = delete;
  ~list() { bson_destroy(&b_); }
  list& str(std::string_view v) {
    bson_append_utf8(&b_, key(), -1, v.data(), static_cast<int>(v.size()));
    return *this;
  }
  list& i64(std::int64_t v) {
    bson_append_int64(&b_, key(), -1, v);
    return *this;
  }
  list& sub(const doc& v) {
    bson_append_document(&b_, key(), -1, v.get());
    return *this;
  }
  const bson_t* get() const noexcept { return &b_; }

 private:
  const char* key() {
    const char* k = nullptr;
    bson_uint32_to_string(n_++, &k, buf_, sizeof buf_);
    return k;
  }
  bson_t b_;
  std::uint32_t n_ = 0;
  char buf_[16];
};

inline doc& doc::arr(std::string_view k, const list& l) {
  bson_append_array(&b_, k.data(), static_cast<int>(k.size()), l.get());
  return *this;
}

// Typed reads of one document's top-level fields (or a dotted path). A missing field or one of
// another type reads as the empty value: documents written by this store always have the type.
class view {
 public:
  explicit view(const bson_t* b) : b_(b) {}
  bool has(const char* path) const {
    bson_iter_t it;
    return bson_iter_init(&it, b_) && bson_iter_find_descendant(&it, path, &it) && !BSON_ITER_HOLDS_NULL(&it);
  }
  std::string str(const char* path) const {
    bson_iter_t it;
    if (!find(path, it) || !BSON_ITER_HOLDS_UTF8(&it)) return {};
    std::uint32_t len = 0;
    const char* s = bson_iter_utf8(&it, &len);
    return std::string(s, len);
  }
  std::int64_t i64(const char* path) const {
    bson_iter_t it;
    if (!find(path, it)) return 0;
    if (BSON_ITER_HOLDS_INT64(&it) || BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_DOUBLE(&it) ||
        BSON_ITER_HOLDS_BOOL(&it))
      return bson_iter_as_int64(&it);
    if (BSON_ITER_HOLDS_DATE_TIME(&it)) return bson_iter_date_time(&it);
    return 0;
  }
  bool boolean(const char* path) const {
    bson_iter_t it;
    if (!find(path, it)) return false;
    return bson_iter_as_bool(&it);
  }
  // A sub-document; nullopt when absent or not a document.
  std::optional<doc> sub(const char* path) const {
    bson_iter_t it;
    if (!find(path, it) || !BSON_ITER_HOLDS_DOCUMENT(&it)) return std::nullopt;
    std::uint32_t len = 0;
    const std::uint8_t* data = nullptr;
    bson_iter_document(&it, &len, &data);
    bson_t b;
    if (!bson_init_static(&b, data, len)) return std::nullopt;
    return doc::copy_of(&b);
  }
  // The documents of an array field (cursor batches).
  std::vector<doc> docs(const char* path) const {
    std::vector<doc> out;
    bson_iter_t it;
    if (!find(path, it) || !BSON_ITER_HOLDS_ARRAY(&it)) return out;
    bson_iter_t child;
    if (!bson_iter_recurse(&it, &child)) return out;
    while (bson_iter_next(&child)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&child)) continue;
      std::uint32_t len = 0;
      const std::uint8_t* data = nullptr;
      bson_iter_document(&child, &len, &data);
      bson_t b;
      if (bson_init_static(&b, data, len)) out.push_back(doc::copy_of(&b));
    }
    return out;
  }

 private:
  bool find(const char* path, bson_iter_t& it) const {
    bson_iter_t root;
    return bson_iter_init(&root, b_) && bson_iter_find_descendant(&root, path, &it);
  }
  const bson_t* b_;
};

}  // namespace certfleet::store::mongo
