// A Llama GGUF's weights as the CPU executor reads them: every matrix a view onto the file's
// mapping in its own block type (no copies, no f32 expansion), laid out for one product per
// projection: Q, K and V rows stacked into one matrix, gate and up into another. Only the norms
// and RoPE divisors (a few KB) are copied out as f32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/types.hpp"
#include "model/cpu/qgemv_matrix.hpp"
#include "model/formats/llama_config.hpp"

namespace conveyor::model {

class gguf_file;

struct layer_weights {
  std::vector<float> attn_norm;  ///< (n_embd)
  qmatrix wqkv;                  ///< (n_head*hd + 2*n_head_kv*hd, n_embd): rows of Q, then K, then V
  std::vector<float> qkv_bias;   ///< (n_head*hd + 2*n_head_kv*hd) Q, K, V biases (qwen2), or empty
  std::vector<float> q_norm;     ///< (hd) RMSNorm weight over each query head (qwen3), or empty
  std::vector<float> k_norm;     ///< (hd) the same over each key head, or empty
  qmatrix wo;                    ///< (n_embd, n_head*hd)
  std::vector<float> ffn_norm;   ///< (n_embd)
  qmatrix gate_up;               ///< (2*n_ff, n_embd): rows of gate, then up
  qmatrix down;                  ///< (n_embd, n_ff)
};

struct llama_weights {
  qmatrix token_embd;              ///< (vocab, n_embd)
  std::vector<float> output_norm;  ///< (n_embd)
  qmatrix lm_head;                 ///< (vocab, n_embd): output.weight, or token_embd when tied
  std::vector<float> rope_freqs;   ///< (n_rot/2) angle divisors, or empty
  std::vector<layer_weights> layers;

  /// Views every tensor the config needs in `f`, which must outlive the result. Throws
  /// model_error naming the tensor for a missing one, a wrong shape, or a type the kernels do
  /// not read (the message lists the supported types).
  static llama_weights map(const gguf_file& f, const llama_config& c);
  /// Repacks the matrices `isa`'s kernels have a packed layout for (qmatrix::pack: the layers
  /// and the LM head; the embedding table stays a view) and tells `f` that their raw bytes are
  /// no longer read (gguf_file::release_pages), so the mapping's pages leave resident memory.
  /// Returns the bytes repacked.
  size_t pack(cpu_isa isa, const gguf_file& f);
  /// Bytes of the weights viewed (the matrices' blocks; the f32 copies are negligible).
  size_t bytes() const;
  /// Row `tok` of the embedding table as f32 (n_embd floats).
  void embed(token_id tok, float* out) const;
};

} // namespace conveyor::model
