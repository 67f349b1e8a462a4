#pragma once
// The fixtures of tests/msca/fixtures/ (README there says what each one is).
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace msca_test {

inline std::string fixture(const std::string& name) {
  const std::string path = std::string(CERTFLEET_SOURCE_DIR) + "/tests/msca/fixtures/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing fixture " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace msca_test
