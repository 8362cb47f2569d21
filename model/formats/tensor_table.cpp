// The tensor table: llama.cpp's names (LLM_TENSOR_NAMES) and the Hugging Face names
// convert_hf_to_gguf.py maps to them (gguf-py's TensorNameMap), with shapes as llama.cpp's
// llama_model::load_tensors creates them.
#include "model/formats/tensor_table.hpp"

#include <array>
#include <cstdlib>

#include "model/formats/llama_config.hpp"

namespace conveyor::model {
namespace {

using D = tensor_dim;
using W = tensor_when;
using G = tensor_group;
using P = hf_permute;
using I = tensor_id;

// One row per tensor_id, in its order: the model's own tensors, then a layer's in the order
// convert_hf_to_gguf.py writes them (a Hugging Face folder's view keeps this order).
constexpr std::array<tensor_row, 18> kRows{{
    {I::token_embd, false, "token_embd.weight", "model.embed_tokens.weight", D::embd, D::vocab, W::always, G::none, 0, P::none},
    {I::output_norm, false, "output_norm.weight", "model.norm.weight", D::embd, D::one, W::always, G::none, 0, P::none},
    {I::output, false, "output.weight", "lm_head.weight", D::embd, D::vocab, W::untied, G::none, 0, P::none},
    {I::rope_freqs, false, "rope_freqs.weight", nullptr, D::rope_half, D::one, W::rope_freqs, G::none, 0, P::none},
    {I::attn_norm, true, "attn_norm.weight", "input_layernorm.weight", D::embd, D::one, W::always, G::none, 0, P::none},
    {I::attn_q, true, "attn_q.weight", "self_attn.q_proj.weight", D::embd, D::q, W::always, G::qkv, 0, P::q_heads},
    {I::attn_k, true, "attn_k.weight", "self_attn.k_proj.weight", D::embd, D::kv, W::always, G::qkv, 1, P::kv_heads},
    {I::attn_v, true, "attn_v.weight", "self_attn.v_proj.weight", D::embd, D::kv, W::always, G::qkv, 2, P::none},
    {I::attn_q_bias, true, "attn_q.bias", "self_attn.q_proj.bias", D::q, D::one, W::qkv_bias, G::qkv_bias, 0, P::none},
    {I::attn_k_bias, true, "attn_k.bias", "self_attn.k_proj.bias", D::kv, D::one, W::qkv_bias, G::qkv_bias, 1, P::none},
    {I::attn_v_bias, true, "attn_v.bias", "self_attn.v_proj.bias", D::kv, D::one, W::qkv_bias, G::qkv_bias, 2, P::none},
    {I::attn_q_norm, true, "attn_q_norm.weight", "self_attn.q_norm.weight", D::head, D::one, W::qk_norm, G::none, 0, P::none},
    {I::attn_k_norm, true, "attn_k_norm.weight", "self_attn.k_norm.weight", D::head, D::one, W::qk_norm, G::none, 0, P::none},
    {I::attn_output, true, "attn_output.weight", "self_attn.o_proj.weight", D::q, D::embd, W::always, G::none, 0, P::none},
    {I::ffn_norm, true, "ffn_norm.weight", "post_attention_layernorm.weight", D::embd, D::one, W::always, G::none, 0, P::none},
    {I::ffn_gate, true, "ffn_gate.weight", "mlp.gate_proj.weight", D::embd, D::ff, W::always, G::gate_up, 0, P::none},
    {I::ffn_up, true, "ffn_up.weight", "mlp.up_proj.weight", D::embd, D::ff, W::always, G::gate_up, 1, P::none},
    {I::ffn_down, true, "ffn_down.weight", "mlp.down_proj.weight", D::ff, D::embd, W::always, G::none, 0, P::none},
}};

constexpr bool rows_in_id_order() {
  for (size_t i = 0; i < kRows.size(); ++i)
    if (static_cast<size_t>(kRows[i].id) != i) return false;
  return true;
}
static_assert(rows_in_id_order(), "kRows[i].id must be i: tensor_spec indexes by id");

} // namespace

std::span<const tensor_row> tensor_table() { return kRows; }

const tensor_row& tensor_spec(tensor_id id) { return kRows[static_cast<size_t>(id)]; }

std::span<const tensor_row> group_rows(tensor_group g) {
  size_t first = 0;
  while (first < kRows.size() && kRows[first].group != g) ++first;
  size_t last = first;
  while (last < kRows.size() && kRows[last].group == g) ++last;
  return std::span<const tensor_row>(kRows).subspan(first, last - first);
}

std::string gguf_name(const tensor_row& r, int32_t layer) {
  return r.per_layer ? "blk." + std::to_string(layer) + "." + r.gguf : std::string(r.gguf);
}

std::string gguf_name(tensor_id id, int32_t layer) { return gguf_name(tensor_spec(id), layer); }

std::string hf_name(const tensor_row& r, int32_t layer) {
  if (!r.hf) return "";
  return r.per_layer ? "model.layers." + std::to_string(layer) + "." + r.hf : std::string(r.hf);
}

std::vector<std::string> graph_tensors(const llama_config& c) {
  const tensor_params p = tensor_params::of(c);
  std::vector<std::string> n;
  for (const tensor_row& r : kRows)
    if (!r.per_layer && p.reads(r)) n.push_back(gguf_name(r));
  for (int32_t l = 0; l < c.n_layer; ++l)
    for (const tensor_row& r : kRows)
      if (r.per_layer && p.reads(r)) n.push_back(gguf_name(r, l));
  return n;
}

tensor_params tensor_params::of(const llama_config& c) {
  tensor_params p;
  p.embd = c.n_embd;
  p.q = int64_t{c.n_head} * c.head_dim;
  p.kv = int64_t{c.n_head_kv} * c.head_dim;
  p.ff = c.n_ff;
  p.head = c.head_dim;
  p.vocab = c.vocab_size;
  p.rope_half = c.n_rot / 2;
  p.tied_output = c.tied_output;
  p.has_rope_freqs = c.has_rope_freqs;
  p.qkv_bias = c.qkv_bias;
  p.qk_norm = c.qk_norm;
  return p;
}

int64_t tensor_params::size(tensor_dim d) const {
  switch (d) {
    case D::one: return 1;
    case D::embd: return embd;
    case D::q: return q;
    case D::kv: return kv;
    case D::ff: return ff;
    case D::head: return head;
    case D::vocab: return vocab;
    case D::rope_half: return rope_half;
  }
  std::abort();  // not a tensor_dim
}

bool tensor_params::reads(const tensor_row& r) const {
  switch (r.when) {
    case W::always: return true;
    case W::untied: return !tied_output;
    case W::rope_freqs: return has_rope_freqs;
    case W::qkv_bias: return qkv_bias;
    case W::qk_norm: return qk_norm;
  }
  std::abort();  // not a tensor_when
}

std::vector<int64_t> tensor_params::hf_shape(const tensor_row& r) const {
  if (r.rows == D::one) return {size(r.cols)};
  return {size(r.rows), size(r.cols)};
}

int64_t tensor_params::group_elems(tensor_group g) const {
  int64_t n = 0;
  for (const tensor_row& r : group_rows(g)) n += elems(r);
  return n;
}

} // namespace conveyor::model
