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

BOOST_AUTO_TEST_SUITE_END()
