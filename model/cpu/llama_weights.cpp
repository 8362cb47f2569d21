// Maps a Llama GGUF's tensors, named and shaped by the tensor table: shape- and type-checked views
// for the matrices, f32 copies of the norms.
#include "model/cpu/llama_weights.hpp"

#include <span>

#include "model/cpu/qmm.hpp"
#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/tensor_load.hpp"
#include "model/formats/tensor_table.hpp"

namespace conveyor::model {
namespace {

/// The tensors `rows` of `layer`, each [ne0, ne1], stacked into one matrix (one row of the table
/// alone, or a fused group's rows in slot order).
qmatrix stacked(const gguf_file& f, const tensor_params& p, std::span<const tensor_row> rows, int32_t layer = 0) {
  qmatrix q;
  for (const tensor_row& r : rows) {
    const std::string name = gguf_name(r, layer);
    const int64_t k = p.ne0(r), n = p.ne1(r);
    const gguf_tensor_info& t = checked_tensor(f, name, k, n);
    if (!qmm_supports(t.type))
      throw model_error(f.path() + ": tensor '" + name + "' has type " + type_name(t.type) +
                        ", which conveyor cannot run (supported: " + kSupportedTensorTypes + ")");
    if (!q.append(t.type, f.tensor_data(t), static_cast<int32_t>(n), static_cast<int32_t>(k)))
      throw model_error(f.path() + ": tensor '" + name + "' (" + type_name(t.type) + ") has rows of " + std::to_string(k) +
                        " elements, which is not a multiple of its block of " + std::to_string(block_elems(t.type)) +
                        " and of 32");
  }
  return q;
}

qmatrix stacked(const gguf_file& f, const tensor_params& p, tensor_id id, int32_t layer = 0) {
  return stacked(f, p, std::span<const tensor_row>(&tensor_spec(id), 1), layer);
}

} // namespace

llama_weights llama_weights::map(const gguf_file& f, const llama_config& c) {
  llama_weights w;
  const tensor_params p = tensor_params::of(c);
  w.token_embd = stacked(f, p, tensor_id::token_embd);
  w.output_norm = load_tensor_f32(f, tensor_id::output_norm, p);
  w.lm_head = c.tied_output ? w.token_embd : stacked(f, p, tensor_id::output);
  if (c.has_rope_freqs) w.rope_freqs = load_tensor_f32(f, tensor_id::rope_freqs, p);
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    layer_weights& L = w.layers[static_cast<size_t>(l)];
    L.attn_norm = load_tensor_f32(f, tensor_id::attn_norm, p, l);
    L.wqkv = stacked(f, p, group_rows(tensor_group::qkv), l);
    // Q, K and V biases end to end, as the fused QKV product's row lays them out. (The CUDA
    // upload walks the same rows on its own: the GPU-vs-CPU tests compare two loading paths.)
    if (c.qkv_bias) L.qkv_bias = load_group_f32(f, tensor_group::qkv_bias, p, l);
    if (c.qk_norm) {
      L.q_norm = load_tensor_f32(f, tensor_id::attn_q_norm, p, l);
      L.k_norm = load_tensor_f32(f, tensor_id::attn_k_norm, p, l);
    }
    L.wo = stacked(f, p, tensor_id::attn_output, l);
    L.ffn_norm = load_tensor_f32(f, tensor_id::ffn_norm, p, l);
    L.gate_up = stacked(f, p, group_rows(tensor_group::gate_up), l);
    L.down = stacked(f, p, tensor_id::ffn_down, l);
  }
  return w;
}

size_t llama_weights::pack(cpu_isa isa, const gguf_file& f) {
  size_t n = 0;
  const auto one = [&](qmatrix& q) {
    for (const qmatrix::part& p : q.pack(isa)) {
      f.release_pages(p.data, p.row_bytes * static_cast<size_t>(p.rows));
      n += p.row_bytes * static_cast<size_t>(p.rows);
    }
  };
  for (layer_weights& L : layers) {
    one(L.wqkv);
    one(L.wo);
    one(L.gate_up);
    one(L.down);
  }
  one(lm_head);
  return n;
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
