// dequantize_row against gguf-py's numpy dequantizers (tests/data/dequant_vectors.bin, written
// by scripts/make_dequant_vectors.py): required BIT-EXACT. Plus fp16/bf16 conversion edge cases,
// exhaustive fp16 checks (against F16C where available), and quantize_row_ref round trips.
#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "model/formats/dequant.hpp"
#include "tiny_model.hpp"

using namespace conveyor::model;

namespace {

constexpr const char* vectors_hint = "HINT: re-run scripts/make_dequant_vectors.py";

struct vector_case {
  ggml_type type;
  uint32_t n_elements = 0;
  std::vector<uint8_t> raw;
  std::vector<float> expected;
};

/// Reads the golden file; any format problem is a test failure carrying the HINT.
std::vector<vector_case> load_vectors(std::string& stamp) {
  const std::string path = std::string(CONVEYOR_TEST_DATA) + "/dequant_vectors.bin";
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in.good(), path << " cannot be read. " << vectors_hint);
  const std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  const auto take = [&](void* dst, size_t n) {
    BOOST_REQUIRE_MESSAGE(pos + n <= b.size(), path << " is truncated at byte " << pos << ". " << vectors_hint);
    std::memcpy(dst, b.data() + pos, n);
    pos += n;
  };
  const auto u32 = [&] {
    uint32_t v = 0;
    take(&v, 4);
    return v;
  };
  char magic[4];
  take(magic, 4);
  BOOST_REQUIRE_MESSAGE(std::memcmp(magic, "CVDQ", 4) == 0, path << ": bad magic. " << vectors_hint);
  const uint32_t version = u32();
  BOOST_REQUIRE_MESSAGE(version == 1, path << ": format version " << version << ", expected 1. " << vectors_hint);
  const uint32_t n_cases = u32();
  stamp.resize(u32());
  take(stamp.data(), stamp.size());
  std::vector<vector_case> cases(n_cases);
  for (vector_case& c : cases) {
    c.type = static_cast<ggml_type>(u32());
    c.n_elements = u32();
    c.raw.resize(u32());
    take(c.raw.data(), c.raw.size());
    c.expected.resize(c.n_elements);
    take(c.expected.data(), c.expected.size() * sizeof(float));
    BOOST_REQUIRE_MESSAGE(is_dequantizable(c.type), path << ": case of type " << type_name(c.type) << ". " << vectors_hint);
    BOOST_REQUIRE_MESSAGE(c.raw.size() == c.n_elements / block_elems(c.type) * block_bytes(c.type),
                          path << ": " << type_name(c.type) << " byte count does not match. " << vectors_hint);
  }
  BOOST_REQUIRE_MESSAGE(pos == b.size(), path << ": trailing bytes. " << vectors_hint);
  return cases;
}

uint16_t half_bits(float f) { return fp32_to_fp16(f); }

} // namespace

BOOST_AUTO_TEST_SUITE(dequant)

BOOST_AUTO_TEST_CASE(matches_gguf_py_bit_exactly) {
  std::string stamp;
  const std::vector<vector_case> cases = load_vectors(stamp);
  BOOST_TEST_MESSAGE("dequant vectors from " << stamp);
  std::map<std::string, bool> seen;
  for (const vector_case& c : cases) {
    BOOST_TEST_CONTEXT(type_name(c.type) << " (vectors from " << stamp << ")") {
      seen[type_name(c.type)] = true;
      std::vector<float> got(c.n_elements, -12345.0f);
      dequantize_row(c.type, c.raw.data(), got.data(), c.n_elements);
      int mismatches = 0;
      for (uint32_t i = 0; i < c.n_elements; ++i) {
        if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(c.expected[i]) && ++mismatches <= 5) {
          BOOST_ERROR("element " << i << ": got " << got[i] << " expected " << c.expected[i] << " (bits 0x"
                                 << std::hex << std::bit_cast<uint32_t>(got[i]) << " vs 0x"
                                 << std::bit_cast<uint32_t>(c.expected[i]) << std::dec << ")");
        }
      }
      BOOST_TEST(mismatches == 0);
    }
  }
  for (const char* t : {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"}) {
    BOOST_CHECK_MESSAGE(seen[t], "no vectors for " << t << ". " << vectors_hint);
  }
}

BOOST_AUTO_TEST_CASE(fp16_edge_values) {
  BOOST_TEST(fp16_to_fp32(0x0000) == 0.0f);
  BOOST_TEST(std::signbit(fp16_to_fp32(0x8000)));
  BOOST_TEST(fp16_to_fp32(0x3C00) == 1.0f);
  BOOST_TEST(fp16_to_fp32(0xC000) == -2.0f);
  BOOST_TEST(fp16_to_fp32(0x7BFF) == 65504.0f);
  BOOST_TEST(fp16_to_fp32(0x0400) == std::ldexp(1.0f, -14));      // smallest normal
  BOOST_TEST(fp16_to_fp32(0x0001) == std::ldexp(1.0f, -24));      // smallest subnormal
  BOOST_TEST(fp16_to_fp32(0x03FF) == std::ldexp(1023.0f, -24));   // largest subnormal
  BOOST_TEST(fp16_to_fp32(0x8001) == -std::ldexp(1.0f, -24));
  BOOST_TEST(std::isinf(fp16_to_fp32(0x7C00)));
  BOOST_TEST(fp16_to_fp32(0xFC00) == -INFINITY);
  BOOST_TEST(std::isnan(fp16_to_fp32(0x7E00)));
  BOOST_TEST(std::isnan(fp16_to_fp32(0x7C01)));  // signalling NaN stays NaN (quietened), not inf

  BOOST_TEST(half_bits(1.0f) == 0x3C00);
  BOOST_TEST(half_bits(-0.0f) == 0x8000);
  BOOST_TEST(half_bits(65504.0f) == 0x7BFF);
  BOOST_TEST(half_bits(65519.996f) == 0x7BFF);  // below the midpoint to inf
  BOOST_TEST(half_bits(65520.0f) == 0x7C00);    // tie: 0x7BFF is odd, so rounds to inf
  BOOST_TEST(half_bits(1e9f) == 0x7C00);
  BOOST_TEST(half_bits(-INFINITY) == 0xFC00);
  BOOST_TEST(half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie -> even
  BOOST_TEST(half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie -> even (up)
  BOOST_TEST(half_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3C01);
  BOOST_TEST(half_bits(std::ldexp(1.0f, -24)) == 0x0001);
  BOOST_TEST(half_bits(std::ldexp(1.0f, -25)) == 0x0000);      // tie with 0 -> even (0)
  BOOST_TEST(half_bits(std::ldexp(1.5f, -25)) == 0x0001);
  BOOST_TEST(half_bits(std::ldexp(3.0f, -25)) == 0x0002);      // 1.5 ulp: tie -> even (2)
  BOOST_TEST(half_bits(std::ldexp(1023.5f, -24)) == 0x0400);   // rounds up into the normals
  BOOST_TEST(half_bits(std::ldexp(1.0f, -30)) == 0x0000);
  BOOST_TEST(half_bits(-std::ldexp(1.0f, -30)) == 0x8000);
  BOOST_TEST(half_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
  const uint16_t nan = half_bits(std::bit_cast<float>(0x7F800001u));  // payload only in low bits
  BOOST_TEST((nan & 0x7C00) == 0x7C00);
  BOOST_TEST((nan & 0x03FF) != 0);
}

BOOST_AUTO_TEST_CASE(fp16_exhaustive_round_trip_and_vector_path) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    all[h] = static_cast<uint16_t>(h);
  }
  std::vector<float> row(65536);
  dequantize_row(ggml_type::f16, all.data(), row.data(), 65536);  // SIMD path where available
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    const uint16_t back = fp32_to_fp16(f);
    const uint16_t want = is_nan ? static_cast<uint16_t>(h | 0x0200) : static_cast<uint16_t>(h);
    bad += back != want || std::bit_cast<uint32_t>(row[h]) != std::bit_cast<uint32_t>(f);
#if defined(__F16C__)
    bad += std::bit_cast<uint32_t>(_cvtsh_ss(static_cast<uint16_t>(h))) != std::bit_cast<uint32_t>(f);
#endif
  }
  BOOST_TEST(bad == 0);
}

#if defined(__F16C__)
BOOST_AUTO_TEST_CASE(fp32_to_fp16_matches_f16c_on_a_dense_sweep) {
  int bad = 0;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 251) {  // ~17M values, every exponent
    const float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    bad += fp32_to_fp16(f) != _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
  }
  BOOST_TEST(bad == 0);
}
#endif

BOOST_AUTO_TEST_CASE(bf16_conversions) {
  BOOST_TEST(bf16_to_fp32(0x3F80) == 1.0f);
  BOOST_TEST(bf16_to_fp32(0x0001) == std::bit_cast<float>(0x00010000u));  // subnormal kept
  BOOST_TEST(fp32_to_bf16(1.0f) == 0x3F80);
  BOOST_TEST(fp32_to_bf16(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // tie -> even
  BOOST_TEST(fp32_to_bf16(std::bit_cast<float>(0x3F818000u)) == 0x3F82);  // tie -> even (up)
  BOOST_TEST(fp32_to_bf16(std::bit_cast<float>(0x3F808001u)) == 0x3F81);
  BOOST_TEST(fp32_to_bf16(std::bit_cast<float>(0x00018000u)) == 0x0002);  // subnormal, tie -> even
  BOOST_TEST(fp32_to_bf16(-INFINITY) == 0xFF80);
  BOOST_TEST(fp32_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds to inf, as ggml
  BOOST_TEST(fp32_to_bf16(std::bit_cast<float>(0x7F800001u)) == 0x7FC0);  // sNaN -> quiet NaN
  BOOST_TEST(fp32_to_bf16(std::bit_cast<float>(0xFFC12345u)) == 0xFFC1);
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool is_nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
    if (!is_nan && fp32_to_bf16(bf16_to_fp32(static_cast<uint16_t>(h))) != h) {
      BOOST_ERROR("bf16 round trip fails for 0x" << std::hex << h);
    }
  }
}

BOOST_AUTO_TEST_CASE(quantize_ref_round_trips_within_one_step) {
  tiny_rng rng(3);
  std::vector<float> x(1024);
  for (float& v : x) {
    v = 0.02f * rng.normal();
  }
  // Worst-case error per type relative to max|x| of a block (half a quant step plus scale rounding).
  const std::map<ggml_type, float> bound{
      {ggml_type::f32, 0.0f},   {ggml_type::f16, 1e-3f},  {ggml_type::bf16, 4e-3f}, {ggml_type::q8_0, 0.01f},
      {ggml_type::q4_0, 0.07f}, {ggml_type::q4_1, 0.07f}, {ggml_type::q5_0, 0.04f}, {ggml_type::q5_1, 0.04f},
      {ggml_type::q4_k, 0.12f}, {ggml_type::q5_k, 0.07f}, {ggml_type::q6_k, 0.05f}};
  for (const auto& [t, rel] : bound) {
    BOOST_TEST_CONTEXT(type_name(t)) {
      const std::vector<uint8_t> q = quantize_row_ref(t, x);
      BOOST_TEST(q.size() == x.size() / block_elems(t) * block_bytes(t));
      std::vector<float> y(x.size());
      dequantize_row(t, q.data(), y.data(), static_cast<int64_t>(x.size()));
      float amax = 0, err = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        amax = std::max(amax, std::fabs(x[i]));
        err = std::max(err, std::fabs(x[i] - y[i]));
      }
      BOOST_TEST(err <= rel * amax, "max error " << err << " vs bound " << rel * amax);
    }
  }
  BOOST_CHECK_THROW(quantize_row_ref(ggml_type::q8_1, x), std::invalid_argument);
  BOOST_CHECK_THROW(quantize_row_ref(ggml_type::q4_k, std::span<const float>(x.data(), 100)), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(type_table) {
  BOOST_TEST(block_elems(ggml_type::q4_1) == 32u);
  BOOST_TEST(block_bytes(ggml_type::q4_1) == 20u);
  BOOST_TEST(block_bytes(ggml_type::q6_k) == 210u);
  BOOST_TEST(block_bytes(ggml_type::q8_1) == 36u);
  BOOST_TEST(block_bytes(ggml_type::q8_k) == 292u);
  BOOST_TEST(block_bytes(ggml_type::bf16) == 2u);
  BOOST_TEST(type_name(ggml_type::q5_k) == "Q5_K");
  BOOST_TEST(type_name(static_cast<ggml_type>(29)) == "IQ1_M");
  BOOST_TEST(block_bytes(static_cast<ggml_type>(29)) == 56u);
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 41u, 1000u}) {
    BOOST_TEST_CONTEXT("id " << id) {
      BOOST_TEST(block_elems(static_cast<ggml_type>(id)) == 0u);
      BOOST_TEST(type_name(static_cast<ggml_type>(id)) == "type" + std::to_string(id));
    }
  }
  BOOST_TEST(is_dequantizable(ggml_type::q6_k));
  BOOST_TEST(!is_dequantizable(ggml_type::q8_1));
  BOOST_TEST(!is_dequantizable(ggml_type::q2_k));
  BOOST_TEST(!is_dequantizable(static_cast<ggml_type>(20)));
}

BOOST_AUTO_TEST_SUITE_END()
