// A toy executor that keeps a real paged KV cache of token ids and samples a pure function of
// the sequence's whole history *as read back from that cache* through the block table. A wrong
// block table, a recompute that skips a token, a prefix-cache hit on stale content, a block reused
// while still needed or a wrongly resolved k_previous_sample all change the tokens, which a test
// compares with reference_stream(), computed without any scheduler.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "engine/executor.hpp"
#include "engine/plan_check.hpp"
#include "engine/request.hpp"

namespace conveyor::test {

/// The toy model: a hash of the whole history, reduced to ids 0..9 (0 is the EOS id of the tests).
inline token_id toy_next_token(const std::vector<token_id>& history) {
  uint64_t h = 1469598103934665603ull;
  for (token_id t : history) h = (h ^ static_cast<uint64_t>(static_cast<uint32_t>(t))) * 1099511628211ull;
  return static_cast<token_id>((h >> 29) % 10);
}

/// A toy model that copies: three times in four it continues the latest earlier occurrence of
/// the history's last two tokens (what prompt lookup proposes), else it is toy_next_token.
inline token_id toy_copy_next_token(const std::vector<token_id>& history) {
  const size_t n = history.size();
  uint64_t h = 7;
  for (token_id t : history) h = (h ^ static_cast<uint64_t>(static_cast<uint32_t>(t))) * 1099511628211ull;
  if (n >= 3 && (h >> 40) % 4 != 0)
    for (size_t i = n - 2; i-- > 0;)
      if (history[i] == history[n - 2] && history[i + 1] == history[n - 1]) return history[i + 2];
  return toy_next_token(history);
}

using toy_model = token_id (*)(const std::vector<token_id>&);

/// A logprob that depends on the position and the token, so that a test sees them carried.
inline float toy_logprob(size_t position, token_id t) { return -static_cast<float>(position % 7) - 0.01f * static_cast<float>(t); }

/// The tokens a job produces when nothing ends it early: the same stop rules as the scheduler
/// (EOS id 0 unless ignore_eos, max_tokens, max_model_len).
inline std::vector<token_id> reference_stream(const request& r, int32_t max_model_len, toy_model model = toy_next_token) {
  std::vector<token_id> history = r.prompt_token_ids, out;
  while (true) {
    const token_id t = model(history);
    history.push_back(t);
    out.push_back(t);
    if (!r.stop.ignore_eos && t == 0) break;
    if (static_cast<int32_t>(out.size()) >= r.stop.max_tokens || static_cast<int32_t>(history.size()) >= max_model_len) break;
  }
  return out;
}

class kv_toy_executor final : public executor {
public:
  kv_toy_executor(int32_t num_blocks, int32_t block_size, int32_t max_model_len, toy_model model = toy_next_token)
      : model_(model) {
    info_.num_kv_blocks = num_blocks;
    info_.block_size = block_size;
    info_.vocab_size = 1 << 20;
    info_.max_model_len = max_model_len;
    info_.device = "toy";
    kv_.assign(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), -1);
  }
  const executor_info& info() const override { return info_; }

  step_result step(const step_plan& plan) override {
    const std::string err = check_plan(plan, info_);
    BOOST_REQUIRE_MESSAGE(err.empty(), err);
    const int32_t bs = info_.block_size;
    auto slot = [&](const scheduled_seq& s, int32_t pos) -> token_id& {
      return kv_[static_cast<size_t>(s.block_table[static_cast<size_t>(pos / bs)]) * static_cast<size_t>(bs) + static_cast<size_t>(pos % bs)];
    };
    for (const auto& s : plan.seqs)  // one fused step: every write, then every read
      for (size_t i = 0; i < s.tokens.size(); ++i) slot(s, s.num_computed_tokens + static_cast<int32_t>(i)) = s.tokens[i];
    step_result r;
    r.step_id = plan.step_id;
    for (const auto& s : plan.seqs) {
      BOOST_REQUIRE(s.num_drafts == 0 || (s.sample && s.num_drafts < static_cast<int32_t>(s.tokens.size())));
      if (!s.sample) continue;
      // A drafted sequence samples after each of its last num_drafts + 1 tokens.
      const int32_t end = s.num_computed_tokens + static_cast<int32_t>(s.tokens.size());
      for (int32_t row_end = end - s.num_drafts; row_end <= end; ++row_end) {
        std::vector<token_id> history;
        for (int32_t p = 0; p < row_end; ++p) history.push_back(slot(s, p));
        const token_id t = model_(history);
        r.sampled.push_back({s.id, t, toy_logprob(history.size(), t), {}});
      }
      num_drafts_ += s.num_drafts;
    }
    ++steps_;
    return r;
  }
  int64_t steps() const { return steps_; }
  int64_t num_drafts() const { return num_drafts_; }
  void set_verifies_drafts() { info_.verifies_drafts = true; }

private:
  toy_model model_;
  int64_t num_drafts_ = 0;
  executor_info info_;
  std::vector<token_id> kv_;
  int64_t steps_ = 0;
};

} // namespace conveyor::test
