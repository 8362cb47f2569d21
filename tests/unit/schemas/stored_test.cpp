// The journal's encodings: a submit map that decodes back to the same job (every field, each
// input kind), and the summary read out of each event kind; corrupt bytes give nothing.
#include <boost/test/unit_test.hpp>

#include "schemas/events.hpp"
#include "schemas/replies.hpp"
#include "schemas/stored.hpp"

using namespace conveyor;
using namespace conveyor::schemas;

namespace {

submit_request full_job() {
  submit_request j;
  j.id = "job:7/a";
  j.input = std::vector<chat_message>{{"system", "be brief"}, {"user", "h\xC3\xA9llo"}};
  j.max_tokens = 99;
  j.temperature = 0.7f;
  j.top_p = 0.9f;
  j.top_k = 40;
  j.min_p = 0.05f;
  j.presence_penalty = 0.3f;
  j.frequency_penalty = -0.7f;
  j.repetition_penalty = 1.15f;
  j.logit_bias = {{0, -100.0f}, {17, 2.5f}, {50000, 0.1f}};
  j.chat_template_kwargs = {{"enable_thinking", false}, {"depth", int64_t{-2}}, {"scale", 0.25}, {"who", std::string("me")}};
  j.seed = 18446744073709551557ull;
  j.stop = {"\n\n", "END"};
  j.stop_token_ids = {3, 5};
  j.ignore_eos = true;
  j.min_tokens = 4;
  j.priority = -7;
  j.deadline_ms = 123456;
  j.logprobs = true;
  j.stream = false;
  return j;
}

submit_request round_trip(const submit_request& j) {
  const wire_bytes b = encode(j);
  auto r = decode_request(b);
  BOOST_TEST_REQUIRE(std::holds_alternative<submit_request>(r));
  return std::get<submit_request>(r);
}

} // namespace

BOOST_AUTO_TEST_SUITE(stored)

BOOST_AUTO_TEST_CASE(a_submit_map_decodes_back_to_the_same_job) {
  const submit_request j = full_job();
  const submit_request d = round_trip(j);
  BOOST_TEST(d.id == j.id);
  const auto& msgs = std::get<std::vector<chat_message>>(d.input);
  BOOST_TEST_REQUIRE(msgs.size() == 2u);
  BOOST_TEST(msgs[1].content == "h\xC3\xA9llo");
  BOOST_TEST(d.max_tokens == 99);
  BOOST_TEST(d.temperature == j.temperature);
  BOOST_TEST(d.top_p == j.top_p);
  BOOST_TEST(d.top_k == 40);
  BOOST_TEST(d.min_p == j.min_p);
  BOOST_TEST(d.presence_penalty == j.presence_penalty);
  BOOST_TEST(d.frequency_penalty == j.frequency_penalty);
  BOOST_TEST(d.repetition_penalty == j.repetition_penalty);
  BOOST_TEST((d.logit_bias == j.logit_bias));
  BOOST_TEST((d.chat_template_kwargs == j.chat_template_kwargs));
  BOOST_TEST(d.seed.value() == *j.seed);
  BOOST_TEST(d.stop == j.stop);
  BOOST_TEST(d.stop_token_ids == j.stop_token_ids);
  BOOST_TEST(d.ignore_eos);
  BOOST_TEST(d.min_tokens == 4);
  BOOST_TEST(d.priority == -7);
  BOOST_TEST(d.deadline_ms.value() == 123456);
  BOOST_TEST(d.logprobs);
  BOOST_TEST(!d.stream);
}

BOOST_AUTO_TEST_CASE(text_and_token_prompts_and_defaults_round_trip) {
  submit_request j;
  j.id = "t";
  j.input = std::string("once upon");
  submit_request d = round_trip(j);
  BOOST_TEST(std::get<std::string>(d.input) == "once upon");
  BOOST_TEST(!d.seed.has_value());
  BOOST_TEST(!d.deadline_ms.has_value());
  BOOST_TEST(d.stream);
  j.input = std::vector<token_id>{1, 2, 300};
  d = round_trip(j);
  BOOST_TEST((std::get<std::vector<token_id>>(d.input) == std::vector<token_id>{1, 2, 300}));
}

BOOST_AUTO_TEST_CASE(each_event_kind_decodes_to_its_type) {
  auto a = decode_event(encode(accepted_event{"j", 0}));
  BOOST_TEST_REQUIRE(a.has_value());
  BOOST_TEST(std::holds_alternative<accepted_event>(*a));
  BOOST_TEST(job_id_of(*a) == "j");
  BOOST_TEST(!is_terminal(*a));
  tokens_event t;
  t.id = "j";
  t.seq = 4;
  t.token_ids = {7, 8, 9};
  t.text = "abc";
  auto ts = decode_event(encode(t));
  BOOST_TEST_REQUIRE(ts.has_value());
  BOOST_TEST(seq_of(*ts) == 4u);
  BOOST_TEST((std::get<tokens_event>(*ts).token_ids == std::vector<token_id>{7, 8, 9}));
  BOOST_TEST(!std::get<tokens_event>(*ts).logprobs.has_value());
  done_event d;
  d.id = "j";
  d.seq = 5;
  d.reason = finish_reason::cancelled;
  d.usage = {12, 3, 1};
  d.timing = {1.5, std::nullopt, 9.25};
  auto ds = decode_event(encode(d));
  BOOST_TEST_REQUIRE(ds.has_value());
  BOOST_TEST(is_terminal(*ds));
  const auto& dd = std::get<done_event>(*ds);
  BOOST_TEST((dd.reason == finish_reason::cancelled));
  BOOST_TEST(dd.usage.prompt_tokens == 12);
  BOOST_TEST(dd.usage.completion_tokens == 3);
  BOOST_TEST(dd.usage.cached_tokens == 1);
  BOOST_TEST(dd.timing.queue_ms == 1.5);
  BOOST_TEST(!dd.timing.ttft_ms.has_value());
  BOOST_TEST(dd.timing.e2e_ms == 9.25);
  error_event e;
  e.id = "j";
  auto es = decode_event(encode(e));
  BOOST_TEST_REQUIRE(es.has_value());
  BOOST_TEST(std::holds_alternative<error_event>(*es));
  BOOST_TEST(is_terminal(*es));
  // Encoding a decoded event gives the same bytes.
  for (const job_event& ev : {*a, *ts, *ds, *es}) BOOST_TEST(encode(*decode_event(encode(ev))) == encode(ev));
}

BOOST_AUTO_TEST_CASE(top_logprobs_and_response_formats_round_trip) {
  submit_request j;
  j.id = "g";
  j.input = std::string("x");
  j.top_logprobs = 5;
  j.logprobs = true;
  for (auto [kind, spec] : {std::pair{response_format::kind::json_object, ""}, std::pair{response_format::kind::json_schema, R"({"type":"object"})"},
                            std::pair{response_format::kind::regex, "[a-z]+"}, std::pair{response_format::kind::grammar, "root ::= \"a\""}}) {
    j.format = response_format{kind, spec};
    const submit_request d = round_trip(j);
    BOOST_TEST(d.top_logprobs == 5);
    BOOST_TEST_REQUIRE(d.format.has_value());
    BOOST_TEST((d.format->type == kind));
    BOOST_TEST(d.format->spec == spec);
    BOOST_TEST(d.to_sampling_params(1).top_logprobs == 5);
    BOOST_TEST(!d.prompt_logprobs.has_value());
  }
  j.prompt_logprobs = 0;  // a journaled job resumed before its first token scores its prompt again
  BOOST_TEST(round_trip(j).prompt_logprobs.value_or(-1) == 0);
  j.prompt_logprobs = 20;
  BOOST_TEST(round_trip(j).prompt_logprobs.value_or(-1) == 20);
}

BOOST_AUTO_TEST_CASE(events_carry_text_logprobs_alternatives_and_errors) {
  tokens_event t;
  t.id = "j";
  t.seq = 2;
  t.token_ids = {7, 8};
  t.text = "ab";
  t.logprobs = std::vector<float>{-0.5f, -0.25f};
  t.top_logprobs = std::vector<std::vector<conveyor::token_logprob>>{{{7, -0.5f}, {3, -1.5f}}, {{8, -0.25f}}};
  auto decoded = decode_event(encode(t));
  BOOST_TEST_REQUIRE(decoded.has_value());
  const auto& ts = std::get<tokens_event>(*decoded);
  BOOST_TEST(ts.text == "ab");
  BOOST_TEST((*ts.logprobs == std::vector<float>{-0.5f, -0.25f}));
  BOOST_TEST_REQUIRE(ts.top_logprobs->size() == 2u);
  BOOST_TEST((*ts.top_logprobs)[0].size() == 2u);
  BOOST_TEST((*ts.top_logprobs)[0][1].token == 3);
  BOOST_TEST((*ts.top_logprobs)[0][1].logprob == -1.5f);
  error_event e;
  e.id = "j";
  e.code = error_code::overloaded;
  e.message = "full";
  auto es = decode_event(encode(e));
  BOOST_TEST_REQUIRE(es.has_value());
  BOOST_TEST((std::get<error_event>(*es).code == error_code::overloaded));
  BOOST_TEST(std::get<error_event>(*es).message == "full");
}

BOOST_AUTO_TEST_CASE(corrupt_bytes_and_other_maps_decode_to_nothing) {
  BOOST_TEST(!decode_event(std::vector<uint8_t>{}).has_value());
  BOOST_TEST(!decode_event(std::vector<uint8_t>{0xc1}).has_value());
  BOOST_TEST(!decode_event(std::vector<uint8_t>{0x93, 1, 2, 3}).has_value());  // an array
  wire_bytes b = encode(accepted_event{"j", 0});
  b.resize(b.size() / 2);
  BOOST_TEST(!decode_event(b).has_value());
  BOOST_TEST(!decode_event(encode(heartbeat_event{})).has_value());  // no job event
  BOOST_TEST(!decode_event(encode(error_reply{"j", error_code::not_found, "gone", ""})).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
