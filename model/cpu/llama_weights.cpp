// Maps a Llama GGUF's tensors: shape- and type-checked views for the matrices, f32 copies of the
// norms.
#include "model/cpu/llama_weights.hpp"

#include <initializer_list>

#include "model/cpu/qmm.hpp"
#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/tensor_load.hpp"

namespace conveyor::model {
namespace {

/// Stacks the tensors `names`, each [k, rows_i], into q.
qmatrix stacked(const gguf_file& f, std::initializer_list<std::pair<std::string, int64_t>> names, int64_t k) {
  qmatrix q;
  for (const auto& [name, rows] : names) {
    const gguf_tensor_info& t = checked_tensor(f, name, k, rows);
    if (!qmm_supports(t.type))
      throw model_error(f.path() + ": tensor '" + name + "' has type " + type_name(t.type) +
                        ", which conveyor cannot run (supported: " + kSupportedTensorTypes + ")");
    if (!q.append(t.type, f.tensor_data(t), static_cast<int32_t>(rows), static_cast<int32_t>(k)))
      throw model_error(f.path() + ": tensor '" + name + "' (" + type_name(t.type) + ") has rows of " + std::to_string(k) +
                        " elements, which is not a multiple of its block of " + std::to_string(block_elems(t.type)) +
                        " and of 32");
  }
  return q;
}

/// Layer l's Q, K and V biases end to end, as the fused QKV product's row lays them out. (The
/// CUDA weights load them on their own: the GPU-vs-CPU tests compare two independent paths.)
std::vector<float> load_qkv_bias(const gguf_file& f, const llama_config& c, int32_t l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t q = int64_t{c.n_head} * c.head_dim, kv = int64_t{c.n_head_kv} * c.head_dim;
  std::vector<float> b = load_tensor_f32(f, p + "attn_q.bias", q);
  for (const char* t : {"attn_k.bias", "attn_v.bias"}) {
    const std::vector<float> v = load_tensor_f32(f, p + t, kv);
    b.insert(b.end(), v.begin(), v.end());
  }
  return b;
}

} // namespace

llama_weights llama_weights::map(const gguf_file& f, const llama_config& c) {
  llama_weights w;
  const int64_t d = c.n_embd, q = int64_t{c.n_head} * c.head_dim, kv = int64_t{c.n_head_kv} * c.head_dim;
  w.token_embd = stacked(f, {{"token_embd.weight", c.vocab_size}}, d);
  w.output_norm = load_tensor_f32(f, "output_norm.weight", d);
  w.lm_head = c.tied_output ? w.token_embd : stacked(f, {{"output.weight", c.vocab_size}}, d);
  if (c.has_rope_freqs) w.rope_freqs = load_tensor_f32(f, "rope_freqs.weight", c.n_rot / 2);
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    layer_weights& L = w.layers[static_cast<size_t>(l)];
    L.attn_norm = load_tensor_f32(f, p + "attn_norm.weight", d);
    L.wqkv = stacked(f, {{p + "attn_q.weight", q}, {p + "attn_k.weight", kv}, {p + "attn_v.weight", kv}}, d);
    if (c.qkv_bias) L.qkv_bias = load_qkv_bias(f, c, l);
    if (c.qk_norm) {
      L.q_norm = load_tensor_f32(f, p + "attn_q_norm.weight", c.head_dim);
      L.k_norm = load_tensor_f32(f, p + "attn_k_norm.weight", c.head_dim);
    }
    L.wo = stacked(f, {{p + "attn_output.weight", d}}, q);
    L.ffn_norm = load_tensor_f32(f, p + "ffn_norm.weight", d);
    L.gate_up = stacked(f, {{p + "ffn_gate.weight", c.n_ff}, {p + "ffn_up.weight", c.n_ff}}, d);
    L.down = stacked(f, {{p + "ffn_down.weight", d}}, c.n_ff);
  }
  return w;
}

size_t llama_weights::bytes() const {
  size_t n = token_embd.bytes() + (lm_head.parts().front().data == token_embd.parts().front().data ? 0 : lm_head.bytes());
  for (const layer_weights& L : layers) n += L.wqkv.bytes() + L.wo.bytes() + L.gate_up.bytes() + L.down.bytes();
  return n;
}

void llama_weights::embed(token_id tok, float* out) const {
  const qmatrix::part& p = token_embd.parts().front();
  dequantize_row(p.type, p.data + static_cast<size_t>(tok) * p.row_bytes, out, token_embd.k());
}

} // namespace conveyor::model
