#pragma once
// The store backends every conformance suite runs against: SQLite always; MongoDB when
// CERTFLEET_TEST_MONGODB_URI names a replica set (each test on a scratch database of its own,
// dropped when the test binary exits). One list, so a new backend passes the jobs and the
// catalog suites alike.
#include "certfleet/core/object_id.hpp"
#include "certfleet/store/mongodb.hpp"
#include "certfleet/store/store.hpp"
#include "temp_dir.hpp"

#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace store_conformance_backends {

struct backend {
  std::string name;
  std::function<std::unique_ptr<certfleet::store::store>(const testbed::temp_dir&)> open;
};

// The scratch databases this process made, dropped at exit.
struct scratch_databases {
  std::mutex m;
  std::vector<certfleet::store::mongodb_options> made;
  ~scratch_databases() {
    for (const auto& o : made)
      if (auto r = certfleet::store::drop_mongodb_database(o); !r)
        std::cerr << "could not drop scratch database " << o.database << ": " << r.error().message << "\n";
  }
};
inline scratch_databases& scratch() {
  static scratch_databases s;
  return s;
}

inline std::vector<backend> backends() {
  std::vector<backend> b;
  // A real file, two readers: reads run on reader connections as in production.
  b.push_back({"sqlite", [](const testbed::temp_dir& d) {
                 auto s = certfleet::store::open_sqlite({d.file("certfleet.db"), 2, 5000, false});
                 if (!s) throw std::runtime_error(s.error().message);
                 return std::move(*s);
               }});
  if (const char* uri = std::getenv("CERTFLEET_TEST_MONGODB_URI"); uri && *uri) {
    b.push_back({"mongodb", [uri = std::string(uri)](const testbed::temp_dir&) {
                   certfleet::store::mongodb_options o;
                   o.uri = uri;
                   o.database = "certfleet_test_" + certfleet::new_object_id();
                   // The suites step a synthetic clock; the change stream would only add noise.
                   o.clock = certfleet::store::lease_clock::caller;
                   o.change_stream = false;
                   {
                     std::lock_guard lk(scratch().m);
                     scratch().made.push_back(o);
                   }
                   auto s = certfleet::store::open_mongodb(o);
                   if (!s) throw std::runtime_error(s.error().message);
                   return std::move(*s);
                 }});
  }
  return b;
}

}  // namespace store_conformance_backends
