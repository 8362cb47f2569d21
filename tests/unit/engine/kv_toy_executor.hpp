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

/// The tokens a job produces when nothing ends it early: the same stop rules as the scheduler
/// (EOS id 0 unless ignore_eos, max_tokens, max_model_len).
inline std::vector<token_id> reference_stream(const request& r, int32_t max_model_len) {
  std::vector<token_id> history = r.prompt_token_ids, out;
  while (true) {
    const token_id t = toy_next_token(history);
    history.push_back(t);
    out.push_back(t);
    if (!r.stop.ignore_eos && t == 0) break;
    if (static_cast<int32_t>(out.size()) >= r.stop.max_tokens || static_cast<int32_t>(history.size()) >= max_model_len) break;
  }
  return out;
}

class kv_toy_executor final : public executor {
public:
  kv_toy_executor(int32_t num_blocks, int32_t block_size, int32_t max_model_len) {
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
      if (!s.sample) continue;
      std::vector<token_id> history;
      const int32_t end = s.num_computed_tokens + static_cast<int32_t>(s.tokens.size());
      for (int32_t p = 0; p < end; ++p) history.push_back(slot(s, p));
      r.sampled.push_back({s.id, toy_next_token(history), -1.0f, {}});
    }
    ++steps_;
    return r;
  }
  int64_t steps() const { return steps_; }

private:
  executor_info info_;
  std::vector<token_id> kv_;
  int64_t steps_ = 0;
};

} // namespace conveyor::test
