#pragma once
// `openssl s_server -www` on 127.0.0.1 for TLS endpoint tests (discovery probes, the
// discovery_execute job): the kernel picks the port, read from its "ACCEPT" line; the process
// object kills it by PID when the test ends, whichever way it ends.
#include "certs.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace testbed {

inline void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

// `openssl s_server` on 127.0.0.1, port chosen by the kernel and read from its "ACCEPT" line.
// The process object kills it by PID when the test ends, whichever way it ends.
struct s_server {
  std::unique_ptr<process> proc;
  std::uint16_t port = 0;
};

inline s_server start_s_server(const temp_dir& dir, const std::string& name, const std::string& cert_file,
                        const std::string& key_file, const std::string& chain_pem, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{std::string("/usr/bin/openssl"), "s_server", "-accept", "127.0.0.1:0", "-cert", cert_file, "-key", key_file, "-www"};
  if (!chain_pem.empty()) {
    write_text_file(dir.file(name + "-chain.pem"), chain_pem);
    argv.insert(argv.end(), {"-cert_chain", dir.file(name + "-chain.pem")});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  s_server s;
  s.proc = std::make_unique<process>(argv, std::map<std::string, std::string>{}, dir.file(name));
  // Polls its stdout: the line is printed once the socket listens.
  std::string line = s.proc->wait_for_stdout("ACCEPT", std::chrono::seconds(15));
  auto colon = line.rfind(':');
  if (line.empty() || colon == std::string::npos)
    throw std::runtime_error("s_server " + name + " did not start: " + s.proc->stderr_text());
  s.port = static_cast<std::uint16_t>(std::stoi(line.substr(colon + 1)));
  return s;
}

inline s_server start_s_server(const temp_dir& dir, const std::string& name, const pem_cert& leaf,
                        const std::string& chain_pem, std::vector<std::string> extra = {}) {
  write_text_file(dir.file(name + ".crt"), leaf.cert_pem);
  write_text_file(dir.file(name + ".key"), leaf.key_pem);
  return start_s_server(dir, name, dir.file(name + ".crt"), dir.file(name + ".key"), chain_pem, std::move(extra));
}

}  // namespace testbed
