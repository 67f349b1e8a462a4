#pragma once
// Crash points for crash tests: with CERTFLEET_CRASH_AT=<name> in the environment, the process
// kills itself with SIGKILL the Nth time (CERTFLEET_CRASH_AFTER, default 1) it reaches <name>.
// Unset, a crash point costs one branch on a cached flag.
#include <string_view>

namespace certfleet {
void crash_point(std::string_view name);
// Fault injection for recovery tests: true when CERTFLEET_FAIL_AT=<name> (the caller then skips
// the step as if its write had failed). Unset, one branch on a cached flag.
bool fault_point(std::string_view name);
}
