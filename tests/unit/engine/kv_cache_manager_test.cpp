#include <boost/test/unit_test.hpp>

#include "engine/kv_cache_manager.hpp"

using namespace conveyor;

namespace {

using ids = std::vector<block_id>;

std::vector<token_id> make_tokens(token_id first, int32_t n) {
  std::vector<token_id> out;
  for (int32_t i = 0; i < n; ++i) out.push_back(first + i);
  return out;
}

// Toy pool: 8 blocks of 4 tokens.
conveyor::kv_cache_manager toy(bool caching = true) { return {8, 4, caching}; }

// Allocates and computes `tokens` for `seq`, registering its full blocks in the cache.
void run_prompt(conveyor::kv_cache_manager& kv, seq_id seq, const std::vector<token_id>& tokens) {
  const prefix_hit hit = kv.find_cached_prefix(tokens);
  BOOST_REQUIRE(kv.allocate_slots(seq, static_cast<int32_t>(tokens.size()), &hit));
  kv.cache_blocks(seq, tokens, static_cast<int32_t>(tokens.size()));
}

} // namespace

BOOST_AUTO_TEST_SUITE(kv_cache_manager)

BOOST_AUTO_TEST_CASE(allocate_slots_grows_the_table_block_by_block) {
  auto kv = toy();
  BOOST_TEST(kv.allocate_slots(1, 10));
  BOOST_TEST(kv.block_table(1) == (ids{0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(kv.allocate_slots(1, 12));
  BOOST_TEST(kv.block_table(1).size() == 3u);
  BOOST_TEST(kv.allocate_slots(2, 1));
  BOOST_TEST(kv.allocate_slots(1, 13));
  BOOST_TEST(kv.block_table(1) == (ids{0, 1, 2, 4}), boost::test_tools::per_element());
  BOOST_TEST(kv.block_table(2) == (ids{3}), boost::test_tools::per_element());
  BOOST_TEST(kv.num_used_blocks() == 5);
  BOOST_TEST(kv.num_table_blocks() == 5);
  BOOST_TEST(kv.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(failed_allocation_leaves_state_unchanged) {
  auto kv = toy();
  BOOST_TEST(kv.allocate_slots(1, 24)); // blocks 0..5; 6 and 7 free
  const auto queue_before = kv.pool().free_queue();
  BOOST_TEST(!kv.allocate_slots(2, 9)); // needs 3
  BOOST_TEST(kv.block_table(2).empty());
  BOOST_TEST(!kv.allocate_slots(1, 32, nullptr, /*num_reserved=*/1)); // 2 new + 1 reserved > 2
  BOOST_TEST(kv.block_table(1).size() == 6u);
  BOOST_TEST(kv.pool().free_queue() == queue_before, boost::test_tools::per_element());
  BOOST_TEST(kv.check_invariants() == "");
  BOOST_TEST(kv.allocate_slots(1, 32)); // exactly fits without the reserve
  BOOST_TEST(kv.num_free_blocks() == 0);
}

BOOST_AUTO_TEST_CASE(failed_allocation_with_a_hit_revives_nothing) {
  auto kv = toy();
  run_prompt(kv, 1, make_tokens(0, 9)); // blocks 0 1 (cached) 2
  kv.free(1);                            // queue: 2 3 4 5 6 7 1 0 (2, uncached, first)
  BOOST_TEST(kv.allocate_slots(2, 20));  // takes 2 3 4 5 6
  const auto tokens = make_tokens(0, 12);
  const prefix_hit hit = kv.find_cached_prefix(tokens);
  BOOST_TEST(hit.blocks == (ids{0, 1}), boost::test_tools::per_element());
  // Needs 2 revived + 1 new = 3 of the 3 free; with one reserved it must fail untouched.
  BOOST_TEST(!kv.allocate_slots(3, 12, &hit, /*num_reserved=*/1));
  BOOST_TEST(kv.pool().ref_count(0) == 0);
  BOOST_TEST(kv.pool().ref_count(1) == 0);
  BOOST_TEST(kv.block_table(3).empty());
  BOOST_TEST(kv.check_invariants() == "");
  BOOST_TEST(kv.allocate_slots(3, 12, &hit));
  BOOST_TEST(kv.block_table(3) == (ids{0, 1, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(prefix_hit_shares_full_blocks_and_bumps_ref_counts) {
  auto kv = toy();
  run_prompt(kv, 1, make_tokens(0, 10)); // blocks 0 1 full and cached, 2 partial
  auto second = make_tokens(0, 8);
  second.push_back(500);
  second.push_back(501);
  const prefix_hit hit = kv.find_cached_prefix(second);
  BOOST_TEST(hit.num_tokens == 8);
  BOOST_TEST(hit.blocks == (ids{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(kv.allocate_slots(2, 10, &hit));
  BOOST_TEST(kv.block_table(2) == (ids{0, 1, 3}), boost::test_tools::per_element());
  BOOST_TEST(kv.pool().ref_count(0) == 2);
  BOOST_TEST(kv.pool().ref_count(1) == 2);
  BOOST_TEST(kv.check_invariants() == "");
  // A shared block is never freed under its other user.
  kv.free(1);
  BOOST_TEST(kv.pool().ref_count(0) == 1);
  BOOST_TEST(kv.pool().free_queue() == (ids{2, 4, 5, 6, 7}), boost::test_tools::per_element());  // 2 held no full block
  BOOST_TEST(kv.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(hit_never_covers_the_last_prompt_token) {
  auto kv = toy();
  const auto tokens = make_tokens(0, 8);
  run_prompt(kv, 1, tokens); // two full cached blocks
  BOOST_TEST(kv.find_cached_prefix(tokens).num_tokens == 4);
  auto longer = tokens;
  longer.push_back(99);
  BOOST_TEST(kv.find_cached_prefix(longer).num_tokens == 8);
  BOOST_TEST(kv.find_cached_prefix(make_tokens(0, 4)).num_tokens == 0);
}

BOOST_AUTO_TEST_CASE(hit_needs_the_whole_chain_to_match) {
  auto kv = toy();
  run_prompt(kv, 1, make_tokens(0, 9));
  // Second block equal, first different: the chain hash differs, so nothing hits.
  auto other = make_tokens(0, 9);
  other[0] = 77;
  BOOST_TEST(kv.find_cached_prefix(other).num_tokens == 0);
  // First block equal, second different: one block hits.
  auto partial = make_tokens(0, 9);
  partial[5] = 77;
  BOOST_TEST(kv.find_cached_prefix(partial).num_tokens == 4);
}

BOOST_AUTO_TEST_CASE(freed_cached_blocks_stay_reusable_until_evicted_tail_first) {
  auto kv = toy();
  run_prompt(kv, 1, make_tokens(0, 13)); // blocks 0 1 2 cached, 3 partial
  kv.free(1);                             // queue: 4 5 6 7 3 2 1 0
  BOOST_TEST(kv.find_cached_prefix(make_tokens(0, 13)).num_tokens == 12);
  BOOST_TEST(kv.allocate_slots(2, 20)); // takes 4 5 6 7 3
  BOOST_TEST(kv.find_cached_prefix(make_tokens(0, 13)).num_tokens == 12);
  BOOST_TEST(kv.allocate_slots(3, 1)); // evicts 2, the tail block of seq 1
  BOOST_TEST(kv.block_table(3) == (ids{2}), boost::test_tools::per_element());
  BOOST_TEST(kv.find_cached_prefix(make_tokens(0, 13)).num_tokens == 8);
  BOOST_TEST(kv.allocate_slots(4, 1)); // evicts 1
  BOOST_TEST(kv.find_cached_prefix(make_tokens(0, 13)).num_tokens == 4);
  BOOST_TEST(kv.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(no_hits_when_prefix_caching_is_off) {
  auto kv = toy(/*caching=*/false);
  run_prompt(kv, 1, make_tokens(0, 13));
  kv.free(1);
  BOOST_TEST(kv.find_cached_prefix(make_tokens(0, 13)).num_tokens == 0);
  BOOST_TEST(kv.pool().num_cached() == 0);
}

BOOST_AUTO_TEST_CASE(cache_blocks_registers_only_computed_full_blocks) {
  auto kv = toy();
  const auto tokens = make_tokens(0, 12);
  BOOST_TEST(kv.allocate_slots(1, 12));
  kv.cache_blocks(1, tokens, 7); // one full block computed
  BOOST_TEST(kv.pool().num_cached() == 1);
  kv.cache_blocks(1, tokens, 12);
  BOOST_TEST(kv.pool().num_cached() == 3);
  BOOST_TEST(kv.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(free_of_an_unknown_seq_is_a_no_op) {
  auto kv = toy();
  kv.free(42);
  BOOST_TEST(kv.num_free_blocks() == 8);
  BOOST_TEST(kv.check_invariants() == "");
}

BOOST_AUTO_TEST_SUITE_END()
