// `noop`: a diagnostic job that proves workers are alive and gives benchmarks a workload.
#include "certfleet/core/json.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/job_types.hpp"

#include <fmt/format.h>

#include <array>

namespace certfleet::queue {

namespace {
struct noop_payload {
  std::int64_t ms = 0;
  std::int64_t fail_times = 0;
  bool log = false;
  bool permanent = false;    // fail for good (dead at once) instead of retrying
  std::int64_t lines = 0;    // log lines to write, one every line_ms (a live log to watch)
  std::int64_t line_ms = 0;
  std::string text;  // the lines' message instead of the default one (a long line for the UI's tests)
};

result<noop_payload> parse(const std::string& payload) {
  auto r = json::object_reader::parse(payload, "payload");
  if (!r) return std::move(r).error();
  if (auto o = r->only({"ms", "fail_times", "log", "lines", "line_ms", "permanent", "text"}); !o) return std::move(o).error();
  // An optional integer member from 0 to `max` (0 when absent).
  auto int_in = [&](std::string_view key, std::int64_t max) -> result<std::int64_t> {
    auto v = r->optional_int(key);
    if (!v) return std::move(v).error();
    auto n = v->value_or(0);
    if (n < 0 || n > max)
      return make_error(errc::invalid_argument, fmt::format("payload.{} must be from 0 to {}", key, max),
                        fmt::format("payload.{}", key));
    return n;
  };
  auto flag = [&](std::string_view key) -> result<bool> {
    auto v = r->optional_bool(key);
    if (!v) return std::move(v).error();
    return v->value_or(false);
  };
  noop_payload p;
  auto ms = int_in("ms", 3'600'000);
  if (!ms) return std::move(ms).error();
  auto ft = int_in("fail_times", 100);
  if (!ft) return std::move(ft).error();
  auto ln = int_in("lines", 100'000);
  if (!ln) return std::move(ln).error();
  auto lms = int_in("line_ms", 60'000);
  if (!lms) return std::move(lms).error();
  auto lg = flag("log");
  if (!lg) return std::move(lg).error();
  auto perm = flag("permanent");
  if (!perm) return std::move(perm).error();
  p.ms = *ms;
  p.fail_times = *ft;
  p.lines = *ln;
  p.line_ms = *lms;
  p.log = *lg;
  p.permanent = *perm;
  auto text = r->optional_string("text");
  if (!text) return std::move(text).error();
  p.text = text->value_or("");
  if (p.text.size() > 4000) return make_error(errc::invalid_argument, "payload.text must be at most 4000 bytes", "payload.text");
  return p;
}
}  // namespace

void register_noop(handler_registry& r) {
  r.add(
      std::string(job_names::noop),
      [](job_context& ctx) -> boost::asio::awaitable<outcome> {
        auto p = parse(ctx.payload());
        if (!p) co_return outcome::permanent_failure(p.error());
        if (p->log) co_await ctx.log("info", fmt::format("noop attempt {}: sleeping {} ms", ctx.job().attempts, p->ms));
        if (p->ms > 0) co_await ctx.sleep(std::chrono::milliseconds(p->ms));
        // Levels and details vary so a log viewer shows each kind of line.
        static constexpr std::array<std::string_view, 4> levels{"info", "info", "warn", "error"};
        for (std::int64_t i = 1; i <= p->lines; ++i) {
          const auto level = levels[static_cast<std::size_t>(i % 4)];
          std::string detail = i % 10 == 0 ? fmt::format(R"({{"line":{},"note":"every tenth line has a detail"}})", i) : "";
          // Built before the co_await: GCC 12 destroys a ?: temporary in a co_await's arguments twice.
          std::string message = p->text;
          if (message.empty()) message = fmt::format("[noop] line {} of {} from 127.0.0.1:{}", i, p->lines, 20000 + i % 100);
          co_await ctx.log(std::string(level), std::move(message), detail);
          if (p->line_ms > 0) co_await ctx.sleep(std::chrono::milliseconds(p->line_ms));
          ctx.checkpoint();
        }
        ctx.checkpoint();
        if (ctx.job().attempts <= p->fail_times) {
          auto why = fmt::format("noop: failing on purpose (attempt {} of {} planned failures)", ctx.job().attempts,
                                 p->fail_times);
          auto out = p->permanent ? outcome::permanent_failure(std::move(why)) : outcome::failure(std::move(why));
          out.error_class = "on_purpose";  // the hint table's row for it
          co_return out;
        }
        if (p->log) co_await ctx.log("info", "noop done");
        co_return outcome::ok();
      },
      [](const std::string& payload) -> result<void> {
        auto p = parse(payload);
        if (!p) return std::move(p).error();
        return {};
      });
}

}  // namespace certfleet::queue
