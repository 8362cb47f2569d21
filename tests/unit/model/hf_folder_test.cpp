// Hugging Face folders against the GGUF files of the same weights (scripts/make_arch_models.py,
// the ctest fixture arch_models): for every architecture and dtype the folder's view holds the
// converter's tensors byte for byte, gives bit-identical logits through the CPU executor, and
// tokenizes like the GGUF. Sharded folders and ["a", "b"] merges read the same. Mistral's
// folders hold a SentencePiece tokenizer.model (read with libsentencepiece, model/text/hf_spm.cpp).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <filesystem>

#include "greedy_driver.hpp"
#include "hf_test_files.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"
#include "model/model_path.hpp"
#include "model/text/tokenizer.hpp"
#include "model_files.hpp"

namespace conveyor::model {
namespace {

using testing::arch_models_dir;

/// Greedy tokens and the hash of every step's logits (prompt in chunks of 3, then 5 decode steps).
driven_seq run(const gguf_file& f) {
  cpu_executor_options o;
  o.block_size = 4;
  o.num_kv_blocks = 16;
  o.threads = 1;
  cpu_executor ex(f, o);
  std::vector<driven_seq> seqs(1);
  seqs[0].prompt = {5, 17, 42, 99, 150, 7, 260, 33, 12, 201, 64};
  seqs[0].chunk = 3;
  seqs[0].max_new = 6;
  run_greedy(ex, seqs, 16, [&](size_t k) {
    const int32_t v = ex.info().vocab_size;
    return std::vector<float>(ex.last_logits().begin() + static_cast<std::ptrdiff_t>(k) * v,
                              ex.last_logits().begin() + static_cast<std::ptrdiff_t>(k + 1) * v);
  });
  return seqs[0];
}

void check_same_tensors(const gguf_file& gguf, const gguf_file& hf) {
  BOOST_TEST(hf.tensors().size() == gguf.tensors().size());
  for (const gguf_tensor_info& t : gguf.tensors()) {
    BOOST_TEST_CONTEXT("tensor " << t.name) {
      const gguf_tensor_info* h = hf.find_tensor(t.name);
      BOOST_REQUIRE(h != nullptr);
      BOOST_TEST((h->type == t.type));
      BOOST_TEST(h->n_dims == t.n_dims);
      BOOST_TEST((h->ne == t.ne));
      BOOST_REQUIRE_EQUAL(h->nbytes, t.nbytes);
      BOOST_TEST(std::memcmp(hf.tensor_data(*h), gguf.tensor_data(t), t.nbytes) == 0);
    }
  }
}

void check_same_metadata(const gguf_file& gguf, const gguf_file& hf) {
  const std::string a = *gguf.get_string("general.architecture");
  BOOST_TEST(*hf.get_string("general.architecture") == a);
  for (const std::string k : {".embedding_length", ".block_count", ".feed_forward_length", ".attention.head_count",
                              ".attention.head_count_kv", ".attention.key_length", ".context_length"})
    BOOST_TEST((hf.get_int(a + k) == gguf.get_int(a + k)), k);
  for (const std::string k : {".rope.freq_base", ".attention.layer_norm_rms_epsilon"})
    BOOST_TEST((hf.get_float(a + k) == gguf.get_float(a + k)), k);
  BOOST_TEST(hf.get_string_array("tokenizer.ggml.tokens") == gguf.get_string_array("tokenizer.ggml.tokens"));
  BOOST_TEST(hf.get_int_array("tokenizer.ggml.token_type") == gguf.get_int_array("tokenizer.ggml.token_type"));
  BOOST_TEST(hf.get_string_array("tokenizer.ggml.merges") == gguf.get_string_array("tokenizer.ggml.merges"));
  BOOST_TEST(hf.get_float_array("tokenizer.ggml.scores") == gguf.get_float_array("tokenizer.ggml.scores"));
  BOOST_TEST(*hf.get_string("tokenizer.ggml.model") == *gguf.get_string("tokenizer.ggml.model"));
  for (const char* k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"})
    BOOST_TEST((hf.get_int(k) == gguf.get_int(k)), k);
  for (const char* k : {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix"}) BOOST_TEST((hf.get_bool(k) == gguf.get_bool(k)), k);
  // The converter writes "default" for SentencePiece; the tiny mistral GGUF leaves it out (the same to llama.cpp).
  BOOST_TEST(hf.get_string("tokenizer.ggml.pre").value_or("default") == gguf.get_string("tokenizer.ggml.pre").value_or("default"));
  BOOST_TEST(*hf.get_string("tokenizer.chat_template") == *gguf.get_string("tokenizer.chat_template"));
}

void check_same_tokens(const gguf_file& gguf, const gguf_file& hf) {
  const tokenizer a = tokenizer::from_gguf(gguf), b = tokenizer::from_gguf(hf);
  BOOST_TEST(a.vocab_size() == b.vocab_size());
  BOOST_TEST(a.bos() == b.bos());
  BOOST_TEST(a.eos() == b.eos());
  BOOST_TEST(a.eog_ids() == b.eog_ids());
  for (const char* text : {"Hello world! 123 4567", "the other thing in the hat", "  multiple   spaces\n\nnew line",
                           "<|im_start|>user\nhi<|im_end|>", "Caf\xC3\xA9 d\xC3\xA9j\xC3\xA0 vu, isn't it?",
                           "<s>[INST] the sea </s> is on", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xD0\x9F\xD1\x80\xD0\xB8 \xF0\x9F\x98\x80 \xCE\xB1\xCE\xB2\xCE\xB3 Stra\xC3\x9F\x65",
                           " leading space and trailing  ", "tab\there\r\nand \xFF\xFE invalid bytes"}) {
    BOOST_TEST_CONTEXT("text " << text) {
      BOOST_TEST(a.encode(text, true) == b.encode(text, true));
      BOOST_TEST(a.encode(text, false, false) == b.encode(text, false, false));
    }
  }
}

void check_pair(const std::string& arch, const std::string& dtype) {
  BOOST_TEST_CONTEXT(arch << " " << dtype) {
    const std::string dir = arch_models_dir();
    const gguf_file gguf = gguf_file::open(dir + "/" + arch + "." + dtype + ".gguf");
    const gguf_file hf = open_model(dir + "/" + arch + ".hf-" + dtype);
    check_same_tensors(gguf, hf);
    check_same_metadata(gguf, hf);
    check_same_tokens(gguf, hf);
    const driven_seq g = run(gguf), h = run(hf);
    BOOST_TEST(g.first_logits.size() == static_cast<size_t>(tokenizer::from_gguf(gguf).vocab_size()));
    BOOST_TEST(g.out == h.out);
    BOOST_TEST(g.first_logits == h.first_logits);
    BOOST_TEST(g.logits_hash == h.logits_hash);
    BOOST_TEST(g.logits_hash != 0u);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(hf_folder)

BOOST_AUTO_TEST_CASE(llama3_folders_match_their_ggufs) {
  for (const char* dt : {"f32", "f16", "bf16"}) check_pair("llama3", dt);
}

BOOST_AUTO_TEST_CASE(qwen2_folders_match_their_ggufs) {
  for (const char* dt : {"f32", "f16", "bf16"}) check_pair("qwen2", dt);
}

BOOST_AUTO_TEST_CASE(qwen3_folders_match_their_ggufs) {
  for (const char* dt : {"f32", "f16", "bf16"}) check_pair("qwen3", dt);
}

BOOST_AUTO_TEST_CASE(mistral_folders_match_their_ggufs) {
  for (const char* dt : {"f32", "f16", "bf16"}) check_pair("mistral", dt);
  // Bytes the vocabulary has no piece for reach SentencePiece's byte fallback (<0xXX>, ids 3..258).
  const tokenizer tok = tokenizer::from_gguf(open_model(arch_models_dir() + "/mistral.hf-f32"));
  const std::vector<token_id> ids = tok.encode("\xE6\x97\xA5 the", false, false);
  // "▁日▁the": "▁" (259, after <unk> <s> </s> and the 256 byte pieces), 日's three bytes, "▁the".
  const std::vector<token_id> want = {259, 3 + 0xE6, 3 + 0x97, 3 + 0xA5};
  BOOST_REQUIRE(ids.size() == 5u);
  BOOST_TEST(std::vector<token_id>(ids.begin(), ids.begin() + 4) == want);
  BOOST_TEST(tok.piece(ids.back()) == " the");
  BOOST_TEST(tok.decode(ids) == "\xE6\x97\xA5 the");
}

BOOST_AUTO_TEST_CASE(mistral_tokenizer_json_beside_tokenizer_model_only_names_specials) {
  // Real Mistral folders ship both; the converter reads the vocabulary from tokenizer.model and
  // takes only special-token ids and the post-processor's BOS from tokenizer.json.
  const std::string dir = testing::copy_arch_folder("mistral.hf-f16", "mistral_both");
  nlohmann::json added = nlohmann::json::array();
  for (int id = 0; id < 3; ++id)
    added.push_back({{"id", id}, {"content", id == 0 ? "<unk>" : id == 1 ? "<s>" : "</s>"}, {"special", true}});
  const nlohmann::json bos_then_a = {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}};
  testing::write_json(dir + "/tokenizer.json",
                      {{"version", "1.0"}, {"added_tokens", added},
                       {"post_processor", {{"type", "TemplateProcessing"}, {"single", bos_then_a}}},
                       {"model", {{"type", "BPE"}, {"byte_fallback", true}, {"vocab", {{"<unk>", 0}}}, {"merges", nlohmann::json::array()}}}});
  const gguf_file gguf = gguf_file::open(arch_models_dir() + "/mistral.f16.gguf");
  const gguf_file hf = open_model(dir);
  check_same_metadata(gguf, hf);
  check_same_tokens(gguf, hf);
}

BOOST_AUTO_TEST_CASE(mistral_added_tokens_and_prefix_space) {
  // tokenizer_config.json's added_tokens_decoder (special, or looking special: control; else
  // user-defined with ▁ as a space) and added_tokens.json (user-defined) override pieces, with
  // score -1000, as _create_vocab_sentencepiece does; add_prefix_space overrides the model's.
  const std::string dir = testing::copy_arch_folder("mistral.hf-f32", "mistral_added");
  nlohmann::json tcfg = testing::read_json(dir + "/tokenizer_config.json");
  tcfg["added_tokens_decoder"] = {{"0", {{"content", "<unk>"}, {"special", true}}},
                                  {"303", {{"content", "<|tool|>"}, {"special", false}}},
                                  {"304", {{"content", "\xE2\x96\x81my\xE2\x96\x81word"}, {"special", false}}}};
  tcfg["add_prefix_space"] = false;
  testing::write_json(dir + "/tokenizer_config.json", tcfg);
  testing::write_json(dir + "/added_tokens.json", {{"[TOOL]", 305}});
  const gguf_file hf = open_model(dir);
  const auto tokens = hf.get_string_array("tokenizer.ggml.tokens");
  const auto types = hf.get_int_array("tokenizer.ggml.token_type");
  const auto scores = hf.get_float_array("tokenizer.ggml.scores");
  BOOST_REQUIRE(tokens.size() == 306u);
  BOOST_TEST(types[0] == 3);  // <unk> becomes control, as the converter writes it for Mistral 7B
  BOOST_TEST(tokens[303] == "<|tool|>");
  BOOST_TEST(types[303] == 3);
  BOOST_TEST(tokens[304] == " my word");
  BOOST_TEST(types[304] == 4);
  BOOST_TEST(tokens[305] == "[TOOL]");
  BOOST_TEST(types[305] == 4);
  for (int id : {0, 303, 304, 305}) BOOST_TEST(scores[size_t(id)] == -1000.0f);
  BOOST_TEST(scores[259] == 0.0f);
  BOOST_TEST(hf.get_bool("tokenizer.ggml.add_space_prefix").value() == false);
  const tokenizer tok = tokenizer::from_gguf(hf);
  std::vector<token_id> want = {305};
  for (token_id id : tok.encode("the", false, false)) want.push_back(id);
  BOOST_TEST(tok.encode("[TOOL]the", false, false) == want);  // user-defined tokens are cut out even without parse_special
  BOOST_TEST(tok.encode("the", false, false).front() != tokenizer::from_gguf(gguf_file::open(arch_models_dir() + "/mistral.f32.gguf"))
                                                           .encode("the", false, false).front());  // no "▁" in front now
}

BOOST_AUTO_TEST_CASE(sharded_folder_and_merge_pairs_read_the_same) {
  const std::string dir = testing::copy_arch_folder("llama3.hf-bf16", "sharded");
  const auto tensors = testing::read_st(dir + "/model.safetensors");
  std::vector<testing::st_tensor> a, b;
  nlohmann::json map = nlohmann::json::object();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string shard = i % 2 ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
    (i % 2 ? b : a).push_back(tensors[i]);
    map[tensors[i].name] = shard;
  }
  std::filesystem::remove(dir + "/model.safetensors");
  testing::write_st(dir + "/model-00001-of-00002.safetensors", a);
  testing::write_st(dir + "/model-00002-of-00002.safetensors", b);
  testing::write_json(dir + "/model.safetensors.index.json", {{"metadata", {{"total_size", 0}}}, {"weight_map", map}});
  nlohmann::json tok = testing::read_json(dir + "/tokenizer.json");
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& m : tok["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  tok["model"]["merges"] = pairs;
  testing::write_json(dir + "/tokenizer.json", tok);

  const gguf_file gguf = gguf_file::open(arch_models_dir() + "/llama3.bf16.gguf");
  const gguf_file hf = open_model(dir + "/");
  check_same_tensors(gguf, hf);
  check_same_metadata(gguf, hf);
  check_same_tokens(gguf, hf);
  BOOST_TEST(run(gguf).logits_hash == run(hf).logits_hash);
}

BOOST_AUTO_TEST_CASE(resolve_model_accepts_a_folder) {
  const std::string dir = arch_models_dir() + "/qwen2.hf-f32";
  BOOST_TEST(resolve_model(dir) == dir);
  BOOST_TEST(open_model(resolve_model(dir)).get_string("general.architecture").value() == "qwen2");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
