// qgemv (fused dequantize-and-dot kernels) against a naive double reference over the
// dequantize_row() matrix: every supported block type, 1..9 tokens (every kernel width) and more
// up to 35 (groups of 8 plus a rest), odd row counts, several block counts,
// accumulate on/off, both ISAs; bit-exact weights (one-hot activations), stacked parts of mixed
// types, row ranges, and the pool split.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <thread>
#include <vector>

#include "greedy_driver.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/cpu/qgemv.hpp"
#include "model/cpu/qgemv_pool.hpp"
#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "reference_forward.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

const ggml_type kTypes[] = {ggml_type::f16, ggml_type::q4_0, ggml_type::q4_1,
                            ggml_type::q5_0, ggml_type::q5_1, ggml_type::q8_0};

/// A random (rows, k) matrix quantized to `t` and appended to q; returns its dequantized rows.
std::vector<float> add_random_part(qmatrix& q, ggml_type t, int32_t rows, int32_t k, tiny_rng& rng) {
  std::vector<float> x(static_cast<size_t>(rows) * k);
  for (float& v : x) v = 0.05f * rng.normal() + (t == ggml_type::q4_1 || t == ggml_type::q5_1 ? 0.01f : 0.0f);
  // qmatrix only views its blocks: they live as long as the test binary.
  static std::deque<std::vector<uint8_t>> blocks;
  const std::vector<uint8_t>& raw = blocks.emplace_back(quantize_row_ref(t, x));
  BOOST_REQUIRE(q.append(t, raw.data(), rows, k));
  std::vector<float> deq(x.size());
  dequantize_row(t, raw.data(), deq.data(), static_cast<int64_t>(deq.size()));
  return deq;
}

std::vector<float> random_vec(size_t n, tiny_rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

/// C(m, n) = A · W^T (+ c0) in double.
std::vector<double> reference(const std::vector<float>& w, const std::vector<float>& a, const std::vector<float>& c0,
                              int32_t m, int32_t n, int32_t k, bool accumulate) {
  std::vector<double> c(static_cast<size_t>(m) * n);
  for (int32_t t = 0; t < m; ++t)
    for (int32_t r = 0; r < n; ++r) {
      double s = accumulate ? c0[static_cast<size_t>(t) * n + r] : 0.0;
      for (int32_t j = 0; j < k; ++j) s += double{a[static_cast<size_t>(t) * k + j]} * w[static_cast<size_t>(r) * k + j];
      c[static_cast<size_t>(t) * n + r] = s;
    }
  return c;
}

// Errors below are max_rel_error() (reference_forward.hpp): max |got - ref| / max |ref|.

std::vector<qgemv_isa> isas() {
  std::vector<qgemv_isa> v{qgemv_isa::scalar};
  if (qgemv_isa_available(qgemv_isa::avx2)) v.push_back(qgemv_isa::avx2);
  else BOOST_TEST_MESSAGE("this CPU lacks AVX2/FMA/F16C: only the scalar kernel is tested");
  return v;
}

const char* isa_name(qgemv_isa i) { return i == qgemv_isa::avx2 ? "avx2" : "scalar"; }

} // namespace

BOOST_AUTO_TEST_SUITE(qgemv_kernels)

BOOST_AUTO_TEST_CASE(every_type_matches_double_reference) {
  tiny_rng rng(7);
  for (ggml_type t : kTypes)
    for (int32_t k : {32, 96, 320, 1536})
      for (int32_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 32, 35})
        for (bool acc : {false, true}) {
          const int32_t n = 37;
          qmatrix q;
          const std::vector<float> w = add_random_part(q, t, n, k, rng);
          const std::vector<float> a = random_vec(static_cast<size_t>(m) * k, rng);
          const std::vector<float> c0 = random_vec(static_cast<size_t>(m) * n, rng);
          const std::vector<double> ref = reference(w, a, c0, m, n, k, acc);
          std::vector<float> by_isa[2];
          for (qgemv_isa isa : isas()) {
            std::vector<float> c = c0;
            qgemv_rows(isa, q, a.data(), c.data(), m, acc, 0, n);
            BOOST_TEST(max_rel_error(c, ref) <= 1e-5, type_name(t) << " k=" << k << " m=" << m << " accumulate=" << acc << " "
                                                     << isa_name(isa) << ": relative error " << max_rel_error(c, ref));
            by_isa[static_cast<int>(isa)] = std::move(c);
          }
          if (!by_isa[1].empty()) {  // scalar against AVX2 directly
            std::vector<double> s(by_isa[0].begin(), by_isa[0].end());
            BOOST_TEST(max_rel_error(by_isa[1], s) <= 1e-5, type_name(t) << " k=" << k << " m=" << m << " scalar vs avx2");
          }
        }
}

BOOST_AUTO_TEST_CASE(weights_are_bit_identical_to_dequantize_row) {
  // One-hot activations pick single weights: 1*w plus exact zeros, so C must equal W exactly.
  tiny_rng rng(11);
  for (ggml_type t : kTypes) {
    const int32_t n = 9, k = 128, m = 8;
    qmatrix q;
    const std::vector<float> w = add_random_part(q, t, n, k, rng);
    for (qgemv_isa isa : isas())
      for (int32_t j0 = 0; j0 < k; j0 += m) {
        std::vector<float> a(static_cast<size_t>(m) * k, 0.0f), c(static_cast<size_t>(m) * n);
        for (int32_t i = 0; i < m; ++i) a[static_cast<size_t>(i) * k + j0 + i] = 1.0f;
        qgemv_rows(isa, q, a.data(), c.data(), m, false, 0, n);
        int32_t bad = 0;
        for (int32_t i = 0; i < m; ++i)
          for (int32_t r = 0; r < n; ++r) bad += c[static_cast<size_t>(i) * n + r] != w[static_cast<size_t>(r) * k + j0 + i];
        BOOST_TEST(bad == 0, type_name(t) << " " << isa_name(isa) << " columns " << j0 << ".." << j0 + m - 1
                                          << ": " << bad << " weights differ from dequantize_row");
      }
  }
}

BOOST_AUTO_TEST_CASE(stacked_parts_row_ranges_and_pool_split) {
  tiny_rng rng(3);
  const int32_t k = 192;
  qmatrix q;
  std::vector<float> w = add_random_part(q, ggml_type::q4_1, 45, k, rng);
  for (auto [t, rows] : {std::pair{ggml_type::q8_0, 17}, std::pair{ggml_type::f16, 3}, std::pair{ggml_type::q5_0, 70}}) {
    const std::vector<float> p = add_random_part(q, t, rows, k, rng);
    w.insert(w.end(), p.begin(), p.end());
  }
  const int32_t n = q.rows();
  BOOST_REQUIRE_EQUAL(n, 135);
  BOOST_REQUIRE_EQUAL(q.parts().size(), 4u);
  spinning_pool pool(3);
  for (int32_t m : {1, 5, 32})
    for (qgemv_isa isa : isas()) {
      const std::vector<float> a = random_vec(static_cast<size_t>(m) * k, rng);
      const std::vector<float> c0 = random_vec(static_cast<size_t>(m) * n, rng);
      // Rows [30, 100) straddle three parts; every other row keeps its old value.
      std::vector<float> c = c0;
      qgemv_rows(isa, q, a.data(), c.data(), m, true, 30, 100);
      const std::vector<double> ref = reference(w, a, c0, m, n, k, true);
      std::vector<float> in_range;
      std::vector<double> ref_in_range;
      int32_t touched_outside = 0;
      for (size_t i = 0; i < c.size(); ++i) {
        const bool in = i % n >= 30 && i % n < 100;  // row i % n of token i / n
        if (in) in_range.push_back(c[i]), ref_in_range.push_back(ref[i]);
        touched_outside += !in && c[i] != c0[i];
      }
      const double err = max_rel_error(in_range, ref_in_range);
      BOOST_TEST(err <= 1e-5, isa_name(isa) << " m=" << m << " row range error " << err);
      BOOST_TEST(touched_outside == 0, isa_name(isa) << " wrote rows outside [30, 100)");
      // The pool split runs the same kernel per row: bit-identical to one call over all rows.
      std::vector<float> whole = c0, split = c0;
      qgemv_rows(isa, q, a.data(), whole.data(), m, false, 0, n);
      qgemv(pool, q, a.data(), split.data(), m, false, isa);
      BOOST_TEST((whole == split), isa_name(isa) << " m=" << m << ": pool split differs from a single call");
      BOOST_TEST(max_rel_error(whole, reference(w, a, c0, m, n, k, false)) <= 1e-5);
    }
}

BOOST_AUTO_TEST_CASE(unsupported_layouts_are_refused) {
  const std::vector<uint8_t> raw(4096, 0);
  qmatrix q;
  BOOST_TEST(!q.append(ggml_type::q4_k, raw.data(), 2, 64));  // not a multiple of the 256-element block
  BOOST_TEST(!q.append(ggml_type::q2_k, raw.data(), 2, 256));  // a type the kernels do not read
  BOOST_TEST(!q.append(ggml_type::f16, raw.data(), 2, 48));  // not a multiple of 32
  BOOST_TEST(!q.append(ggml_type::q8_0, raw.data(), 0, 64));  // no rows
  BOOST_TEST(q.empty());
  BOOST_TEST(q.append(ggml_type::q8_0, raw.data(), 3, 64));
  BOOST_TEST(!q.append(ggml_type::q8_0, raw.data(), 3, 96));  // another k
  BOOST_TEST(q.rows() == 3);
  BOOST_TEST(q.bytes() == 3u * 2u * 34u);
  q.clear();
  BOOST_TEST(q.empty());
  BOOST_TEST(q.rows() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(qgemv_executor)

// The fast mode's bound on a tiny random model's logits against the double reference, relative
// to the largest logit: 8-bit activations carry ~0.4% rounding per element (1/254 of a block's
// largest value); measured 0.3-1.3% on these configs (every ISA).
constexpr double kFastLogitError = 3e-2;

// A 23-token prompt in one step, every block type of the three configs (K-quants and BF16 in B):
// the exact mode (qgemv, f32 activations) must match the double reference as cpu_executor_logits
// requires; the fast mode (8-bit activations, qmm) within its stated bound (kFastLogitError).
BOOST_AUTO_TEST_CASE(exact_and_fast_math_match_reference) {
  tiny_llama_spec legacy;  // 4 heads MHA, untied Q8_0 head, F16 embeddings, Q5_0/Q5_1/Q4_0 layers
  legacy.n_head = legacy.n_head_kv = 4;
  legacy.attn_q = legacy.attn_k = ggml_type::q5_0;
  legacy.attn_v = legacy.attn_output = ggml_type::q5_1;
  legacy.set_ffn_types(ggml_type::q4_0);
  legacy.token_embd = ggml_type::f16;
  legacy.tied = false;
  legacy.output = ggml_type::q8_0;
  const std::pair<const char*, tiny_llama_spec> specs[] = {{"a", tiny_config_a()}, {"b", tiny_config_b()}, {"legacy", legacy}};
  for (const auto& [name, spec] : specs) {
    const std::string path = testing::temp_path(std::string("qgemv_") + name + ".gguf");
    write_tiny_llama(path, spec);
    auto f = gguf_file::open(path);
    std::vector<token_id> prompt;
    for (int32_t i = 0; i < 23; ++i) prompt.push_back(3 + (i * 37 + 5) % 250);
    const std::vector<double> ref = reference_logits(f, prompt, false);
    std::vector<std::pair<cpu_math, cpu_isa>> modes{{cpu_math::exact, cpu_best_isa()}};
    for (cpu_isa isa : {cpu_isa::scalar, cpu_isa::avx2, cpu_isa::avxvnni, cpu_isa::avx512})  // the fast mode on every kernel set
      if (cpu_isa_available(isa)) modes.emplace_back(cpu_math::fast, isa);
    for (const auto& [math, isa] : modes) {
      cpu_executor_options o;
      o.block_size = 4;
      o.num_kv_blocks = 64;
      o.match_llama_cpp = false;
      o.math = math;
      o.isa = isa;
      cpu_executor ex(f, o);
      std::vector<driven_seq> seqs(1);
      seqs[0].prompt = prompt;
      seqs[0].max_new = 1;
      run_greedy(ex, seqs, 64, [&](size_t) { return ex.last_logits(); });
      const double err = max_rel_error(seqs[0].first_logits, ref);
      BOOST_TEST_MESSAGE("config " << name << ", math " << to_string(math) << " (" << cpu_isa_name(isa)
                                    << "): max relative logit error " << err);
      BOOST_TEST(err < (math == cpu_math::exact ? 1e-4 : kFastLogitError),
                 "config " << name << ", math " << to_string(math) << " " << cpu_isa_name(isa) << ": max relative error " << err);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(qgemv_pool)

BOOST_AUTO_TEST_CASE(every_item_runs_once_spinning_blocking_and_after_sleep) {
  spinning_pool pool(3, 50);
  BOOST_REQUIRE_EQUAL(pool.size(), 3);
  std::vector<int32_t> hits;
  for (int32_t round = 0; round < 400; ++round) {
    if (round == 200) pool.set_spin_us(0);  // workers now block between loops
    if (round % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // spin expires
    const int64_t n = 1 + round % 37;
    hits.assign(static_cast<size_t>(n), 0);
    std::atomic<int32_t> bad_thread{0};
    pool.parallel_for(n, [&](int64_t i, int32_t thread) {
      ++hits[static_cast<size_t>(i)];  // distinct i per call: no race
      if (thread < 0 || thread >= pool.size()) ++bad_thread;
    });
    BOOST_TEST(std::count(hits.begin(), hits.end(), 1) == n, "round " << round);
    BOOST_TEST(bad_thread.load() == 0);
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
