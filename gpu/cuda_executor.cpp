// Construction (memory sizing, weights, buffers) and the step entry point of the CUDA executor;
// the launches themselves are in cuda_forward.cpp.
#include "gpu/cuda_executor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "engine/plan_check.hpp"
#include "gpu/check.hpp"
#include "model/cpu/cpu_ops.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/tensor_load.hpp"

namespace conveyor::gpu {
namespace {

[[noreturn]] void bad_plan(const std::string& what) { throw std::invalid_argument("malformed step plan: " + what); }

constexpr int64_t kReserveBytes = int64_t{256} << 20;  // CUDA graphs, cuBLASLt internals, fragmentation
constexpr int32_t kMaxSplits = 32;
constexpr int32_t kInvariantSplits = 16;  // batch-invariant: a max_model_len context in this many splits
constexpr int32_t kInvariantSplitRows = 512;  // and partials for this many decode rows (more: several launches)
constexpr int32_t kBuckets[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256};

double gib(int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }

} // namespace

cuda_executor::cuda_executor(const model::gguf_file& f, const cuda_executor_options& o)
    : cfg_(model::llama_config::from_gguf(f)) {
  init(&f, o);
}

cuda_executor::cuda_executor(const model::llama_config& c, const cuda_executor_options& o) : cfg_(c) { init(nullptr, o); }

cuda_executor::~cuda_executor() {
  for (auto& [b, g] : graphs_) cudaGraphExecDestroy(g);
}

cuda_executor::stream_holder::~stream_holder() {
  if (s) cudaStreamDestroy(s);
}

void cuda_executor::init(const model::gguf_file* f, const cuda_executor_options& o) {
  opt_ = o;
  const std::string where = f ? f->path() + ": " : std::string("dummy model: ");
  if (o.block_size <= 0 || o.block_size > 1024) throw model::model_error("block_size must be in 1..1024");
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
    throw model::model_error("gpu_memory_utilization must be in (0, 1]");
  if (o.max_num_batched_tokens < 1 || o.max_num_seqs < 1 || o.num_kv_blocks < 0 || o.max_drafts < 0)
    throw model::model_error("max_num_batched_tokens and max_num_seqs must be >= 1, num_kv_blocks and max_drafts >= 0");
  const int32_t hd = cfg_.head_dim;
  if (hd % 8 != 0 || hd > 256 || cfg_.n_rot % 2 != 0 || cfg_.n_rot > hd || cfg_.n_head % cfg_.n_head_kv != 0 ||
      cfg_.n_head / cfg_.n_head_kv > 64)
    throw model::model_error(where + "the CUDA executor needs head_dim a multiple of 8 up to 256, an even n_rot <= "
                             "head_dim and at most 64 query heads per KV head (this model: head_dim " +
                             std::to_string(hd) + ", n_rot " + std::to_string(cfg_.n_rot) + ", heads " +
                             std::to_string(cfg_.n_head) + "/" + std::to_string(cfg_.n_head_kv) + ")");
  std::string why;
  if (!cuda_device_available(&why, o.device)) throw std::runtime_error("no usable CUDA device: " + why);
  device_ = o.device;
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_.s, cudaStreamNonBlocking));
  gemm_ = std::make_unique<gemm_runner>();

  const int32_t max_len = o.max_model_len > 0 ? std::min(o.max_model_len, cfg_.n_ctx_train) : cfg_.n_ctx_train;
  info_.block_size = o.block_size;
  info_.vocab_size = cfg_.vocab_size;
  info_.max_model_len = max_len;
  info_.device = "cuda";
  info_.async_steps = true;
  info_.scores_prompts = true;
  invariant_ = o.batch_invariant || o.max_drafts > 0;
  max_drafts_ = o.max_drafts;
  info_.verifies_drafts = o.max_drafts > 0;
  // A decode step is weight-bound up to a few hundred rows (docs/gpu.md §3): drafting pays far
  // longer than on a CPU. An estimate, not measured.
  if (info_.verifies_drafts) info_.step_fixed_cost_tokens = 256.0;

  // Weights.
  device_arena measure_w;
  w_.carve(measure_w, cfg_);
  weight_arena_ = device_arena(measure_w.used(), "weights");
  w_.carve(weight_arena_, cfg_);
  if (f)
    upload_gguf_weights(*f, cfg_, w_, stream_);
  else
    fill_dummy_weights(cfg_, w_, o.dummy_seed, stream_);

  // Step capacities, attention tiling, graph buckets.
  step_caps caps;
  caps.tokens = o.max_num_batched_tokens;
  caps.seqs = std::min(o.max_num_seqs, caps.tokens);
  const int64_t max_blocks_per_seq = (max_len + o.block_size - 1) / o.block_size;
  caps.blocks = int64_t{caps.seqs} * max_blocks_per_seq;
  caps.samples = static_cast<int32_t>(std::min<int64_t>(caps.tokens, int64_t{caps.seqs} * (1 + max_drafts_)));
  group_ = cfg_.n_head / cfg_.n_head_kv;
  tile_tokens_ = std::max(1, std::min(64 / group_, 8192 / (hd * group_)));
  const int32_t graph_max = std::min(256, caps.seqs);
  if (o.cuda_graphs)
    for (int32_t b : kBuckets)
      if (b <= graph_max) buckets_.push_back(b);
  fused_rows_ = o.fused_decode && !invariant_ ? fused_gemv_max_rows(cfg_.n_embd) : 0;
  max_splits_ = kMaxSplits;
  split_tokens_cap_ = graph_max;
  // A graph launches as many splits as the eager policy could choose for any context up to
  // max_len; each replay reads its own step's split length (splits past the context return).
  graph_splits_ = std::max(1, std::min(kMaxSplits, (max_len + kMinSplitLen - 1) / kMinSplitLen));
  if (invariant_) {
    // One split length for every step and row, at least two splits (a decode row's order then
    // depends on its own context alone: empty splits add nothing in the combine); partials for a
    // graph bucket's rows or a step's sampled rows, up to 512 (more decode rows, as a recompute
    // after a preemption brings, take several attention launches).
    inv_split_len_ = std::max(kMinSplitLen, ((max_len + kInvariantSplits - 1) / kInvariantSplits + 31) / 32 * 32);
    graph_splits_ = max_splits_ = std::max(2, (max_len + inv_split_len_ - 1) / inv_split_len_);
    split_tokens_cap_ = std::max(graph_max, std::min(caps.samples, kInvariantSplitRows));
    gemm_->set_invariant(std::min(caps.samples, 64), caps.tokens, std::min(caps.samples, 64));
  }

  // Activations and constants, sized for the capacities.
  const int64_t T = caps.tokens, NS = caps.sample_cap(), d = cfg_.n_embd, nq = int64_t{cfg_.n_head} * hd,
                nkv = int64_t{cfg_.n_head_kv} * hd, ff = cfg_.n_ff;
  auto carve = [&](device_arena& a) {
    x_ = a.take<float>(T * d);
    h_ = a.take<bf16>(T * d);
    qkv_ = a.take<float>(T * (nq + 2 * nkv));
    q_ = a.take<bf16>(T * nq);
    attn_ = a.take<bf16>(T * nq);
    gu_ = a.take<bf16>(T * 2 * ff);
    act_ = a.take<bf16>(T * ff);
    hs_ = a.take<bf16>(NS * d);
    logits_ = a.take<float>(NS * cfg_.vocab_size);
    part_o_ = a.take<float>(int64_t{split_tokens_cap_} * cfg_.n_head * max_splits_ * hd);
    part_ml_ = a.take<float>(int64_t{split_tokens_cap_} * cfg_.n_head * max_splits_ * 2);
    rope_ = a.take<float2>(int64_t{max_len} * (cfg_.n_rot / 2));
    out_ids_ = a.take<int32_t>(NS);
    prev_ids_ = a.take<int32_t>(NS);
    out_lp_ = a.take<float>(NS);
    score_rows_ = a.take<int32_t>(NS);
  };
  device_arena measure_a;
  carve(measure_a);
  act_arena_ = device_arena(measure_a.used(), "activations");
  carve(act_arena_);
  meta_ = std::make_unique<step_meta_buffer>(caps, invariant_);
  if (invariant_) {  // every plan chosen and checked now: no split-K surprise at the first step
    for (const row_class c : {row_class::decode, row_class::prompt}) {
      gemm_->prepare(static_cast<int32_t>(nq + 2 * nkv), static_cast<int32_t>(d), true, 0.0f, c);
      gemm_->prepare(static_cast<int32_t>(d), static_cast<int32_t>(nq), true, 1.0f, c);
      gemm_->prepare(static_cast<int32_t>(2 * ff), static_cast<int32_t>(d), false, 0.0f, c);
      gemm_->prepare(static_cast<int32_t>(d), static_cast<int32_t>(ff), true, 1.0f, c);
    }
    gemm_->prepare(cfg_.vocab_size, static_cast<int32_t>(d), true, 0.0f, row_class::head);
  }
  for (int32_t k = 0; k < 2; ++k) {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, sizeof(int32_t) * static_cast<size_t>(NS)));
    slots_.ids[k] = static_cast<int32_t*>(p);
    CUDA_CHECK(cudaMallocHost(&p, sizeof(float) * static_cast<size_t>(NS)));
    slots_.lp[k] = static_cast<float*>(p);
    CUDA_CHECK(cudaEventCreateWithFlags(&slots_.done[k], cudaEventBlockingSync | cudaEventDisableTiming));
  }

  // RoPE table with the CPU's own angle function (bit-identical angles, divisors and linear
  // scaling included).
  std::vector<float> freqs;
  if (f && cfg_.has_rope_freqs) freqs = model::load_tensor_f32(*f, model::tensor_id::rope_freqs, model::tensor_params::of(cfg_));
  {
    const int32_t half = cfg_.n_rot / 2;
    std::vector<float2> table(static_cast<size_t>(max_len) * half);
    std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
    for (int32_t p = 0; p < max_len; ++p) {
      model::rope_angles(p, cfg_.n_rot, cfg_.rope_theta, freqs.empty() ? nullptr : freqs.data(), c.data(), s.data(),
                         cfg_.rope_freq_scale);
      for (int32_t i = 0; i < half; ++i) table[static_cast<size_t>(p) * half + i] = make_float2(c[i], s[i]);
    }
    CUDA_CHECK(cudaMemcpy(rope_, table.data(), table.size() * sizeof(float2), cudaMemcpyHostToDevice));
  }

  // KV pool: what gpu_memory_utilization leaves after everything above (or exactly num_kv_blocks).
  const int64_t block_bytes = 2 * int64_t{cfg_.n_layer} * o.block_size * cfg_.n_head_kv * hd * int64_t{sizeof(bf16)};
  int64_t blocks = o.num_kv_blocks;
  if (blocks == 0) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const int64_t in_use = static_cast<int64_t>(total_b - free_b);
    const int64_t budget = static_cast<int64_t>(o.gpu_memory_utilization * static_cast<double>(total_b)) - in_use - kReserveBytes;
    blocks = budget / block_bytes - 1;  // one block is the padding sink
    if (blocks < 1)
      throw std::runtime_error(where + "gpu_memory_utilization " + std::to_string(o.gpu_memory_utilization) + " of " +
                               std::to_string(gib(static_cast<int64_t>(total_b))) + " GiB leaves no room for KV blocks after " +
                               std::to_string(gib(in_use)) + " GiB in use (weights " + std::to_string(gib(static_cast<int64_t>(weight_arena_.used()))) +
                               " GiB, activations " + std::to_string(gib(static_cast<int64_t>(act_arena_.used()))) +
                               " GiB) ---> HINT: raise --gpu-memory-utilization or lower --max-num-batched-tokens");
  }
  blocks = std::min<int64_t>(blocks, int64_t{1} << 30);
  info_.num_kv_blocks = static_cast<int32_t>(blocks);
  layer_kv_elems_ = (blocks + 1) * cfg_.n_head_kv * o.block_size * hd;
  auto carve_kv = [&](device_arena& a) {  // sized by the same carving (V's start is 256-aligned)
    k_cache_ = a.take<bf16>(cfg_.n_layer * layer_kv_elems_);
    v_cache_ = a.take<bf16>(cfg_.n_layer * layer_kv_elems_);
  };
  device_arena measure_kv;
  carve_kv(measure_kv);
  kv_arena_ = device_arena(measure_kv.used(), "KV cache");
  carve_kv(kv_arena_);
  CUDA_CHECK(cudaMemsetAsync(k_cache_, 0, kv_arena_.capacity(), stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::string cuda_executor::memory_summary() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "weights %.2f GiB bf16, activations %.2f GiB (%d tokens, %d sequences per step), KV %.2f GiB "
                "(%d blocks x %d tokens), CUDA graphs for decode batches up to %d%s",
                gib(static_cast<int64_t>(weight_arena_.used())), gib(static_cast<int64_t>(act_arena_.used())),
                meta_->caps().tokens, meta_->caps().seqs, gib(static_cast<int64_t>(kv_arena_.capacity())),
                info_.num_kv_blocks, info_.block_size, buckets_.empty() ? 0 : buckets_.back(),
                invariant_ ? (info_.verifies_drafts ? ", batch-invariant (verifies drafts)" : ", batch-invariant") : "");
  return buf;
}

cuda_executor::result_slots::~result_slots() {
  for (int32_t k = 0; k < 2; ++k) {
    if (ids[k]) cudaFreeHost(ids[k]);
    if (lp[k]) cudaFreeHost(lp[k]);
    if (done[k]) cudaEventDestroy(done[k]);
  }
}

void cuda_executor::check_plan(const step_plan& plan) const {
  if (plan.num_tokens() > meta_->caps().tokens)
    bad_plan("a step of " + std::to_string(plan.num_tokens()) + " tokens exceeds the CUDA executor's max_num_batched_tokens " +
             std::to_string(meta_->caps().tokens));
  if (static_cast<int64_t>(plan.seqs.size()) > meta_->caps().seqs)
    bad_plan("a step of " + std::to_string(plan.seqs.size()) + " sequences exceeds the CUDA executor's max_num_seqs " +
             std::to_string(meta_->caps().seqs));
  if (auto err = conveyor::check_plan(plan, info_, /*allow_previous_sample=*/true); !err.empty()) bad_plan(err);
  int64_t samples = 0;
  for (const auto& s : plan.seqs) {
    if (s.num_drafts > max_drafts_)
      bad_plan("sequence " + std::to_string(s.id) + " has " + std::to_string(s.num_drafts) +
               " drafts, more than the CUDA executor's max_drafts " + std::to_string(max_drafts_));
    samples += s.sample ? 1 + s.num_drafts : 0;
  }
  if (samples > meta_->caps().sample_cap())
    bad_plan("a step sampling " + std::to_string(samples) + " rows exceeds the CUDA executor's " +
             std::to_string(meta_->caps().sample_cap()) + " (max_num_seqs x (1 + max_drafts), at most max_num_batched_tokens)");
  for (const auto& s : plan.seqs)
    if (s.tokens.back() == k_previous_sample && prev_row_.count(s.id) == 0)
      bad_plan("sequence " + std::to_string(s.id) + " asks for its previous sample, but the step submitted before sampled none for it");
}

int32_t cuda_executor::bucket_for(int32_t batch) const {
  for (int32_t b : buckets_)
    if (b >= batch) return b;
  return 0;
}

std::vector<float> cuda_executor::last_logits() const {
  std::vector<float> out(static_cast<size_t>(last_samples_) * cfg_.vocab_size);
  CUDA_CHECK(cudaMemcpy(out.data(), logits_, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

} // namespace conveyor::gpu
