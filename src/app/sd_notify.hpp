#pragma once
// systemd's service notifications (sd_notify(3)) without libsystemd: a datagram to the unix
// socket systemd names in $NOTIFY_SOCKET ("/run/systemd/notify", or "@name" in the abstract
// namespace). Used by `certfleet serve` under the unit's Type=notify: READY=1 once it listens,
// WATCHDOG=1 from the event loop while WatchdogSec= is set, STOPPING=1 on SIGTERM.
#include <chrono>
#include <optional>
#include <string_view>

namespace certfleet::app {

// Sends `state` ("READY=1\nSTATUS=…"); false when NOTIFY_SOCKET is unset or the send failed
// (not under systemd: nothing to tell).
bool sd_notify(std::string_view state);

// How often to send WATCHDOG=1: half of $WATCHDOG_USEC, when it is set (and $WATCHDOG_PID, if
// set, is this process); nullopt otherwise.
std::optional<std::chrono::microseconds> sd_watchdog_interval();

}  // namespace certfleet::app
