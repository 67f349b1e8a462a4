#pragma once
// A directory under /tmp removed with everything in it when the test ends.
#include <filesystem>
#include <string>

namespace testbed {

class temp_dir {
 public:
  explicit temp_dir(const std::string& prefix = "certfleet-test");
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace testbed
