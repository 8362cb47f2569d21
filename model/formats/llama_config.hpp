// The hyper-parameters of the decoder-only architectures conveyor runs (llama: Llama 2/3.x,
// Mistral, SmolLM; qwen2: Qwen2/2.5; qwen3: Qwen3), read from GGUF metadata (model-format.md
// §1.6). They differ only in switches on one forward pass: QKV bias, RMSNorm on q and k, the RoPE
// pairing and its frequency scaling. Anything the runtime cannot run (another architecture,
// inconsistent head counts) is a model_error naming the file and the problem.
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

/// Which dims RoPE rotates together. norm: adjacent pairs (2i, 2i+1), the GGUF layout of Llama
/// (its converter permutes Q/K rows); neox: halves (i, i + n_rot/2), as Qwen and every Hugging
/// Face checkpoint.
enum class rope_pairs { norm, neox };

/// The architectures conveyor runs, for error messages: "llama, qwen2, qwen3".
std::string supported_architectures();

struct llama_config {
  std::string arch = "llama";  ///< general.architecture
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
  float rope_freq_scale = 1.0f;  ///< linear RoPE scaling: positions times this (1 / factor)
  bool has_rope_freqs = false;  ///< rope_freqs.weight divides each pair's angle (Llama 3.x)
  rope_pairs rope = rope_pairs::norm;
  bool qkv_bias = false;  ///< Qwen2: attn_{q,k,v}.bias added after the projection
  bool qk_norm = false;   ///< Qwen3: attn_{q,k}_norm, an RMSNorm over each head of q and k before RoPE

  /// Reads and checks the hyper-parameters. Throws model_error.
  static llama_config from_gguf(const gguf_file& f);
  /// Checks the numbers (head counts, dims) whatever their source; throws model_error("<where>: ...").
  void validate(const std::string& where) const;
  /// One line for logs: "llama 30 layers, hidden 576, heads 9/3, ffn 1536, vocab 49152".
  std::string summary() const;
};

} // namespace conveyor::model
