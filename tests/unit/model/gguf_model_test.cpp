// Reads whole Llama GGUFs: the tiny_model fixtures (configs A and B of model-format.md §6.1) and
// the real SmolLM2-135M-Instruct Q4_1 file. A missing real file is a failure with a HINT, not a skip.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"
#include "tiny_model.hpp"

namespace fs = std::filesystem;
using namespace conveyor::model;

namespace {

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("conveyor_gguf_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

fs::path model_cache_dir() {
  if (const char* c = std::getenv("CONVEYOR_CACHE"); c != nullptr && *c != '\0') {
    return c;
  }
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : "/root") / ".cache" / "conveyor" / "models";
}

/// Mean and standard deviation of a dequantized tensor.
std::pair<double, double> stats(const gguf_file& f, const gguf_tensor_info& t) {
  std::vector<float> v(static_cast<size_t>(t.num_elements()));
  dequantize_row(t.type, f.tensor_data(t), v.data(), t.num_elements());
  double s = 0, s2 = 0;
  for (float x : v) {
    s += x;
    s2 += double{x} * x;
  }
  const double mean = s / static_cast<double>(v.size());
  return {mean, std::sqrt(s2 / static_cast<double>(v.size()) - mean * mean)};
}

} // namespace

BOOST_AUTO_TEST_SUITE(gguf_model)

BOOST_AUTO_TEST_CASE(tiny_config_a_has_llama_metadata_and_tensors) {
  const tiny_llama_spec spec = tiny_config_a();
  const std::string path = temp_path("tiny_a.gguf");
  write_tiny_llama(path, spec);
  const gguf_file f = gguf_file::open(path);
  BOOST_TEST(*f.get_string("general.architecture") == "llama");
  BOOST_TEST(*f.get_int("llama.embedding_length") == 96);
  BOOST_TEST(*f.get_int("llama.attention.head_count") == 3);
  BOOST_TEST(*f.get_int("llama.attention.head_count_kv") == 1);
  BOOST_TEST(*f.get_int("llama.rope.dimension_count") == 32);
  BOOST_TEST(*f.get_float("llama.rope.freq_base") == 100000.0);
  BOOST_TEST(*f.get_bool("tokenizer.ggml.add_bos_token") == false);
  BOOST_TEST(*f.get_string("tokenizer.ggml.pre") == "smollm");
  BOOST_TEST(f.get_string("tokenizer.chat_template")->find("<|im_start|>") != std::string::npos);
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  BOOST_REQUIRE(tokens.size() == 3u + 256u + spec.merges.size());
  BOOST_TEST(*f.get_int("llama.vocab_size") == static_cast<int64_t>(tokens.size()));
  BOOST_TEST(tokens[1] == "<|im_start|>");
  BOOST_TEST(tokens[3 + ' '] == "Ġ");
  BOOST_TEST(tokens[3 + '\n'] == "Ċ");
  BOOST_TEST(tokens[3 + 0xAD] == "Ń");
  BOOST_TEST(tokens[3 + 'A'] == "A");
  BOOST_TEST(tokens[3 + 256 + 2] == "Ġthe");
  const auto types = f.get_int_array("tokenizer.ggml.token_type");
  BOOST_TEST(types[0] == 3);
  BOOST_TEST(types[3] == 1);
  BOOST_TEST(f.get_string_array("tokenizer.ggml.merges").size() == spec.merges.size());
  // token_embd + output_norm + 9 per layer; tied, so no output.weight.
  BOOST_TEST(f.tensors().size() == 2u + 9u * 2u);
  BOOST_TEST(f.find_tensor("output.weight") == nullptr);
  const gguf_tensor_info* emb = f.find_tensor("token_embd.weight");
  BOOST_REQUIRE(emb != nullptr);
  BOOST_TEST(type_name(emb->type) == "Q8_0");
  BOOST_TEST(emb->ne[0] == 96);
  BOOST_TEST(emb->ne[1] == static_cast<int64_t>(tokens.size()));
  const gguf_tensor_info* k = f.find_tensor("blk.1.attn_k.weight");
  BOOST_REQUIRE(k != nullptr);
  BOOST_TEST(type_name(k->type) == "Q4_1");
  BOOST_TEST(k->ne[1] == 32);
  const auto [wmean, wstd] = stats(f, *f.find_tensor("blk.0.ffn_down.weight"));
  BOOST_TEST(std::fabs(wmean) < 0.002);
  BOOST_TEST(std::fabs(wstd - 0.02) < 0.003);
  const auto [nmean, nstd] = stats(f, *f.find_tensor("blk.0.attn_norm.weight"));
  BOOST_TEST(std::fabs(nmean - 1.0) < 0.01);
  BOOST_TEST(nstd < 0.05);
}

BOOST_AUTO_TEST_CASE(tiny_config_b_covers_every_dequantizable_type) {
  tiny_llama_spec spec = tiny_config_b();
  spec.alignment = 64;
  const std::string path = temp_path("tiny_b.gguf");
  write_tiny_llama(path, spec);
  const gguf_file f = gguf_file::open(path);
  BOOST_TEST(f.alignment() == 64u);
  BOOST_TEST(f.get_string_array("tokenizer.ggml.tokens").size() == 512u);
  BOOST_TEST(f.tensors().size() == 4u + 9u * 2u);  // + output.weight + rope_freqs.weight
  BOOST_TEST(type_name(f.find_tensor("output.weight")->type) == "Q6_K");
  BOOST_TEST(f.find_tensor("rope_freqs.weight")->ne[0] == 32);
  for (const gguf_tensor_info& t : f.tensors()) {
    BOOST_TEST_CONTEXT(t.name << " " << type_name(t.type)) {
      BOOST_TEST(is_dequantizable(t.type));
      if (t.name.find("weight") != std::string::npos && t.n_dims == 2) {
        const auto [mean, sd] = stats(f, t);
        BOOST_TEST(std::fabs(mean) < 0.003);
        BOOST_TEST(std::fabs(sd - 0.02) < 0.004);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(tiny_spec_inconsistencies_are_rejected) {
  tiny_llama_spec spec;
  spec.n_head_kv = 2;  // 3 % 2 != 0
  BOOST_CHECK_THROW(write_tiny_llama(temp_path("bad.gguf"), spec), std::invalid_argument);
  spec = tiny_config_a();
  spec.set_attn_types(ggml_type::q4_k);  // 96 % 256 != 0
  BOOST_CHECK_THROW(write_tiny_llama(temp_path("bad.gguf"), spec), std::invalid_argument);
  spec = tiny_config_a();
  spec.merges.push_back("zz yy");
  BOOST_CHECK_THROW(write_tiny_llama(temp_path("bad.gguf"), spec), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(real_smollm2_q4_1_file) {
  const fs::path path = model_cache_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf";
  BOOST_REQUIRE_MESSAGE(fs::exists(path), path.string() << " is missing. HINT: run ./setup.sh (fetches the model)");
  const gguf_file f = gguf_file::open(path.string());
  BOOST_TEST(f.tensors().size() == 272u);
  std::map<ggml_type, int> counts;
  for (const gguf_tensor_info& t : f.tensors()) {
    ++counts[t.type];
  }
  BOOST_TEST(counts[ggml_type::q4_1] == 210);
  BOOST_TEST(counts[ggml_type::f32] == 61);
  BOOST_TEST(counts[ggml_type::q8_0] == 1);
  BOOST_TEST(type_name(f.find_tensor("token_embd.weight")->type) == "Q8_0");
  BOOST_TEST(f.find_tensor("output.weight") == nullptr);
  BOOST_TEST(*f.get_string("general.architecture") == "llama");
  BOOST_TEST(*f.get_int("llama.embedding_length") == 576);
  BOOST_TEST(*f.get_int("llama.block_count") == 30);
  BOOST_TEST(*f.get_int("tokenizer.ggml.bos_token_id") == 1);
  BOOST_TEST(f.get_string_array("tokenizer.ggml.tokens").size() == 49152u);
  BOOST_TEST(f.get_string_array("tokenizer.ggml.merges").size() == 48900u);
  uint64_t total = 0;
  for (const gguf_tensor_info& t : f.tensors()) {
    total += t.nbytes;
  }
  BOOST_TEST(total == 96576768u);  // model-format.md §0
  const auto [mean, sd] = stats(f, *f.find_tensor("blk.0.attn_q.weight"));
  BOOST_TEST(std::isfinite(mean));
  BOOST_TEST((sd > 0.001 && sd < 1.0));
}

BOOST_AUTO_TEST_SUITE_END()
