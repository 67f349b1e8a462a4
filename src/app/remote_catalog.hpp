#pragma once
// `certfleet certificates|targets|credentials …` and `certfleet settings …`: over a server's API
// only (remote mode, remote.hpp). They change sealed secrets and the system settings the
// server's key and caches own, so the API is their one way in, from any machine; on the server
// itself --server https://127.0.0.1:PORT reaches it.
#include "remote.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace certfleet::app {

struct catalog_args {
  std::string project = "default";
  bool settings_project = false;  // settings --project P: the project's settings, not the system's
  std::string id, name, cert_file, key_file, chain_file, from_file, reason, acme_account, dns_provider, key_type,
      profile;
  std::vector<std::string> domains, assignments;  // issue --domain; settings set NAME=VALUE…
  bool json = false;
  // targets import: a JSON-lines or CSV file (from_file, format), or an Ansible INI inventory
  // turned into JSON lines from a template body (inventory, template_file, group, known_hosts).
  std::string format, inventory, template_file, group, known_hosts;
  bool dry_run = false;  // print the body instead of sending it
};

// `certfleet targets import` (docs/targets-import.md). --dry-run needs no server.
int import_targets(const remote_client* c, const catalog_args& a);

// `kind`: certificates, targets or credentials (the API's path word). Prints the answer and
// returns the exit code.
int remote_catalog(const remote_client& c, const std::string& kind, const std::string& cmd, const catalog_args& a);
int remote_settings(const remote_client& c, const std::string& cmd, const catalog_args& a);

}  // namespace certfleet::app
