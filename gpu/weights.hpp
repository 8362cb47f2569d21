// The model's weights on the device: matrices in bf16 stacked for one GEMM per projection (as
// model/cpu/llama_weights.hpp stacks them on the CPU), norms in f32. Either uploaded from a GGUF
// (dequantized to f32 on the host by model/, rounded to bf16, copied tensor by tensor) or
// seeded random values generated on the device (dummy weights for speed runs).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "gpu/arena.hpp"
#include "gpu/kernels.hpp"
#include "model/formats/llama_config.hpp"

namespace conveyor::model {
class gguf_file;
}

namespace conveyor::gpu {

struct device_layer {
  float* attn_norm = nullptr;  ///< (n_embd)
  bf16* wqkv = nullptr;        ///< (n_head*hd + 2*n_head_kv*hd, n_embd): Q rows, K rows, V rows
  float* qkv_bias = nullptr;   ///< (n_head*hd + 2*n_head_kv*hd): Q, K, V biases (qwen2), or null
  float* q_norm = nullptr;     ///< (hd) RMSNorm weight over each query head (qwen3), or null
  float* k_norm = nullptr;     ///< (hd) the same over each key head, or null
  bf16* wo = nullptr;          ///< (n_embd, n_head*hd)
  float* ffn_norm = nullptr;   ///< (n_embd)
  bf16* w_gate_up = nullptr;   ///< (2*n_ff, n_embd): gate rows, then up rows
  bf16* w_down = nullptr;      ///< (n_embd, n_ff)
};

struct device_weights {
  bf16* token_embd = nullptr;   ///< (vocab, n_embd)
  float* output_norm = nullptr; ///< (n_embd)
  bf16* lm_head = nullptr;      ///< (vocab, n_embd); == token_embd when tied
  std::vector<device_layer> layers;

  /// Carves every tensor of `c` out of `arena` (a measuring arena only counts).
  void carve(device_arena& arena, const model::llama_config& c);
  /// Bytes of the bf16 matrices a decode step reads (layers + LM head; the embedding rows are few).
  static int64_t streamed_bytes(const model::llama_config& c);
};

/// Copies every tensor of `f` into `w` (already carved for `c`). Throws model_error.
void upload_gguf_weights(const model::gguf_file& f, const model::llama_config& c, device_weights& w, cudaStream_t stream);

/// Fills `w` with seeded uniform values: matrices and biases with std 0.02, norms 1 +- 0.02.
void fill_dummy_weights(const model::llama_config& c, device_weights& w, uint64_t seed, cudaStream_t stream);

} // namespace conveyor::gpu
