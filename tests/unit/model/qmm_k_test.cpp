// K-quant qmm (Q4_K/Q5_K/Q6_K x Q8_K) on every ISA this CPU has: the Q8_K quantizer, accuracy
// against a double reference and an f32 bound, ISA agreement, bitwise batch invariance, accumulate
// / ldc, k up to 14336, unaligned rows, m up to 512, the small-step kernel (m <= 4) and the
// row-lane kernels (m >= kq::wide_m) against scalar bit for bit, at odd row offsets and counts.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "model/cpu/qmm.hpp"
#include "model/cpu/qmm_k_common.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::model {
namespace {

const ggml_type kTypes[] = {ggml_type::q4_k, ggml_type::q5_k, ggml_type::q6_k};

std::vector<cpu_isa> isas() {
  std::vector<cpu_isa> v;
  for (cpu_isa i : {cpu_isa::scalar, cpu_isa::avx2, cpu_isa::avxvnni, cpu_isa::avx512})
    if (cpu_isa_available(i)) v.push_back(i);
  return v;
}

/// `rows` random weight rows of type t: random bytes, with fp16 d / dmin in [1e-3, 1e-2].
struct kmat {
  ggml_type t;
  int32_t rows, k;
  size_t row_bytes;
  std::vector<uint8_t> raw;
  const uint8_t* row(int32_t r) const { return raw.data() + static_cast<size_t>(r) * row_bytes; }
};

kmat random_weights(ggml_type t, int32_t rows, int32_t k, std::mt19937& rng) {
  const size_t bb = kq::block_bytes_of(t);
  kmat w{t, rows, k, bb * static_cast<size_t>(k / 256), {}};
  w.raw.resize(w.row_bytes * static_cast<size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
  for (uint8_t& b : w.raw) b = static_cast<uint8_t>(byte(rng));
  for (size_t off = 0; off < w.raw.size(); off += bb) {
    const uint16_t d = fp32_to_fp16(scale(rng)), dmin = fp32_to_fp16(scale(rng));
    std::memcpy(&w.raw[off + (t == ggml_type::q6_k ? 208 : 0)], &d, 2);
    if (t != ggml_type::q6_k) std::memcpy(&w.raw[off + 2], &dmin, 2);
  }
  return w;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = nd(rng);
  return x;
}

/// m activation rows of k floats, quantized to Q8_K; stride = row bytes + pad.
std::vector<uint8_t> quantize_acts(const std::vector<float>& x, int32_t m, int32_t k, size_t pad = 0) {
  const size_t rb = act_row_bytes(act_format::q8_k, k) + pad;
  std::vector<uint8_t> out(rb * static_cast<size_t>(m), 0xCD);
  for (int32_t t = 0; t < m; ++t)
    quantize_act_row(cpu_isa::scalar, act_format::q8_k, x.data() + static_cast<size_t>(t) * k, out.data() + rb * t, k);
  return out;
}

/// c[t * ldc + r] for rows [row0, row0 + n) of w and m tokens.
void run(cpu_isa isa, const kmat& w, const uint8_t* wbase, int32_t row0, int32_t n, const std::vector<uint8_t>& act,
         size_t act_stride, int32_t m, float* c, int32_t ldc, bool accumulate = false) {
  qmm_job j;
  j.type = w.t;
  j.w = wbase + static_cast<size_t>(row0) * w.row_bytes;
  j.w_row_bytes = w.row_bytes;
  j.n_rows = n;
  j.k = w.k;
  j.act = act.data();
  j.act_stride = act_stride;
  j.m = m;
  j.c = c + row0;
  j.ldc = ldc;
  j.accumulate = accumulate;
  qmm_run(isa, j);
}

std::vector<float> run_all(cpu_isa isa, const kmat& w, const std::vector<uint8_t>& act, int32_t m) {
  std::vector<float> c(static_cast<size_t>(m) * w.rows, std::numeric_limits<float>::quiet_NaN());
  run(isa, w, w.raw.data(), 0, w.rows, act, act.size() / m, m, c.data(), w.rows);
  return c;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Dequantized Q8_K row (d * q, in double).
std::vector<double> deq_act(const uint8_t* a, int32_t k) {
  std::vector<double> y(k);
  for (int32_t b = 0; b < k / 256; ++b, a += kq::q8k_bytes) {
    const double d = kq::load_f32(a);
    for (int i = 0; i < 256; ++i) y[256 * b + i] = d * static_cast<int8_t>(a[kq::q8k_qs + i]);
  }
  return y;
}

BOOST_AUTO_TEST_SUITE(qmm_kquant)

BOOST_AUTO_TEST_CASE(q8_k_quantizer_follows_ggml_rounding) {
  std::mt19937 rng(1);
  std::vector<float> x = random_floats(512, rng);
  x[300] = -9.0f;  // largest magnitude of block 1: becomes -127 (iscale = -127/max)
  std::vector<uint8_t> q(act_row_bytes(act_format::q8_k, 512));
  quantize_act_row(cpu_isa::scalar, act_format::q8_k, x.data(), q.data(), 512);
  BOOST_TEST(q.size() == 2 * 292u);
  for (int b = 0; b < 2; ++b) {
    const uint8_t* blk = q.data() + 292 * b;
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < 256; ++i)
      if (std::fabs(x[256 * b + i]) > amax) amax = std::fabs(max = x[256 * b + i]);
    const float iscale = -127.0f / max;
    BOOST_TEST(same_bits(kq::load_f32(blk), 1.0f / iscale));
    for (int i = 0; i < 256; ++i) {
      const auto v = static_cast<int8_t>(blk[4 + i]);
      BOOST_TEST(v == static_cast<int>(std::nearbyint(iscale * x[256 * b + i])));
    }
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += static_cast<int8_t>(blk[4 + 16 * s + i]);
      BOOST_TEST(kq::load_i16(blk + 260 + 2 * s) == sum);
    }
  }
  BOOST_TEST(static_cast<int>(static_cast<int8_t>(q[292 + 4 + 300 - 256])) == -127);
}

BOOST_AUTO_TEST_CASE(q8_k_quantizer_is_deterministic_and_survives_zero_inf_nan) {
  std::mt19937 rng(2);
  std::vector<float> x = random_floats(1024, rng);
  for (int i = 256; i < 512; ++i) x[i] = 0.0f;                        // block 1: zeros
  x[600] = std::numeric_limits<float>::infinity();                    // block 2: inf
  x[800] = std::numeric_limits<float>::quiet_NaN();                   // block 3: NaN
  const size_t rb = act_row_bytes(act_format::q8_k, 1024);
  std::vector<uint8_t> ref(rb), other(rb);
  quantize_act_row(cpu_isa::scalar, act_format::q8_k, x.data(), ref.data(), 1024);
  for (cpu_isa isa : isas()) {
    quantize_act_row(isa, act_format::q8_k, x.data(), other.data(), 1024);
    BOOST_TEST(std::memcmp(ref.data(), other.data(), rb) == 0);
  }
  BOOST_TEST(kq::load_f32(ref.data() + 292) == 0.0f);
  for (int i = 0; i < 256 + 32; ++i) BOOST_TEST(ref[292 + 4 + i] == 0);
  const float d3 = kq::load_f32(ref.data() + 3 * 292);
  BOOST_TEST(std::isfinite(d3));
  BOOST_TEST(ref[3 * 292 + 4 + 800 - 768] == 0);  // the NaN element
}

BOOST_AUTO_TEST_CASE(matches_double_reference_and_f32_bound) {
  std::mt19937 rng(3);
  for (ggml_type t : kTypes)
    for (int32_t k : {256, 512, 4096, 14336}) {
      const int32_t rows = k > 4096 ? 3 : 9, m = 3;
      const kmat w = random_weights(t, rows, k, rng);
      const std::vector<float> x = random_floats(static_cast<size_t>(m) * k, rng);
      const std::vector<uint8_t> act = quantize_acts(x, m, k);
      const size_t rb = act.size() / m;
      std::vector<float> wd(k);
      for (cpu_isa isa : isas()) {
        const std::vector<float> c = run_all(isa, w, act, m);
        for (int32_t r = 0; r < rows; ++r) {
          dequantize_row(t, w.row(r), wd.data(), k);
          for (int32_t tk = 0; tk < m; ++tk) {
            const std::vector<double> a = deq_act(act.data() + rb * tk, k);
            const float* xf = x.data() + static_cast<size_t>(tk) * k;
            double ref = 0, mag = 0, exact = 0, bound = 0;
            for (int32_t e = 0; e < k; ++e) {
              ref += wd[e] * a[e];
              mag += std::fabs(wd[e] * a[e]);
              exact += static_cast<double>(wd[e]) * xf[e];
            }
            // Q8_K rounds each x to within d/2 = amax/254 of its block.
            for (int32_t b = 0; b < k / 256; ++b) {
              double amax = 0, wsum = 0;
              for (int e = 256 * b; e < 256 * b + 256; ++e) {
                amax = std::max(amax, std::fabs(static_cast<double>(xf[e])));
                wsum += std::fabs(wd[e]);
              }
              bound += amax / 254.0 * wsum * (1 + 1e-6);
            }
            const double got = c[static_cast<size_t>(tk) * rows + r];
            BOOST_TEST_CONTEXT(type_name(t) << " " << cpu_isa_name(isa) << " k=" << k << " r=" << r << " t=" << tk) {
              BOOST_TEST(std::fabs(got - ref) <= 1e-5 * mag);
              BOOST_TEST(std::fabs(got - exact) <= bound + 1e-5 * mag);
            }
          }
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(isas_agree_with_scalar) {
  std::mt19937 rng(4);
  for (ggml_type t : kTypes) {
    const int32_t k = 1024, rows = 23, m = 11;
    const kmat w = random_weights(t, rows, k, rng);
    const std::vector<uint8_t> act = quantize_acts(random_floats(static_cast<size_t>(m) * k, rng), m, k);
    const std::vector<float> ref = run_all(cpu_isa::scalar, w, act, m);
    double scale = 0;
    for (float v : ref) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    for (cpu_isa isa : isas()) {
      const std::vector<float> c = run_all(isa, w, act, m);
      size_t differ = 0;
      for (size_t i = 0; i < c.size(); ++i) {
        BOOST_TEST(std::fabs(c[i] - ref[i]) <= 1e-6 * scale);
        differ += same_bits(c[i], ref[i]) ? 0 : 1;
      }
      BOOST_TEST_MESSAGE(type_name(t) << " " << cpu_isa_name(isa) << ": " << differ << " results not bit-identical to scalar");
    }
  }
}

BOOST_AUTO_TEST_CASE(batch_invariant_over_m_and_row_splits) {
  std::mt19937 rng(5);
  for (ggml_type t : kTypes) {
    const int32_t k = 512, rows = 41;
    const kmat w = random_weights(t, rows, k, rng);
    const std::vector<float> x = random_floats(static_cast<size_t>(133) * k, rng);
    for (cpu_isa isa : isas()) {
      BOOST_TEST_CONTEXT(type_name(t) << " " << cpu_isa_name(isa)) {
        for (int32_t m : {37, 133}) {
          const std::vector<uint8_t> act = quantize_acts(x, m, k);
          const size_t rb = act.size() / m;
          const std::vector<float> whole = run_all(isa, w, act, m);
          for (int32_t tk = 0; tk < m; tk += (tk < 16 ? 1 : 7)) {
            const std::vector<uint8_t> one(act.begin() + static_cast<long>(rb * tk), act.begin() + static_cast<long>(rb * (tk + 1)));
            const std::vector<float> c1 = run_all(isa, w, one, 1);
            for (int32_t r = 0; r < rows; ++r) BOOST_TEST(same_bits(c1[r], whole[static_cast<size_t>(tk) * rows + r]));
          }
          for (int32_t split : {0, 5, 17}) {
            std::vector<float> c(whole.size(), -1.0f);
            if (split > 0) run(isa, w, w.raw.data(), 0, split, act, rb, m, c.data(), rows);
            run(isa, w, w.raw.data(), split, rows - split, act, rb, m, c.data(), rows);
            for (size_t i = 0; i < c.size(); ++i) BOOST_TEST(same_bits(c[i], whole[i]));
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(accumulate_ldc_unaligned_rows_and_large_m) {
  std::mt19937 rng(6);
  for (ggml_type t : kTypes) {
    const int32_t k = 256, rows = 13, m = 512, ldc = rows + 6;
    const kmat w = random_weights(t, rows, k, rng);
    const std::vector<uint8_t> act = quantize_acts(random_floats(static_cast<size_t>(m) * k, rng), m, k, 3);
    const size_t rb = act.size() / m;
    // An odd base address for the weights.
    std::vector<uint8_t> shifted(w.raw.size() + 1);
    std::memcpy(shifted.data() + 1, w.raw.data(), w.raw.size());
    for (cpu_isa isa : isas()) {
      BOOST_TEST_CONTEXT(type_name(t) << " " << cpu_isa_name(isa)) {
        std::vector<float> fresh(static_cast<size_t>(m) * ldc, 7.0f), acc(fresh.size()), odd(fresh.size(), 7.0f);
        run(isa, w, w.raw.data(), 0, rows, act, rb, m, fresh.data(), ldc);
        for (size_t i = 0; i < acc.size(); ++i) acc[i] = 0.25f * static_cast<float>(i % 17);
        const std::vector<float> before = acc;
        run(isa, w, w.raw.data(), 0, rows, act, rb, m, acc.data(), ldc, true);
        run(isa, w, shifted.data() + 1, 0, rows, act, rb, m, odd.data(), ldc);
        for (int32_t tk = 0; tk < m; ++tk)
          for (int32_t r = 0; r < ldc; ++r) {
            const size_t i = static_cast<size_t>(tk) * ldc + r;
            if (r < rows) {
              BOOST_TEST(same_bits(acc[i], before[i] + fresh[i]));
              BOOST_TEST(same_bits(odd[i], fresh[i]));
            } else {
              BOOST_TEST(fresh[i] == 7.0f);
              BOOST_TEST(same_bits(acc[i], before[i]));
            }
          }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(small_steps_are_batch_invariant_and_match_scalar) {
  // m = 1..5 (the 8-row small-step kernel up to kq::small_m, the token tiles above), taken from
  // inside a bigger run; row ranges whose offset and length are not multiples of the 8-row tile;
  // k = 768 and 4096, accumulate and a padded activation stride.
  std::mt19937 rng(7);
  for (ggml_type t : kTypes)
    for (int32_t k : {768, 4096}) {
      const int32_t rows = 29, big = 13;
      const kmat w = random_weights(t, rows, k, rng);
      const std::vector<uint8_t> act = quantize_acts(random_floats(static_cast<size_t>(big) * k, rng), big, k, 5);
      const size_t rb = act.size() / big;
      const std::vector<float> ref = run_all(cpu_isa::scalar, w, act, big);
      for (cpu_isa isa : isas()) {
        BOOST_TEST_CONTEXT(type_name(t) << " " << cpu_isa_name(isa) << " k=" << k) {
          const std::vector<float> whole = run_all(isa, w, act, big);
          for (size_t i = 0; i < whole.size(); ++i) BOOST_TEST(same_bits(whole[i], ref[i]));
          for (int32_t m = 1; m <= 5; ++m)
            for (int32_t t0 : {0, 3, big - m}) {
              const std::vector<uint8_t> sub(act.begin() + static_cast<long>(rb * t0), act.begin() + static_cast<long>(rb * (t0 + m)));
              for (auto [row0, n] : {std::pair{0, rows}, std::pair{3, 8}, std::pair{5, 19}, std::pair{27, 2}, std::pair{9, 1}}) {
                std::vector<float> c(static_cast<size_t>(m) * rows, -3.0f);
                run(isa, w, w.raw.data(), row0, n, sub, rb, m, c.data(), rows);
                std::vector<float> acc(c.size(), 0.5f);
                run(isa, w, w.raw.data(), row0, n, sub, rb, m, acc.data(), rows, true);
                for (int32_t tk = 0; tk < m; ++tk)
                  for (int32_t r = 0; r < rows; ++r) {
                    const size_t i = static_cast<size_t>(tk) * rows + r;
                    const float want = ref[static_cast<size_t>(t0 + tk) * rows + r];
                    const bool in = r >= row0 && r < row0 + n;
                    BOOST_TEST(same_bits(c[i], in ? want : -3.0f), "m=" << m << " t0=" << t0 << " rows " << row0 << "+" << n
                                                                         << " r=" << r << " t=" << tk);
                    BOOST_TEST(same_bits(acc[i], in ? 0.5f + want : 0.5f));
                  }
              }
            }
        }
      }
    }
  // Long rows (Llama-3-8B's k = 14336): m = 1..4 against scalar, bit for bit.
  for (ggml_type t : kTypes) {
    const int32_t k = 14336, rows = 11;
    const kmat w = random_weights(t, rows, k, rng);
    const std::vector<uint8_t> act = quantize_acts(random_floats(static_cast<size_t>(4) * k, rng), 4, k);
    const std::vector<float> ref = run_all(cpu_isa::scalar, w, act, 4);
    for (cpu_isa isa : isas())
      for (int32_t m = 1; m <= 4; ++m) {
        const std::vector<uint8_t> sub(act.begin(), act.begin() + static_cast<long>(act.size() / 4 * m));
        const std::vector<float> c = run_all(isa, w, sub, m);
        for (size_t i = 0; i < c.size(); ++i)
          BOOST_TEST(same_bits(c[i], ref[i]), type_name(t) << " " << cpu_isa_name(isa) << " k=14336 m=" << m << " i=" << i);
      }
  }
}

BOOST_AUTO_TEST_CASE(wide_steps_match_scalar_bit_for_bit) {
  // m >= kq::wide_m: the row-lane kernels (16-row groups on AVX-512, 8 on AVX2, unpacked once per call).
  // Row ranges that start and end inside a 16-row group, k = 256 (one block) and 14336 (the
  // next-block prefetch runs past the row), accumulate and a padded activation stride. 83 rows:
  // passes of kq::wide_groups groups (64 rows on AVX-512, 32 on AVX2) and a short last one.
  std::mt19937 rng(8);
  for (ggml_type t : kTypes)
    for (int32_t k : {256, 14336}) {
      const int32_t rows = 83, m = 40;
      const kmat w = random_weights(t, rows, k, rng);
      const std::vector<uint8_t> act = quantize_acts(random_floats(static_cast<size_t>(m) * k, rng), m, k, 7);
      const size_t rb = act.size() / m;
      const std::vector<float> ref = run_all(cpu_isa::scalar, w, act, m);
      for (cpu_isa isa : isas())
        for (int32_t mm : {kq::wide_m, kq::wide_m + 1, m})
          for (auto [row0, n] : {std::pair{0, rows}, std::pair{3, 16}, std::pair{5, 31}, std::pair{20, 17}}) {
            std::vector<float> c(static_cast<size_t>(mm) * rows, -3.0f), acc(c.size(), 0.5f);
            run(isa, w, w.raw.data(), row0, n, act, rb, mm, c.data(), rows);
            run(isa, w, w.raw.data(), row0, n, act, rb, mm, acc.data(), rows, true);
            size_t bad = 0;
            for (int32_t tk = 0; tk < mm; ++tk)
              for (int32_t r = 0; r < rows; ++r) {
                const size_t i = static_cast<size_t>(tk) * rows + r;
                const bool in = r >= row0 && r < row0 + n;
                bad += same_bits(c[i], in ? ref[i] : -3.0f) ? 0 : 1;
                bad += same_bits(acc[i], in ? 0.5f + ref[i] : 0.5f) ? 0 : 1;
              }
            BOOST_TEST(bad == 0u, type_name(t) << " " << cpu_isa_name(isa) << " k=" << k << " m=" << mm << " rows " << row0
                                               << "+" << n);
          }
    }
}

BOOST_AUTO_TEST_CASE(row_lane_sums_hold_at_extreme_values) {
  // The AVX2 row-lane kernel adds maddubs pair sums in int16 before widening (Q4_K 8 groups,
  // Q5_K 4, Q6_K 2): largest quants (every bit set, Q6_K scales 127) against activations of
  // +-127 make those sums as large as they get; random data never comes close.
  std::mt19937 rng(9);
  for (ggml_type t : kTypes) {
    const int32_t rows = 11, k = 512, m = kq::wide_m;
    kmat w = random_weights(t, rows, k, rng);
    const size_t bb = kq::block_bytes_of(t);
    for (size_t off = 0; off < w.raw.size(); off += bb)
      for (size_t i = 0; i < bb; ++i) {
        const bool scale_field = t == ggml_type::q6_k ? i >= 208 : i < 4;
        if (!scale_field) w.raw[off + i] = t == ggml_type::q6_k && i >= 192 ? 0x7F : 0xFF;
      }
    std::vector<float> x(static_cast<size_t>(m) * k);
    for (size_t i = 0; i < x.size(); ++i) x[i] = (i / static_cast<size_t>(k)) % 2 == 0 ? 1.0f : -1.0f;
    const std::vector<uint8_t> act = quantize_acts(x, m, k);
    const std::vector<float> ref = run_all(cpu_isa::scalar, w, act, m);
    for (cpu_isa isa : isas()) {
      const std::vector<float> c = run_all(isa, w, act, m);
      size_t bad = 0;
      for (size_t i = 0; i < c.size(); ++i) bad += same_bits(c[i], ref[i]) ? 0 : 1;
      BOOST_TEST(bad == 0u, type_name(t) << " " << cpu_isa_name(isa));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace
} // namespace conveyor::model
