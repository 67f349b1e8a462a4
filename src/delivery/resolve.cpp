// resolve_host (resolve.hpp): the public face of the resolver SSH delivery already uses.
#include "certfleet/delivery/resolve.hpp"

#include "delivery/ssh/session.hpp"  // resolve_on_pool

namespace certfleet::delivery {

boost::asio::awaitable<resolve_result> resolve_host(std::string host, std::uint16_t port, boost::asio::thread_pool* pool,
                                                    std::chrono::milliseconds timeout) {
  ssh_options ro;  // only its resolver fields are read
  ro.resolve_pool = pool;
  ro.resolve_timeout = timeout;
  resolve_result out;
  if (auto f = co_await detail::resolve_on_pool(ro, host, port, out.endpoints)) {
    out.cls = f->cls;
    out.error = std::move(f->message);
  }
  co_return out;
}

}  // namespace certfleet::delivery
