// The reply and event encoders produce exactly the bytes of the shared vectors (which the Python
// client's tests decode), so both sides agree on every key, type and encoding.
#include <boost/test/unit_test.hpp>

#include <iomanip>
#include <sstream>

#include "schemas/events.hpp"
#include "schemas/replies.hpp"
#include "vectors.hpp"

using namespace conveyor::schemas;
using conveyor::finish_reason;

namespace {

std::string hex(const wire_bytes& bytes) {
  std::ostringstream os;
  for (uint8_t b : bytes) os << std::hex << std::setw(2) << std::setfill('0') << int(b);
  return os.str();
}

void check(const std::string& section, const std::string& name, const wire_bytes& encoded) {
  BOOST_TEST_CONTEXT(section << "/" << name) {
    BOOST_TEST(hex(encoded) == test::vector(section, name).at("hex").get<std::string>());
  }
}

tokens_event tokens_with_logprobs() {
  return {"job-1", 2, {1917}, " world", std::vector<float>{-0.5f}, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
}

done_event done_stop() {
  return {"job-1", 3, finish_reason::stop, "Hello, world", {5, 3, 0}, {1.5, 12.25, 40.0}};
}

} // namespace

BOOST_AUTO_TEST_SUITE(encoders)

BOOST_AUTO_TEST_CASE(replies_match_the_vectors) {
  check("replies", "reply_submit_ok", encode(submit_reply{"job-1"}));
  check("replies", "reply_submit_ok_group", encode(submit_reply{"batch-7/item-3"}));
  check("replies", "reply_error_bad_request",
        encode(error_reply{"job-1", error_code::bad_request, "max_tokens must be 1 or more",
                           "max_tokens"}));
  check("replies", "reply_error_no_id",
        encode(error_reply{"", error_code::bad_request, "the message is not valid msgpack", ""}));
  check("replies", "reply_error_duplicate",
        encode(error_reply{"job-1", error_code::duplicate,
                           "job job-1 is running; it was not submitted again", ""}));
  check("replies", "reply_error_too_long",
        encode(error_reply{"job-1", error_code::too_long,
                           "the prompt has 9000 tokens; max_model_len is 8192", "prompt"}));
  check("replies", "reply_error_overloaded",
        encode(error_reply{"job-1", error_code::overloaded, "the queue is full; retry later", ""}));
  check("replies", "reply_error_not_found",
        encode(error_reply{"job-9", error_code::not_found, "no job job-9", ""}));
  check("replies", "reply_error_shutting_down",
        encode(error_reply{"job-1", error_code::shutting_down, "the server is draining", ""}));
  check("replies", "reply_error_internal", encode(error_reply{"", error_code::internal, "oops", ""}));
  check("replies", "reply_cancel", encode(cancel_reply{"job-1", job_state::cancelled}));
  check("replies", "reply_status_running",
        encode(status_reply{"job-1", job_state::running, 5, 2, 3, std::nullopt}));
  check("replies", "reply_status_finished",
        encode(status_reply{"job-1", job_state::finished, 5, 3, 4, finish_reason::stop}));
  check("replies", "reply_stats",
        encode([] {
          stats_reply r;
          r.serving.queued = 3;
          r.serving.running = 2;
          r.serving.kv_usage = 0.25;
          r.serving.kv_blocks_used = 64;
          r.serving.kv_blocks_total = 256;
          r.serving.prompt_tokens_total = 1000;
          r.serving.completion_tokens_total = 5000;
          r.serving.cached_tokens_total = 128;
          r.serving.jobs_accepted = 12;
          r.jobs_rejected = 1;
          r.serving.jobs_finished = 7;
          r.jobs_failed = 0;
          r.serving.tokens_per_s = 88.5;
          r.uptime_s = 3600.0;
          r.serving.preemptions_total = 2;
          r.serving.spec_drafts_total = 40;
          r.serving.spec_draft_tokens_total = 150;
          r.serving.spec_accepted_tokens_total = 96;
          r.rejected = {{"bad_request", 1}, {"overloaded", 0}};
          r.finished = {{"length", 6}, {"stop", 1}};
          r.histograms = {{"time_to_first_token_seconds", 7, 1.75}, {"inter_token_latency_seconds", 4993, 49.5}};
          return r;
        }()));
  check("replies", "reply_health", encode(health_reply{server_status::serving, "smollm2-135m-instruct"}));
  check("replies", "reply_health_draining", encode(health_reply{server_status::draining, "tiny"}));
}

BOOST_AUTO_TEST_CASE(fetch_splices_already_encoded_events) {
  wire_bytes a = encode(tokens_with_logprobs());
  wire_bytes b = encode(done_stop());
  check("replies", "reply_fetch", encode(fetch_reply{"job-1", {a, b}, true}));
  check("replies", "reply_fetch_empty", encode(fetch_reply{"job-1", {}, false}));
}

BOOST_AUTO_TEST_CASE(events_match_the_vectors) {
  check("events", "event_accepted", encode(accepted_event{"job-1", 0}));
  check("events", "event_tokens", encode(tokens_event{"job-1", 1, {9906, 11}, "Hello,", std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt}));
  tokens_event first{"job-1", 1, {11}, ",", std::vector<float>{-0.25f}, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  first.top_logprobs = std::vector<std::vector<conveyor::token_logprob>>{{{11, -0.25f}, {13, -2.0f}}};
  first.prompt = prompt_scores{{1, 9906, 22}, {-3.5f, -0.125f}, std::vector<std::vector<conveyor::token_logprob>>{{{9906, -3.5f}, {22, -4.0f}}, {{22, -0.125f}, {5, -3.0f}}}};
  check("events", "event_tokens_prompt_logprobs", encode(first));
  // Read back, they are the same event.
  const auto back = decode_event(encode(first));
  BOOST_REQUIRE(back.has_value());
  const auto& t = std::get<tokens_event>(*back);
  BOOST_REQUIRE(t.prompt.has_value());
  BOOST_TEST(t.prompt->token_ids == first.prompt->token_ids, boost::test_tools::per_element());
  BOOST_TEST(t.prompt->logprobs == first.prompt->logprobs, boost::test_tools::per_element());
  BOOST_REQUIRE(t.prompt->top.has_value());
  BOOST_TEST(t.prompt->top->at(1).at(1).token == 5);
  BOOST_TEST(t.prompt->top->at(1).at(1).logprob == -3.0f);
  BOOST_TEST(encode(t) == encode(first));
  tokens_event bytes{"job-1", 1, {9906, 254}, "Hello", std::vector<float>{-0.5f, -1.0f}, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  bytes.top_logprobs = std::vector<std::vector<conveyor::token_logprob>>{{{9906, -0.5f}}, {{254, -1.0f}}};
  bytes.token_bytes = std::vector<std::string>{"Hello", "\xe2\x9c"};  // half a character: not UTF-8, so bin
  bytes.top_bytes = std::vector<std::vector<std::string>>{{"Hello"}, {"\xe2\x9c"}};
  check("events", "event_tokens_bytes", encode(bytes));
  const auto bytes_back = decode_event(encode(bytes));
  BOOST_REQUIRE(bytes_back.has_value());
  BOOST_TEST(encode(std::get<tokens_event>(*bytes_back)) == encode(bytes));
  check("events", "event_tokens_logprobs", encode(tokens_with_logprobs()));
  check("events", "event_done_stop", encode(done_stop()));
  check("events", "event_done_cancelled_before_first_token",
        encode(done_event{"job-2", 1, finish_reason::cancelled, "", {5, 0, 0}, {3.0, std::nullopt, 3.0}}));
  check("events", "event_done_length_utf8",
        encode(done_event{"job-3", 5, finish_reason::length, "h\xc3\xa9llo \xe2\x9c\x93",
                          {70000, 300, 64}, {0.0, 250.5, 9000.75}}));
  check("events", "event_done_deadline",
        encode(done_event{"job-4", 2, finish_reason::deadline, "a", {1, 1, 0}, {0.5, 1.0, 100.0}}));
  check("events", "event_error",
        encode(error_event{"job-1", 0, error_code::bad_request, "max_tokens must be 1 or more"}));
  check("events", "event_heartbeat",
        encode(heartbeat_event{42, 1700000000.5, server_status::serving, 2, 3, 0.125, 120.0}));
}

BOOST_AUTO_TEST_CASE(every_vector_is_covered_by_an_encoder_test) {
  // A reply or event added to the generator must get a check above; this counts them.
  BOOST_TEST(test::vectors().at("replies").size() == 18u);
  BOOST_TEST(test::vectors().at("events").size() == 11u);
  for (const auto& v : test::vectors().at("events"))
    BOOST_TEST(v.at("topic").get<std::string>() ==
               (v.at("value").at("kind") == "heartbeat" ? std::string(heartbeat_topic)
                                                         : topic_for(v.at("value").at("id"))));
}

BOOST_AUTO_TEST_CASE(a_decode_error_becomes_an_error_reply) {
  decode_error e{error_code::bad_request, "max_tokens", "max_tokens must be 1 or more", "job-1"};
  check("replies", "reply_error_bad_request", encode(to_reply(e)));
}

BOOST_AUTO_TEST_SUITE_END()
