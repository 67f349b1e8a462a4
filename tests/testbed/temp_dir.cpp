#include "temp_dir.hpp"

#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace testbed {

temp_dir::temp_dir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

temp_dir::~temp_dir() {
  if (std::getenv("CERTFLEET_KEEP_TEST_DIRS")) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace testbed
