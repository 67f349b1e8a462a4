// report_unexpected: the one co_spawn completion handler. An exception out of a spawned coroutine
// is logged with its context and the event loop goes on; a clean end logs nothing.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sstream>
#include <stdexcept>

#include "certfleet/core/spawn.hpp"

namespace asio = boost::asio;
using certfleet::report_unexpected;

namespace {
struct log_capture {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  log_capture() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    sink->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~log_capture() { spdlog::set_default_logger(previous); }
};

asio::awaitable<void> throws(const char* what) {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  throw std::runtime_error(what);
}
asio::awaitable<void> ends_cleanly(int& ran) {
  ++ran;
  co_return;
}
}  // namespace

TEST(spawn, an_escaping_exception_is_logged_with_its_context_and_the_loop_goes_on) {
  log_capture logs;
  asio::io_context ioc;
  int failed_calls = 0, clean_calls = 0, ran = 0;
  asio::co_spawn(ioc, throws("index out of range"),
                 report_unexpected("HTTP session", [&](bool failed) { failed ? ++failed_calls : ++clean_calls; }));
  asio::co_spawn(ioc, ends_cleanly(ran), report_unexpected("worker lane", [&](bool failed) { failed ? ++failed_calls : ++clean_calls; }));
  ioc.run();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(failed_calls, 1);
  EXPECT_EQ(clean_calls, 1);
  EXPECT_EQ(logs.out.str(), "error HTTP session ended by an unexpected exception: index out of range\n");
}

TEST(spawn, a_non_standard_exception_is_named_as_such) {
  EXPECT_EQ(certfleet::describe_exception(std::make_exception_ptr(42)), "an exception of unknown type");
  EXPECT_EQ(certfleet::describe_exception(std::make_exception_ptr(std::logic_error("bug"))), "bug");
  EXPECT_EQ(certfleet::describe_exception(nullptr), "");
}
