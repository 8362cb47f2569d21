#include "gpu/weights.hpp"

#include <string>

#include "gpu/check.hpp"
#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/tensor_load.hpp"

namespace conveyor::gpu {
namespace {

struct dims {
  int64_t d, q, kv, ff, vocab;
  explicit dims(const model::llama_config& c)
      : d(c.n_embd), q(int64_t{c.n_head} * c.head_dim), kv(int64_t{c.n_head_kv} * c.head_dim), ff(c.n_ff),
        vocab(c.vocab_size) {}
};

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
  const dims n(c);
  token_embd = a.take<bf16>(n.vocab * n.d);
  output_norm = a.take<float>(n.d);
  lm_head = c.tied_output ? token_embd : a.take<bf16>(n.vocab * n.d);
  layers.assign(static_cast<size_t>(c.n_layer), {});
  for (auto& L : layers) {
    L.attn_norm = a.take<float>(n.d);
    L.wqkv = a.take<bf16>((n.q + 2 * n.kv) * n.d);
    if (c.qkv_bias) L.qkv_bias = a.take<float>(n.q + 2 * n.kv);
    if (c.qk_norm) {
      L.q_norm = a.take<float>(c.head_dim);
      L.k_norm = a.take<float>(c.head_dim);
    }
    L.wo = a.take<bf16>(n.d * n.q);
    L.ffn_norm = a.take<float>(n.d);
    L.w_gate_up = a.take<bf16>(2 * n.ff * n.d);
    L.w_down = a.take<bf16>(n.d * n.ff);
  }
}

int64_t device_weights::streamed_bytes(const model::llama_config& c) {
  const dims n(c);
  const int64_t per_layer = (n.q + 2 * n.kv) * n.d + n.d * n.q + 3 * n.ff * n.d;
  return 2 * (per_layer * c.n_layer + n.vocab * n.d);
}

void upload_gguf_weights(const model::gguf_file& f, const model::llama_config& c, device_weights& w, cudaStream_t stream) {
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const dims n(c);
  std::vector<uint16_t> staging;
  upload_bf16(w.token_embd, model::load_tensor_f32(f, "token_embd.weight", n.d, n.vocab), staging);
  upload_f32(w.output_norm, model::load_tensor_f32(f, "output_norm.weight", n.d));
  if (!c.tied_output) upload_bf16(w.lm_head, model::load_tensor_f32(f, "output.weight", n.d, n.vocab), staging);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const device_layer& L = w.layers[static_cast<size_t>(l)];
    upload_f32(L.attn_norm, model::load_tensor_f32(f, p + "attn_norm.weight", n.d));
    upload_bf16(L.wqkv, model::load_tensor_f32(f, p + "attn_q.weight", n.d, n.q), staging);
    upload_bf16(L.wqkv + n.q * n.d, model::load_tensor_f32(f, p + "attn_k.weight", n.d, n.kv), staging);
    upload_bf16(L.wqkv + (n.q + n.kv) * n.d, model::load_tensor_f32(f, p + "attn_v.weight", n.d, n.kv), staging);
    if (L.qkv_bias) {  // one vector laid out as the fused GEMM's output row: Q, K, V
      upload_f32(L.qkv_bias, model::load_tensor_f32(f, p + "attn_q.bias", n.q));
      upload_f32(L.qkv_bias + n.q, model::load_tensor_f32(f, p + "attn_k.bias", n.kv));
      upload_f32(L.qkv_bias + n.q + n.kv, model::load_tensor_f32(f, p + "attn_v.bias", n.kv));
    }
    if (L.q_norm) {
      upload_f32(L.q_norm, model::load_tensor_f32(f, p + "attn_q_norm.weight", c.head_dim));
      upload_f32(L.k_norm, model::load_tensor_f32(f, p + "attn_k_norm.weight", c.head_dim));
    }
    upload_bf16(L.wo, model::load_tensor_f32(f, p + "attn_output.weight", n.q, n.d), staging);
    upload_f32(L.ffn_norm, model::load_tensor_f32(f, p + "ffn_norm.weight", n.d));
    upload_bf16(L.w_gate_up, model::load_tensor_f32(f, p + "ffn_gate.weight", n.d, n.ff), staging);
    upload_bf16(L.w_gate_up + n.ff * n.d, model::load_tensor_f32(f, p + "ffn_up.weight", n.d, n.ff), staging);
    upload_bf16(L.w_down, model::load_tensor_f32(f, p + "ffn_down.weight", n.ff, n.d), staging);
  }
}

void fill_dummy_weights(const model::llama_config& c, device_weights& w, uint64_t seed, cudaStream_t stream) {
  const dims n(c);
  const float a = 0.02f * 1.7320508f;  // uniform(-a, a) has std a / sqrt(3) = 0.02
  uint64_t s = seed;
  auto mat = [&](bf16* p, int64_t count) { launch_fill_random_bf16(p, count, ++s * 0x9e3779b97f4a7c15ull, a, 0.0f, stream); };
  auto norm = [&](float* p, int64_t count) { launch_fill_random_f32(p, count, ++s * 0x9e3779b97f4a7c15ull, 0.02f, 1.0f, stream); };
  mat(w.token_embd, n.vocab * n.d);
  norm(w.output_norm, n.d);
  if (!c.tied_output) mat(w.lm_head, n.vocab * n.d);
  for (const device_layer& L : w.layers) {
    norm(L.attn_norm, n.d);
    mat(L.wqkv, (n.q + 2 * n.kv) * n.d);
    if (L.qkv_bias) launch_fill_random_f32(L.qkv_bias, n.q + 2 * n.kv, ++s * 0x9e3779b97f4a7c15ull, a, 0.0f, stream);
    if (L.q_norm) {
      norm(L.q_norm, c.head_dim);
      norm(L.k_norm, c.head_dim);
    }
    mat(L.wo, n.d * n.q);
    norm(L.ffn_norm, n.d);
    mat(L.w_gate_up, 2 * n.ff * n.d);
    mat(L.w_down, n.d * n.ff);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

} // namespace conveyor::gpu
