// The load generator's protocol encoding and decoding, checked against an independent msgpack
// codec (nlohmann::json's).
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "tools/bench/wire.hpp"

namespace conveyor::bench {
namespace {

using nlohmann::json;

json parse(const std::string& frame) { return json::from_msgpack(frame); }

std::string pack(const json& j) {
  const auto bytes = json::to_msgpack(j);
  return std::string(bytes.begin(), bytes.end());
}

} // namespace

BOOST_AUTO_TEST_SUITE(bench_wire)

BOOST_AUTO_TEST_CASE(submit_with_prompt_tokens_forces_the_length) {
  bench_request r;
  r.prompt_tokens = {100, 200, 49151};
  r.max_tokens = 7;
  r.force_length = true;
  const json j = parse(encode_submit(r, "run/3", {0.0, 42}));
  BOOST_TEST(j.size() == 8u);
  BOOST_TEST(j["op"] == "submit");
  BOOST_TEST(j["id"] == "run/3");
  BOOST_TEST(j["prompt_tokens"] == json({100, 200, 49151}));
  BOOST_TEST(j["max_tokens"] == 7);
  BOOST_TEST(j["temperature"].get<double>() == 0.0);
  BOOST_TEST(j["seed"] == 42);
  BOOST_TEST(j["ignore_eos"] == true);
  BOOST_TEST(j["min_tokens"] == 7);
}

BOOST_AUTO_TEST_CASE(submit_with_messages_or_prompt_lets_the_model_stop) {
  bench_request chat;
  chat.messages = {{"system", "be brief"}, {"user", "hi"}};
  chat.max_tokens = 3;
  const json c = parse(encode_submit(chat, "run/0", {}));
  BOOST_TEST(c["messages"] == json::parse(R"([{"role":"system","content":"be brief"},{"role":"user","content":"hi"}])"));
  BOOST_TEST(!c.contains("ignore_eos"));
  BOOST_TEST(!c.contains("seed"));
  BOOST_TEST(!c.contains("prompt"));
  bench_request text;
  text.prompt = "Once upon a time";
  const json t = parse(encode_submit(text, "run/1", {0.7, std::nullopt}));
  BOOST_TEST(t["prompt"] == "Once upon a time");
  BOOST_TEST(t["temperature"].get<double>() == 0.7);
  BOOST_TEST(!t.contains("prompt_tokens"));
}

BOOST_AUTO_TEST_CASE(fetch_and_health_requests) {
  BOOST_TEST(parse(encode_fetch("run/9", 5, 4096)) == json::parse(R"({"op":"fetch","id":"run/9","from_seq":5,"max_events":4096})"));
  BOOST_TEST(parse(encode_health()) == json::parse(R"({"op":"health"})"));
}

BOOST_AUTO_TEST_CASE(events_decode_to_the_fields_the_benchmark_uses) {
  decoder d;
  BOOST_TEST(!d.event("", 0).has_value());  // zero bytes is not an event
  const std::string tokens = pack(json::parse(R"({"id":"run/1","seq":4,"kind":"tokens","token_ids":[5,6,7],"text":"abc","extra":1})"));
  const auto t = d.event(tokens.data(), tokens.size());
  BOOST_REQUIRE(t.has_value());
  BOOST_TEST(t->id == "run/1");
  BOOST_TEST(t->seq == 4);
  BOOST_TEST((t->kind == event_kind::tokens));
  BOOST_TEST(t->num_tokens == 3);

  const std::string done = pack(json::parse(R"({"id":"run/1","seq":9,"kind":"done","finish_reason":"length","text":"abc",
      "usage":{"prompt_tokens":32,"completion_tokens":256,"cached_tokens":0},"timing":{"queue_ms":1.0,"ttft_ms":null,"e2e_ms":2.0}})"));
  const auto dn = d.event(done.data(), done.size());
  BOOST_REQUIRE(dn.has_value());
  BOOST_TEST((dn->kind == event_kind::done));
  BOOST_TEST(dn->finish_reason == "length");
  BOOST_TEST(dn->prompt_tokens == 32);
  BOOST_TEST(dn->completion_tokens == 256);

  const std::string err = pack(json::parse(R"({"id":"x/2","seq":0,"kind":"error","code":"overloaded","message":"full"})"));
  const auto e = d.event(err.data(), err.size());
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST((e->kind == event_kind::error));
  BOOST_TEST(e->error_code == "overloaded");

  const std::string future = pack(json::parse(R"({"id":"x/2","seq":3,"kind":"progress"})"));
  BOOST_TEST((d.event(future.data(), future.size())->kind == event_kind::other));  // unknown kinds keep their seq
}

BOOST_AUTO_TEST_CASE(malformed_events_are_refused) {
  decoder d;
  for (const std::string& bad : {std::string("\xc1"), pack(json::array({1, 2})), pack(json::parse(R"({"seq":1,"kind":"tokens"})")),
                                pack(json::parse(R"({"id":"a/1","kind":"tokens"})")), pack(json::parse(R"({"id":"a/1","seq":-1,"kind":"done"})")),
                                std::string("\x82\xa2id")})
    BOOST_TEST(!d.event(bad.data(), bad.size()).has_value());
}

BOOST_AUTO_TEST_CASE(replies_decode_with_fetched_events) {
  decoder d;
  const std::string fetch = pack(json::parse(R"({"ok":true,"id":"run/1","events":[
      {"id":"run/1","seq":1,"kind":"tokens","token_ids":[1]},{"id":"run/1","seq":2,"kind":"done","finish_reason":"stop",
       "usage":{"prompt_tokens":3,"completion_tokens":1,"cached_tokens":0}}],"complete":true})"));
  const auto f = d.reply(fetch.data(), fetch.size());
  BOOST_REQUIRE(f.has_value());
  BOOST_TEST(f->ok);
  BOOST_TEST(f->complete);
  BOOST_REQUIRE(f->events.size() == 2u);
  BOOST_TEST(f->events[1].completion_tokens == 1);

  const std::string err = pack(json::parse(R"({"ok":false,"id":"run/2","error":{"code":"overloaded","message":"queue full"}})"));
  const auto e = d.reply(err.data(), err.size());
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(!e->ok);
  BOOST_TEST(e->id == "run/2");
  BOOST_TEST(e->error_code == "overloaded");

  const std::string health = pack(json::parse(R"({"ok":true,"status":"serving","protocol":1,"model":"smollm2"})"));
  BOOST_TEST(d.reply(health.data(), health.size())->model == "smollm2");
  const std::string no_ok = pack(json::parse(R"({"id":"a"})"));
  BOOST_TEST(!d.reply(no_ok.data(), no_ok.size()).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::bench
