// Test support: writes tiny random-weight Llama GGUFs (model-format.md §6.1) with a byte-level
// GPT-2 style tokenizer, plus reference quantizers for every type dequantize_row() reads.
// Test code only: the quantizers favour clarity over ggml's error-minimising search.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/formats/ggml_type.hpp"

namespace conveyor::model {

/// The ChatML template SmolLM2 ships (model-format.md §5.7).
extern const char* const tiny_chatml_template;

/// Shape, tokenizer and per-tensor-kind types of a tiny Llama. Defaults are config A of §6.1
/// (GQA 3:1, odd head count, tied embeddings, Q4_1 layers, Q8_0 token_embd, F32 norms).
struct tiny_llama_spec {
  /// "llama", "qwen2" (adds attn_{q,k,v}.bias, F32) or "qwen3" (adds attn_{q,k}_norm).
  std::string arch = "llama";
  int32_t n_embd = 96;
  int32_t n_head = 3;
  int32_t n_head_kv = 1;
  int32_t n_ff = 256;
  int32_t n_layer = 2;
  int32_t n_ctx = 256;  ///< llama.context_length
  /// Merges "left right" in rank order; each result is appended as a NORMAL token. Both sides
  /// must already be tokens (byte strings or earlier results).
  std::vector<std::string> merges{"Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s", "r e", "Ġ w"};
  /// Total vocabulary; 0 means exactly 3 + 256 + merges.size(). Extra ids are UNUSED tokens
  /// named "<|unused_N|>".
  int32_t n_vocab = 0;
  float rope_theta = 100000.0f;
  float rms_eps = 1e-5f;
  bool tied = true;         ///< true: no output.weight (the LM head is token_embd)
  bool rope_freqs = false;  ///< adds rope_freqs.weight [head_dim/2] F32 (llama3-style divisors)
  float rope_linear_factor = 0.0f;  ///< > 0: rope.scaling.type "linear" with this factor
  int32_t key_length = 0;   ///< > 0: attention.key_length (a head dim other than n_embd / n_head)
  bool attn_bias = false;   ///< attn_{q,k,v}.bias for any arch (qwen2 always has them)
  /// Extra metadata (f32 values, key without the arch prefix) and extra 1-D F32 tensors of
  /// n_embd values, for files conveyor must read differently or refuse.
  std::vector<std::pair<std::string, float>> extra_f32_kv;
  std::vector<std::string> extra_tensors;
  ggml_type attn_q = ggml_type::q4_1;
  ggml_type attn_k = ggml_type::q4_1;
  ggml_type attn_v = ggml_type::q4_1;
  ggml_type attn_output = ggml_type::q4_1;
  ggml_type ffn_gate = ggml_type::q4_1;
  ggml_type ffn_up = ggml_type::q4_1;
  ggml_type ffn_down = ggml_type::q4_1;
  ggml_type token_embd = ggml_type::q8_0;
  ggml_type output = ggml_type::q6_k;  ///< only used when !tied
  ggml_type norm = ggml_type::f32;     ///< attn_norm, ffn_norm, output_norm
  uint64_t seed = 42;
  float weight_std = 0.02f;  ///< 2-D weights ~ normal(0, weight_std)
  float norm_noise = 0.02f;  ///< norm weights ~ 1 + normal(0, norm_noise)
  uint32_t alignment = 0;    ///< 0: no general.alignment key (GGUF default 32)
  std::string chat_template = tiny_chatml_template;

  /// Sets attn_q/k/v/output to `t`.
  void set_attn_types(ggml_type t);
  /// Sets ffn_gate/up/down to `t`.
  void set_ffn_types(ggml_type t);
  int32_t head_dim() const { return key_length > 0 ? key_length : n_embd / n_head; }
};

/// Config A of §6.1 (the defaults).
tiny_llama_spec tiny_config_a();
/// Config B of §6.1: n_embd 256, 4/2 heads, n_ff 512, vocab 512, untied, rope_freqs, and one
/// type per tensor kind covering Q4_0 Q5_0 Q5_1 Q4_K Q5_K Q6_K F16 BF16 (with A: Q4_1 Q8_0 F32).
tiny_llama_spec tiny_config_b();

/// Token texts in id order: 0 "<|endoftext|>", 1 "<|im_start|>", 2 "<|im_end|>" (CONTROL),
/// 3..258 the GPT-2 byte->unicode strings of bytes 0..255 (NORMAL), then merge results, then
/// unused padding. Throws std::invalid_argument for a merge whose sides are not tokens.
std::vector<std::string> tiny_vocab(const tiny_llama_spec& spec);

/// Writes the model. Throws std::invalid_argument if the spec is inconsistent (head counts,
/// a type whose block size does not divide ne[0], ...) and gguf_error on I/O failure.
void write_tiny_llama(const std::string& path, const tiny_llama_spec& spec);

/// Reference quantizer: `x.size()` (a multiple of block_elems(t)) f32 values to raw blocks.
/// Supports exactly the types is_dequantizable() accepts; throws std::invalid_argument otherwise.
std::vector<uint8_t> quantize_row_ref(ggml_type t, std::span<const float> x);

/// Deterministic normal(0, 1) stream (splitmix64 + Box-Muller), identical on every platform.
class tiny_rng {
public:
  explicit tiny_rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  /// Uniform in [0, 1).
  double uniform();
  float normal();

private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

} // namespace conveyor::model
