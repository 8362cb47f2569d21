// Pipelined steps in the actor tier (the loop the CUDA executor gets): the scheduler submits step
// N+1 before collecting step N. Each job must stream exactly what the one-step-at-a-time loop
// streams, a stop string or a cancel must drop the token planned past it, and an executor failure
// with two steps out must end every job once and stop the runtime.
#include <boost/test/unit_test.hpp>

#include "harness.hpp"

using namespace conveyor;
using namespace conveyor::actor_test;

namespace {

struct spec {
  const char* id;
  int32_t max_tokens;
  std::vector<std::string> stop;
};

std::map<std::string, job_stream> run_jobs(bool pipelined, const std::vector<spec>& jobs, harness_options o = {}) {
  o.pipelined = pipelined;
  harness h(o);
  for (const auto& j : jobs) h.submit(j.id, j.max_tokens, j.stop);
  h.run();
  std::map<std::string, job_stream> out;
  for (const auto& j : jobs) out[j.id] = h.stream(j.id);
  BOOST_TEST(h.live_requests.load() == 0);
  if (pipelined) {
    BOOST_TEST(h.ex->placeholders > 0, "no step was planned ahead");
    BOOST_TEST(h.ex->max_outstanding == 2);
  } else {
    BOOST_TEST(h.ex->submits == 0);
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(pipelined_steps)

BOOST_AUTO_TEST_CASE(jobs_stream_what_the_synchronous_loop_streams) {
  // Two slots for five jobs: queueing, admissions behind decodes, stop strings mid-stream.
  const std::vector<spec> jobs{{"five", 5, {}}, {"long", 40, {}}, {"stop-d", 30, {"d"}}, {"one", 1, {}}, {"stop-bc", 30, {"bc"}}};
  const auto sync = run_jobs(false, jobs, {.max_num_seqs = 2});
  const auto pipe = run_jobs(true, jobs, {.max_num_seqs = 2});
  for (const auto& j : jobs) {
    BOOST_TEST_CONTEXT("job " << j.id) {
      const job_stream& a = sync.at(j.id);
      const job_stream& b = pipe.at(j.id);
      BOOST_TEST(b.token_ids == a.token_ids, boost::test_tools::per_element());
      BOOST_TEST(b.text == a.text);
      BOOST_TEST(b.terminal.value("finish_reason", "") == a.terminal.value("finish_reason", "x"));
      BOOST_TEST(b.terminal.at("usage").value("completion_tokens", -1) == a.terminal.at("usage").value("completion_tokens", -2));
    }
  }
  BOOST_TEST(sync.at("long").token_ids.size() == 40u);
  BOOST_TEST(sync.at("stop-d").terminal.value("finish_reason", "") == "stop");
}

BOOST_AUTO_TEST_CASE(a_cancel_with_two_steps_out_ends_the_job_once) {
  harness h({.pipelined = true});
  h.submit("x", 30);
  h.step();  // submit: the prompt
  h.step();  // submit: the first decode, planned ahead
  BOOST_TEST(h.ex->placeholders == 1);
  BOOST_REQUIRE(h.step_pending());  // the collect of the prompt's step
  const uint64_t c = h.cancel("x");
  h.settle();
  BOOST_TEST(h.reply(c).value("state", "") == "cancelled");
  h.run();  // both results arrive: nothing more for "x"
  auto s = h.stream("x");
  BOOST_TEST(s.terminal.value("finish_reason", "") == "cancelled");
  BOOST_TEST(s.terminal.at("usage").value("completion_tokens", -1) == static_cast<int>(s.token_ids.size()));
  BOOST_TEST(s.token_ids.size() <= 1u);
  BOOST_TEST(h.live_requests.load() == 0);

  h.submit("after", 3);  // the loop is not stuck on the dropped steps
  h.run();
  BOOST_TEST(h.stream("after").token_ids == (std::vector<token_id>{'a', 'b', 'c'}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_failure_with_two_steps_out_fails_every_job_once) {
  harness h({.max_num_seqs = 1, .pipelined = true});
  h.submit("running", 30);
  h.submit("waiting", 30);
  h.step();
  h.step();
  h.step();  // the first result is in: 'a'
  h.ex->fail_next = true;
  h.run();
  for (const char* id : {"running", "waiting"}) {
    BOOST_TEST_CONTEXT("job " << id) {
      auto s = h.stream(id);
      BOOST_TEST(s.terminal.value("kind", "") == "error");
      BOOST_TEST(s.terminal.value("message", "").find("device lost") != std::string::npos);
    }
  }
  BOOST_TEST(h.control.wait() == 1);
  BOOST_TEST(h.registry.snapshot().failed == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
