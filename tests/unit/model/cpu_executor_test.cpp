// The CPU executor's logits against the straightforward reference forward, on tiny random
// models covering every weight type, GQA, tied and untied heads and rope_freqs.
#include <boost/test/unit_test.hpp>

#include "greedy_driver.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "reference_forward.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

std::vector<token_id> test_prompt(int32_t n, int32_t vocab, int32_t salt = 0) {
  std::vector<token_id> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(3 + (i * 37 + salt * 11 + 5) % (vocab - 3));
  return t;
}

// One step over the whole prompt (or chunks of `chunk`); returns the last position's logits.
std::vector<float> executor_logits(const gguf_file& f, const std::vector<token_id>& prompt, bool match_llama_cpp, int32_t chunk = 0) {
  cpu_executor_options o;
  o.block_size = 4;
  o.num_kv_blocks = 64;
  o.match_llama_cpp = match_llama_cpp;
  o.math = cpu_math::exact;  // against the double reference; the fast mode: qgemv_test
  cpu_executor ex(f, o);
  std::vector<driven_seq> seqs(1);
  seqs[0].prompt = prompt;
  seqs[0].chunk = chunk;
  seqs[0].max_new = 1;
  run_greedy(ex, seqs, 64, [&](size_t k) {
    const int32_t v = ex.info().vocab_size;
    return std::vector<float>(ex.last_logits().begin() + static_cast<std::ptrdiff_t>(k) * v,
                              ex.last_logits().begin() + static_cast<std::ptrdiff_t>(k + 1) * v);
  });
  return seqs[0].first_logits;
}

tiny_llama_spec config_c() {  // MHA, untied Q8_0 head, F16 embeddings, Q4_0/Q5_0/Q5_1 layers
  tiny_llama_spec s;
  s.n_embd = 128;
  s.n_head = 4;
  s.n_head_kv = 4;
  s.attn_q = s.attn_k = ggml_type::q5_0;
  s.attn_v = s.attn_output = ggml_type::q5_1;
  s.set_ffn_types(ggml_type::q4_0);
  s.token_embd = ggml_type::f16;
  s.tied = false;
  s.output = ggml_type::q8_0;
  return s;
}

void check_against_reference(const tiny_llama_spec& spec, const std::string& name) {
  const std::string path = testing::temp_path(name + ".gguf");
  write_tiny_llama(path, spec);
  auto f = gguf_file::open(path);
  const auto prompt = test_prompt(23, static_cast<int32_t>(tiny_vocab(spec).size()));
  const auto ref = reference_logits(f, prompt, false);
  for (int32_t chunk : {0, 5}) {
    BOOST_TEST_CONTEXT(name << ", prompt chunk " << (chunk ? std::to_string(chunk) : "all")) {
      const auto got = executor_logits(f, prompt, false, chunk);
      BOOST_REQUIRE_EQUAL(got.size(), ref.size());
      BOOST_TEST(max_rel_error(got, ref) < 1e-4, "max relative error " << max_rel_error(got, ref));
      // llama.cpp's roundings (8-bit activations, fp16 KV) move logits by about a percent, no more.
      const auto rounded = executor_logits(f, prompt, true, chunk);
      BOOST_TEST(max_rel_error(rounded, ref) < 5e-2, "with llama.cpp rounding: " << max_rel_error(rounded, ref));
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(cpu_executor_logits)

BOOST_AUTO_TEST_CASE(logits_match_reference_q4_1_gqa_tied) { check_against_reference(tiny_config_a(), "config_a"); }

BOOST_AUTO_TEST_CASE(logits_match_reference_kquants_untied_rope_freqs) { check_against_reference(tiny_config_b(), "config_b"); }

BOOST_AUTO_TEST_CASE(logits_match_reference_qwen2_qkv_bias_neox) {
  tiny_llama_spec s = tiny_config_a();
  s.arch = "qwen2";
  s.rope_theta = 1000000.0f;
  check_against_reference(s, "qwen2");
}

BOOST_AUTO_TEST_CASE(logits_match_reference_qwen3_qk_norm_key_length) {
  tiny_llama_spec s = tiny_config_b();  // head dim 32 given as key_length: 4 heads of 32 in n_embd 256
  s.arch = "qwen3";
  s.key_length = 32;
  s.rope_freqs = false;
  check_against_reference(s, "qwen3");
}

BOOST_AUTO_TEST_CASE(logits_match_reference_llama_with_attention_bias) {
  tiny_llama_spec s = tiny_config_a();
  s.attn_bias = true;
  check_against_reference(s, "llama_bias");
}

BOOST_AUTO_TEST_CASE(logits_match_reference_linear_rope_scaling) {
  tiny_llama_spec s = tiny_config_a();
  s.rope_linear_factor = 4.0f;
  check_against_reference(s, "linear_rope");
}

BOOST_AUTO_TEST_CASE(logits_match_reference_legacy_quants_mha) { check_against_reference(config_c(), "config_c"); }

BOOST_AUTO_TEST_CASE(malformed_plans_are_rejected) {
  const std::string path = testing::temp_path("plans.gguf");
  write_tiny_llama(path, tiny_config_a());
  auto f = gguf_file::open(path);
  cpu_executor_options o;
  o.block_size = 4;
  o.num_kv_blocks = 4;
  cpu_executor ex(f, o);
  auto plan_with = [](std::vector<token_id> toks, std::vector<block_id> table, int32_t computed = 0) {
    step_plan p;
    p.seqs.push_back({1, computed, std::move(toks), std::move(table), true, {}, nullptr, {}, {}, 0});
    return p;
  };
  BOOST_CHECK_THROW(ex.step(plan_with({1, 2, 3, 4, 5}, {0})), std::invalid_argument);     // too few blocks
  BOOST_CHECK_THROW(ex.step(plan_with({1}, {9})), std::invalid_argument);                 // unknown block
  BOOST_CHECK_THROW(ex.step(plan_with({100000}, {0})), std::invalid_argument);            // token out of vocab
  BOOST_CHECK_THROW(ex.step(plan_with({}, {0})), std::invalid_argument);                  // empty
  BOOST_CHECK_THROW(ex.step(plan_with({1}, {0, 1, 2, 3}, 300)), std::invalid_argument);   // past max_model_len
  BOOST_TEST(ex.step(plan_with({1, 2}, {0})).sampled.size() == 1u);                       // and it still works
}

BOOST_AUTO_TEST_CASE(kv_pool_too_small_is_a_clear_error) {
  const std::string path = testing::temp_path("kv.gguf");
  write_tiny_llama(path, tiny_config_a());
  auto f = gguf_file::open(path);
  cpu_executor_options o;
  o.kv_cache_bytes = 100;
  try {
    cpu_executor ex(f, o);
    BOOST_FAIL("expected model_error");
  } catch (const model_error& e) {
    BOOST_TEST(std::string(e.what()).find("raise kv_cache_bytes") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(negative_attention_split_keys_is_a_clear_error) {
  const std::string path = testing::temp_path("split.gguf");
  write_tiny_llama(path, tiny_config_a());
  auto f = gguf_file::open(path);
  cpu_executor_options o;
  o.attention_split_keys = -1;
  try {
    cpu_executor ex(f, o);
    BOOST_FAIL("expected model_error");
  } catch (const model_error& e) {
    BOOST_TEST(std::string(e.what()) == "attention_split_keys must be >= 0 (0: never split)", e.what());
  }
  o.attention_split_keys = 0;  // never: a valid setting
  BOOST_CHECK_NO_THROW(cpu_executor(f, o));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
