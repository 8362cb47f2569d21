// The tensors of the graphs conveyor runs (llama, qwen2, qwen3; model/formats/llama_config.hpp),
// one row each: the GGUF name, the Hugging Face name, the shape in terms of the config, the
// config switch that adds it, and its slot in a fused matrix (Q|K|V rows stacked for one product,
// their biases likewise, gate|up). Every loader reads this table instead of spelling names:
// llama_config's refusal of tensors no graph reads, the CPU weights (model/cpu/llama_weights.cpp),
// the CUDA upload (gpu/weights.cpp) and a Hugging Face folder's names (model/formats/hf_folder.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace conveyor::model {

struct llama_config;

/// A dimension of a tensor, in terms of the config.
enum class tensor_dim : uint8_t {
  one,        ///< 1: the second dimension of a vector
  embd,       ///< n_embd
  q,          ///< n_head * head_dim
  kv,         ///< n_head_kv * head_dim
  ff,         ///< n_ff
  head,       ///< head_dim
  vocab,      ///< vocab_size
  rope_half,  ///< n_rot / 2
};

/// When the graph reads a tensor.
enum class tensor_when : uint8_t {
  always,
  untied,      ///< !tied_output (otherwise the LM head is token_embd)
  rope_freqs,  ///< has_rope_freqs
  qkv_bias,    ///< qkv_bias
  qk_norm,     ///< qk_norm
};

/// The fused matrix (or vector) a tensor is one slot of: the group's tensors' rows stacked in slot
/// order, for one product per group.
enum class tensor_group : uint8_t { none, qkv, qkv_bias, gate_up };

/// The row order a Hugging Face checkpoint's tensor needs in the GGUF layout when the
/// architecture's RoPE rotates adjacent pairs (rope_pairs::norm, llama): rows permuted per head as
/// convert_hf_to_gguf.py's LlamaModel.permute does, over n_head (q) or n_head_kv (kv) heads.
enum class hf_permute : uint8_t { none, q_heads, kv_heads };

enum class tensor_id : uint8_t {
  token_embd, output_norm, output, rope_freqs,
  attn_norm, attn_q, attn_k, attn_v, attn_q_bias, attn_k_bias, attn_v_bias, attn_q_norm, attn_k_norm,
  attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down,
};

struct tensor_row {
  tensor_id id;
  bool per_layer;      ///< named "blk.<l>." + gguf and "model.layers.<l>." + hf
  const char* gguf;    ///< "attn_q.weight"
  const char* hf;      ///< "self_attn.q_proj.weight"; nullptr when a folder has no such tensor (computed)
  tensor_dim cols;     ///< ne[0], contiguous
  tensor_dim rows;     ///< ne[1]; one for a vector. The Hugging Face shape is {rows, cols}, {cols} for a vector
  tensor_when when;
  tensor_group group;
  uint8_t slot;        ///< position in the group (0 when none)
  hf_permute permute;
};

/// Every row: the model's own tensors, then a layer's, in the order the converters write them.
/// A group's rows are adjacent, in slot order.
std::span<const tensor_row> tensor_table();
const tensor_row& tensor_spec(tensor_id id);
/// The rows of `g` (not none) in slot order.
std::span<const tensor_row> group_rows(tensor_group g);

/// "blk.3.attn_q.weight"; `layer` is ignored for the model's own tensors.
std::string gguf_name(const tensor_row& r, int32_t layer = 0);
std::string gguf_name(tensor_id id, int32_t layer = 0);
/// "model.layers.3.self_attn.q_proj.weight"; "" when the row has no Hugging Face name.
std::string hf_name(const tensor_row& r, int32_t layer = 0);

/// The names of the tensors the graph of `c` reads, the model's own first, then layer by layer.
/// llama.cpp refuses a file with any other tensor ("wrong number of tensors") or applies it;
/// ignoring one would change the output silently (llama_config::from_gguf refuses it).
std::vector<std::string> graph_tensors(const llama_config& c);

/// What the rows' rules need of a config: its sizes and switches. From a llama_config, or from a
/// Hugging Face config.json (model/formats/hf_folder.cpp fills it).
struct tensor_params {
  int64_t embd = 0, q = 0, kv = 0, ff = 0, head = 0, vocab = 0, rope_half = 0;
  bool tied_output = false, has_rope_freqs = false, qkv_bias = false, qk_norm = false;

  static tensor_params of(const llama_config& c);
  int64_t size(tensor_dim d) const;
  /// Whether the graph reads `r`.
  bool reads(const tensor_row& r) const;
  /// ne[0] and ne[1] of `r`.
  int64_t ne0(const tensor_row& r) const { return size(r.cols); }
  int64_t ne1(const tensor_row& r) const { return size(r.rows); }
  /// The Hugging Face (row-major) shape of `r`: {rows, cols}, or {cols} for a vector.
  std::vector<int64_t> hf_shape(const tensor_row& r) const;
  /// Elements of `r`: ne0 * ne1.
  int64_t elems(const tensor_row& r) const { return ne0(r) * ne1(r); }
  /// Elements of the fused tensor of `g`: its rows' elements summed.
  int64_t group_elems(tensor_group g) const;
};

} // namespace conveyor::model
