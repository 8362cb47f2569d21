// The HTTP intake with a scripted front door: a second request under the X-Request-Id of a job
// whose `accepted` is still being committed (the job table says duplicate, the publisher has
// no event yet, so fetch says not_found) re-attaches and is answered from the live events,
// instead of a 409 that says the job's results are no longer kept (issue 26, defect 7).
#include <boost/test/unit_test.hpp>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <mutex>
#include <thread>

#include "schemas/events.hpp"
#include "schemas/replies.hpp"
#include "transport/http_intake.hpp"

namespace conveyor::testing {
namespace {

using json = nlohmann::json;

// Answers as the runtime does while the first request's job waits for its commit, and once the
// status is asked, lets the job's events go out (as the publisher hands them to its sinks).
class committing_sink final : public transport::request_sink {
public:
  explicit committing_sink(transport::http_intake& in, std::string job_state) : in_(in), state_(std::move(job_state)) {}
  void deliver(transport::reply_to to, schemas::decode_result request, std::optional<schemas::resume_point>) override {
    std::lock_guard lk(mu_);
    if (auto* s = std::get_if<schemas::submit_request>(&request)) {
      ops.push_back("submit");
      to.send(schemas::error_reply{s->id, schemas::error_code::duplicate, "job '" + s->id + "' is already running", {}});
    } else if (auto* f = std::get_if<schemas::fetch_request>(&request)) {
      ops.push_back("fetch");
      to.send(schemas::error_reply{f->id, schemas::error_code::not_found, "no job '" + f->id + "'", {}});
    } else if (auto* st = std::get_if<schemas::status_request>(&request)) {
      ops.push_back("status");
      schemas::status_reply r;
      r.id = st->id;
      r.state = state_ == "running" ? job_state::running : job_state::finished;
      to.send(r);
      if (state_ != "running") return;
      // The commit lands: the job's events go out.
      in_.on_event(schemas::published_event(schemas::accepted_event{st->id, 0}));
      schemas::tokens_event t;
      t.id = st->id, t.seq = 1, t.token_ids = {7, 8}, t.text = "Paris.";
      in_.on_event(schemas::published_event(t));
      schemas::done_event d;
      d.id = st->id, d.seq = 2, d.reason = finish_reason::length, d.text = "Paris.", d.usage = {5, 2, 0};
      in_.on_event(schemas::published_event(d));
    }
  }
  std::vector<std::string> ops;

private:
  transport::http_intake& in_;
  std::string state_;
  std::mutex mu_;
};

json post(int port, const std::string& id, int& status) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10, 0);
  auto r = c.Post("/v1/completions", {{"X-Request-Id", id}}, R"({"prompt": "The capital of France is", "max_tokens": 2})",
                  "application/json");
  BOOST_TEST_REQUIRE(static_cast<bool>(r));
  status = r->status;
  return json::parse(r->body);
}

transport::http_config config() {
  transport::http_config cfg;
  cfg.port = 0;
  cfg.model_name = "m";
  return cfg;
}

} // namespace

BOOST_AUTO_TEST_SUITE(http_attach)

BOOST_AUTO_TEST_CASE(a_retry_during_the_first_commit_attaches_live) {
  transport::http_intake in(config());
  committing_sink sink(in, "running");
  transport::intake_context ctx;
  ctx.sink = &sink;
  ctx.piece = [](token_id t) { return std::string(1, static_cast<char>('a' + t)); };
  in.start(ctx);
  int status = 0;
  const json body = post(in.port(), "dup-1", status);
  in.stop();
  BOOST_TEST(status == 200, body.dump());
  BOOST_TEST(body["choices"][0]["text"] == "Paris.", body.dump());
  BOOST_TEST((sink.ops == std::vector<std::string>{"submit", "fetch", "status"}));
}

// A job the table remembers as ended whose events are gone: 409, as documented.
BOOST_AUTO_TEST_CASE(an_ended_job_without_events_is_409) {
  transport::http_intake in(config());
  committing_sink sink(in, "finished");
  transport::intake_context ctx;
  ctx.sink = &sink;
  ctx.piece = [](token_id) { return std::string(); };
  in.start(ctx);
  int status = 0;
  const json body = post(in.port(), "gone-1", status);
  in.stop();
  BOOST_TEST(status == 409, body.dump());
  BOOST_TEST(body["error"]["code"] == "duplicate", body.dump());
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
