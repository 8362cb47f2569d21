// Llama weights dequantized to f32 at load, laid out for one GEMM per projection:
// Q, K and V rows are stacked into one matrix, gate and up into another.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/llama_config.hpp"

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
};

struct llama_weights {
  std::vector<float> token_embd;   ///< (vocab, n_embd)
  std::vector<float> output_norm;  ///< (n_embd)
  std::vector<float> output;       ///< (vocab, n_embd); empty when the head is tied to token_embd
  std::vector<float> rope_freqs;   ///< (n_rot/2) angle divisors, or empty
  std::vector<layer_weights> layers;

  /// Loads and dequantizes every tensor the config needs. Throws model_error.
  static llama_weights load(const gguf_file& f, const llama_config& c);
  /// The LM head matrix (vocab, n_embd).
  const float* lm_head() const { return output.empty() ? token_embd.data() : output.data(); }
};

} // namespace conveyor::model
