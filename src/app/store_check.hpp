#pragma once
// `certfleet store check --store URI`: a non-destructive self-test of a MongoDB cluster before an
// operator switches to it (docs/operations-mongodb.md).
#include "certfleet/core/settings.hpp"

namespace certfleet::app {

// Exit 0: every check passed; 1: one failed (each says why); 2: not a MongoDB store setting;
// 5: the cluster could not be opened (the message says why).
int run_store_check(const settings_map& settings);

}  // namespace certfleet::app
