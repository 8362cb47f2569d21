// The Llama architecture's hyper-parameters, read from GGUF metadata (model-format.md §1.6).
// Anything the runtime cannot run (another architecture, inconsistent head counts) is a
// model_error naming the file and the problem.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace conveyor::model {

class gguf_file;

/// A model file conveyor cannot run. what() is "<path>: <problem>".
struct model_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct llama_config {
  std::string name;          ///< general.name, or the file name
  int32_t n_embd = 0;        ///< hidden size
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;     ///< GQA: query heads h use kv head h / (n_head / n_head_kv)
  int32_t head_dim = 0;      ///< n_embd / n_head unless attention.key_length says otherwise
  int32_t n_ff = 0;          ///< SwiGLU inner size
  int32_t vocab_size = 0;
  int32_t n_ctx_train = 0;   ///< llama.context_length
  int32_t n_rot = 0;         ///< rope.dimension_count; dims past it are not rotated
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = false;  ///< no output.weight: the LM head is token_embd
  bool has_rope_freqs = false;  ///< rope_freqs.weight divides each pair's angle (Llama 3.1)
  /// GGUF Llama weights have Q/K rows permuted so RoPE pairs are adjacent (ggml "NORM" layout).
  bool rope_adjacent_pairs = true;

  /// Reads and checks the hyper-parameters. Throws model_error.
  static llama_config from_gguf(const gguf_file& f);
  /// One line for logs: "llama 30 layers, hidden 576, heads 9/3, ffn 1536, vocab 49152".
  std::string summary() const;
};

} // namespace conveyor::model
