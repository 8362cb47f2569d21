// The CUDA executor's step pipeline: submit() queues a whole step on the stream and returns,
// collect() waits for the oldest one. While the GPU runs step N the host plans step N+1 (the
// scheduler), fills it into the other pinned metadata buffer and queues it behind N, so the GPU
// goes from one step to the next without waiting for the host (vLLM's async scheduling). N+1's
// decodes need N's sampled ids: they are read on the device (embedding, k_previous_sample).
//
//   host:  fill(N) upload launch copy->slot[N%2] record(N) | fill(N+1) ... record(N+1) | wait(N) read slot[N%2]
//   GPU:                [-------------- step N --------------][------------ step N+1 ------------]
#include <algorithm>
#include <span>
#include <stdexcept>

#include "engine/draft_rows.hpp"
#include "gpu/check.hpp"
#include "gpu/cuda_executor.hpp"

namespace conveyor::gpu {

step_result cuda_executor::step(const step_plan& plan) {
  submit(plan);
  return collect();
}

void cuda_executor::submit(const step_plan& plan) {
  check_plan(plan);
  if (outstanding_.size() >= 2) throw std::logic_error("the CUDA executor takes at most two steps before a collect()");
  outstanding_step out;
  out.result.step_id = plan.step_id;
  if (plan.seqs.empty()) {
    out.ready = true;
    prev_row_.clear();
    outstanding_.push_back(std::move(out));
    return;
  }
  CUDA_CHECK(cudaSetDevice(device_));
  bool decode_only = true, on_host = false, scores = false;
  int32_t n_sample = 0;
  for (const auto& s : plan.seqs) {
    // Batch-invariant graphs hold decode rows only (a prompt's last token runs eagerly).
    decode_only = decode_only && s.tokens.size() == 1 && s.sample && (!invariant_ || s.num_computed_tokens >= s.num_prompt_tokens);
    n_sample += s.sample ? 1 + s.num_drafts : 0;
    on_host = on_host || (s.sample && (s.constraint || !s.logit_edits.empty() || s.sampling.top_logprobs > 0));
    scores = scores || !s.prompt_targets.empty();
  }
  on_host = on_host || scores;
  // The slot's previous user (two steps back) has been collected: its upload and copies are done.
  const int32_t slot = next_slot_;
  next_slot_ ^= 1;
  meta_->select(slot);
  const int32_t bucket = decode_only ? bucket_for(static_cast<int32_t>(plan.seqs.size())) : 0;
  const step_shape sh = meta_->fill(plan, bucket, tile_tokens_, group_, info_.block_size, info_.num_kv_blocks, prev_row_);
  const bool graph_splits = bucket > 0 && graph_splits_ > 1 && (invariant_ || bucket * cfg_.n_head_kv < 2 * sm_count_);
  if (graph_splits) {
    const int32_t len = invariant_ ? inv_split_len_ : split_len_for(sh.max_ctx, bucket);
    meta_->set_split_len(len > 0 ? len : (info_.max_model_len + 31) / 32 * 32);  // 0: one split holds it all
  }
  meta_->upload(sh, stream_);
  // The previous step's ids, where this step's k_previous_sample tokens read them: out_ids_ itself
  // is rewritten by this step's sampling, twice when a new graph bucket runs once eagerly first.
  if (sh.previous_samples > 0)
    CUDA_CHECK(cudaMemcpyAsync(prev_ids_, out_ids_, sizeof(int32_t) * meta_->caps().sample_cap(), cudaMemcpyDeviceToDevice, stream_));
  if (bucket > 0) {
    run_graph(bucket, sh, graph_splits);
  } else {
    const attn_split sp = eager_split(sh);
    last_split_ = {false, sp.n_splits, sp.n_splits > 1 ? sp.split_len : 0, sh.max_ctx};
    forward(sh, sp);
  }
  if (n_sample > 0) {
    CUDA_CHECK(cudaMemcpyAsync(slots_.ids[slot], out_ids_, sizeof(int32_t) * n_sample, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaMemcpyAsync(slots_.lp[slot], out_lp_, sizeof(float) * n_sample, cudaMemcpyDeviceToHost, stream_));
  }
  CUDA_CHECK(cudaEventRecord(slots_.done[slot], stream_));
  last_samples_ = n_sample;
  out.slot = slot;
  prev_row_.clear();
  int32_t row = 0;
  for (const auto& s : plan.seqs) {
    if (!s.sample) continue;
    if (s.num_drafts == 0) prev_row_[s.id] = row;  // a drafted sequence is never planned ahead
    for (int32_t i = 0; i <= s.num_drafts; ++i, ++row) out.result.sampled.push_back({s.id, 0, 0.0f, {}});
  }
  if (on_host) {
    // Grammar masks and top logprobs need this step's logits on the host before the next step
    // overwrites them: wait now. A grammar's token replaces the device's in out_ids_, which the
    // next step's k_previous_sample reads.
    read_slot(slot, out.result);
    row = 0;
    bool replaced = false;
    for (const auto& s : plan.seqs) {
      if (!s.sample) continue;
      const bool redrawn = s.constraint || !s.logit_edits.empty();
      if (redrawn || s.sampling.top_logprobs > 0) resample_on_host(s, row, &out.result.sampled[static_cast<size_t>(row)]);
      replaced = replaced || redrawn;
      for (int32_t i = 0; i <= s.num_drafts; ++i, ++row) slots_.ids[slot][row] = out.result.sampled[static_cast<size_t>(row)].token;
    }
    if (replaced) CUDA_CHECK(cudaMemcpy(out_ids_, slots_.ids[slot], sizeof(int32_t) * n_sample, cudaMemcpyHostToDevice));
    if (scores) out.result.prompt_scores = score_prompts(plan);
    out.ready = true;
  }
  outstanding_.push_back(std::move(out));
}

void cuda_executor::read_slot(int32_t slot, step_result& r) const {
  CUDA_CHECK(cudaEventSynchronize(slots_.done[slot]));
  for (size_t i = 0; i < r.sampled.size(); ++i) {
    r.sampled[i].token = slots_.ids[slot][i];
    r.sampled[i].logprob = slots_.lp[slot][i];
  }
}

step_result cuda_executor::collect() {
  if (outstanding_.empty()) throw std::logic_error("cuda_executor::collect() without a submitted step");
  outstanding_step out = std::move(outstanding_.front());
  outstanding_.pop_front();
  if (!out.ready) read_slot(out.slot, out.result);
  return std::move(out.result);
}

// Structured outputs, logit edits (logit_bias, penalties) and top logprobs: the row's logits come
// to the host and the CPU sampler (the same pure function of logits, params, position and edits)
// draws there. One vocab-sized copy per
// such row and step; the device kernel samples every other row.
void cuda_executor::resample_on_host(const scheduled_seq& s, int32_t row, sampled_token* out) {
  const size_t V = static_cast<size_t>(cfg_.vocab_size), rows = static_cast<size_t>(s.num_drafts) + 1;
  host_row_.resize(V * rows);
  CUDA_CHECK(cudaMemcpy(host_row_.data(), logits_ + static_cast<size_t>(row) * V, V * rows * sizeof(float), cudaMemcpyDeviceToHost));
  const bool redrawn = s.constraint || !s.logit_edits.empty();
  host_masks_.resize(std::max(host_masks_.size(), rows));
  if (s.constraint) fill_drafted_masks(s, std::span<std::vector<uint32_t>>(host_masks_).first(rows));
  const int64_t end = int64_t{s.num_computed_tokens} + static_cast<int64_t>(s.tokens.size());
  for (int32_t i = 0; i <= s.num_drafts; ++i) {  // row i: position end - num_drafts + i, drafts 1..i standing
    const std::span<const float> lg(host_row_.data() + V * static_cast<size_t>(i), V);
    sampled_token& o = out[i];
    if (redrawn) {
      const std::span<const uint32_t> mask = s.constraint ? std::span<const uint32_t>(host_masks_[static_cast<size_t>(i)])
                                                          : std::span<const uint32_t>();
      const model::sample_result d =
          model::sample_token(lg, s.sampling, end - s.num_drafts + i, host_scratch_, mask, drafted_row_edits(s, i, host_edits_));
      o.token = d.token;
      o.logprob = d.logprob;
    }
    model::top_logprobs(lg, s.sampling.top_logprobs, o.top, host_scratch_);
  }
}

// Prompt logprobs, after the step's own sampling (the step waited): the rows with a target take
// the final norm and the LM head S rows at a time, through the sampled rows' buffers (their
// tokens are read by now); their logits come to the host, where the CPU sampler's functions
// score them.
std::vector<sampled_token> cuda_executor::score_prompts(const step_plan& plan) {
  prompt_rows p = prompt_rows_of(plan);
  const int32_t S = meta_->caps().sample_cap(), d = cfg_.n_embd;
  const size_t V = static_cast<size_t>(cfg_.vocab_size);
  for (size_t b = 0; b < p.rows.size(); b += static_cast<size_t>(S)) {
    const auto n = static_cast<int32_t>(std::min(static_cast<size_t>(S), p.rows.size() - b));
    for (int32_t k = 0; k < n; ++k) p.rows[b + static_cast<size_t>(k)] = meta_->row_of(p.rows[b + static_cast<size_t>(k)]);
    CUDA_CHECK(cudaMemcpyAsync(score_rows_, p.rows.data() + b, sizeof(int32_t) * static_cast<size_t>(n), cudaMemcpyHostToDevice, stream_));
    launch_rmsnorm(x_, nullptr, score_rows_, w_.output_norm, hs_, n, d, cfg_.rms_eps, stream_);
    gemm_->run(hs_, w_.lm_head, logits_, true, n, cfg_.vocab_size, d, 0.0f, stream_, invariant_ ? row_class::head : row_class::any);
    host_row_.resize(V * static_cast<size_t>(n));
    CUDA_CHECK(cudaMemcpyAsync(host_row_.data(), logits_, sizeof(float) * V * static_cast<size_t>(n), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (int32_t k = 0; k < n; ++k) {
      sampled_token& o = p.scores[b + static_cast<size_t>(k)];
      const std::span<const float> lg(host_row_.data() + V * static_cast<size_t>(k), V);
      o.logprob = model::logprob_of(lg, o.token);
      model::top_logprobs(lg, p.tops[b + static_cast<size_t>(k)], o.top, host_scratch_);
    }
  }
  return std::move(p.scores);
}

} // namespace conveyor::gpu
