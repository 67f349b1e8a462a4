// The `file` target spec parser: any JSON gets a target or an error naming a "file…" field;
// whatever parses passes the delivery's own checks (absolute paths, no "..", private key mode).
#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "certfleet/delivery/file.hpp"

using namespace certfleet::delivery;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  boost::system::error_code ec;
  auto v = boost::json::parse(in, ec);
  if (ec) return 0;
  auto t = parse_file_target(v);
  if (!t) {
    if (t.error().field.rfind("file", 0) != 0) std::abort();
    return 0;
  }
  if (!check_file_target(*t)) std::abort();
  for (const auto* p : {&t->cert_path, &t->key_path})
    if (p->empty() || p->front() != '/' || p->find("/../") != std::string::npos) std::abort();
  if (t->key_mode & 0007) std::abort();
  if (file_backup_path(t->cert_path, "run-1").rfind(t->cert_path, 0) != 0) std::abort();
  // The post command always splits (checked at parse) and names its program absolutely or bare.
  if (!t->post_command.empty()) {
    auto words = split_post_command(t->post_command);
    if (!words) std::abort();
    if (!words->empty() && words->front().find('/') != std::string::npos && words->front().front() != '/') std::abort();
  }
  // The base-directory rule: accepted paths lie strictly below a base dir.
  if (check_file_target_paths(*t, {"/srv/certs"}))
    for (const auto* p : {&t->cert_path, &t->key_path, &t->chain_path})
      if (!p->empty() && p->rfind("/srv/certs/", 0) != 0) std::abort();
  if (check_file_target_paths(*t, {})) std::abort();  // no base dirs: nothing allowed
  return 0;
}
