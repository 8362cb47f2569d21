#include "model/cpu/cpu_executor.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/config.hpp"
#include "engine/draft_rows.hpp"
#include "engine/plan_check.hpp"
#include "model/cpu/cpu_ops.hpp"
#include "model/formats/gguf.hpp"

namespace conveyor::model {
namespace {

[[noreturn]] void bad_plan(const std::string& what) { throw std::invalid_argument("malformed step plan: " + what); }

std::string mib(int64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

/// fn(t) for every token t < T: over the pool in long steps (each token's work is its own, so
/// the results do not depend on the split), inline in short ones where a hand-out costs more.
template <class F> void per_token(spinning_pool& pool, int32_t T, const F& fn) {
  if (T < 8 || pool.size() == 1) {
    for (int32_t t = 0; t < T; ++t) fn(t);
    return;
  }
  pool.parallel_for(T, [&](int64_t t, int32_t) { fn(static_cast<int32_t>(t)); });
}

} // namespace

cpu_executor::cpu_executor(const gguf_file& f, const cpu_executor_options& o)
    : cfg_(llama_config::from_gguf(f)), w_(llama_weights::map(f, cfg_)), pool_(o.threads), mm_(o.math, cpu_isa_available(o.isa) ? o.isa : throw model_error(std::string("this CPU cannot run the ") + cpu_isa_name(o.isa) + " kernels")) {
  if (o.threads < 0) throw model_error("threads must be >= 0 (0: every core)");
  if (o.block_size <= 0 || o.block_size > 1024) throw model_error("block_size must be in 1..1024");
  match_llama_cpp_ = o.match_llama_cpp;
  whole_runs_ = o.attention_whole_runs;
  if (o.attention_split_keys < 0) throw model_error("attention_split_keys must be >= 0 (0: never split)");
  split_keys_ = o.attention_split_keys;
  const kv_storage storage = match_llama_cpp_ ? kv_storage::f16 : kv_storage::f32;
  info_.max_model_len = o.max_model_len > 0 ? std::min(o.max_model_len, cfg_.n_ctx_train) : cfg_.n_ctx_train;
  const int64_t per_block = paged_kv::block_bytes(cfg_.n_layer, o.block_size, cfg_.n_head_kv, cfg_.head_dim, storage);
  const int64_t phys = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
  int64_t bytes = o.kv_cache_bytes;
  std::string why = o.num_kv_blocks > 0 ? "num_kv_blocks" : "kv_cache_bytes";
  if (o.num_kv_blocks <= 0 && bytes <= 0) {
    const kv_auto_size a = auto_kv_cache_bytes(per_block / o.block_size, info_.max_model_len, phys);
    bytes = a.bytes;
    why = "sized for " + a.reason + "; set kv_cache_bytes to change";
  }
  const int64_t blocks = o.num_kv_blocks > 0 ? o.num_kv_blocks : bytes / per_block;
  if (blocks < 1 || blocks > (int64_t{1} << 30))
    throw model_error("kv_cache_bytes " + std::to_string(bytes) + " holds no KV block (one block takes " +
                      std::to_string(per_block) + " bytes); raise kv_cache_bytes");
  // A pool the machine cannot hold fails here with the setting's name, not as bad_alloc later.
  if (phys > 0 && blocks * per_block > phys)
    throw model_error("the KV cache would take " + std::to_string(blocks * per_block) + " bytes (" + std::to_string(blocks) +
                      " blocks of " + std::to_string(per_block) + "), more than this machine's " + std::to_string(phys) +
                      " bytes of memory; lower kv_cache_bytes (or num_kv_blocks)");
  info_.num_kv_blocks = static_cast<int32_t>(blocks);
  if (o.pack_weights && o.math == cpu_math::fast) packed_bytes_ = w_.pack(mm_.isa(), f);
  info_.block_size = o.block_size;
  info_.vocab_size = cfg_.vocab_size;
  info_.device = "cpu";
  info_.scores_prompts = true;
  // Every kernel computes a row the same way whatever else the step holds (batch-invariant), so
  // a drafted row's logits are those of the step that would have computed it alone.
  info_.verifies_drafts = true;
  info_.step_fixed_cost_tokens = default_fixed_cost_tokens;
  kv_ = std::make_unique<paged_kv>(cfg_.n_layer, info_.num_kv_blocks, o.block_size, cfg_.n_head_kv, cfg_.head_dim, storage, mm_.isa());
  kv_sizing_ = std::to_string(blocks) + " blocks x " + std::to_string(o.block_size) + " tokens = " +
               std::to_string(blocks * o.block_size) + " tokens, " + mib(blocks * per_block) + " reserved, " +
               mib(kv_->resident_bytes()) + " in memory (pages are committed as sequences write them; " +
               (storage == kv_storage::f16 ? "fp16" : "f32") + "; " + why + ")";
}

std::string cpu_executor::compute_summary() const {
  return std::string("math ") + to_string(mm_.math()) + " (" +
         (mm_.math() == cpu_math::fast ? std::string(cpu_isa_name(mm_.isa())) + " integer kernels"
                                       : std::string("f32 kernels")) +
         "), " + std::to_string(pool_.size()) + " threads, weights " + mib(static_cast<int64_t>(w_.bytes())) + " mapped" +
         (packed_bytes_ > 0 ? " (" + mib(static_cast<int64_t>(packed_bytes_)) + " of them repacked for " + cpu_isa_name(mm_.isa()) + ")"
                            : std::string());
}

void cpu_executor::project(const float* a, const qmatrix& w, float* c, int32_t m, bool accumulate) {
  mm_.run(pool_, w, a, m, c, accumulate);
}

void cpu_executor::check_plan(const step_plan& plan) const {
  if (auto err = conveyor::check_plan(plan, info_); !err.empty()) bad_plan(err);
}

void cpu_executor::flatten(const step_plan& plan) {
  tok_.clear();
  pos_.clear();
  table_.clear();
  for (const auto& s : plan.seqs)
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      tok_.push_back(s.tokens[i]);
      pos_.push_back(s.num_computed_tokens + static_cast<int32_t>(i));
      table_.push_back(s.block_table.data());
    }
}

step_result cpu_executor::step(const step_plan& plan) {
  check_plan(plan);
  flatten(plan);
  const int32_t T = static_cast<int32_t>(tok_.size()), d = cfg_.n_embd, half = cfg_.n_rot / 2;
  x_.resize(static_cast<size_t>(T) * d);
  per_token(pool_, T, [&](int32_t t) { w_.embed(tok_[t], &x_[static_cast<size_t>(t) * d]); });
  rope_cos_.resize(static_cast<size_t>(T) * half);
  rope_sin_.resize(static_cast<size_t>(T) * half);
  const float* ff = w_.rope_freqs.empty() ? nullptr : w_.rope_freqs.data();
  for (int32_t t = 0; t < T; ++t)
    rope_angles(pos_[t], cfg_.n_rot, cfg_.rope_theta, ff, &rope_cos_[static_cast<size_t>(t) * half],
                &rope_sin_[static_cast<size_t>(t) * half], cfg_.rope_freq_scale);

  for (int32_t l = 0; l < cfg_.n_layer; ++l) {
    attention_block(l);
    ffn_block(l);
  }

  // Final norm and LM head only for the rows that sample: a sequence's last, and a drafted
  // one's last num_drafts + 1 (each row as if the drafts before it stood).
  struct sampled_row {
    const scheduled_seq* seq;
    int64_t position;  // of the token drawn
  };
  std::vector<int32_t> rows;
  std::vector<sampled_row> sampled;
  int32_t row = 0;
  for (const auto& s : plan.seqs) {
    row += static_cast<int32_t>(s.tokens.size());
    if (!s.sample) continue;
    const int64_t end = int64_t{s.num_computed_tokens} + static_cast<int64_t>(s.tokens.size());
    for (int32_t i = s.num_drafts; i >= 0; --i) {
      rows.push_back(row - 1 - i);
      sampled.push_back({&s, end - i});
    }
  }
  const int32_t S = static_cast<int32_t>(rows.size()), V = cfg_.vocab_size;
  h_.resize(static_cast<size_t>(std::max(S, 1)) * d);
  for (int32_t i = 0; i < S; ++i)
    rms_norm(&x_[static_cast<size_t>(rows[i]) * d], w_.output_norm.data(), &h_[static_cast<size_t>(i) * d], d, cfg_.rms_eps);
  logits_.resize(static_cast<size_t>(S) * V);
  if (S > 0) project(h_.data(), w_.lm_head, logits_.data(), S, false);

  // Sampling is a pure function of (logits, params, seed, position): sequences in parallel, each
  // thread with its own scratch, results in plan order.
  row_seqs_.clear();
  for (const sampled_row& r : sampled) row_seqs_.push_back(r.seq);
  fill_masks(row_seqs_);
  std::vector<sample_result> drawn(sampled.size());
  std::vector<std::vector<token_logprob>> tops(sampled.size());
  std::vector<int32_t> drafts_before(sampled.size(), 0);  // a sequence's rows are consecutive, row 0 first
  for (size_t k = 1; k < sampled.size(); ++k)
    if (sampled[k].seq == sampled[k - 1].seq) drafts_before[k] = drafts_before[k - 1] + 1;
  scratch_.resize(static_cast<size_t>(pool_.size()));
  const auto draw = [&](int64_t k, int32_t thread) {
    const scheduled_seq& s = *sampled[static_cast<size_t>(k)].seq;
    std::span<const float> lg(&logits_[static_cast<size_t>(k) * V], static_cast<size_t>(V));
    const int64_t position = sampled[static_cast<size_t>(k)].position;
    auto& scratch = scratch_[static_cast<size_t>(thread)];
    std::span<const uint32_t> allowed;
    if (s.constraint) allowed = masks_[static_cast<size_t>(k)];
    // Penalties: a drafted row draws as it would after the drafts before it stood, so its edits
    // count them as output (the scheduler's edits end at the sequence's newest known token).
    const std::span<const logit_edit> edits = drafted_row_edits(s, drafts_before[static_cast<size_t>(k)], scratch.row_edits);
    drawn[static_cast<size_t>(k)] = sample_token(lg, s.sampling, position, scratch, allowed, edits);
    top_logprobs(lg, s.sampling.top_logprobs, tops[static_cast<size_t>(k)], scratch);
  };
  if (sampled.size() > 1) {
    pool_.parallel_for(static_cast<int64_t>(sampled.size()), draw);
  } else if (!sampled.empty()) {
    draw(0, 0);
  }
  step_result r;
  r.step_id = plan.step_id;
  for (size_t k = 0; k < sampled.size(); ++k)
    r.sampled.push_back({sampled[k].seq->id, drawn[k].token, drawn[k].logprob, std::move(tops[k])});
  r.prompt_scores = score_prompts(plan);
  return r;
}

// Structured outputs: each sampled row's mask, filled before the draws (sequences in parallel);
// a drafted sequence's rows follow its grammar through the drafts (engine/draft_rows.hpp).
void cpu_executor::fill_masks(std::span<const scheduled_seq* const> row_seqs) {
  masks_.resize(row_seqs.size());
  std::vector<size_t> first;  // the first row of each constrained sequence
  for (size_t k = 0; k < row_seqs.size(); k += static_cast<size_t>(row_seqs[k]->num_drafts) + 1)
    if (row_seqs[k]->constraint) first.push_back(k);
  const auto fill = [&](int64_t j, int32_t) {
    const size_t k0 = first[static_cast<size_t>(j)];
    fill_drafted_masks(*row_seqs[k0], std::span<std::vector<uint32_t>>(masks_).subspan(k0, static_cast<size_t>(row_seqs[k0]->num_drafts) + 1));
  };
  if (first.size() > 1) pool_.parallel_for(static_cast<int64_t>(first.size()), fill);
  else if (!first.empty()) fill(0, 0);
}

// Prompt logprobs: the final norm and LM head over every row with a target, a few dozen rows at
// a time (their logits are vocabulary-wide), each row's target and alternatives in parallel.
std::vector<sampled_token> cpu_executor::score_prompts(const step_plan& plan) {
  constexpr int32_t kScoreRows = 64;
  prompt_rows p = prompt_rows_of(plan);
  const int32_t d = cfg_.n_embd, V = cfg_.vocab_size;
  for (size_t b = 0; b < p.rows.size(); b += kScoreRows) {
    const auto n = static_cast<int32_t>(std::min<size_t>(kScoreRows, p.rows.size() - b));
    h_.resize(static_cast<size_t>(n) * d);
    for (int32_t i = 0; i < n; ++i)
      rms_norm(&x_[static_cast<size_t>(p.rows[b + i]) * d], w_.output_norm.data(), &h_[static_cast<size_t>(i) * d], d, cfg_.rms_eps);
    score_logits_.resize(static_cast<size_t>(n) * V);
    project(h_.data(), w_.lm_head, score_logits_.data(), n, false);
    pool_.parallel_for(n, [&](int64_t k, int32_t thread) {
      sampled_token& o = p.scores[b + static_cast<size_t>(k)];
      std::span<const float> lg(&score_logits_[static_cast<size_t>(k) * V], static_cast<size_t>(V));
      o.logprob = logprob_of(lg, o.token);
      top_logprobs(lg, p.tops[b + static_cast<size_t>(k)], o.top, scratch_[static_cast<size_t>(thread)]);
    });
  }
  return std::move(p.scores);
}

void cpu_executor::attention_block(int32_t l) {
  const layer_weights& L = w_.layers[static_cast<size_t>(l)];
  const int32_t T = static_cast<int32_t>(tok_.size()), d = cfg_.n_embd, hd = cfg_.head_dim;
  const int32_t nq = cfg_.n_head * hd, nkv = cfg_.n_head_kv * hd, width = nq + 2 * nkv, half = cfg_.n_rot / 2;
  h_.resize(static_cast<size_t>(T) * d);
  per_token(pool_, T, [&](int32_t t) {
    rms_norm(&x_[static_cast<size_t>(t) * d], L.attn_norm.data(), &h_[static_cast<size_t>(t) * d], d, cfg_.rms_eps);
  });
  qkv_.resize(static_cast<size_t>(T) * width);
  project(h_.data(), L.wqkv, qkv_.data(), T, false);

  const int32_t bs = info_.block_size;
  per_token(pool_, T, [&](int32_t t) {  // distinct (block, slot) per token: no two write one row
    float* q = &qkv_[static_cast<size_t>(t) * width];
    if (!L.qkv_bias.empty())
      for (int32_t i = 0; i < width; ++i) q[i] += L.qkv_bias[static_cast<size_t>(i)];
    if (!L.q_norm.empty()) {  // in place: rms_norm reads each element before writing it
      for (int32_t h = 0; h < cfg_.n_head; ++h) rms_norm(q + h * hd, L.q_norm.data(), q + h * hd, hd, cfg_.rms_eps);
      for (int32_t h = 0; h < cfg_.n_head_kv; ++h)
        rms_norm(q + nq + h * hd, L.k_norm.data(), q + nq + h * hd, hd, cfg_.rms_eps);
    }
    const float* c = &rope_cos_[static_cast<size_t>(t) * half];
    const float* s = &rope_sin_[static_cast<size_t>(t) * half];
    const bool neox = cfg_.rope == rope_pairs::neox;
    rope_apply(q, cfg_.n_head, hd, cfg_.n_rot, c, s, neox);
    rope_apply(q + nq, cfg_.n_head_kv, hd, cfg_.n_rot, c, s, neox);
    const block_id b = table_[t][pos_[t] / bs];
    kv_->store(l, b, pos_[t] % bs, q + nq, q + nq + nkv);  // fp16-rounded when match_llama_cpp
  });

  // Every token's keys are in the cache now, so attention of token t over 0..pos[t] is causal.
  const int32_t group = cfg_.n_head / cfg_.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  attn_.resize(static_cast<size_t>(T) * nq);
  // A work item is a run of up to `run` consecutive rows of one sequence (a prompt chunk, a
  // decode with drafts) and the query heads of one kv head: every chunk of keys it reads is read
  // once for all of them, each V row once a row (for its heads). One query head an item only
  // where that spreads the work over more threads than it adds: an item of h heads costs about
  // 2 + h one-head units (attn-bench: 1 row at 400 positions, 1 / 3 heads 4.5 / 7.1 us), so one
  // decode on 2 threads takes its 3 kv heads as 3 items, on 16 threads its 9 heads as 9. A row's
  // result does not depend on the grouping.
  const int64_t threads = pool_.size();
  const auto rounds = [&](int64_t items) { return (items + threads - 1) / threads; };
  int32_t heads = group, run = 1;
  if (rounds(int64_t{T} * cfg_.n_head) * 3 < rounds(int64_t{T} * cfg_.n_head_kv) * (2 + group)) heads = 1;
  else run = static_cast<int32_t>(std::clamp<int64_t>(int64_t{T} * cfg_.n_head_kv / (4 * threads), 1, 16));
  runs_.clear();
  for (int32_t t = 0; t < T; ++t) {
    if (t > 0 && runs_.back().second < run && table_[t] == table_[t - 1] && pos_[t] == pos_[t - 1] + 1) ++runs_.back().second;
    else runs_.emplace_back(t, 1);
  }
  // A run and all its kv heads make one item (attend_heads: a block's K and V pieces of every head
  // read in one sweep) where the same cost model says that is no slower: so from as many runs as
  // threads on 2 threads. Measured there (decodes at 500 positions, `step-bench --against
  // kv-head-items`): steps 12% faster at batch 2, 14-16% at 4 to 24, 19% at 32 (docs/benchmarks.md).
  if (attention_split(l, width, scale, heads == group)) {
    project(attn_.data(), L.wo, x_.data(), T, true);  // x += attn · Wo^T
    return;
  }
  const int64_t n_runs = static_cast<int64_t>(runs_.size());
  const bool whole = whole_runs_ && rounds(n_runs) * (2 + cfg_.n_head) <= rounds(n_runs * (cfg_.n_head / heads)) * (2 + heads);
  const int32_t items = whole ? 1 : cfg_.n_head / heads;
  pool_.parallel_for(n_runs * items, [&](int64_t ri, int32_t) {
    const auto [t, n] = runs_[static_cast<size_t>(ri / items)];
    const int32_t h = static_cast<int32_t>(ri % items) * heads;
    const float* q = &qkv_[static_cast<size_t>(t) * width + h * hd];
    float* out = &attn_[static_cast<size_t>(t) * nq + h * hd];
    if (whole) kv_->attend_heads(l, table_[t], pos_[t], n, 0, cfg_.n_head_kv, group, q, width, scale, out, nq, match_llama_cpp_);
    else kv_->attend(l, table_[t], pos_[t], n, h / group, heads, q, width, scale, out, nq, match_llama_cpp_);
  });
  project(attn_.data(), L.wo, x_.data(), T, true);  // x += attn · Wo^T
}

void cpu_executor::ffn_block(int32_t l) {
  const layer_weights& L = w_.layers[static_cast<size_t>(l)];
  const int32_t T = static_cast<int32_t>(tok_.size()), d = cfg_.n_embd, ff = cfg_.n_ff;
  per_token(pool_, T, [&](int32_t t) {
    rms_norm(&x_[static_cast<size_t>(t) * d], L.ffn_norm.data(), &h_[static_cast<size_t>(t) * d], d, cfg_.rms_eps);
  });
  gu_.resize(static_cast<size_t>(T) * 2 * ff);
  project(h_.data(), L.gate_up, gu_.data(), T, false);
  act_.resize(static_cast<size_t>(T) * ff);
  per_token(pool_, T, [&](int32_t t) {
    const float* g = &gu_[static_cast<size_t>(t) * 2 * ff];
    silu_mul(g, g + ff, &act_[static_cast<size_t>(t) * ff], ff);
  });
  project(act_.data(), L.down, x_.data(), T, true);  // x += act · Wdown^T
}

} // namespace conveyor::model
