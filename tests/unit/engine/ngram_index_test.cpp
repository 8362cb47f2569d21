// Prompt lookup through the n-gram index (engine/ngram_index.hpp) against the rule written as a
// plain scan (every n from max_n down, every earlier position compared): the same drafts for
// every prefix of random sequences over small vocabularies (many repeats, long chains), one
// index per sequence extended step by step as the scheduler does, and an index handed other
// tokens starting over.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "engine/ngram_index.hpp"
#include "engine/speculation.hpp"

using namespace conveyor;

namespace {

// engine/speculation.hpp's rule, scanning: the longest n in [min_n, max_n] whose suffix occurs
// earlier, its occurrences latest first, the vote and the cap.
std::vector<token_id> scan_rule(const std::vector<token_id>& t, int32_t min_n, int32_t max_n, int32_t k) {
  std::vector<token_id> out;
  const auto len = static_cast<int64_t>(t.size());
  if (k <= 0) return out;
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    std::vector<int64_t> alive;
    for (int64_t i = len - n - 1; i >= 0; --i)
      if (std::equal(t.end() - n, t.end(), t.begin() + i)) alive.push_back(i + n);
    if (alive.empty()) continue;
    for (int64_t step = 0; step < std::min<int64_t>(k, ngram_draft_per_match_token * n); ++step) {
      int64_t voters = 0, agree = 0;
      token_id proposed = 0;
      for (int64_t from : alive)
        if (from + step < len) {
          if (voters++ == 0) proposed = t[static_cast<size_t>(from + step)];
          if (t[static_cast<size_t>(from + step)] == proposed) ++agree;
        }
      if (voters == 0 || agree * ngram_vote_den < voters * ngram_vote_num) break;
      out.push_back(proposed);
      std::erase_if(alive, [&](int64_t f) { return f + step >= len || t[static_cast<size_t>(f + step)] != proposed; });
    }
    return out;
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(indexed_lookup_drafts_what_the_scan_drafts) {
  std::mt19937_64 rng(41);
  int64_t lookups = 0, drafted = 0;
  for (int32_t vocab : {2, 3, 5, 12, 60})
    for (auto [min_n, max_n] : {std::pair{1, 1}, {1, 3}, {1, 5}, {2, 4}, {3, 3}, {2, 8}})
      for (int32_t k : {1, 4, 8}) {
        BOOST_TEST_CONTEXT("vocab " << vocab << " n " << min_n << ".." << max_n << " k " << k) {
          std::vector<token_id> t;
          ngram_index index;
          std::vector<token_id> got;
          for (int32_t len = 0; len < 300; ++len) {
            // Runs copied from earlier in the sequence, as grounded text has, between random tokens.
            if (len > 20 && rng() % 4 == 0) {
              const size_t from = rng() % (t.size() - 10), n = 1 + rng() % 8;
              for (size_t i = 0; i < n; ++i) t.push_back(t[from + i]);
            } else {
              t.push_back(static_cast<token_id>(rng() % static_cast<uint64_t>(vocab)));
            }
            const int32_t n = propose_ngram(index, t, min_n, max_n, k, got);
            const std::vector<token_id> want = scan_rule(t, min_n, max_n, k);
            BOOST_TEST(n == static_cast<int32_t>(got.size()));
            BOOST_TEST(got == want, "at length " << t.size());
            ++lookups;
            drafted += n;
          }
        }
      }
  BOOST_TEST(drafted > lookups / 4);  // the runs make the sequences draft
}

BOOST_AUTO_TEST_CASE(an_index_handed_other_tokens_starts_over) {
  ngram_index index;
  std::vector<token_id> out;
  const std::vector<token_id> a{1, 2, 3, 1, 2, 3, 1, 2}, b{9, 8, 9, 8, 7, 9};
  std::vector<token_id> c = a;
  c[7] = 3;  // as long as a, another last token
  BOOST_TEST(propose_ngram(index, a, 1, 3, 4, out) == 3);
  BOOST_TEST(out == (std::vector<token_id>{3, 1, 2}));  // (3 1 2) at 2 .. 4: what followed it
  BOOST_TEST(propose_ngram(index, b, 1, 3, 4, out) == 1);  // shorter: rebuilt
  BOOST_TEST(out == (std::vector<token_id>{8}));  // (9) at 0 and 2: 8 both, then 9 / 7 split
  BOOST_TEST(propose_ngram(index, c, 1, 3, 4, out) == 1);  // as long: rebuilt (else a stale chain: none)
  BOOST_TEST(out == (std::vector<token_id>{1}));
  BOOST_TEST(propose_ngram(index, a, 2, 3, 4, out) == 3);  // another key length: rebuilt
  BOOST_TEST(out == scan_rule(a, 2, 3, 4));
}
