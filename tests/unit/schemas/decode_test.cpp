// decode_request() cases the shared vectors cannot carry: size limits, custom limits, the id a
// refusal keeps, conversion to engine parameters, and mutated frames (run under ASan/UBSan).
#include <boost/test/unit_test.hpp>

#include <random>

#include <msgpack.hpp>

#include "schemas/decode_fields.hpp"
#include "schemas/requests.hpp"
#include "vectors.hpp"

using namespace conveyor::schemas;

namespace {

// {"op":"submit","id":"job-1","prompt":<n bytes of 'x'>} packed by msgpack-c.
std::vector<uint8_t> submit_with_prompt(std::size_t n) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(3);
  pk.pack(std::string("op")); pk.pack(std::string("submit"));
  pk.pack(std::string("id")); pk.pack(std::string("job-1"));
  pk.pack(std::string("prompt")); pk.pack(std::string(n, 'x'));
  return {reinterpret_cast<const uint8_t*>(buf.data()),
          reinterpret_cast<const uint8_t*>(buf.data()) + buf.size()};
}

decode_error error_of(const decode_result& r) {
  BOOST_TEST_REQUIRE(std::holds_alternative<decode_error>(r));
  return std::get<decode_error>(r);
}

} // namespace

BOOST_AUTO_TEST_SUITE(decoder)

BOOST_AUTO_TEST_CASE(a_frame_over_max_message_bytes_is_too_long_before_parsing) {
  decode_limits limits;
  std::size_t overhead = submit_with_prompt(0).size() + 4;  // str32 header for big prompts
  auto at_limit = submit_with_prompt(limits.max_message_bytes - overhead);
  BOOST_TEST_REQUIRE(at_limit.size() == limits.max_message_bytes);
  BOOST_TEST(std::holds_alternative<submit_request>(decode_request(at_limit, limits)));
  auto over = submit_with_prompt(limits.max_message_bytes - overhead + 1);
  decode_error e = error_of(decode_request(over, limits));
  BOOST_TEST(e.code == error_code::too_long);
  BOOST_TEST(e.field == "");
}

BOOST_AUTO_TEST_CASE(custom_limits_bound_arrays_maps_strings_and_messages) {
  decode_limits limits;
  limits.max_array_len = 3;
  auto ok = test::vector_bytes("requests", "submit_minimal");
  BOOST_TEST(std::holds_alternative<submit_request>(decode_request(ok, limits)));
  auto tokens = test::vector_bytes("requests", "submit_prompt_tokens");  // 6 ids
  BOOST_TEST(error_of(decode_request(tokens, limits)).code == error_code::bad_request);
  limits = {};
  limits.max_map_len = 2;  // the top map has 3 keys
  BOOST_TEST(error_of(decode_request(ok, limits)).code == error_code::bad_request);
  limits = {};
  limits.max_str_bytes = 4;  // "submit" is 6 bytes
  BOOST_TEST(error_of(decode_request(ok, limits)).code == error_code::bad_request);
  limits = {};
  limits.max_messages = 2;  // submit_messages has 3
  auto messages = test::vector_bytes("requests", "submit_messages");
  BOOST_TEST(error_of(decode_request(messages, limits)).field == "messages");
  limits.max_depth = 2;  // messages need depth 3
  limits.max_messages = 100;
  BOOST_TEST(error_of(decode_request(messages, limits)).code == error_code::bad_request);
  limits = {};
  limits.max_fetch_events = 50;
  auto fetch = test::vector_bytes("requests", "fetch_full");  // asks for 100
  BOOST_TEST(error_of(decode_request(fetch, limits)).field == "max_events");
}

BOOST_AUTO_TEST_CASE(response_format_and_top_logprobs_are_checked) {
  const auto submit = [](auto&& extra) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(4);
    pk.pack(std::string("op")); pk.pack(std::string("submit"));
    pk.pack(std::string("id")); pk.pack(std::string("j"));
    pk.pack(std::string("prompt")); pk.pack(std::string("x"));
    extra(pk);
    return decode_request(std::span(reinterpret_cast<const uint8_t*>(buf.data()), buf.size()));
  };
  auto ok = submit([](auto& pk) {
    pk.pack(std::string("response_format"));
    pk.pack_map(2);
    pk.pack(std::string("type")); pk.pack(std::string("regex"));
    pk.pack(std::string("pattern")); pk.pack(std::string("[0-9]+"));
  });
  BOOST_TEST_REQUIRE(std::holds_alternative<submit_request>(ok));
  BOOST_TEST((std::get<submit_request>(ok).format->type == response_format::kind::regex));
  auto no_schema = error_of(submit([](auto& pk) {
    pk.pack(std::string("response_format"));
    pk.pack_map(1);
    pk.pack(std::string("type")); pk.pack(std::string("json_schema"));
  }));
  BOOST_TEST(no_schema.field == "response_format.schema");
  auto bad_type = error_of(submit([](auto& pk) {
    pk.pack(std::string("response_format"));
    pk.pack_map(1);
    pk.pack(std::string("type")); pk.pack(std::string("xml"));
  }));
  BOOST_TEST(bad_type.field == "response_format.type");
  auto not_map = error_of(submit([](auto& pk) { pk.pack(std::string("response_format")); pk.pack(3); }));
  BOOST_TEST(not_map.field.rfind("response_format", 0) == 0);
  auto top = error_of(submit([](auto& pk) { pk.pack(std::string("top_logprobs")); pk.pack(21); }));
  BOOST_TEST(top.field == "top_logprobs");
  auto with_top = submit([](auto& pk) { pk.pack(std::string("top_logprobs")); pk.pack(3); });
  BOOST_TEST_REQUIRE(std::holds_alternative<submit_request>(with_top));
  BOOST_TEST(std::get<submit_request>(with_top).logprobs);
}

BOOST_AUTO_TEST_CASE(fetch_defaults_are_capped_by_the_limit) {
  decode_limits limits;
  limits.max_fetch_events = 10;
  auto r = decode_request(test::vector_bytes("requests", "fetch_defaults"), limits);
  BOOST_TEST_REQUIRE(std::holds_alternative<fetch_request>(r));
  BOOST_TEST(std::get<fetch_request>(r).max_events == 10);
}

BOOST_AUTO_TEST_CASE(a_refusal_keeps_the_id_when_it_was_valid) {
  auto bad_max = test::vector_bytes("requests", "submit_max_tokens_zero");
  BOOST_TEST(error_of(decode_request(bad_max)).id == "job-1");
  auto bad_id = test::vector_bytes("requests", "submit_id_space");
  BOOST_TEST(error_of(decode_request(bad_id)).id == "");
  auto garbage = test::vector_bytes("requests", "huge_array_claim");
  BOOST_TEST(error_of(decode_request(garbage)).id == "");
}

BOOST_AUTO_TEST_CASE(submit_converts_to_engine_parameters) {
  auto r = decode_request(test::vector_bytes("requests", "submit_full"));
  BOOST_TEST_REQUIRE(std::holds_alternative<submit_request>(r));
  const auto& s = std::get<submit_request>(r);
  auto sampling = s.to_sampling_params(99);
  BOOST_TEST(sampling.temperature == 0.5f);
  BOOST_TEST(sampling.top_p == 0.75f);
  BOOST_TEST(sampling.top_k == 40);
  BOOST_TEST(sampling.min_p == 0.125f);
  BOOST_TEST(sampling.seed == 1234u);
  BOOST_TEST(sampling.validate().empty());
  auto stop = s.to_stop_params({0, 1});
  BOOST_TEST(stop.max_tokens == 64);
  BOOST_TEST(stop.min_tokens == 8);
  BOOST_TEST(stop.ignore_eos);
  BOOST_TEST((stop.eos_token_ids == std::vector<conveyor::token_id>{0, 1}));
  BOOST_TEST((stop.stop_token_ids == std::vector<conveyor::token_id>{2, 7}));
  BOOST_TEST(stop.validate().empty());

  auto minimal = decode_request(test::vector_bytes("requests", "submit_minimal"));
  BOOST_TEST(std::get<submit_request>(minimal).to_sampling_params(99).seed == 99u);
  // The sampler computes logprobs only for a job that reads them (logprobs or top_logprobs).
  submit_request lp = std::get<submit_request>(minimal);
  BOOST_TEST(!lp.to_sampling_params(1).logprobs);
  lp.top_logprobs = 3;
  BOOST_TEST(lp.to_sampling_params(1).logprobs);
  lp.top_logprobs = 0;
  lp.logprobs = true;
  BOOST_TEST(lp.to_sampling_params(1).logprobs);
}

// Found by tests/fuzz/fuzz_decode: a repeated key that is not UTF-8 was echoed into the error
// reply ("key \xff appears twice"), which Python's msgpack (raw=False) cannot even decode.
BOOST_AUTO_TEST_CASE(keys_that_are_not_utf8_are_refused_without_echoing_them) {
  auto utf8_error = [](std::vector<uint8_t> frame) {
    decode_error e = error_of(decode_request(frame));
    BOOST_TEST(conveyor::schemas::detail::valid_utf8(e.message));
    BOOST_TEST(conveyor::schemas::detail::valid_utf8(e.field));
    return e;
  };
  // {"\xff":1, "\xff":1, "op":"stats"}
  decode_error top = utf8_error({0x83, 0xa1, 0xff, 0x01, 0xa1, 0xff, 0x01, 0xa2, 'o', 'p',
                                 0xa5, 's', 't', 'a', 't', 's'});
  BOOST_TEST(top.field == "");
  BOOST_TEST(top.message == "map keys must be valid UTF-8");
  // {"op":"submit","id":"job-1","messages":[{"\xc0\x80":"x"}]}: an overlong NUL as a key.
  std::vector<uint8_t> nested = {0x83, 0xa2, 'o', 'p', 0xa6, 's', 'u', 'b', 'm', 'i', 't',
                                 0xa2, 'i', 'd', 0xa5, 'j', 'o', 'b', '-', '1',
                                 0xa8, 'm', 'e', 's', 's', 'a', 'g', 'e', 's', 0x91, 0x81,
                                 0xa2, 0xc0, 0x80, 0xa1, 'x'};
  decode_error inner = utf8_error(nested);
  BOOST_TEST(inner.field == "messages[0]");
  BOOST_TEST(inner.id == "job-1");
  // The same with an integer key: the field names the map, without a trailing '.'.
  nested.erase(nested.end() - 5, nested.end() - 2);
  nested.insert(nested.end() - 2, 0x01);
  BOOST_TEST(utf8_error(nested).field == "messages[0]");
}

BOOST_AUTO_TEST_CASE(mutated_frames_never_crash_and_valid_results_are_consistent) {
  std::mt19937 rng(20240611);
  std::size_t num_ok = 0, num_refused = 0;
  for (const auto& v : test::vectors().at("requests")) {
    auto base = test::from_hex(v.at("hex"));
    if (base.empty()) continue;
    for (int round = 0; round < 200; ++round) {
      auto frame = base;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        std::size_t at = rng() % frame.size();
        switch (rng() % 3) {
          case 0: frame[at] = static_cast<uint8_t>(rng()); break;
          case 1: frame[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
          case 2: frame.insert(frame.begin() + at, static_cast<uint8_t>(rng())); break;
        }
      }
      decode_result r = decode_request(frame);
      if (const auto* error = std::get_if<decode_error>(&r)) {
        ++num_refused;
        BOOST_TEST(!error->message.empty());
        BOOST_TEST((error->id.empty() || valid_id(error->id)));
      } else {
        ++num_ok;
        if (const auto* s = std::get_if<submit_request>(&r)) {
          BOOST_TEST(valid_id(s->id));
          BOOST_TEST(s->max_tokens >= 1);
          BOOST_TEST(s->to_sampling_params(0).validate().empty());
        }
      }
    }
  }
  BOOST_TEST(num_refused > 0u);
  BOOST_TEST_MESSAGE("mutations: " << num_ok << " decoded, " << num_refused << " refused");
}

BOOST_AUTO_TEST_SUITE_END()
