// The CUDA executor as the rest of conveyor sees it: options, factories and the benchmark's
// device probes, with no CUDA types. A build with CUDA links conveyor_gpu (gpu/factory.cpp);
// a build without it links gpu/factory_fallback.cpp, whose every function says how to rebuild.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/executor.hpp"
#include "gpu/device.hpp"

namespace conveyor::model {
class gguf_file;
struct llama_config;
} // namespace conveyor::model

namespace conveyor::gpu {

struct cuda_executor_options {
  int32_t device = 0;
  /// Token slots per KV block.
  int32_t block_size = 16;
  /// Fraction of the GPU's memory this process may hold: weights, activations, then KV blocks.
  double gpu_memory_utilization = 0.90;
  /// When > 0, the KV pool has exactly this many blocks (tests, small runs).
  int32_t num_kv_blocks = 0;
  /// Longest sequence served; 0 = the model's training context.
  int32_t max_model_len = 0;
  /// Most tokens in one step: sizes the activation buffers (the scheduler's token budget).
  int32_t max_num_batched_tokens = 2048;
  /// Most sequences in one step: sizes the sampling buffers and the largest graph bucket.
  int32_t max_num_seqs = 256;
  /// Capture decode-only steps as CUDA graphs at bucketed batch sizes.
  bool cuda_graphs = true;
  /// Steps of up to 8 token rows run the fused decode GEMVs (norm + QKV + RoPE, norm + gate/up +
  /// SwiGLU); false: cuBLASLt for every step (comparisons, benchmarks).
  bool fused_decode = true;
  /// Every row's logits independent of the other rows of its step (docs/gpu.md §3, "Speculative
  /// decoding"): one cuBLASLt algorithm per row class and none split-K, no fused GEMVs, decode rows
  /// as one-row attention tiles split at a length fixed per executor. Slower at small batches;
  /// what makes a step's tokens the same whatever else it holds.
  bool batch_invariant = false;
  /// Verify up to this many drafted tokens per sequence and step (speculative decoding, vLLM's
  /// num_speculative_tokens); > 0 makes the executor batch-invariant. The sampled-row buffers
  /// hold max_num_seqs x (1 + max_drafts) rows, at most max_num_batched_tokens.
  int32_t max_drafts = 0;
  /// Seed of the random weights of make_cuda_executor_dummy.
  uint64_t dummy_seed = 1234;
};

/// True when this binary was built with the CUDA executor.
bool cuda_build_available();

/// Loads `f` (GGUF, any type model/ dequantizes) as bf16 onto the GPU. Throws model_error for a
/// model conveyor cannot run, std::runtime_error for a CUDA failure or a build without CUDA.
std::shared_ptr<executor> make_cuda_executor(const model::gguf_file& f, const cuda_executor_options& o);

/// A model of shape `c` with seeded random bf16 weights generated on the GPU (vLLM's
/// --load-format dummy): for speed measurements, where the values do not matter.
std::shared_ptr<executor> make_cuda_executor_dummy(const model::llama_config& c, const cuda_executor_options& o);

/// Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written (the
/// memory-bandwidth ceiling of METHOD.md), measured with `bytes` per copy.
double cuda_measure_copy_bandwidth(int64_t bytes);

/// bf16 x bf16 -> fp32-accumulate GEMM rate in FLOP/s through cuBLASLt (the same call the
/// executor makes), for C(m, n) = A(m, k) B(n, k)^T on random inputs.
double cuda_measure_gemm_flops(int32_t m, int32_t n, int32_t k);

} // namespace conveyor::gpu
