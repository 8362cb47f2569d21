// qmm legacy kernels (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0) on every available ISA: the Q8_0 /
// Q8_1 activation quantizers (ggml rounding, zero and non-finite rows, ISA independence), the
// products against a double reference over the same quantized values and against f32
// activations, SIMD against scalar, bitwise batch invariance (m, tiles, row splits), accumulate,
// ldc, unaligned weight rows and the job checks.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "model/cpu/qmm.hpp"
#include "model/cpu/qmm_kernels.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::model {
namespace {

const ggml_type kTypes[] = {ggml_type::f32,  ggml_type::f16,  ggml_type::bf16, ggml_type::q4_0,
                            ggml_type::q4_1, ggml_type::q5_0, ggml_type::q5_1, ggml_type::q8_0};

std::vector<cpu_isa> isas() {
  std::vector<cpu_isa> v;
  for (cpu_isa i : {cpu_isa::scalar, cpu_isa::avx2, cpu_isa::avxvnni, cpu_isa::avx512})
    if (cpu_isa_available(i)) v.push_back(i);
  return v;
}

bool is_float_type(ggml_type t) { return act_format_for(t) == act_format::f32; }
size_t row_bytes(ggml_type t, int32_t k) { return static_cast<size_t>(k) / block_elems(t) * block_bytes(t); }

/// Random weight rows: floats for F types, random blocks (random bits, small fp16 scales, mins,
/// Q8_0 values over the whole int8 range) for the quantized types.
std::vector<uint8_t> random_weights(ggml_type t, int32_t rows, int32_t k, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::uniform_real_distribution<float> ud(0.002f, 0.01f), um(-0.1f, 0.02f);
  std::vector<uint8_t> w(row_bytes(t, k) * rows);
  auto put16 = [&](size_t at, uint16_t v) { std::memcpy(&w[at], &v, 2); };
  if (is_float_type(t)) {
    for (size_t i = 0; i < static_cast<size_t>(rows) * k; ++i) {
      const float x = nd(g);
      if (t == ggml_type::f32) std::memcpy(&w[4 * i], &x, 4);
      else put16(2 * i, t == ggml_type::f16 ? fp32_to_fp16(x) : fp32_to_bf16(x));
    }
    return w;
  }
  const size_t bb = block_bytes(t);
  for (size_t at = 0; at < w.size(); at += bb) {
    for (size_t i = 0; i < bb; ++i) w[at + i] = static_cast<uint8_t>(g());
    put16(at, fp32_to_fp16(ud(g)));
    if (t == ggml_type::q4_1 || t == ggml_type::q5_1) put16(at + 2, fp32_to_fp16(um(g)));
  }
  return w;
}

std::vector<float> random_acts(int32_t m, int32_t k, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m) * k);
  for (float& v : x) v = nd(g);
  for (size_t i = 0; i < x.size(); i += 97) x[i] *= 8.0f;  // some outliers
  return x;
}

/// A weight matrix and its activations, in their qmm encodings and dequantized.
struct problem {
  ggml_type type;
  int32_t rows, k, m;
  std::vector<uint8_t> w, act;
  std::vector<float> x;                 // f32 activations (m, k)
  std::vector<double> wd, ad;           // dequantized weights (rows, k) and activations (m, k)
  size_t stride;

  problem(ggml_type t, int32_t rows_, int32_t k_, int32_t m_, uint32_t seed) : type(t), rows(rows_), k(k_), m(m_) {
    std::mt19937 g(seed);
    w = random_weights(t, rows, k, g);
    x = random_acts(m, k, g);
    const act_format f = act_format_for(t);
    stride = act_row_bytes(f, k);
    act.resize(stride * m);
    for (int32_t i = 0; i < m; ++i) quantize_act_row(cpu_isa::scalar, f, &x[static_cast<size_t>(i) * k], &act[stride * i], k);
    std::vector<float> row(k);
    for (int32_t r = 0; r < rows; ++r) {
      dequantize_row(t, &w[row_bytes(t, k) * r], row.data(), k);
      wd.insert(wd.end(), row.begin(), row.end());
    }
    for (int32_t i = 0; i < m; ++i)
      for (int32_t e = 0; e < k; ++e) ad.push_back(act_value(i, e));
  }
  /// Element e of activation row i as the kernels see it (layout of qmm_quant.cpp).
  double act_value(int32_t i, int32_t e) const {
    const uint8_t* a = &act[stride * i];
    if (f32()) return x[static_cast<size_t>(i) * k + e];
    float d;
    std::memcpy(&d, a + 32 * static_cast<size_t>(k / 32) + 4 * static_cast<size_t>(e / 32), 4);
    return static_cast<int8_t>(a[e]) * double{d};
  }
  bool f32() const { return is_float_type(type); }
  qmm_job job(float* c, int32_t ldc) const {
    return {type, w.data(), row_bytes(type, k), rows, k, act.data(), stride, m, c, ldc, false};
  }
  std::vector<float> run(cpu_isa isa) const {
    std::vector<float> c(static_cast<size_t>(m) * rows, -1.0f);
    qmm_run(isa, job(c.data(), rows));
    return c;
  }
  double dot(int32_t t, int32_t r, bool abs, bool exact_x) const {
    double s = 0.0;
    for (int32_t e = 0; e < k; ++e) {
      const double a = exact_x ? x[static_cast<size_t>(t) * k + e] : ad[static_cast<size_t>(t) * k + e];
      const double p = wd[static_cast<size_t>(r) * k + e] * a;
      s += abs ? std::fabs(p) : p;
    }
    return s;
  }
};

std::vector<int32_t> ks_for(ggml_type t) {
  if (is_float_type(t)) return {8, 37, 32, 64, 576, 1536, 4096};
  return {32, 64, 224, 480, 576, 1536, 4096};  // nb = 7 and 15: every block-group remainder (4, 2, 1)
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

} // namespace

BOOST_AUTO_TEST_SUITE(qmm)

BOOST_AUTO_TEST_CASE(q8_quantizers_round_like_ggml) {
  std::mt19937 g(1);
  const std::vector<float> x = random_acts(1, 96, g);
  std::vector<uint8_t> q0(q8_0_row_bytes(96)), q1(q8_1_row_bytes(96));
  BOOST_TEST(q0.size() == 3u * 36u);
  BOOST_TEST(q1.size() == 3u * 40u);
  quantize_q8_0_row(x.data(), q0.data(), 96);
  quantize_q8_1_row(x.data(), q1.data(), 96);
  BOOST_TEST(std::memcmp(q0.data(), q1.data(), q0.size()) == 0);  // q8_1 = q8_0 + sums
  for (int b = 0; b < 3; ++b) {
    float amax = 0.0f, d, s;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    std::memcpy(&d, &q1[96 + 4 * b], 4);
    std::memcpy(&s, &q1[108 + 4 * b], 4);
    BOOST_TEST(same_bits(d, amax / 127.0f));
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int8_t>(q1[32 * b + i]);
      BOOST_TEST(q == static_cast<int>(std::nearbyint(x[32 * b + i] * (1.0f / d))));  // ties to even
      sum += q;
    }
    BOOST_TEST(same_bits(s, d * static_cast<float>(sum)));
  }
}

BOOST_AUTO_TEST_CASE(q8_quantizer_ties_go_to_even) {
  // amax 127 -> d = 1 exactly, so x * (1/d) = x and the ties stay ties.
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -3.5f, 126.5f, 0.49999997f, -126.5f};
  const int want[] = {127, 0, 2, 2, 0, -2, -4, 126, 0, -126};
  std::copy(std::begin(in), std::end(in), x.begin());
  std::vector<uint8_t> q(q8_0_row_bytes(32));
  quantize_q8_0_row(x.data(), q.data(), 32);
  for (size_t i = 0; i < std::size(want); ++i) BOOST_TEST(static_cast<int8_t>(q[i]) == want[i], "element " << i);
}

BOOST_AUTO_TEST_CASE(q8_quantizers_zero_and_nonfinite_rows) {
  std::vector<float> x(64, 0.0f);
  std::vector<uint8_t> q(q8_1_row_bytes(64), 0xAB);
  quantize_q8_1_row(x.data(), q.data(), 64);
  for (uint8_t v : q) BOOST_TEST(v == 0u);  // qs 0, d +0, s +0
  x[3] = std::numeric_limits<float>::infinity();
  x[40] = std::numeric_limits<float>::quiet_NaN();
  x[41] = -std::numeric_limits<float>::infinity();
  quantize_q8_1_row(x.data(), q.data(), 64);  // garbage in, garbage out, but no UB (sanitizers)
  quantize_q8_0_row(x.data(), q.data(), 64);
  for (int i = 0; i < 64; ++i) BOOST_TEST(std::abs(static_cast<int>(static_cast<int8_t>(q[i]))) <= 127);
}

BOOST_AUTO_TEST_CASE(quantize_act_row_is_isa_independent) {
  std::mt19937 g(2);
  const std::vector<float> x = random_acts(1, 576, g);
  for (act_format f : {act_format::q8_0, act_format::q8_1}) {
    std::vector<uint8_t> ref(act_row_bytes(f, 576));
    quantize_act_row(cpu_isa::scalar, f, x.data(), ref.data(), 576);
    for (cpu_isa i : isas()) {
      std::vector<uint8_t> q(ref.size());
      quantize_act_row(i, f, x.data(), q.data(), 576);
      quantize_act_row(i, f, x.data(), q.data(), 576);
      BOOST_TEST((q == ref));
    }
  }
}

// Every ISA against the double product of the dequantized weights and the dequantized (q8)
// activations: the same quantized math, so only float rounding differs (<= 1e-5 of sum |w*a|).
// SIMD against scalar: <= 1e-6 of sum |w*a|.
BOOST_AUTO_TEST_CASE(matches_double_reference_and_scalar) {
  for (ggml_type t : kTypes)
    for (int32_t k : ks_for(t)) {
      const problem p(t, 11, k, k >= 1536 ? 5 : 9, 100 + static_cast<uint32_t>(k));
      const std::vector<float> cs = p.run(cpu_isa::scalar);
      for (cpu_isa isa : isas()) {
        BOOST_TEST_CONTEXT(type_name(t) << " k=" << k << " " << cpu_isa_name(isa)) {
          const std::vector<float> c = p.run(isa);
          double worst = 0.0, worst_s = 0.0;
          for (int32_t i = 0; i < p.m; ++i)
            for (int32_t r = 0; r < p.rows; ++r) {
              const double scale = p.dot(i, r, true, false) + 1e-30;
              const float v = c[static_cast<size_t>(i) * p.rows + r];
              worst = std::max(worst, std::fabs(v - p.dot(i, r, false, false)) / scale);
              worst_s = std::max(worst_s, std::fabs(double{v} - cs[static_cast<size_t>(i) * p.rows + r]) / scale);
            }
          BOOST_TEST(worst <= 1e-5);
          BOOST_TEST(worst_s <= 1e-6);
        }
      }
    }
}

// Against the unquantized f32 activations. q8 rounding moves each activation by at most d/2 of
// its block (d = amax/127), so |c - w.x| <= sum_j |w_j| * d(j)/2, plus 1e-5 of sum |w*x| for the
// float rounding. F types take the activations exactly: 1e-5 of sum |w*x| alone.
BOOST_AUTO_TEST_CASE(q8_activation_error_bound_against_f32) {
  for (ggml_type t : kTypes) {
    const problem p(t, 7, 576, 3, 7);
    for (cpu_isa isa : isas()) {
      BOOST_TEST_CONTEXT(type_name(t) << " " << cpu_isa_name(isa)) {
        const std::vector<float> c = p.run(isa);
        for (int32_t i = 0; i < p.m; ++i)
          for (int32_t r = 0; r < p.rows; ++r) {
            double bound = 1e-5 * p.dot(i, r, true, true);
            if (!p.f32())
              for (int32_t b = 0; b < p.k / 32; ++b) {
                double amax = 0.0, wsum = 0.0;
                for (int e = 32 * b; e < 32 * b + 32; ++e) {
                  amax = std::max(amax, std::fabs(double{p.x[static_cast<size_t>(i) * p.k + e]}));
                  wsum += std::fabs(p.wd[static_cast<size_t>(r) * p.k + e]);
                }
                bound += wsum * amax / 127.0 / 2.0;
              }
            BOOST_TEST(std::fabs(c[static_cast<size_t>(i) * p.rows + r] - p.dot(i, r, false, true)) <= bound);
          }
      }
    }
  }
}

// c[t][r] depends only on weight row r and activation row t: m = 1, 2, 3, 5, 37 and 133 (every
// tile remainder, token chunks of 64 and 128) and row chunks at offsets that match no tile (rows
// tiles of 4 and 8) give the same bits. k = 480 and 224 (nb = 15, 7) cover every block group.
BOOST_AUTO_TEST_CASE(batch_invariant_bitwise) {
  for (ggml_type t : kTypes)
    for (int32_t k : {64, 224, 480, 576}) {
      const int32_t k_used = is_float_type(t) && k == 64 ? 61 : k;
      const problem p(t, 23, k_used, 133, 5);
      for (cpu_isa isa : isas()) {
        BOOST_TEST_CONTEXT(type_name(t) << " k=" << k_used << " " << cpu_isa_name(isa)) {
          const std::vector<float> full = p.run(isa);
          size_t mismatches = 0;
          for (int32_t m : {1, 2, 3, 5, 37}) {
            for (int32_t t0 = 0; t0 + m <= p.m; t0 += (m <= 5 ? 13 + m : 50)) {
              std::vector<float> c(static_cast<size_t>(m) * p.rows);
              qmm_job j = p.job(c.data(), p.rows);
              j.act = p.act.data() + p.stride * t0;
              j.m = m;
              qmm_run(isa, j);
              for (size_t e = 0; e < c.size(); ++e) mismatches += !same_bits(c[e], full[t0 * p.rows + e]);
            }
          }
          const int32_t cuts[][4] = {{0, 5, 17, 23}, {0, 1, 2, 23}, {0, 3, 11, 23}, {0, 9, 22, 23}, {0, 6, 13, 23}};
          for (int32_t m : {p.m, 1})  // m == 1 takes its own tiles
            for (const auto& cut : cuts) {
              std::vector<float> c(static_cast<size_t>(m) * p.rows, 0.0f);
              for (int part = 0; part < 3; ++part) {
                qmm_job j = p.job(c.data() + cut[part], p.rows);
                j.w = p.w.data() + j.w_row_bytes * cut[part];
                j.n_rows = cut[part + 1] - cut[part];
                j.m = m;
                qmm_run(isa, j);
              }
              for (size_t e = 0; e < c.size(); ++e) mismatches += !same_bits(c[e], full[e]);
            }
          BOOST_TEST(mismatches == 0u);
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(accumulate_ldc_and_unaligned_rows) {
  for (ggml_type t : kTypes) {
    const problem p(t, 13, 64, 6, 11);
    for (cpu_isa isa : isas()) {
      BOOST_TEST_CONTEXT(type_name(t) << " " << cpu_isa_name(isa)) {
        const std::vector<float> base = p.run(isa);
        const int32_t ldc = p.rows + 5;
        std::vector<float> c(static_cast<size_t>(p.m) * ldc);
        for (size_t e = 0; e < c.size(); ++e) c[e] = 0.25f * static_cast<float>(e % 7);
        const std::vector<float> c0 = c;
        qmm_job j = p.job(c.data(), ldc);
        j.accumulate = true;
        qmm_run(isa, j);
        // Weight rows copied to an odd address.
        std::vector<uint8_t> odd(p.w.size() + 1);
        std::memcpy(odd.data() + 1, p.w.data(), p.w.size());
        std::vector<float> cu(base.size());
        qmm_job ju = p.job(cu.data(), p.rows);
        ju.w = odd.data() + 1;
        qmm_run(isa, ju);
        size_t bad = 0;
        for (int32_t i = 0; i < p.m; ++i)
          for (int32_t e = 0; e < ldc; ++e) {
            const size_t at = static_cast<size_t>(i) * ldc + e;
            const float want = e < p.rows ? c0[at] + base[static_cast<size_t>(i) * p.rows + e] : c0[at];
            bad += !same_bits(c[at], want);
          }
        for (size_t e = 0; e < base.size(); ++e) bad += !same_bits(cu[e], base[e]);
        BOOST_TEST(bad == 0u);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(rejects_bad_jobs) {
  const problem p(ggml_type::q4_1, 2, 64, 1, 3);
  std::vector<float> c(2);
  qmm_job j = p.job(c.data(), 2);
  j.k = 48;
  BOOST_CHECK_THROW(qmm_run(cpu_isa::scalar, j), std::invalid_argument);
  j.k = 64;
  j.type = ggml_type::q2_k;
  BOOST_CHECK_THROW(qmm_run(cpu_isa::scalar, j), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
