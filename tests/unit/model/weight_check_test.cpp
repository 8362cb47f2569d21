// Weights that hold NaN or Inf are refused at load, naming the tensor (issue 26, defect 7): every
// value of F32/F16/BF16 tensors, and the fp16 block scales of the quantized types.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>

#include "model/formats/gguf.hpp"
#include "model/formats/gguf_writer.hpp"
#include "model/formats/llama_config.hpp"
#include "model/formats/weight_check.hpp"

using namespace conveyor::model;

namespace {

struct temp_gguf {
  std::string path = (std::filesystem::temp_directory_path() / ("conveyor-wcheck-" + std::to_string(::getpid()) + ".gguf")).string();
  ~temp_gguf() { std::filesystem::remove(path); }
  gguf_file write(const gguf_writer& w) {
    const auto bytes = w.serialize();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return gguf_file::open(path);
  }
};

gguf_writer base() {
  gguf_writer w;
  w.add_kv("general.architecture", "llama");
  const int64_t ne[] = {64, 2};
  std::vector<float> ok(128, 0.5f);
  w.add_tensor_f32("good.weight", ne, ok);
  return w;
}

// One Q8_0 block row: fp16 scale (1.0 = 0x3C00) then 32 int8 quants, two blocks.
std::vector<uint8_t> q8_0_blocks(uint16_t second_scale) {
  std::vector<uint8_t> b(2 * 34, 1);
  const uint16_t one = 0x3C00;
  std::memcpy(b.data(), &one, 2);
  std::memcpy(b.data() + 34, &second_scale, 2);
  return b;
}

} // namespace

BOOST_AUTO_TEST_SUITE(weight_check)

BOOST_AUTO_TEST_CASE(finite_weights_pass) {
  temp_gguf t;
  gguf_writer w = base();
  const int64_t ne[] = {64};
  const auto q = q8_0_blocks(0x3C00);
  w.add_tensor("q.weight", ggml_type::q8_0, ne, q);
  auto f = t.write(w);
  BOOST_TEST(find_non_finite_weight(f).empty());
  BOOST_CHECK_NO_THROW(check_weights_finite(f));
}

BOOST_AUTO_TEST_CASE(a_nan_in_an_f32_tensor_names_it) {
  temp_gguf t;
  gguf_writer w = base();
  const int64_t ne[] = {8};
  std::vector<float> v(8, 1.0f);
  v[5] = std::numeric_limits<float>::quiet_NaN();
  w.add_tensor_f32("blk.0.attn_norm.weight", ne, v);
  auto f = t.write(w);
  const std::string why = find_non_finite_weight(f);
  BOOST_TEST(why.find("blk.0.attn_norm.weight") != std::string::npos, why);
  BOOST_TEST(why.find("element 5 is NaN") != std::string::npos, why);
  try {
    check_weights_finite(f);
    BOOST_FAIL("a NaN weight must be refused");
  } catch (const model_error& e) {
    BOOST_TEST(std::string(e.what()).find(t.path) != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(inf_in_f16_and_a_bad_block_scale_are_found) {
  {
    temp_gguf t;
    gguf_writer w = base();
    const int64_t ne[] = {4};
    const uint16_t h[] = {0x3C00, 0x3C00, 0x7C00, 0x3C00};  // 1, 1, +Inf, 1
    w.add_tensor("output.weight", ggml_type::f16, ne, std::span(reinterpret_cast<const uint8_t*>(h), sizeof h));
    auto f = t.write(w);
    BOOST_TEST(find_non_finite_weight(f).find("'output.weight': element 2") != std::string::npos, find_non_finite_weight(f));
  }
  {
    temp_gguf t;
    gguf_writer w = base();
    const int64_t ne[] = {64};
    const auto q = q8_0_blocks(0x7E00);  // NaN scale in the second block
    w.add_tensor("blk.1.ffn_up.weight", ggml_type::q8_0, ne, q);
    auto f = t.write(w);
    const std::string why = find_non_finite_weight(f);
    BOOST_TEST(why.find("blk.1.ffn_up.weight") != std::string::npos, why);
    BOOST_TEST(why.find("block 1") != std::string::npos, why);
  }
}

BOOST_AUTO_TEST_SUITE_END()
