// The MongoDB catalog at the wire (mockupdb): first compiling version.
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/mongodb.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace certfleet::store::mongo {
// Declared in src/store/mongo/mongo_catalog.hpp (whose driver includes this target does not see).
result<std::shared_ptr<catalog_store>> open_catalog_only(const mongodb_options& o);
std::vector<std::string> catalog_index_commands_json(std::int32_t max_time_ms);
}  // namespace certfleet::store::mongo

TEST(mongo_catalog_wire, index_commands_exist) {
  EXPECT_EQ(certfleet::store::mongo::catalog_index_commands_json(1000).size(), 5u);
}
