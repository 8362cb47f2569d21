#include "greedy_driver.hpp"

#include <algorithm>
#include <stdexcept>

namespace conveyor::model {

int32_t run_greedy(executor& ex, std::vector<driven_seq>& seqs, int32_t blocks_per_seq,
                   const std::function<std::vector<float>(size_t)>& logits_of) {
  std::vector<int32_t> done(seqs.size(), 0);  // tokens already computed
  for (auto& s : seqs) {
    s.out.clear();
    s.logits_hash = 0;
  }
  int32_t step = 0;
  for (;; ++step) {
    step_plan plan;
    plan.step_id = static_cast<uint64_t>(step);
    std::vector<size_t> members;
    for (size_t i = 0; i < seqs.size(); ++i) {
      driven_seq& s = seqs[i];
      if (step < s.start_step || static_cast<int32_t>(s.out.size()) >= s.max_new) continue;
      scheduled_seq q;
      q.id = i;
      q.num_computed_tokens = done[i];
      const int32_t plen = static_cast<int32_t>(s.prompt.size());
      if (done[i] < plen) {
        const int32_t n = s.chunk > 0 ? std::min(s.chunk, plen - done[i]) : plen - done[i];
        q.tokens.assign(s.prompt.begin() + done[i], s.prompt.begin() + done[i] + n);
      } else {
        q.tokens.push_back(s.out.back());
      }
      q.sample = done[i] + static_cast<int32_t>(q.tokens.size()) >= plen;
      q.sampling = s.sampling;
      for (int32_t b = 0; b < blocks_per_seq; ++b) q.block_table.push_back(static_cast<block_id>(i) * blocks_per_seq + b);
      done[i] += static_cast<int32_t>(q.tokens.size());
      plan.seqs.push_back(std::move(q));
      members.push_back(i);
    }
    if (plan.seqs.empty()) {
      bool waiting = false;
      for (auto& s : seqs) waiting |= step < s.start_step;
      if (!waiting) return step;
      continue;
    }
    const step_result r = ex.step(plan);
    size_t k = 0;
    for (size_t m = 0; m < members.size(); ++m) {
      if (!plan.seqs[m].sample) continue;
      const sampled_token& t = r.sampled.at(k);
      if (t.id != members[m]) throw std::logic_error("step_result out of plan order");
      driven_seq& s = seqs[members[m]];
      if (logits_of) {
        std::vector<float> row = logits_of(k);
        if (s.out.empty()) s.first_logits = row;
        const auto* bytes = reinterpret_cast<const unsigned char*>(row.data());
        if (s.out.empty()) s.logits_hash = 1469598103934665603ull;
        for (size_t b = 0; b < row.size() * sizeof(float); ++b) s.logits_hash = (s.logits_hash ^ bytes[b]) * 1099511628211ull;
      }
      s.out.push_back(t.token);
      ++k;
    }
  }
}

} // namespace conveyor::model
