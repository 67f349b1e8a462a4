#pragma once
// The completion handler of every co_spawn. Expected failures are values (result<T>), so an
// exception that leaves a spawned coroutine is a bug: it is logged with what the coroutine was
// doing, and the process goes on serving everything else. `asio::detached` would drop it silently.
//
//   asio::co_spawn(ex, session(std::move(sock)), report_unexpected("HTTP session"));
//   asio::co_spawn(ex, lane(), report_unexpected(fmt::format("job {}: target lane", id),
//                                                [&](bool failed) { ... }));
#include <exception>
#include <functional>
#include <string>

namespace certfleet {

// "what()" of a std::exception, "an exception of unknown type" otherwise; "" for no exception.
std::string describe_exception(std::exception_ptr e);

class report_unexpected {
 public:
  explicit report_unexpected(std::string context, std::function<void(bool failed)> then = {})
      : context_(std::move(context)), then_(std::move(then)) {}
  // Logs "<context> ended by an unexpected exception: <what>" at error level when `e` is set;
  // then calls `then` (when given) with whether it was.
  void operator()(std::exception_ptr e) const;

 private:
  std::string context_;
  std::function<void(bool)> then_;
};

}  // namespace certfleet
