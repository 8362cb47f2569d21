// The fused QKV-bias / q-k head norm / RoPE / KV-write kernel against a host reference built from
// model/cpu/cpu_ops (the CPU executor's own functions), for both pairings (adjacent "NORM", halves
// "NEOX"), partial rotation, linear frequency scaling, and head dims that fill one, two and four
// pairs per lane; outputs poisoned (NaN) before every run.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "gpu/step_meta.hpp"
#include "gpu_support.hpp"
#include "model/cpu/cpu_ops.hpp"

namespace conveyor::gpu::testing {
namespace {

struct rope_case {
  kv_shape s;
  int32_t n_rot;
  bool neox, bias, norm;
  float freq_scale;
};

std::ostream& operator<<(std::ostream& o, const rope_case& c) {
  return o << "heads " << c.s.n_head << "/" << c.s.n_kv << " hd " << c.s.head_dim << " n_rot " << c.n_rot
           << (c.neox ? " neox" : " norm") << (c.bias ? " +bias" : "") << (c.norm ? " +qk_norm" : "")
           << " freq_scale " << c.freq_scale;
}

// One step of three sequences (5 prompt tokens from position 2, a decode at 9, 3 tokens from 0)
// over shuffled blocks; checks Q, and K and V in their cache slots.
void check_rope_case(const rope_case& rc, std::mt19937& rng) {
  const kv_shape& s = rc.s;
  const int32_t hd = s.head_dim, width = (s.n_head + 2 * s.n_kv) * hd, num_blocks = 16, half = rc.n_rot / 2;
  const float eps = 1e-6f, theta = 10000.0f;
  step_plan plan;
  const int32_t computed[] = {2, 9, 0}, lens[] = {5, 1, 3};
  std::vector<int32_t> perm(num_blocks);
  for (int32_t i = 0; i < num_blocks; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  int32_t next = 0;
  for (int32_t q = 0; q < 3; ++q) {
    scheduled_seq sq;
    sq.id = q;
    sq.num_computed_tokens = computed[q];
    for (int32_t i = 0; i < lens[q]; ++i) sq.tokens.push_back(i);
    for (int32_t b = 0; b < (computed[q] + lens[q] + s.block_size - 1) / s.block_size; ++b) sq.block_table.push_back(perm[next++]);
    plan.seqs.push_back(sq);
  }
  step_meta_buffer meta(step_caps{64, 8, 64});
  const step_shape sh = meta.fill(plan, 0, 8, 2, s.block_size, num_blocks);
  meta.upload(sh, nullptr);
  const int32_t T = sh.tokens, max_pos = 16;
  std::vector<float> c(half), sn(half);
  std::vector<float2> rope(size_t(max_pos) * half);
  for (int32_t p = 0; p < max_pos; ++p) {
    model::rope_angles(p, rc.n_rot, theta, nullptr, c.data(), sn.data(), rc.freq_scale);
    for (int32_t i = 0; i < half; ++i) rope[size_t(p) * half + i] = float2{c[i], sn[i]};
  }
  dev_array<float2> drope(rope);
  const auto qkv0 = random_floats(rng, size_t(T) * width);
  std::vector<float> bias0 = random_floats(rng, width, 0.5f), qn0 = random_floats(rng, hd, 0.3f), kn0 = random_floats(rng, hd, 0.3f);
  for (size_t j = 0; j < size_t(hd); ++j) {
    qn0[j] += 1.0f;
    kn0[j] += 1.0f;
  }
  dev_array<float> qkv(qkv0), bias(bias0), qn(qn0), kn(kn0);
  dev_array<bf16_bits> q_out(size_t(T) * s.n_head * hd);
  const size_t cache_elems = size_t(num_blocks) * s.n_kv * s.block_size * hd;
  dev_array<bf16_bits> kc(cache_elems), vc(cache_elems);
  q_out.poison();
  kc.poison();
  vc.poison();
  rope_kv_args a;
  a.n_rot = rc.n_rot;
  a.neox = rc.neox;
  a.bias = rc.bias ? bias.get() : nullptr;
  a.q_norm = rc.norm ? qn.get() : nullptr;
  a.k_norm = rc.norm ? kn.get() : nullptr;
  a.eps = eps;
  launch_rope_kv_write(meta.device(), qkv.get(), drope.get(), as_bf16(q_out), as_bf16(kc), as_bf16(vc), T, s, a, nullptr);
  const auto qg = to_float(q_out.download()), kg = to_float(kc.download()), vg = to_float(vc.download());
  std::vector<float> q_ref, q_got, k_ref, k_got, v_ref, v_got;
  int32_t t = 0;
  for (const auto& sq : plan.seqs)
    for (size_t i = 0; i < sq.tokens.size(); ++i, ++t) {
      const int32_t pos = sq.num_computed_tokens + static_cast<int32_t>(i);
      std::vector<float> row(qkv0.begin() + size_t(t) * width, qkv0.begin() + size_t(t + 1) * width);
      if (rc.bias)
        for (int32_t j = 0; j < width; ++j) row[j] += bias0[j];
      if (rc.norm)
        for (int32_t h = 0; h < s.n_head + s.n_kv; ++h)
          model::rms_norm(&row[size_t(h) * hd], h < s.n_head ? qn0.data() : kn0.data(), &row[size_t(h) * hd], hd, eps);
      model::rope_angles(pos, rc.n_rot, theta, nullptr, c.data(), sn.data(), rc.freq_scale);
      model::rope_apply(row.data(), s.n_head + s.n_kv, hd, rc.n_rot, c.data(), sn.data(), rc.neox);
      for (int32_t j = 0; j < s.n_head * hd; ++j) {
        q_ref.push_back(row[j]);
        q_got.push_back(qg[size_t(t) * s.n_head * hd + j]);
      }
      const int32_t blk = sq.block_table[size_t(pos / s.block_size)], slot = pos % s.block_size;
      for (int32_t g = 0; g < s.n_kv; ++g)
        for (int32_t dd = 0; dd < hd; ++dd) {
          const size_t off = ((size_t(blk) * s.n_kv + g) * s.block_size + slot) * hd + dd;
          k_ref.push_back(row[(s.n_head + g) * hd + dd]);
          k_got.push_back(kg[off]);
          v_ref.push_back(row[(s.n_head + s.n_kv + g) * hd + dd]);
          v_got.push_back(vg[off]);
        }
    }
  BOOST_TEST_CONTEXT(rc) {
    BOOST_TEST(rel_error(q_got, q_ref) < bf16_bound);
    BOOST_TEST(rel_error(k_got, k_ref) < bf16_bound);
    BOOST_TEST(rel_error(v_got, v_ref) < bf16_bound);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_kernels, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(rope_and_kv_write) {
  std::mt19937 rng(3);
  const kv_shape small{4, 2, 32, 4}, wide{2, 1, 136, 4}, widest{2, 1, 256, 8}, many{12, 2, 16, 4};
  const rope_case cases[] = {
      {small, 32, false, false, false, 1.0f},  // llama
      {small, 16, false, false, false, 1.0f},  // partial rotation
      {small, 32, true, false, false, 1.0f},   // neox
      {small, 16, true, true, false, 1.0f},    // qwen2: bias, partial neox
      {small, 32, true, false, true, 0.25f},   // qwen3: head norms, linear scaling
      {wide, 136, true, true, true, 0.5f},     // 68 pairs: lanes hold 2 or 3 pairs
      {wide, 64, false, true, true, 1.0f},     // norm pairing, unrotated tail past 32 pairs
      {widest, 256, true, false, true, 1.0f},  // 4 pairs per lane
      {many, 16, false, true, true, 2.0f},     // more heads than warps: warps take several heads
  };
  for (const rope_case& rc : cases) check_rope_case(rc, rng);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
