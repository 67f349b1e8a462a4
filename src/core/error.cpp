#include "certfleet/core/error.hpp"

#include "certfleet/core/errc_table.hpp"

namespace certfleet {
namespace {

class category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "certfleet"; }
  std::string message(int v) const override { return std::string(errc_row_of(static_cast<errc>(v)).message); }
};

}  // namespace

const std::error_category& certfleet_category() noexcept {
  static const category_impl instance;
  return instance;
}

const char* errc_name(errc e) noexcept { return errc_row_of(e).name.data(); }

}  // namespace certfleet
