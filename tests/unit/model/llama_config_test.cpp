// llama_config reads GGUF metadata as llama.cpp does, and refuses what its graph would not run as
// written: tensors no graph reads (llama.cpp refuses the file or applies them), RoPE settings it
// does not implement.
#include <boost/test/unit_test.hpp>

#include "model/formats/gguf.hpp"
#include "model/formats/llama_config.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

llama_config config_of(const tiny_llama_spec& spec, const std::string& name) {
  const std::string path = testing::temp_path(name + ".gguf");
  write_tiny_llama(path, spec);
  return llama_config::from_gguf(gguf_file::open(path));
}

void expect_refused(const tiny_llama_spec& spec, const std::string& name, const std::string& needle) {
  BOOST_TEST_CONTEXT(name) {
    try {
      config_of(spec, name);
      BOOST_ERROR("no model_error");
    } catch (const model_error& e) {
      const std::string what = e.what();
      BOOST_TEST(what.find(needle) != std::string::npos, what);
      BOOST_TEST(what.find('\n') == std::string::npos, "one line: " << what);
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(llama_config_rules)

BOOST_AUTO_TEST_CASE(tensors_no_graph_reads_are_refused) {
  tiny_llama_spec s;
  s.extra_tensors = {"blk.0.ffn_up.bias"};
  expect_refused(s, "ffn_bias", "tensor 'blk.0.ffn_up.bias' is not part of the llama graph");
  tiny_llama_spec q;
  q.arch = "qwen2";
  q.rope_freqs = true;  // only llama's graph reads rope_freqs
  expect_refused(q, "qwen2_rope_freqs", "tensor 'rope_freqs.weight' is not part of the qwen2 graph");
}

BOOST_AUTO_TEST_CASE(optional_attention_biases_are_read_for_llama_and_qwen3) {
  tiny_llama_spec s;
  BOOST_TEST(!config_of(s, "plain").qkv_bias);
  s.attn_bias = true;
  BOOST_TEST(config_of(s, "llama_bias").qkv_bias);
  s.arch = "qwen3";
  BOOST_TEST(config_of(s, "qwen3_bias").qkv_bias);
}

BOOST_AUTO_TEST_CASE(rope_scaling_as_llama_cpp_reads_it) {
  tiny_llama_spec s;
  BOOST_TEST(config_of(s, "none").rope_freq_scale == 1.0f);
  s.rope_linear_factor = 4.0f;  // type "linear" + factor
  BOOST_TEST(config_of(s, "linear").rope_freq_scale == 0.25f);
  tiny_llama_spec legacy;  // no type key: linear; the older key name
  legacy.extra_f32_kv = {{"rope.scale_linear", 2.0f}};
  BOOST_TEST(config_of(legacy, "legacy").rope_freq_scale == 0.5f);
  tiny_llama_spec factor_only;
  factor_only.extra_f32_kv = {{"rope.scaling.factor", 8.0f}};
  BOOST_TEST(config_of(factor_only, "factor_only").rope_freq_scale == 0.125f);
  tiny_llama_spec attn;
  attn.extra_f32_kv = {{"rope.scaling.attn_factor", 0.5f}};
  expect_refused(attn, "attn_factor", "rope.scaling.attn_factor");
  tiny_llama_spec small;
  small.extra_f32_kv = {{"rope.scaling.factor", 0.5f}};
  expect_refused(small, "small_factor", "must be >= 1");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
