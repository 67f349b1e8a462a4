// The MongoDB store's readings of what a server (or anything on its port) sends back: a reply's
// write errors and write-concern error, a cursor's batch, a findAndModify value read as a job;
// and the store URI's checks. First byte: 0 → the rest is a BSON reply, 1 → a URI.
#include "certfleet/store/mongodb.hpp"
#include "client.hpp"
#include "job_document.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace certfleet::store;
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  ++data;
  --size;
  if (mode % 2 == 1) {
    const std::string_view uri(reinterpret_cast<const char*>(data), size);
    (void)validate_mongodb_uri(uri);
    (void)redacted_mongodb_uri(uri);
    return 0;
  }
  bson_t b;
  if (!bson_init_static(&b, data, size)) return 0;
  // The driver validates replies it receives; do the same before reading.
  if (!bson_validate(&b, BSON_VALIDATE_NONE, nullptr)) return 0;
  auto reply = mongo::doc::copy_of(&b);
  (void)mongo::reply_failure(reply);
  mongo::view v(reply.get());
  for (const auto& d : v.docs("cursor.firstBatch")) (void)mongo::read_job(d.get());
  if (auto value = v.sub("value")) (void)mongo::read_job(value->get());
  (void)mongo::read_job(reply.get());
  return 0;
}
