// The HTTP intake's reading of OpenAI bodies (transport/openai_request.cpp) against the shared
// vectors in tests/data/openai_bodies.json, which the Batch mapping
// (clients/python/conveyor_client/openai_batch.py) is tested against too: the two cannot drift.
#include <boost/test/unit_test.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "transport/openai_request.hpp"

using namespace conveyor;
using namespace conveyor::transport;
using json = nlohmann::json;

namespace {

// Read in file order: a schema's text keeps its property order, as a client sends it.
const nlohmann::ordered_json& cases() {
  static const auto doc = nlohmann::ordered_json::parse(std::ifstream(std::string(CONVEYOR_TEST_DATA) + "/openai_bodies.json"));
  return doc.at("cases");
}

// The submit map of a job: the input, max_tokens, and every field that differs from the
// protocol's default (`stream` is the endpoint's business, not the body's mapping).
json submit_map(const schemas::submit_request& j) {
  const schemas::submit_request d;
  json m = json::object();
  if (const auto* p = std::get_if<std::string>(&j.input)) m["prompt"] = *p;
  if (const auto* ids = std::get_if<std::vector<token_id>>(&j.input)) m["prompt_tokens"] = *ids;
  if (const auto* msgs = std::get_if<std::vector<schemas::chat_message>>(&j.input)) {
    m["messages"] = json::array();
    for (const auto& x : *msgs) m["messages"].push_back({{"role", x.role}, {"content", x.content}});
  }
  m["max_tokens"] = j.max_tokens;
  const auto put = [&m](const char* key, const auto& v, const auto& dflt) {
    if (!(v == dflt)) m[key] = v;
  };
  put("temperature", j.temperature, d.temperature);
  put("top_p", j.top_p, d.top_p);
  put("top_k", j.top_k, d.top_k);
  put("min_p", j.min_p, d.min_p);
  put("presence_penalty", j.presence_penalty, d.presence_penalty);
  put("frequency_penalty", j.frequency_penalty, d.frequency_penalty);
  put("repetition_penalty", j.repetition_penalty, d.repetition_penalty);
  if (j.seed) m["seed"] = *j.seed;
  put("stop", j.stop, d.stop);
  put("stop_token_ids", j.stop_token_ids, d.stop_token_ids);
  put("ignore_eos", j.ignore_eos, d.ignore_eos);
  put("min_tokens", j.min_tokens, d.min_tokens);
  put("priority", j.priority, d.priority);
  if (j.deadline_ms) m["deadline_ms"] = *j.deadline_ms;
  put("logprobs", j.logprobs, d.logprobs);
  put("top_logprobs", j.top_logprobs, d.top_logprobs);
  if (j.prompt_logprobs) m["prompt_logprobs"] = *j.prompt_logprobs;
  if (!j.logit_bias.empty()) {
    m["logit_bias"] = json::object();
    for (const auto& [t, b] : j.logit_bias) m["logit_bias"][std::to_string(t)] = b;
  }
  if (!j.chat_template_kwargs.empty()) {
    m["chat_template_kwargs"] = json::object();
    for (const auto& [k, v] : j.chat_template_kwargs) std::visit([&](const auto& x) { m["chat_template_kwargs"][k] = x; }, v);
  }
  if (j.format) {
    using kind = schemas::response_format::kind;
    m["response_format"] = {{"type", schemas::to_string(j.format->type)}};
    if (j.format->type == kind::json_schema) m["response_format"]["schema"] = j.format->spec;
    if (j.format->type == kind::regex) m["response_format"]["pattern"] = j.format->spec;
    if (j.format->type == kind::grammar) m["response_format"]["grammar"] = j.format->spec;
  }
  return m;
}

} // namespace

BOOST_AUTO_TEST_SUITE(openai_mapping)

BOOST_AUTO_TEST_CASE(every_shared_vector_maps_as_written) {
  BOOST_TEST(cases().size() >= 30u);
  for (const auto& c : cases()) {
    BOOST_TEST_CONTEXT(c.at("name").get<std::string>()) {
      const auto ep = c.at("url") == "/v1/chat/completions" ? openai_endpoint::chat_completions : openai_endpoint::completions;
      const auto got = parse_openai_request(c.at("body").dump(), ep, "m");
      if (c.contains("error")) {
        BOOST_TEST_REQUIRE(std::holds_alternative<openai_error>(got));
        BOOST_TEST(std::get<openai_error>(got).param == c.at("error").get<std::string>(), std::get<openai_error>(got).message);
        continue;
      }
      if (const auto* e = std::get_if<openai_error>(&got)) BOOST_FAIL(e->message);
      if (c.contains("tool_chat")) {  // rendered by the server's tool_chat, not a submit map
        const auto& t = std::get<openai_request>(got).tools;
        BOOST_TEST_REQUIRE(t.has_value());
        const char* choices[] = {"auto", "none", "required"};
        BOOST_TEST(choices[static_cast<int>(t->tool_choice)] == c.at("tool_chat").at("tool_choice").get<std::string>());
        BOOST_TEST(t->function == c.at("tool_chat").at("function").get<std::string>());
        BOOST_TEST(t->parallel_tool_calls == c.at("tool_chat").at("parallel_tool_calls").get<bool>());
        BOOST_TEST(json::parse(t->messages) == c.at("body").at("messages"));
        BOOST_TEST(t->messages == nlohmann::ordered_json::parse(c.at("body").dump()).at("messages").dump());
        continue;
      }
      BOOST_TEST(!std::get<openai_request>(got).tools.has_value());
      const json m = submit_map(std::get<openai_request>(got).job);
      const json want = json::parse(c.at("submit").dump());
      BOOST_TEST(m == want, "got " << m.dump() << "\nwant " << want.dump());
    }
  }
}

BOOST_AUTO_TEST_CASE(tools_and_messages_keep_their_keys_in_the_order_sent) {
  // The model reads the schema as written: llama-server keeps the order; so must the HTTP intake.
  const std::string body = R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":)"
                           R"({"name":"f","parameters":{"type":"object","required":["b"],"properties":{"b":{"type":"string"},"a":{}}}}}]})";
  const auto got = parse_openai_request(body, openai_endpoint::chat_completions, "m");
  BOOST_TEST_REQUIRE(std::holds_alternative<openai_request>(got));
  const auto& t = std::get<openai_request>(got).tools;
  BOOST_TEST_REQUIRE(t.has_value());
  BOOST_TEST(t->tools == R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","required":["b"],"properties":{"b":{"type":"string"},"a":{}}}}}])");
  BOOST_TEST(t->messages == R"([{"role":"user","content":"x"}])");
}

BOOST_AUTO_TEST_SUITE_END()
