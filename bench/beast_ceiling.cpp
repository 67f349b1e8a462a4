// The ceiling for the API benchmark: the smallest Beast HTTP/1.1 keep-alive server we can write
// on one io_context thread with the same coroutine style, answering every request with a fixed
// body. `beast_ceiling PORT [BODY_BYTES]`.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

asio::awaitable<void> session(tcp::socket s, const std::string& body) {
  beast::tcp_stream stream(std::move(s));
  beast::flat_buffer buf;
  for (;;) {
    http::request<http::string_body> req;
    stream.expires_after(std::chrono::seconds(60));
    auto [ec, n] = co_await http::async_read(stream, buf, req, tuple_awaitable);
    if (ec) break;
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "application/json");
    res.body() = body;
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
    if (wec || !res.keep_alive()) break;
  }
}

asio::awaitable<void> listen(tcp::acceptor& a, const std::string& body) {
  for (;;) {
    auto [ec, s] = co_await a.async_accept(tuple_awaitable);
    if (ec) co_return;
    s.set_option(tcp::no_delay(true));
    asio::co_spawn(a.get_executor(), session(std::move(s), body), asio::detached);
  }
}

int main(int argc, char** argv) {
  unsigned short port = argc > 1 ? static_cast<unsigned short>(std::atoi(argv[1])) : 8081;
  std::size_t bytes = argc > 2 ? static_cast<std::size_t>(std::atol(argv[2])) : 16;
  std::string body = "{\"pad\":\"" + std::string(bytes > 11 ? bytes - 11 : 0, 'x') + "\"}";
  asio::io_context ioc(1);
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  std::cout << "beast_ceiling listening on 127.0.0.1:" << a.local_endpoint().port() << " body " << body.size()
            << " bytes" << std::endl;
  asio::signal_set sig(ioc, SIGINT, SIGTERM);
  sig.async_wait([&](auto, int) { ioc.stop(); });
  asio::co_spawn(ioc, listen(a, body), asio::detached);
  ioc.run();
}
