#pragma once
// The store backends every conformance suite runs against: SQLite always; a backend that needs a
// server (MongoDB) joins the list when its URI is set and it is built. One list, so a new
// backend passes the jobs and the catalog suites alike.
#include "certfleet/store/store.hpp"
#include "temp_dir.hpp"

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace store_conformance_backends {

struct backend {
  std::string name;
  std::function<std::unique_ptr<certfleet::store::store>(const testbed::temp_dir&)> open;
};

inline std::vector<backend> backends() {
  std::vector<backend> b;
  // A real file, two readers: reads run on reader connections as in production.
  b.push_back({"sqlite", [](const testbed::temp_dir& d) {
                 auto s = certfleet::store::open_sqlite({d.file("certfleet.db"), 2, 5000, false});
                 if (!s) throw std::runtime_error(s.error().message);
                 return std::move(*s);
               }});
  return b;
}

}  // namespace store_conformance_backends
