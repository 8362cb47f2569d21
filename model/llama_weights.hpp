// Llama weights dequantized to f32 at load, laid out for one GEMM per projection:
// Q, K and V rows are stacked into one matrix, gate and up into another. Optionally each
// projection also keeps its raw quantized blocks (same row order) for the small-step kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/llama_config.hpp"
#include "model/qgemv_matrix.hpp"

namespace conveyor::model {

class gguf_file;

/// Dequantizes tensor `name` of shape ne = [ne0, ne1] (ne0 contiguous) into a row-major
/// (ne1, ne0) f32 matrix. Throws model_error when it is missing, has another shape, or has
/// a type conveyor cannot dequantize.
std::vector<float> load_tensor_f32(const gguf_file& f, const std::string& name, int64_t ne0, int64_t ne1 = 1);

struct layer_weights {
  std::vector<float> attn_norm;  ///< (n_embd)
  std::vector<float> wqkv;       ///< (n_head*hd + 2*n_head_kv*hd, n_embd): rows of Q, then K, then V
  std::vector<float> wo;         ///< (n_embd, n_head*hd)
  std::vector<float> ffn_norm;   ///< (n_embd)
  std::vector<float> w_gate_up;  ///< (2*n_ff, n_embd): rows of gate, then up
  std::vector<float> w_down;     ///< (n_embd, n_ff)
  /// The same matrices as raw blocks (qgemv_matrix.hpp); empty when not kept or when a
  /// tensor's type is not qgemv_supports()ed.
  qmatrix q_wqkv, q_wo, q_gate_up, q_down;
};

struct llama_weights {
  std::vector<float> token_embd;   ///< (vocab, n_embd)
  std::vector<float> output_norm;  ///< (n_embd)
  std::vector<float> output;       ///< (vocab, n_embd); empty when the head is tied to token_embd
  std::vector<float> rope_freqs;   ///< (n_rot/2) angle divisors, or empty
  std::vector<layer_weights> layers;
  /// lm_head() as raw blocks; empty when not kept or not supported.
  qmatrix q_lm_head;

  /// Loads and dequantizes every tensor the config needs; with `keep_blocks`, also copies the
  /// projections' and LM head's raw blocks (about 0.2x the f32 bytes for 4-bit types). Throws
  /// model_error.
  static llama_weights load(const gguf_file& f, const llama_config& c, bool keep_blocks = false);
  /// The LM head matrix (vocab, n_embd).
  const float* lm_head() const { return output.empty() ? token_embd.data() : output.data(); }
};

} // namespace conveyor::model
