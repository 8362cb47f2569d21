#include "gpu/weights.hpp"

#include <string>

#include "gpu/check.hpp"
#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/tensor_load.hpp"
#include "model/formats/tensor_table.hpp"

namespace conveyor::gpu {
namespace {

using model::tensor_group;
using model::tensor_id;

// f32 host values -> bf16 (round to nearest even) -> device, synchronously (the host buffer is reused).
void upload_bf16(bf16* dst, const std::vector<float>& src, std::vector<uint16_t>& staging) {
  staging.resize(src.size());
  for (size_t i = 0; i < src.size(); ++i) staging[i] = model::fp32_to_bf16(src[i]);
  CUDA_CHECK(cudaMemcpy(dst, staging.data(), staging.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
}

void upload_f32(float* dst, const std::vector<float>& src) {
  CUDA_CHECK(cudaMemcpy(dst, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice));
}

} // namespace

void device_weights::carve(device_arena& a, const model::llama_config& c) {
  const model::tensor_params n = model::tensor_params::of(c);
  token_embd = a.take<bf16>(n.vocab * n.embd);
  output_norm = a.take<float>(n.embd);
  lm_head = c.tied_output ? token_embd : a.take<bf16>(n.vocab * n.embd);
  layers.assign(static_cast<size_t>(c.n_layer), {});
  for (auto& L : layers) {
    L.attn_norm = a.take<float>(n.embd);
    L.wqkv = a.take<bf16>(n.group_elems(tensor_group::qkv));
    if (c.qkv_bias) L.qkv_bias = a.take<float>(n.group_elems(tensor_group::qkv_bias));
    if (c.qk_norm) {
      L.q_norm = a.take<float>(c.head_dim);
      L.k_norm = a.take<float>(c.head_dim);
    }
    L.wo = a.take<bf16>(n.embd * n.q);
    L.ffn_norm = a.take<float>(n.embd);
    L.w_gate_up = a.take<bf16>(n.group_elems(tensor_group::gate_up));
    L.w_down = a.take<bf16>(n.embd * n.ff);
  }
}

int64_t device_weights::streamed_bytes(const model::llama_config& c) {
  const model::tensor_params n = model::tensor_params::of(c);
  const int64_t per_layer = n.group_elems(tensor_group::qkv) + n.embd * n.q + n.group_elems(tensor_group::gate_up) + n.ff * n.embd;
  return 2 * (per_layer * c.n_layer + n.vocab * n.embd);
}

void upload_gguf_weights(const model::gguf_file& f, const model::llama_config& c, device_weights& w, cudaStream_t stream) {
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const model::tensor_params n = model::tensor_params::of(c);
  std::vector<uint16_t> staging;
  const auto mat = [&](bf16* dst, tensor_id id, int32_t l) { upload_bf16(dst, model::load_tensor_f32(f, id, n, l), staging); };
  const auto vec = [&](float* dst, tensor_id id, int32_t l) { upload_f32(dst, model::load_tensor_f32(f, id, n, l)); };
  // A fused matrix or vector: the group's tensors one after the other, in slot order.
  const auto fused = [&](auto* dst, tensor_group g, int32_t l, const auto& upload) {
    for (const model::tensor_row& r : model::group_rows(g)) {
      upload(dst, r.id, l);
      dst += n.elems(r);
    }
  };
  mat(w.token_embd, tensor_id::token_embd, 0);
  vec(w.output_norm, tensor_id::output_norm, 0);
  if (!c.tied_output) mat(w.lm_head, tensor_id::output, 0);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const device_layer& L = w.layers[static_cast<size_t>(l)];
    vec(L.attn_norm, tensor_id::attn_norm, l);
    fused(L.wqkv, tensor_group::qkv, l, mat);
    if (L.qkv_bias) fused(L.qkv_bias, tensor_group::qkv_bias, l, vec);  // one vector laid out as the fused GEMM's output row
    if (L.q_norm) {
      vec(L.q_norm, tensor_id::attn_q_norm, l);
      vec(L.k_norm, tensor_id::attn_k_norm, l);
    }
    mat(L.wo, tensor_id::attn_output, l);
    vec(L.ffn_norm, tensor_id::ffn_norm, l);
    fused(L.w_gate_up, tensor_group::gate_up, l, mat);
    mat(L.w_down, tensor_id::ffn_down, l);
  }
}

void fill_dummy_weights(const model::llama_config& c, device_weights& w, uint64_t seed, cudaStream_t stream) {
  const model::tensor_params n = model::tensor_params::of(c);
  const float a = 0.02f * 1.7320508f;  // uniform(-a, a) has std a / sqrt(3) = 0.02
  uint64_t s = seed;
  auto mat = [&](bf16* p, int64_t count) { launch_fill_random_bf16(p, count, ++s * 0x9e3779b97f4a7c15ull, a, 0.0f, stream); };
  auto norm = [&](float* p, int64_t count) { launch_fill_random_f32(p, count, ++s * 0x9e3779b97f4a7c15ull, 0.02f, 1.0f, stream); };
  mat(w.token_embd, n.vocab * n.embd);
  norm(w.output_norm, n.embd);
  if (!c.tied_output) mat(w.lm_head, n.vocab * n.embd);
  for (const device_layer& L : w.layers) {
    norm(L.attn_norm, n.embd);
    mat(L.wqkv, n.group_elems(tensor_group::qkv));
    if (L.qkv_bias) launch_fill_random_f32(L.qkv_bias, n.group_elems(tensor_group::qkv_bias), ++s * 0x9e3779b97f4a7c15ull, a, 0.0f, stream);
    if (L.q_norm) {
      norm(L.q_norm, c.head_dim);
      norm(L.k_norm, c.head_dim);
    }
    mat(L.wo, n.embd * n.q);
    norm(L.ffn_norm, n.embd);
    mat(L.w_gate_up, n.group_elems(tensor_group::gate_up));
    mat(L.w_down, n.embd * n.ff);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

} // namespace conveyor::gpu
