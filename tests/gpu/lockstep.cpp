// The CPU/GPU lockstep driver of lockstep.hpp.
#include "lockstep.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "gpu_support.hpp"
#include "model/cpu/sampler.hpp"

namespace conveyor::gpu::testing {

double lockstep(model::cpu_executor& cpu, cuda_executor& gpu, std::vector<lock_seq> seqs, int32_t blocks_per_seq, int32_t& rows) {
  double worst = 0.0;
  model::sampler_scratch scratch;
  const int32_t V = cpu.info().vocab_size;
  for (int32_t step = 0;; ++step) {
    step_plan plan;
    plan.step_id = static_cast<uint64_t>(step);
    std::vector<size_t> members;
    bool waiting = false;
    for (size_t i = 0; i < seqs.size(); ++i) {
      lock_seq& s = seqs[i];
      waiting |= step < s.start_step;
      if (step < s.start_step || static_cast<int32_t>(s.out.size()) >= s.max_new) continue;
      scheduled_seq q;
      q.id = i;
      q.num_computed_tokens = s.done;
      const int32_t plen = static_cast<int32_t>(s.prompt.size());
      if (s.done < plen) {
        const int32_t n = s.chunk > 0 ? std::min(s.chunk, plen - s.done) : plen - s.done;
        q.tokens.assign(s.prompt.begin() + s.done, s.prompt.begin() + s.done + n);
      } else {
        q.tokens.push_back(s.out.back());
      }
      q.sample = s.done + static_cast<int32_t>(q.tokens.size()) >= plen;
      q.sampling = s.sampling;
      for (int32_t b = 0; b < blocks_per_seq; ++b) q.block_table.push_back(static_cast<block_id>(i) * blocks_per_seq + b);
      s.done += static_cast<int32_t>(q.tokens.size());
      plan.seqs.push_back(std::move(q));
      members.push_back(i);
    }
    if (plan.seqs.empty()) {
      if (!waiting) return worst;
      continue;
    }
    std::vector<size_t> sampled_at;
    for (size_t m = 0; m < plan.seqs.size(); ++m)
      if (plan.seqs[m].sample) sampled_at.push_back(m);
    const step_result rc = cpu.step(plan), rg = gpu.step(plan);
    BOOST_REQUIRE_EQUAL(rc.sampled.size(), rg.sampled.size());
    const std::vector<float>& lc = cpu.last_logits();
    const std::vector<float> lg = gpu.last_logits();
    for (size_t k = 0; k < rc.sampled.size(); ++k) {
      const std::vector<float> a(lg.begin() + std::ptrdiff_t(k * V), lg.begin() + std::ptrdiff_t((k + 1) * V));
      const std::vector<float> b(lc.begin() + std::ptrdiff_t(k * V), lc.begin() + std::ptrdiff_t((k + 1) * V));
      worst = std::max(worst, rel_error(a, b));
      ++rows;
      BOOST_TEST(rg.sampled[k].id == rc.sampled[k].id);
      // The GPU's token is model::sample_token's on the GPU's own logits (same seed, position).
      const scheduled_seq& q = plan.seqs[sampled_at[k]];
      const int64_t position = int64_t{q.num_computed_tokens} + static_cast<int64_t>(q.tokens.size());
      const model::sample_result want = model::sample_token(a, q.sampling, position, scratch);
      BOOST_TEST(rg.sampled[k].token == want.token, "seq " << q.id << " position " << position << " T " << q.sampling.temperature);
      BOOST_TEST(std::abs(rg.sampled[k].logprob - want.logprob) < 2e-3f);
    }
    size_t k = 0;
    for (size_t m = 0; m < members.size(); ++m)
      if (plan.seqs[m].sample) seqs[members[m]].out.push_back(rc.sampled[k++].token);
  }
}

std::vector<token_id> prompt_of(int32_t n, int32_t vocab, int32_t salt) {
  std::vector<token_id> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(3 + (i * 37 + salt * 11 + 5) % (vocab - 3));
  return t;
}

cuda_executor_options gpu_opts(int32_t block_size, int32_t blocks, bool graphs) {
  cuda_executor_options o;
  o.block_size = block_size;
  o.num_kv_blocks = blocks;
  o.max_num_batched_tokens = 128;
  o.max_num_seqs = 8;
  o.cuda_graphs = graphs;
  return o;
}

model::cpu_executor_options cpu_opts(int32_t block_size, int32_t blocks) {
  model::cpu_executor_options o;
  o.block_size = block_size;
  o.num_kv_blocks = blocks;
  o.match_llama_cpp = false;  // f32 KV: the GPU's bf16 is the only rounding difference left
  o.math = model::cpu_math::exact;  // f32 activations, as the GPU's bf16 GEMMs take them
  return o;
}


} // namespace conveyor::gpu::testing
