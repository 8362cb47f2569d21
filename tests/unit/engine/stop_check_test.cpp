#include <boost/test/unit_test.hpp>

#include "engine/stop_check.hpp"
#include "engine_test_util.hpp"

using namespace conveyor;

namespace {

// A sequence with a 3-token prompt and `outputs` sampled after it.
sequence with_outputs(const stop_params& stop, std::vector<token_id> outputs) {
  sequence seq;
  seq.req.stop = stop;
  seq.tokens = {1, 2, 3};
  seq.num_prompt_tokens = 3;
  seq.tokens.insert(seq.tokens.end(), outputs.begin(), outputs.end());
  return seq;
}

stop_params base() {
  stop_params p;
  p.max_tokens = 5;
  p.eos_token_ids = {2};
  p.stop_token_ids = {9};
  return p;
}

} // namespace

BOOST_AUTO_TEST_SUITE(check_stop)

BOOST_AUTO_TEST_CASE(eos_and_stop_token_ids_stop) {
  BOOST_TEST((conveyor::check_stop(with_outputs(base(), {5, 2}), 100) == finish_reason::stop));
  BOOST_TEST((conveyor::check_stop(with_outputs(base(), {9}), 100) == finish_reason::stop));
  BOOST_TEST(!conveyor::check_stop(with_outputs(base(), {5, 6}), 100).has_value());
}

BOOST_AUTO_TEST_CASE(ignore_eos_skips_eos_but_not_stop_token_ids) {
  auto p = base();
  p.ignore_eos = true;
  BOOST_TEST(!conveyor::check_stop(with_outputs(p, {2}), 100).has_value());
  BOOST_TEST((conveyor::check_stop(with_outputs(p, {9}), 100) == finish_reason::stop));
}

BOOST_AUTO_TEST_CASE(min_tokens_holds_back_eos_and_stop_ids) {
  auto p = base();
  p.min_tokens = 2;
  BOOST_TEST(!conveyor::check_stop(with_outputs(p, {2}), 100).has_value());
  BOOST_TEST((conveyor::check_stop(with_outputs(p, {4, 2}), 100) == finish_reason::stop));
}

BOOST_AUTO_TEST_CASE(max_tokens_and_max_model_len_give_length) {
  BOOST_TEST((conveyor::check_stop(with_outputs(base(), {4, 4, 4, 4, 4}), 100) ==
             finish_reason::length));
  BOOST_TEST((conveyor::check_stop(with_outputs(base(), {4, 4}), 5) == finish_reason::length));
  // EOS on the last allowed token reports stop, as vLLM does.
  BOOST_TEST((conveyor::check_stop(with_outputs(base(), {4, 4, 4, 4, 2}), 100) ==
             finish_reason::stop));
}

BOOST_AUTO_TEST_SUITE_END()
