#pragma once
#include "certfleet/core/settings.hpp"

namespace certfleet::app {

// `certfleet …`: parses the command line and runs the command; returns the exit code.
int run_cli(int argc, char** argv);
// `certfleet serve`: runs until SIGTERM/SIGINT, then shuts down gracefully (exit 0).
int serve(const settings_map& settings);

}  // namespace certfleet::app
