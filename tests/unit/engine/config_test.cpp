#include <boost/test/unit_test.hpp>

#include "engine/config.hpp"
#include "engine/request.hpp"
#include "engine_test_util.hpp"

using namespace conveyor;

BOOST_AUTO_TEST_SUITE(engine_config)

BOOST_AUTO_TEST_CASE(defaults_are_valid) {
  BOOST_TEST(scheduler_config{}.validate() == "");
  BOOST_TEST(cache_config{}.validate() == "");
  BOOST_TEST(validate_engine_config({}, {}, 128) == "");
  BOOST_TEST(stop_params{}.validate() == "");
}

BOOST_AUTO_TEST_CASE(errors_name_the_field_and_the_fix) {
  scheduler_config s;
  s.max_num_batched_tokens = 0;
  BOOST_TEST(s.validate().find("max_num_batched_tokens is 0") != std::string::npos);
  s = {};
  s.max_num_queued_reqs = 0;
  BOOST_TEST(s.validate().find("max_num_queued_reqs") != std::string::npos);
  cache_config c;
  c.kv_watermark = 1.0;
  BOOST_TEST(c.validate().find("kv_watermark") != std::string::npos);
  c = {};
  c.block_size = 0;
  BOOST_TEST(c.validate().find("block_size") != std::string::npos);
  const std::string pool = validate_engine_config({}, {}, 100); // 1600 < 2048
  BOOST_TEST(pool.find("max_model_len (2048)") != std::string::npos, pool);
  BOOST_TEST(pool.find("1600 tokens") != std::string::npos, pool);
}

BOOST_AUTO_TEST_CASE(policy_and_batching_names_round_trip) {
  BOOST_TEST((parse_scheduling_policy("priority") == scheduling_policy::priority));
  BOOST_TEST(!parse_scheduling_policy("sjf").has_value());
  BOOST_TEST((parse_batching_mode("static") == batching_mode::static_batch));
  BOOST_TEST(std::string(to_string(batching_mode::continuous)) == "continuous");
}

BOOST_AUTO_TEST_CASE(kv_pool_auto_size_follows_model_and_machine) {
  const int64_t per_token = 23040;  // SmolLM2-135M, fp16 KV: 30 layers x 2 x 192 x 2 bytes
  const int64_t gib = int64_t{1} << 30;
  // Room for four sequences of the model's context when the machine has plenty.
  auto a = auto_kv_cache_bytes(per_token, 8192, 24 * gib);
  BOOST_TEST(a.bytes == 4 * 8192 * per_token);
  BOOST_TEST(a.reason.find("4 sequences of 8192 tokens") != std::string::npos, a.reason);
  // Capped at 10% of memory (a long-context model on a small machine), and it says so.
  a = auto_kv_cache_bytes(per_token, 131072, 8 * gib);
  BOOST_TEST(a.bytes == static_cast<int64_t>(0.10 * static_cast<double>(8 * gib)));
  BOOST_TEST(a.reason.find("10% of this machine's 8192 MiB") != std::string::npos, a.reason);
  // Never below the floor, even on a tiny machine or for a tiny context.
  BOOST_TEST(auto_kv_cache_bytes(per_token, 8192, 100 * (int64_t{1} << 20)).bytes == kv_auto_min_tokens * per_token);
  BOOST_TEST(auto_kv_cache_bytes(per_token, 16, 24 * gib).bytes == kv_auto_min_tokens * per_token);
  // An unknown machine size (0) does not cap.
  BOOST_TEST(auto_kv_cache_bytes(per_token, 8192, 0).bytes == 4 * 8192 * per_token);
}

BOOST_AUTO_TEST_SUITE_END()
