// Exactness where it is defined. f32 -> bf16 is round to nearest, ties to even (CUDA's
// __float2bfloat16): checked bit for bit against a reference written here, through the kernel that
// stores bf16 with nothing else in between (rope_kv_write without rotation, bias or head norms:
// Q, K and V are exactly the f32 inputs converted), over every edge class and random bit patterns.
// Then the rounding's bias on normalized rows (RMSNorm's output, K and Q after the head norms and
// RoPE): a conversion that rounds toward zero stays within the tier's 1e-2 relative bound, so
// what catches it is the mean signed error, far from zero for it and zero for RNE.
#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>

#include "gpu/step_meta.hpp"
#include "gpu_support.hpp"
#include "model/cpu/cpu_ops.hpp"

namespace conveyor::gpu::testing {
namespace {

// The reference: keep the high half, round up when the dropped half is above one half of the
// last kept bit, or exactly one half and the kept part is odd (carrying into the exponent: the
// largest floats round to infinity). NaN is handled by the caller (any NaN must stay NaN).
bf16_bits rne_reference(uint32_t f) {
  uint32_t hi = f >> 16;
  const uint32_t dropped = f & 0xFFFFu;
  if (dropped > 0x8000u || (dropped == 0x8000u && (hi & 1u))) ++hi;
  return static_cast<bf16_bits>(hi);
}
bool is_nan32(uint32_t f) { return (f & 0x7F800000u) == 0x7F800000u && (f & 0x007FFFFFu) != 0; }
bool is_nan16(bf16_bits h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x007Fu) != 0; }

// Inputs: the edge classes (both signs), then patterns around ties and random bit patterns.
std::vector<uint32_t> conversion_inputs(std::mt19937& rng, size_t n) {
  std::vector<uint32_t> v;
  const uint32_t edges[] = {
      0x00000000u, 0x00000001u, 0x00007FFFu, 0x00008000u, 0x00008001u, 0x00018000u,  // zero, denormals, denormal ties
      0x007FFFFFu, 0x00800000u, 0x00808000u, 0x00818000u, 0x3F800000u, 0x3F808000u,  // max denormal, min normal, ties
      0x3F818000u, 0x3F80FFFFu, 0x3F807FFFu, 0x3FFF8000u, 0x7F7F7FFFu, 0x7F7F8000u,  // ties to even up, carries
      0x7F7FFFFFu, 0x7F7EFFFFu, 0x7F800000u, 0x7F800001u, 0x7F808000u, 0x7FC00000u,  // max (rounds to inf), inf, NaNs
      0x7FFFFFFFu, 0x7F80FFFFu, 0x7FBFFFFFu};
  for (uint32_t e : edges)
    for (uint32_t sign : {0u, 0x80000000u}) v.push_back(e | sign);
  while (v.size() < n) {
    const uint32_t r = static_cast<uint32_t>(rng());
    switch (v.size() % 4) {
      case 0: v.push_back(r); break;                                             // any pattern
      case 1: v.push_back((r & 0xFFFF0000u) | 0x8000u); break;                   // an exact tie
      case 2: v.push_back((r & 0xFFFF0000u) | (0x7FFEu + (r >> 8) % 4)); break;  // next to a tie
      default: v.push_back((r & 0x807FFFFFu) | ((r >> 23) % 8 + 120) << 23); break;  // values near 1
    }
  }
  return v;
}

// One sequence of T tokens over shuffled blocks; returns what rope_kv_write stored for each input
// (Q rows, then K and V read from their cache slots), in the inputs' order.
std::vector<bf16_bits> convert_through_rope_kv(const std::vector<uint32_t>& bits, const kv_shape& s, int32_t T) {
  const int32_t hd = s.head_dim, width = (s.n_head + 2 * s.n_kv) * hd, num_blocks = (T + s.block_size - 1) / s.block_size;
  step_plan plan;
  scheduled_seq sq;
  sq.tokens.assign(size_t(T), 1);
  for (int32_t b = 0; b < num_blocks; ++b) sq.block_table.push_back((b * 5 + 3) % num_blocks);  // 5 is coprime to num_blocks
  plan.seqs.push_back(sq);
  step_meta_buffer meta(step_caps{T, 2, num_blocks});
  const step_shape sh = meta.fill(plan, 0, 16, s.n_head / s.n_kv, s.block_size, num_blocks);
  meta.upload(sh, nullptr);
  std::vector<float> qkv(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) qkv[i] = std::bit_cast<float>(bits[i]);
  dev_array<float> dqkv(qkv);
  dev_array<float2> rope(1);
  const size_t cache_elems = size_t(num_blocks) * s.n_kv * s.block_size * hd;
  dev_array<bf16_bits> q(size_t(T) * s.n_head * hd), kc(cache_elems), vc(cache_elems);
  q.poison();
  kc.poison();
  vc.poison();
  rope_kv_args a;  // n_rot 0, no bias, no head norms: a pure conversion
  launch_rope_kv_write(meta.device(), dqkv.get(), rope.get(), as_bf16(q), as_bf16(kc), as_bf16(vc), T, s, a, nullptr);
  const auto qg = q.download(), kg = kc.download(), vg = vc.download();
  std::vector<bf16_bits> out(bits.size());
  for (int32_t t = 0; t < T; ++t)
    for (int32_t j = 0; j < width; ++j) {
      const int32_t head = j / hd, d = j % hd;
      bf16_bits got;
      if (head < s.n_head) {
        got = qg[(size_t(t) * s.n_head + head) * hd + d];
      } else {
        const int32_t g = (head - s.n_head) % s.n_kv, blk = sq.block_table[size_t(t / s.block_size)];
        const size_t off = ((size_t(blk) * s.n_kv + g) * s.block_size + t % s.block_size) * hd + d;
        got = head < s.n_head + s.n_kv ? kg[off] : vg[off];
      }
      out[size_t(t) * width + j] = got;
    }
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_exactness, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(bf16_conversion_rounds_to_nearest_even) {
  std::mt19937 rng(29);
  const kv_shape s{4, 2, 64, 16};
  const int32_t T = 48, width = (s.n_head + 2 * s.n_kv) * s.head_dim;
  const auto bits = conversion_inputs(rng, size_t(T) * width);
  const auto got = convert_through_rope_kv(bits, s, T);
  int32_t wrong = 0, ties = 0, nans = 0;
  for (size_t i = 0; i < bits.size(); ++i) {
    const uint32_t f = bits[i];
    ties += (f & 0xFFFFu) == 0x8000u;
    if (is_nan32(f)) {
      ++nans;
      if (!is_nan16(got[i]) && ++wrong <= 10) BOOST_ERROR("NaN 0x" << std::hex << f << " became 0x" << got[i]);
      continue;
    }
    const bf16_bits want = rne_reference(f);
    if (got[i] != want && ++wrong <= 10)
      BOOST_ERROR("f32 0x" << std::hex << f << " (" << std::bit_cast<float>(f) << ") -> 0x" << got[i] << ", RNE gives 0x" << want);
  }
  BOOST_TEST(wrong == 0);
  BOOST_TEST_MESSAGE(bits.size() << " conversions, " << ties << " exact ties, " << nans << " NaNs: " << wrong << " wrong");
}

// The mean of (|got| - |exact|) in units of the bf16 spacing at |exact|. RNE leaves each value
// within half a unit, symmetrically: the mean is 0 with a standard deviation of 0.29 / sqrt(n)
// (0.0016 at n = 32768). Rounding toward zero moves every value down by a uniform [0, 1) unit:
// a mean of -0.5. The bound 0.05 is ~30 standard deviations of RNE and a tenth of RTZ's bias;
// the f32 arithmetic before the conversion differs from the exact value by ~2^-16 units.
BOOST_AUTO_TEST_CASE(normalized_rows_round_without_bias) {
  std::mt19937 rng(30);
  constexpr double kBound = 0.05;
  {  // RMSNorm: rows at scales spread over 2^-8 .. 2^8, weights around 1.
    const int32_t T = 64, d = 512;
    const float eps = 1e-6f;
    std::vector<float> x0 = random_floats(rng, size_t(T) * d), w0 = random_floats(rng, d, 0.2f);
    for (int32_t t = 0; t < T; ++t)
      for (int32_t j = 0; j < d; ++j) x0[size_t(t) * d + j] *= std::ldexp(1.0f, t % 17 - 8);
    for (auto& v : w0) v += 1.0f;
    dev_array<float> x(x0), w(w0);
    dev_array<bf16_bits> out(size_t(T) * d);
    out.poison();
    launch_rmsnorm(x.get(), nullptr, nullptr, w.get(), as_bf16(out), T, d, eps, nullptr);
    std::vector<double> exact(size_t(T) * d);
    for (int32_t t = 0; t < T; ++t) {
      double ss = 0.0;
      for (int32_t j = 0; j < d; ++j) ss += double(x0[size_t(t) * d + j]) * x0[size_t(t) * d + j];
      const double inv = 1.0 / std::sqrt(ss / d + eps);
      for (int32_t j = 0; j < d; ++j) exact[size_t(t) * d + j] = x0[size_t(t) * d + j] * inv * w0[size_t(j)];
    }
    const double bias = mean_ulp_error(to_float(out.download()), exact);
    BOOST_TEST_MESSAGE("rmsnorm: mean signed error " << bias << " bf16 units");
    BOOST_TEST(std::abs(bias) < kBound, "rmsnorm output: mean signed error " << bias << " bf16 units");
  }
  {  // rope_kv with qwen3's head norms and NEOX RoPE: Q and K normalized, rotated, stored.
    const kv_shape s{4, 2, 128, 16};
    const int32_t T = 32, hd = s.head_dim, width = (s.n_head + 2 * s.n_kv) * hd, half = hd / 2;
    step_plan plan;
    scheduled_seq sq;
    sq.tokens.assign(size_t(T), 1);
    sq.block_table = {1, 0};
    plan.seqs.push_back(sq);
    step_meta_buffer meta(step_caps{T, 2, 2});
    const step_shape sh = meta.fill(plan, 0, 16, 2, s.block_size, 2);
    meta.upload(sh, nullptr);
    std::vector<float> c(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
    std::vector<float2> rope;
    for (int32_t p = 0; p < T; ++p) {
      model::rope_angles(p, hd, 10000.0f, nullptr, c.data(), sn.data(), 1.0f);
      for (int32_t i = 0; i < half; ++i) rope.push_back(float2{c[size_t(i)], sn[size_t(i)]});
    }
    const auto qkv0 = random_floats(rng, size_t(T) * width, 3.0f);
    auto nw0 = random_floats(rng, size_t(hd), 0.3f);
    for (auto& v : nw0) v += 1.0f;
    dev_array<float> qkv(qkv0), nw(nw0);
    dev_array<float2> drope(rope);
    dev_array<bf16_bits> q(size_t(T) * s.n_head * hd), kc(size_t(2) * s.n_kv * s.block_size * hd), vc(kc.size());
    q.poison();
    kc.poison();
    rope_kv_args a;
    a.n_rot = hd;
    a.neox = true;
    a.q_norm = nw.get();
    a.k_norm = nw.get();
    launch_rope_kv_write(meta.device(), qkv.get(), drope.get(), as_bf16(q), as_bf16(kc), as_bf16(vc), T, s, a, nullptr);
    const auto qg = to_float(q.download()), kg = to_float(kc.download());
    std::vector<float> got;
    std::vector<double> exact;
    for (int32_t t = 0; t < T; ++t)
      for (int32_t h = 0; h < s.n_head + s.n_kv; ++h) {
        const float* in = &qkv0[size_t(t) * width + size_t(h) * hd];
        double ss = 0.0;
        for (int32_t j = 0; j < hd; ++j) ss += double(in[j]) * in[j];
        const double inv = 1.0 / std::sqrt(ss / hd + a.eps);
        for (int32_t j = 0; j < hd; ++j) {  // NEOX: dims j and j + half are a pair
          const int32_t i = j % half, lo = i, hi = i + half;
          const float2 cs = rope[size_t(t) * half + i];
          const double x = in[lo] * inv * nw0[size_t(lo)], y = in[hi] * inv * nw0[size_t(hi)];
          exact.push_back(j < half ? x * cs.x - y * cs.y : x * cs.y + y * cs.x);
          if (h < s.n_head) {
            got.push_back(qg[(size_t(t) * s.n_head + h) * hd + j]);
          } else {
            const int32_t blk = sq.block_table[size_t(t / s.block_size)];
            got.push_back(kg[((size_t(blk) * s.n_kv + h - s.n_head) * s.block_size + t % s.block_size) * hd + j]);
          }
        }
      }
    const double bias = mean_ulp_error(got, exact);
    BOOST_TEST_MESSAGE("rope_kv (head norms, RoPE): mean signed error " << bias << " bf16 units");
    BOOST_TEST(std::abs(bias) < kBound, "rope_kv Q and K: mean signed error " << bias << " bf16 units");
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
