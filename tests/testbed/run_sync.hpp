#pragma once
// Runs one awaitable to completion on a private event loop and returns its value.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <exception>
#include <optional>

namespace testbed {

template <class T>
T run_sync(boost::asio::awaitable<T> a) {
  boost::asio::io_context ioc;
  std::optional<T> out;
  std::exception_ptr failure;
  boost::asio::co_spawn(
      ioc, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await std::move(a)); },
      [&](std::exception_ptr e) { failure = e; });
  ioc.run();
  if (failure) std::rethrow_exception(failure);
  return std::move(*out);
}

}  // namespace testbed
