#include <boost/test/unit_test.hpp>

#include "engine/block_pool.hpp"

using namespace conveyor;

namespace {

using ids = std::vector<block_id>;
const std::vector<token_id> tokens_a{1, 2, 3, 4};
const std::vector<token_id> tokens_b{5, 6, 7, 8};

std::vector<int32_t> refs_of(const block_pool& pool) {
  std::vector<int32_t> refs;
  for (block_id b = 0; b < pool.num_blocks(); ++b) refs.push_back(pool.ref_count(b));
  return refs;
}

} // namespace

BOOST_AUTO_TEST_SUITE(block_pool)

BOOST_AUTO_TEST_CASE(allocate_takes_ids_from_the_queue_head) {
  conveyor::block_pool pool(8, 4);
  BOOST_TEST(*pool.allocate(3) == (ids{0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(*pool.allocate(2) == (ids{3, 4}), boost::test_tools::per_element());
  BOOST_TEST(pool.free_queue() == (ids{5, 6, 7}), boost::test_tools::per_element());
  BOOST_TEST(pool.num_free() == 3);
  BOOST_TEST(pool.ref_count(0) == 1);
}

BOOST_AUTO_TEST_CASE(allocate_fails_without_side_effects) {
  conveyor::block_pool pool(8, 4);
  auto first = pool.allocate(6);
  pool.cache((*first)[0], 11, tokens_a);
  const auto queue_before = pool.free_queue();
  const auto refs_before = refs_of(pool);
  BOOST_TEST(!pool.allocate(3).has_value());
  BOOST_TEST(pool.free_queue() == queue_before, boost::test_tools::per_element());
  BOOST_TEST(refs_of(pool) == refs_before, boost::test_tools::per_element());
  BOOST_TEST(pool.num_free() == 2);
  BOOST_TEST(pool.find_cached(11, tokens_a) == 0);
  BOOST_TEST(*pool.allocate(2) == (ids{6, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(uncached_blocks_are_reused_first_and_cached_ones_appended_tail_first) {
  conveyor::block_pool pool(8, 4);
  const auto a = *pool.allocate(3); // 0 1 2
  const auto b = *pool.allocate(2); // 3 4
  pool.release(a);  // nothing cached: back at the head, in order, before the never-used 5 6 7
  BOOST_TEST(pool.free_queue() == (ids{0, 1, 2, 5, 6, 7}), boost::test_tools::per_element());
  pool.cache(3, 100, tokens_a);
  pool.cache(4, 101, tokens_b);
  pool.release(b);  // cached: at the tail, the sequence's tail block first
  BOOST_TEST(pool.free_queue() == (ids{0, 1, 2, 5, 6, 7, 4, 3}), boost::test_tools::per_element());
  BOOST_TEST(pool.check_invariants(std::vector<int32_t>(8, 0)) == "");
  // The touched set stays small: freeing and allocating again takes the same blocks.
  BOOST_TEST(*pool.allocate(3) == (ids{0, 1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(eviction_follows_lru_order_and_drops_the_hash) {
  conveyor::block_pool pool(8, 4);
  const auto a = *pool.allocate(3); // 0 1 2
  pool.cache(0, 100, tokens_a);
  pool.cache(1, 101, tokens_b);
  pool.release(a); // queue: 2 3 4 5 6 7 1 0 (2 has no hash: reused first)
  BOOST_TEST(pool.num_cached() == 2);
  BOOST_TEST(*pool.allocate(6) == (ids{2, 3, 4, 5, 6, 7}), boost::test_tools::per_element());
  BOOST_TEST(pool.find_cached(101, tokens_b) == 1); // still cached while free
  BOOST_TEST(*pool.allocate(1) == (ids{1}), boost::test_tools::per_element());
  BOOST_TEST(pool.find_cached(101, tokens_b) == -1); // evicted
  BOOST_TEST(pool.find_cached(100, tokens_a) == 0);
  BOOST_TEST(pool.num_cached() == 1);
}

BOOST_AUTO_TEST_CASE(touch_revives_a_free_cached_block) {
  conveyor::block_pool pool(4, 4);
  const auto a = *pool.allocate(1);
  pool.cache(0, 100, tokens_a);
  pool.release(a);
  BOOST_TEST(pool.num_free() == 4);
  pool.touch(0);
  BOOST_TEST(pool.ref_count(0) == 1);
  BOOST_TEST(pool.num_free() == 3);
  BOOST_TEST(pool.free_queue() == (ids{1, 2, 3}), boost::test_tools::per_element());
  pool.touch(0);
  BOOST_TEST(pool.ref_count(0) == 2);
  BOOST_TEST(pool.check_invariants({2, 0, 0, 0}) == "");
}

BOOST_AUTO_TEST_CASE(find_cached_rejects_a_hash_with_other_tokens) {
  conveyor::block_pool pool(4, 4);
  pool.allocate(1);
  pool.cache(0, 100, tokens_a);
  BOOST_TEST(pool.find_cached(100, tokens_b) == -1);
  BOOST_TEST(pool.find_cached(100, tokens_a) == 0);
  BOOST_TEST(pool.find_cached(999, tokens_a) == -1);
}

BOOST_AUTO_TEST_CASE(duplicate_hash_keeps_the_first_block) {
  conveyor::block_pool pool(4, 4);
  pool.allocate(2);
  pool.cache(0, 100, tokens_a);
  pool.cache(1, 100, tokens_a);
  BOOST_TEST(pool.is_cached(0));
  BOOST_TEST(!pool.is_cached(1));
  BOOST_TEST(pool.check_invariants({1, 1, 0, 0}) == "");
}

BOOST_AUTO_TEST_CASE(check_invariants_reports_a_ref_count_mismatch) {
  conveyor::block_pool pool(4, 4);
  pool.allocate(2);
  BOOST_TEST(pool.check_invariants({1, 1, 0, 0}) == "");
  const std::string error = pool.check_invariants({1, 0, 0, 0});
  BOOST_TEST(error.find("block 1") != std::string::npos, error);
  BOOST_TEST(pool.check_invariants({1, 1, 1, 0}) != "");
}

BOOST_AUTO_TEST_SUITE_END()
