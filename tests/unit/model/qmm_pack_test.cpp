// Weights repacked at load (qmm_pack_rows, qmatrix::pack, cpu_executor_options::pack_weights):
// the packed rows give the raw rows' bits in every path (m, k, group offsets, a short last
// group, accumulate), through cpu_matmul's row split and through whole models; every ISA gives
// the scalar kernel's bits for the quantized legacy types; packing is refused where an ISA has
// no layout; release_pages leaves other memory alone.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "greedy_driver.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/cpu/cpu_matmul.hpp"
#include "model/cpu/qgemv_pool.hpp"
#include "model/cpu/qmm.hpp"
#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

const ggml_type kPacked[] = {ggml_type::q4_0, ggml_type::q4_1, ggml_type::q5_0, ggml_type::q5_1, ggml_type::q8_0};

size_t row_bytes(ggml_type t, int32_t k) { return static_cast<size_t>(k) / block_elems(t) * block_bytes(t); }

/// Random blocks with small fp16 scales (and mins), every other byte random.
std::vector<uint8_t> random_rows(ggml_type t, int32_t rows, int32_t k, std::mt19937& g) {
  std::vector<uint8_t> w(row_bytes(t, k) * static_cast<size_t>(rows));
  std::uniform_real_distribution<float> ud(0.002f, 0.01f), um(-0.1f, 0.02f);
  if (t == ggml_type::f16) {
    std::normal_distribution<float> nd(0.0f, 0.05f);
    for (size_t i = 0; i < w.size(); i += 2) {
      const uint16_t h = fp32_to_fp16(nd(g));
      std::memcpy(&w[i], &h, 2);
    }
    return w;
  }
  for (uint8_t& b : w) b = static_cast<uint8_t>(g());
  for (size_t at = 0; at < w.size(); at += block_bytes(t)) {
    const uint16_t d = fp32_to_fp16(ud(g)), m = fp32_to_fp16(um(g));
    std::memcpy(&w[at], &d, 2);
    if (t == ggml_type::q4_1 || t == ggml_type::q5_1) std::memcpy(&w[at + 2], &m, 2);
  }
  return w;
}

std::vector<uint8_t> quantized_acts(ggml_type t, int32_t m, int32_t k, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m) * k);
  for (float& v : x) v = nd(g);
  const act_format f = act_format_for(t);
  std::vector<uint8_t> a(act_row_bytes(f, k) * static_cast<size_t>(m));
  for (int32_t i = 0; i < m; ++i)
    quantize_act_row(cpu_isa::scalar, f, &x[static_cast<size_t>(i) * k], &a[act_row_bytes(f, k) * i], k);
  return a;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(qmm_pack)

BOOST_AUTO_TEST_CASE(packed_rows_give_the_raw_rows_bits) {
  std::mt19937 g(17);
  size_t compared = 0, isas = 0;
  for (cpu_isa isa : {cpu_isa::avx2, cpu_isa::avxvnni, cpu_isa::avx512}) {
    if (!cpu_isa_available(isa)) {
      BOOST_TEST_MESSAGE("this CPU has no " << cpu_isa_name(isa) << ": its packed layout is not tested here");
      continue;
    }
    ++isas;
    for (ggml_type t : kPacked)
      // nb 1, 2, 7, 15, 18, 31, 48; 37 rows: groups of 16, 16 and a short one of 5
      for (int32_t k : {32, 64, 224, 480, 576, 992, 1536}) {
        BOOST_TEST_CONTEXT(cpu_isa_name(isa) << " " << type_name(t) << " k=" << k) {
          BOOST_TEST(qmm_packs(isa, t));
          const int32_t rows = 37, m_all = 40;
          const std::vector<uint8_t> w = random_rows(t, rows, k, g), act = quantized_acts(t, m_all, k, g);
          std::vector<uint8_t> packed(w.size());
          qmm_pack_rows(isa, t, w.data(), rows, k, packed.data());
          if (k > 32) BOOST_TEST((packed != w));  // a layout of its own, not a copy
          const size_t stride = act_row_bytes(act_format_for(t), k);
          for (int32_t m : {1, 2, 5, 9, 16, 40})
            for (int32_t r0 : {0, 16})  // packed jobs start at a group
              for (bool acc : {false, true}) {
                const int32_t n = rows - r0;
                std::vector<float> raw(static_cast<size_t>(m) * n, 0.5f), pk = raw;
                qmm_job j{t, w.data() + row_bytes(t, k) * r0, row_bytes(t, k), n, k, act.data(), stride, m, raw.data(), n, acc};
                qmm_run(isa, j);
                j.w = packed.data() + row_bytes(t, k) * r0;
                j.packed = true;
                j.c = pk.data();
                qmm_run(isa, j);
                BOOST_TEST(same_bits(raw, pk), "m=" << m << " r0=" << r0 << " accumulate=" << acc);
                ++compared;
              }
        }
      }
  }
  BOOST_TEST(compared == isas * 5u * 7u * 24u);
}

// Every kernel of the quantized legacy types takes qmm_rl.hpp's float order lane by lane (rows
// in lanes, no horizontal sum), so AVX2, AVX-VNNI and AVX-512, raw or packed rows, any m, give the scalar
// kernel's bits. Extreme blocks too: full-scale weights (Q8_0 -128, nibbles 15) against
// activations of +-127, where an int16 sum would saturate if the kernels summed too far.
BOOST_AUTO_TEST_CASE(every_isa_gives_the_scalar_kernels_bits) {
  std::mt19937 g(23);
  size_t compared = 0;
  for (ggml_type t : kPacked)
    for (int32_t k : {32, 224, 576, 1536})
      for (bool extreme : {false, true}) {
        BOOST_TEST_CONTEXT(type_name(t) << " k=" << k << (extreme ? " extreme" : "")) {
          const int32_t rows = 35, m_all = 11;
          std::vector<uint8_t> w = random_rows(t, rows, k, g), act = quantized_acts(t, m_all, k, g);
          const size_t stride = act_row_bytes(act_format_for(t), k);
          if (extreme) {
            const size_t bb = block_bytes(t);
            for (size_t at = 0; at < w.size(); at += bb)  // every quant byte at its largest magnitude
              for (size_t i = t == ggml_type::q4_1 || t == ggml_type::q5_1 ? 4 : 2; i < bb; ++i)  // past d (and m)
                w[at + i] = t == ggml_type::q8_0 ? 0x80 : 0xFF;
            for (int32_t r = 0; r < m_all; ++r)
              for (int32_t i = 0; i < k; ++i) act[stride * r + i] = static_cast<uint8_t>(r % 2 ? 127 : -127);
          }
          for (int32_t m : {1, 2, 5, 8, 11}) {
            std::vector<float> want(static_cast<size_t>(m) * rows, 0.25f);
            qmm_job j{t, w.data(), row_bytes(t, k), rows, k, act.data(), stride, m, want.data(), rows, true};
            qmm_run(cpu_isa::scalar, j);
            for (cpu_isa isa : {cpu_isa::avx2, cpu_isa::avxvnni, cpu_isa::avx512}) {
              if (!cpu_isa_available(isa)) continue;
              std::vector<uint8_t> packed(w.size());
              qmm_pack_rows(isa, t, w.data(), rows, k, packed.data());
              for (bool pk : {false, true}) {
                std::vector<float> got(want.size(), 0.25f);
                qmm_job o = j;
                o.c = got.data();
                o.w = pk ? packed.data() : w.data();
                o.packed = pk;
                qmm_run(isa, o);
                BOOST_TEST(same_bits(want, got), cpu_isa_name(isa) << (pk ? " packed" : " raw") << " m=" << m);
                ++compared;
              }
            }
          }
        }
      }
  BOOST_TEST(compared > 0u);
}

BOOST_AUTO_TEST_CASE(packing_is_refused_where_no_layout_exists) {
  for (ggml_type t : kPacked) BOOST_TEST(!qmm_packs(cpu_isa::scalar, t));
  for (cpu_isa isa : {cpu_isa::avx2, cpu_isa::avxvnni, cpu_isa::avx512})
    for (ggml_type t : {ggml_type::f32, ggml_type::f16, ggml_type::bf16, ggml_type::q4_k, ggml_type::q6_k})
      BOOST_TEST(!qmm_packs(isa, t));
  std::vector<uint8_t> w(row_bytes(ggml_type::q4_1, 64) * 2), out(w.size());
  BOOST_CHECK_THROW(qmm_pack_rows(cpu_isa::scalar, ggml_type::q4_1, w.data(), 2, 64, out.data()), std::invalid_argument);
  BOOST_CHECK_THROW(qmm_pack_rows(cpu_isa::avx2, ggml_type::f16, w.data(), 2, 64, out.data()), std::invalid_argument);
  // A packed job on an ISA that cannot read it is an error, not garbage.
  std::vector<uint8_t> act(act_row_bytes(act_format::q8_1, 64));
  std::vector<float> c(2);
  qmm_job j{ggml_type::q4_1, w.data(), row_bytes(ggml_type::q4_1, 64), 2, 64, act.data(), act.size(), 1, c.data(), 2, false};
  j.packed = true;
  BOOST_CHECK_THROW(qmm_run(cpu_isa::scalar, j), std::invalid_argument);
}

// A matrix of mixed parts (Q4_1, F16, Q8_0 rows): pack() repacks the two it has a layout for and
// says which; cpu_matmul over the packed matrix gives the unpacked one's bits at every m, on
// every ISA (a matrix packed for another ISA is read raw).
static void check_packed_matrix(cpu_isa isa) {
  std::mt19937 g(5);
  const int32_t k = 576;
  const std::vector<uint8_t> a = random_rows(ggml_type::q4_1, 70, k, g), b = random_rows(ggml_type::f16, 9, k, g),
                             c = random_rows(ggml_type::q8_0, 41, k, g);
  qmatrix raw;
  BOOST_REQUIRE(raw.append(ggml_type::q4_1, a.data(), 70, k));
  BOOST_REQUIRE(raw.append(ggml_type::f16, b.data(), 9, k));
  BOOST_REQUIRE(raw.append(ggml_type::q8_0, c.data(), 41, k));
  qmatrix packed = raw;
  const std::vector<qmatrix::part> done = packed.pack(isa);
  const bool packs = qmm_packs(isa, ggml_type::q4_1);
  BOOST_TEST(done.size() == (packs ? 2u : 0u));
  BOOST_TEST(packed.packed_bytes() == (packs ? a.size() + c.size() : 0u));
  BOOST_TEST(packed.pack(isa).empty());  // once only
  spinning_pool pool(2);
  cpu_matmul mm(cpu_math::fast, isa);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int32_t m : {1, 3, 40}) {
    std::vector<float> x(static_cast<size_t>(m) * k);
    for (float& v : x) v = nd(g);
    std::vector<float> want(static_cast<size_t>(m) * raw.rows()), got(want.size());
    mm.run(pool, raw, x.data(), m, want.data(), false);
    mm.run(pool, packed, x.data(), m, got.data(), false);
    BOOST_TEST(same_bits(want, got), "m=" << m);
    if (isa != cpu_isa::scalar) {  // read by a matmul of another ISA: raw rows, that ISA's bits
      cpu_matmul other(cpu_math::fast, cpu_isa::scalar);
      std::vector<float> want_s(want.size()), got_s(want.size());
      other.run(pool, raw, x.data(), m, want_s.data(), false);
      other.run(pool, packed, x.data(), m, got_s.data(), false);
      BOOST_TEST(same_bits(want_s, got_s), "scalar m=" << m);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_packed_matrix_multiplies_as_the_raw_one) {
  for (cpu_isa isa : {cpu_isa::scalar, cpu_isa::avx2, cpu_isa::avxvnni, cpu_isa::avx512})
    if (cpu_isa_available(isa)) BOOST_TEST_CONTEXT(cpu_isa_name(isa)) { check_packed_matrix(isa); }
}

// Whole models: logits bit for bit with and without packing (the legacy-type tiny model and
// SmolLM2), greedy, a prompt then decodes, two sequences at once.
BOOST_AUTO_TEST_CASE(models_give_the_same_logits_packed_or_not) {
  const std::string tiny = testing::temp_path("pack_tiny_a.gguf");
  write_tiny_llama(tiny, tiny_config_a());
  for (const std::string& path : {tiny, testing::smollm2_path()}) {
    BOOST_TEST_CONTEXT(path) {
      const gguf_file f = gguf_file::open(path);
      uint64_t hash[2] = {0, 0};
      std::vector<token_id> out[2];
      for (int pack = 0; pack < 2; ++pack) {
        cpu_executor_options o;
        o.block_size = 16;
        o.num_kv_blocks = 2 * 8;
        o.pack_weights = pack == 1;
        cpu_executor ex(f, o);
        std::vector<driven_seq> seqs(2);
        for (int s = 0; s < 2; ++s) {
          for (int32_t i = 0; i < 30 + 9 * s; ++i) seqs[s].prompt.push_back(5 + (i * 31 + s * 7) % 200);
          seqs[s].max_new = 10;
          seqs[s].start_step = s;
        }
        run_greedy(ex, seqs, 8, [&ex](size_t r) {
          const int32_t v = ex.info().vocab_size;
          return std::vector<float>(ex.last_logits().begin() + static_cast<std::ptrdiff_t>(r) * v,
                                    ex.last_logits().begin() + static_cast<std::ptrdiff_t>(r + 1) * v);
        });
        hash[pack] = seqs[0].logits_hash ^ (seqs[1].logits_hash * 31);
        out[pack] = seqs[0].out;
        out[pack].insert(out[pack].end(), seqs[1].out.begin(), seqs[1].out.end());
        if (pack == 1 && qmm_packs(cpu_best_isa(), ggml_type::q4_1))  // (scalar hosts pack nothing)
          BOOST_TEST(ex.compute_summary().find("repacked for") != std::string::npos, ex.compute_summary());
      }
      BOOST_TEST(hash[0] == hash[1]);
      BOOST_TEST(out[0] == out[1], boost::test_tools::per_element());
    }
  }
}

// release_pages: the mapping's bytes read back the same afterwards (faulted in again); memory
// that is not the mapping's is left alone.
BOOST_AUTO_TEST_CASE(released_pages_read_back_and_other_memory_is_untouched) {
  const std::string path = testing::temp_path("pack_release.gguf");
  write_tiny_llama(path, tiny_config_a());
  const gguf_file f = gguf_file::open(path);
  const gguf_tensor_info* t = f.find_tensor("token_embd.weight");
  BOOST_REQUIRE(t != nullptr);
  const uint8_t* p = f.tensor_data(*t);
  const size_t n = static_cast<size_t>(t->nbytes);
  const std::vector<uint8_t> before(p, p + n);
  f.release_pages(p, n);
  BOOST_TEST(std::memcmp(before.data(), p, n) == 0);
  std::vector<uint8_t> heap(1 << 16, 0xAB);
  f.release_pages(heap.data(), heap.size());
  BOOST_TEST(std::count(heap.begin(), heap.end(), 0xAB) == static_cast<std::ptrdiff_t>(heap.size()));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
