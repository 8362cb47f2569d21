// Loads a Llama GGUF's tensors into f32 matrices, and optionally copies of the projections' raw blocks.
#include "model/llama_weights.hpp"

#include <algorithm>
#include <initializer_list>

#include "model/dequant.hpp"
#include "model/gguf.hpp"

namespace conveyor::model {
namespace {

std::string shape_str(const gguf_tensor_info& t) {
  std::string s = "[";
  for (uint32_t i = 0; i < std::max<uint32_t>(t.n_dims, 1); ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "]";
}

void append(std::vector<float>& dst, const std::vector<float>& src) { dst.insert(dst.end(), src.begin(), src.end()); }

// Copies the raw blocks of `names` (already shape-checked by load_tensor_f32), stacked in that
// order, into q; leaves q empty when one of them has a type the qgemv kernels do not read.
void keep_blocks(const gguf_file& f, std::initializer_list<std::string> names, qmatrix& q) {
  for (const std::string& name : names) {
    const gguf_tensor_info* t = f.find_tensor(name);
    if (!q.append(t->type, f.tensor_data(*t), static_cast<int32_t>(t->ne[1]), static_cast<int32_t>(t->ne[0]))) {
      q.clear();
      return;
    }
  }
}

} // namespace

std::vector<float> load_tensor_f32(const gguf_file& f, const std::string& name, int64_t ne0, int64_t ne1) {
  const gguf_tensor_info* t = f.find_tensor(name);
  if (!t) throw model_error(f.path() + ": missing tensor '" + name + "'");
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
    throw model_error(f.path() + ": tensor '" + name + "' has shape " + shape_str(*t) + ", expected [" +
                      std::to_string(ne0) + ", " + std::to_string(ne1) + "]");
  if (!is_dequantizable(t->type))
    throw model_error(f.path() + ": tensor '" + name + "' has type " + type_name(t->type) +
                      ", which conveyor cannot load (supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K)");
  std::vector<float> out(static_cast<size_t>(ne0 * ne1));
  const uint8_t* src = f.tensor_data(*t);
  const size_t row_bytes = static_cast<size_t>(ne0) / block_elems(t->type) * block_bytes(t->type);
  for (int64_t r = 0; r < ne1; ++r)
    dequantize_row(t->type, src + static_cast<size_t>(r) * row_bytes, out.data() + r * ne0, ne0);
  return out;
}

llama_weights llama_weights::load(const gguf_file& f, const llama_config& c, bool keep) {
  llama_weights w;
  const int64_t d = c.n_embd, q = int64_t{c.n_head} * c.head_dim, kv = int64_t{c.n_head_kv} * c.head_dim;
  w.token_embd = load_tensor_f32(f, "token_embd.weight", d, c.vocab_size);
  w.output_norm = load_tensor_f32(f, "output_norm.weight", d);
  if (!c.tied_output) w.output = load_tensor_f32(f, "output.weight", d, c.vocab_size);
  if (keep) keep_blocks(f, {c.tied_output ? "token_embd.weight" : "output.weight"}, w.q_lm_head);
  if (c.has_rope_freqs) w.rope_freqs = load_tensor_f32(f, "rope_freqs.weight", c.n_rot / 2);
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    layer_weights& L = w.layers[static_cast<size_t>(l)];
    L.attn_norm = load_tensor_f32(f, p + "attn_norm.weight", d);
    L.wqkv = load_tensor_f32(f, p + "attn_q.weight", d, q);
    append(L.wqkv, load_tensor_f32(f, p + "attn_k.weight", d, kv));
    append(L.wqkv, load_tensor_f32(f, p + "attn_v.weight", d, kv));
    L.wo = load_tensor_f32(f, p + "attn_output.weight", q, d);
    L.ffn_norm = load_tensor_f32(f, p + "ffn_norm.weight", d);
    L.w_gate_up = load_tensor_f32(f, p + "ffn_gate.weight", d, c.n_ff);
    append(L.w_gate_up, load_tensor_f32(f, p + "ffn_up.weight", d, c.n_ff));
    L.w_down = load_tensor_f32(f, p + "ffn_down.weight", c.n_ff, d);
    if (!keep) continue;
    keep_blocks(f, {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}, L.q_wqkv);
    keep_blocks(f, {p + "attn_output.weight"}, L.q_wo);
    keep_blocks(f, {p + "ffn_gate.weight", p + "ffn_up.weight"}, L.q_gate_up);
    keep_blocks(f, {p + "ffn_down.weight"}, L.q_down);
  }
  return w;
}

} // namespace conveyor::model
