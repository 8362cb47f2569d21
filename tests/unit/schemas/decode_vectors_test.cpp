// decode_request() against every request vector in schemas/vectors/protocol_vectors.json: valid
// frames decode to exactly the expected request (defaults filled in), bad ones are refused with
// the expected code and field.
#include <boost/test/unit_test.hpp>

#include "schemas/requests.hpp"
#include "vectors.hpp"

using namespace conveyor::schemas;
using nlohmann::json;

namespace {

json input_json(const prompt_input& input) {
  if (const auto* prompt = std::get_if<std::string>(&input)) return {{"prompt", *prompt}};
  if (const auto* ids = std::get_if<std::vector<conveyor::token_id>>(&input))
    return {{"prompt_tokens", *ids}};
  json messages = json::array();
  for (const chat_message& m : std::get<std::vector<chat_message>>(input))
    messages.push_back({{"role", m.role}, {"content", m.content}});
  return {{"messages", messages}};
}

template <class T> json opt(const std::optional<T>& v) { return v ? json(*v) : json(nullptr); }

json kwargs_json(const std::vector<std::pair<std::string, std::variant<bool, int64_t, double, std::string>>>& kw) {
  json j = json::object();
  for (const auto& [k, v] : kw) std::visit([&j, &k](const auto& x) { j[k] = x; }, v);
  return j;
}

json bias_json(const std::vector<std::pair<conveyor::token_id, float>>& bias) {
  json j = json::object();
  for (const auto& [t, b] : bias) j[std::to_string(t)] = b;
  return j;
}

// The decoded request in the vectors' "decoded" shape.
json to_json(const decode_result& result) {
  return std::visit(
      [](const auto& r) -> json {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, submit_request>) {
          return {{"op", "submit"}, {"id", r.id}, {"input", input_json(r.input)},
                  {"max_tokens", r.max_tokens}, {"temperature", r.temperature},
                  {"top_p", r.top_p}, {"top_k", r.top_k}, {"min_p", r.min_p},
                  {"seed", opt(r.seed)}, {"stop", r.stop}, {"stop_token_ids", r.stop_token_ids},
                  {"ignore_eos", r.ignore_eos}, {"min_tokens", r.min_tokens},
                  {"priority", r.priority}, {"deadline_ms", opt(r.deadline_ms)},
                  {"logprobs", r.logprobs}, {"stream", r.stream}, {"presence_penalty", r.presence_penalty},
                  {"frequency_penalty", r.frequency_penalty}, {"repetition_penalty", r.repetition_penalty},
                  {"logit_bias", bias_json(r.logit_bias)}, {"chat_template_kwargs", kwargs_json(r.chat_template_kwargs)},
                  {"prompt_logprobs", opt(r.prompt_logprobs)}, {"token_bytes", r.token_bytes}, {"speculate", r.speculate}};
        } else if constexpr (std::is_same_v<T, cancel_request>) {
          return {{"op", "cancel"}, {"id", r.id}};
        } else if constexpr (std::is_same_v<T, status_request>) {
          return {{"op", "status"}, {"id", r.id}};
        } else if constexpr (std::is_same_v<T, fetch_request>) {
          return {{"op", "fetch"}, {"id", r.id}, {"from_seq", r.from_seq},
                  {"max_events", r.max_events}};
        } else if constexpr (std::is_same_v<T, stats_request>) {
          return {{"op", "stats"}};
        } else if constexpr (std::is_same_v<T, health_request>) {
          return {{"op", "health"}};
        } else {
          return {{"error", to_string(r.code)}, {"field", r.field}, {"message", r.message}};
        }
      },
      result);
}

} // namespace

BOOST_AUTO_TEST_SUITE(decode_vectors)

BOOST_AUTO_TEST_CASE(the_vector_file_has_every_kind_of_case) {
  const json& doc = test::vectors();
  BOOST_TEST(doc.at("protocol") == protocol_version);
  std::size_t num_ok = 0, num_bad = 0;
  for (const json& v : doc.at("requests")) (v.at("expect") == "ok" ? num_ok : num_bad)++;
  BOOST_TEST(num_ok >= 15u);
  BOOST_TEST(num_bad >= 60u);
}

BOOST_AUTO_TEST_CASE(valid_requests_decode_to_the_expected_values) {
  for (const json& v : test::vectors().at("requests")) {
    if (v.at("expect") != "ok") continue;
    BOOST_TEST_CONTEXT("vector " << v.at("name").get<std::string>()) {
      auto frame = test::from_hex(v.at("hex"));
      decode_result result = decode_request(frame);
      BOOST_TEST(!std::holds_alternative<decode_error>(result), to_json(result).dump());
      BOOST_TEST(to_json(result) == v.at("decoded"),
                 "got " << to_json(result).dump() << "\nwant " << v.at("decoded").dump());
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused_with_the_expected_code_and_field) {
  for (const json& v : test::vectors().at("requests")) {
    if (v.at("expect") == "ok") continue;
    BOOST_TEST_CONTEXT("vector " << v.at("name").get<std::string>()) {
      auto frame = test::from_hex(v.at("hex"));
      decode_result result = decode_request(frame);
      const auto* error = std::get_if<decode_error>(&result);
      BOOST_TEST_REQUIRE(error != nullptr, "decoded as " << to_json(result).dump());
      BOOST_TEST(to_string(error->code) == v.at("expect").get<std::string>());
      BOOST_TEST(error->field == v.at("field").get<std::string>(), "message: " << error->message);
      BOOST_TEST(!error->message.empty());
      BOOST_TEST_MESSAGE(v.at("name").get<std::string>() << ": [" << error->field << "] "
                                                         << error->message);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_strict_prefix_of_a_valid_frame_is_refused) {
  for (const json& v : test::vectors().at("requests")) {
    if (v.at("expect") != "ok") continue;
    auto frame = test::from_hex(v.at("hex"));
    for (std::size_t n = 0; n < frame.size(); ++n) {
      BOOST_TEST_CONTEXT(v.at("name").get<std::string>() << " cut to " << n << " bytes") {
        decode_result result = decode_request(std::span(frame.data(), n));
        BOOST_TEST(std::holds_alternative<decode_error>(result));
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
