// engine/draft_rows.hpp: a drafted sequence's row i is sampled as if drafts 1..i stood: its grammar
// mask after accepting them (then rolled back, the grammar unchanged), empty past a refused draft;
// its penalties counting them.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "engine/draft_rows.hpp"
#include "engine/logit_edits.hpp"

using namespace conveyor;

namespace {

// Accepts tokens below `limit`; the mask is one word holding the number of accepted tokens, so a
// row's mask tells how many drafts the constraint had taken when it was filled.
struct counting_constraint final : token_constraint {
  token_id limit = 100;
  int32_t taken = 0, rollbacks = 0;
  void fill_mask(std::vector<uint32_t>& mask) override { mask.assign(1, static_cast<uint32_t>(taken)); }
  bool accept(token_id t) override {
    if (t >= limit) return false;
    ++taken;
    return true;
  }
  bool terminated() const override { return false; }
  void rollback(int32_t n) override {
    taken -= n;
    rollbacks += n;
  }
};

scheduled_seq drafted(std::vector<token_id> tokens, int32_t drafts) {
  scheduled_seq s;
  s.tokens = std::move(tokens);
  s.num_drafts = drafts;
  s.sample = true;
  return s;
}

} // namespace

BOOST_AUTO_TEST_SUITE(draft_rows)

BOOST_AUTO_TEST_CASE(each_rows_mask_follows_the_drafts_before_it_and_the_grammar_ends_unchanged) {
  auto g = std::make_shared<counting_constraint>();
  scheduled_seq s = drafted({7, 1, 2, 3}, 3);
  s.constraint = g;
  std::vector<std::vector<uint32_t>> masks(4);
  fill_drafted_masks(s, masks);
  for (uint32_t i = 0; i < 4; ++i) BOOST_TEST(masks[i] == std::vector<uint32_t>{i});
  BOOST_TEST(g->taken == 0);
  BOOST_TEST(g->rollbacks == 3);
}

BOOST_AUTO_TEST_CASE(rows_past_a_refused_draft_get_empty_masks) {
  auto g = std::make_shared<counting_constraint>();
  g->limit = 50;
  scheduled_seq s = drafted({7, 1, 60, 3, 4}, 4);  // draft 2 (60) is refused
  s.constraint = g;
  std::vector<std::vector<uint32_t>> masks(5, std::vector<uint32_t>{99u});
  fill_drafted_masks(s, masks);
  BOOST_TEST(masks[0] == std::vector<uint32_t>{0u});
  BOOST_TEST(masks[1] == std::vector<uint32_t>{1u});
  BOOST_TEST(masks[2].empty());  // row 2 draws as if draft 2 stood, which the grammar refuses
  BOOST_TEST(masks[3].empty());
  BOOST_TEST(masks[4].empty());
  BOOST_TEST(g->taken == 0);
}

BOOST_AUTO_TEST_CASE(penalized_rows_count_the_drafts_before_them) {
  scheduled_seq s = drafted({7, 5, 5, 9}, 3);
  s.sampling.frequency_penalty = 0.5f;
  s.sampling.logit_bias = {{2, 1.0f}};
  make_logit_edits(s.sampling, std::vector<token_id>{1, 2}, std::vector<token_id>{7}, s.logit_edits);
  std::vector<logit_edit> scratch;
  const auto row0 = drafted_row_edits(s, 0, scratch);
  BOOST_TEST(row0.data() == s.logit_edits.data());  // row 0: the plan's own edits
  std::vector<logit_edit> want;
  make_logit_edits(s.sampling, std::vector<token_id>{1, 2}, std::vector<token_id>{7, 5, 5}, want);
  const auto row2 = drafted_row_edits(s, 2, scratch);
  BOOST_REQUIRE_EQUAL(row2.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    BOOST_TEST(row2[k].token == want[k].token);
    BOOST_TEST(row2[k].bias == want[k].bias);
    BOOST_TEST(row2[k].count == want[k].count);
    BOOST_TEST(row2[k].repeated == want[k].repeated);
  }
  BOOST_TEST(std::any_of(row2.begin(), row2.end(), [](const logit_edit& e) { return e.token == 5 && e.count == 2; }));
  s.sampling.frequency_penalty = 0.0f;  // logit_bias alone: the same edits on every row
  s.logit_edits.clear();
  make_logit_edits(s.sampling, std::vector<token_id>{1, 2}, std::vector<token_id>{7}, s.logit_edits);
  BOOST_TEST(drafted_row_edits(s, 3, scratch).data() == s.logit_edits.data());
}

BOOST_AUTO_TEST_SUITE_END()
