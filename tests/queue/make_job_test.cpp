// make_job, the one place a job is built: what the type table decides, what a request may
// override, what it refuses (each error naming its field), and the registry's part.
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"

#include <gtest/gtest.h>

using namespace certfleet;
using namespace certfleet::queue;

namespace {

enqueue_request req(std::string project, std::string_view type, std::string payload = "{}") {
  enqueue_request r;
  r.project_id = std::move(project);
  r.type = std::string(type);
  r.payload = std::move(payload);
  return r;
}

error refused(const enqueue_request& r, caller who = caller::system, const handler_registry* h = nullptr) {
  auto j = make_job(r, who, h);
  EXPECT_FALSE(j) << r.type;
  return j ? error{} : j.error();
}

handler_fn idle() {
  return [](job_context&) -> boost::asio::awaitable<outcome> { co_return outcome::ok(); };
}

}  // namespace

TEST(make_job, lane_and_attempts_come_from_the_type_table) {
  for (const auto& t : all_job_types()) {
    auto j = make_job(req("p1", t.name), caller::system, nullptr);
    ASSERT_TRUE(j) << t.name << ": " << j.error().message;
    EXPECT_EQ(j->lane, t.lane) << t.name;
    EXPECT_EQ(j->max_attempts, t.max_attempts) << t.name;
  }
  auto d = make_job(req("p1", job_names::distribution_execute), caller::system, nullptr);
  EXPECT_EQ(d->lane, "dist");
  EXPECT_EQ(d->max_attempts, 1);
}

TEST(make_job, copies_the_request_and_attempts_override_the_table) {
  enqueue_request r = req("p1", job_names::cleanup_dns, R"({"a":1})");
  r.idempotency_key = "k:1";
  r.run_at = 1234;
  r.triggered_by = "sweep";
  r.max_attempts = 7;
  r.held = true;
  r.parent_job_id = "parent";
  r.certificate_id = "cert";
  r.distribution_id = "dist";
  auto j = make_job(r, caller::system, nullptr);
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->id, "");
  EXPECT_EQ(j->project_id, "p1");
  EXPECT_EQ(j->type, "cleanup_dns");
  EXPECT_EQ(j->lane, "main");
  EXPECT_EQ(j->payload, R"({"a":1})");
  EXPECT_EQ(j->max_attempts, 7);
  EXPECT_EQ(j->run_at, 1234);
  EXPECT_TRUE(j->held);
  EXPECT_EQ(j->idempotency_key, "k:1");
  EXPECT_EQ(j->parent_job_id, "parent");
  EXPECT_EQ(j->certificate_id, "cert");
  EXPECT_EQ(j->distribution_id, "dist");
  EXPECT_EQ(j->triggered_by, "sweep");

  r.idempotency_key.reset();
  EXPECT_EQ(make_job(r, caller::system, nullptr)->idempotency_key, "") << "no key: none stored";
}

TEST(make_job, refusals_name_their_field) {
  auto e = refused(req("p1", "nope"));
  EXPECT_TRUE(e.is(errc::unknown_job_type));
  EXPECT_EQ(e.field, "type");

  e = refused(req("p1", "noop", "[1]"));
  EXPECT_EQ(e.field, "payload");
  e = refused(req("p1", "noop", "{"));
  EXPECT_EQ(e.field, "payload");

  enqueue_request r = req("p1", "noop");
  r.idempotency_key = "";
  EXPECT_EQ(refused(r).field, "idempotency_key");
  r.idempotency_key = std::string(max_idempotency_key + 1, 'k');
  EXPECT_EQ(refused(r).field, "idempotency_key");
  r.idempotency_key = std::string("a\x7f");
  EXPECT_EQ(refused(r).field, "idempotency_key");
  r.idempotency_key = std::string(max_idempotency_key, 'k');
  EXPECT_TRUE(make_job(r, caller::system, nullptr)) << "the limit itself is allowed";

  enqueue_request at = req("p1", "noop");
  at.run_at = -1;
  EXPECT_EQ(refused(at).field, "run_at");

  enqueue_request attempts = req("p1", "noop");
  attempts.max_attempts = 101;
  EXPECT_EQ(refused(attempts).field, "max_attempts");
  attempts.max_attempts = -1;
  EXPECT_EQ(refused(attempts).field, "max_attempts");

  e = refused(req("", "noop"));
  EXPECT_TRUE(e.is(errc::invalid_argument));
  EXPECT_EQ(e.field, "project");
}

TEST(make_job, a_user_names_only_user_triggerable_types) {
  auto e = refused(req("p1", job_names::distribution_execute), caller::user);
  EXPECT_TRUE(e.is(errc::invalid_argument));
  EXPECT_EQ(e.field, "type");
  EXPECT_TRUE(make_job(req("p1", "noop"), caller::user, nullptr));
}

TEST(make_job, with_a_registry_the_handler_must_exist_and_its_validator_runs) {
  handler_registry h;
  auto e = refused(req("p1", "noop"), caller::user, &h);
  EXPECT_TRUE(e.is(errc::unknown_job_type));
  EXPECT_EQ(e.field, "type");

  int checked = 0;
  h.add("noop", idle(), [&](const std::string& payload) -> result<void> {
    ++checked;
    if (payload.find("bad") != std::string::npos)
      return make_error(errc::invalid_argument, "payload.x is bad", "payload.x");
    return {};
  });
  EXPECT_TRUE(make_job(req("p1", "noop", R"({"x":"good"})"), caller::user, &h));
  EXPECT_EQ(checked, 1);
  EXPECT_EQ(refused(req("p1", "noop", R"({"x":"bad"})"), caller::user, &h).field, "payload.x");
  EXPECT_EQ(checked, 2);
  // Not an object: refused before the validator is asked.
  EXPECT_EQ(refused(req("p1", "noop", "[]"), caller::user, &h).field, "payload");
  EXPECT_EQ(checked, 2);

  // Without a registry (a module's in-transaction path) neither check runs.
  EXPECT_TRUE(make_job(req("p1", "noop", R"({"x":"bad"})"), caller::system, nullptr));
  EXPECT_EQ(checked, 2);
}
