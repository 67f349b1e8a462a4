#pragma once
// Sending notifications (docs/notifications.md): the notification.send handler and the test
// message of POST …/notification-channels/{id}/test share one path — load the channel and its
// sealed secret, render the event for the channel's kind (template.hpp), deliver it
// (webhook / Slack / Teams over delivery's HTTP POST, email over delivery's SMTP client) and say
// what happened, classified.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/net/error_class.hpp"
#include "certfleet/delivery/module.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace certfleet::notify {

struct notify_options {
  const kek* key = nullptr;                  // opens channel secrets and webhook credentials
  boost::asio::thread_pool* cpu = nullptr;   // name resolution
  std::string ca_pem;                        // extra trust anchors (CERTFLEET_EXTRA_CA_FILE)
};

// What one delivery attempt of a message to a channel did.
struct send_report {
  std::string channel_kind;  // webhook | email | slack | teams
  net::error_class cls = net::error_class::none;
  std::string error;   // for operators; never a secret
  std::string reply;   // the server's answer: "250 2.0.0 Ok: queued as …" or "HTTP 200 ok"
  int http_status = 0;
  std::chrono::seconds retry_after{0};  // a 429's (or 503's) Retry-After
  std::vector<net::phase_timing> timings;
  std::string event_id;                 // the test message's
  std::chrono::milliseconds duration{0};  // the test message's, end to end
  bool ok() const { return cls == net::error_class::none; }
  // Whether the queue should try again (network and io_transient); other classes are final.
  bool retryable() const;
};

// Sends a test message to a channel of the project right now (the test route): the answer says
// whether it was delivered and, if not, why. not_found for a channel the project does not have;
// a channel whose secret cannot be opened is shutting_down/config_invalid as opening says.
boost::asio::awaitable<result<send_report>> send_test_message(store::store& st, std::string project_id,
                                                              std::string channel_id, notify_options opt, time_ms now);
// The test route's JSON answer: {channel_id, kind, delivered, event_id, error_class?, error?,
// reply?, http_status?, retry_after_s?, duration_ms}.
boost::json::object send_report_view(const send_report& r, const std::string& channel_id);

// notification.send: one event to one channel (payload {event_id, event, channel_id, data,
// template?} as fire_event writes it).
void register_notification_handler(queue::handler_registry& r, std::shared_ptr<const notify_options> options);

}  // namespace certfleet::notify
