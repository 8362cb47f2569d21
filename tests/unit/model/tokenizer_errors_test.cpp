// Bad tokenizer inputs: unsupported model and pre types, inconsistent vocabularies (token_type
// length, token types, special ids, merges), each a tokenizer_error whose message names the value;
// and tokenizer::from_gguf on small tokenizer-only GGUFs written with gguf_writer.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <unistd.h>

#include "model/formats/gguf.hpp"
#include "model/formats/gguf_writer.hpp"
#include "model/text/tokenizer.hpp"
#include "model/text/unicode_bytes.hpp"

namespace fs = std::filesystem;
using namespace conveyor::model;
using conveyor::token_id;

namespace {

vocab_data small_vocab() {
  vocab_data v;
  v.pre = "smollm";
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(byte_to_unicode(uint8_t(b)));
  v.tokens.push_back("ab");
  v.merges.push_back("a b");
  v.tokens.push_back("<|im_end|>");
  v.token_types.assign(v.tokens.size(), 1);
  v.token_types.back() = 3;
  return v;
}

/// Expects tokenizer(v) to throw a tokenizer_error whose message contains every `parts`.
void expect_error(const vocab_data& v, std::initializer_list<std::string_view> parts) {
  try {
    tokenizer t(v);
    BOOST_ERROR("no tokenizer_error thrown");
  } catch (const tokenizer_error& e) {
    const std::string msg = e.what();
    for (std::string_view p : parts) BOOST_TEST(msg.find(p) != std::string::npos, "'" << p << "' not in: " << msg);
  }
}

std::string temp_gguf(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("conveyor_tok_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

gguf_writer tokenizer_gguf(const vocab_data& v) {
  gguf_writer w;
  w.add_kv("general.architecture", "llama");
  w.add_kv("tokenizer.ggml.model", v.model);
  w.add_kv("tokenizer.ggml.pre", v.pre);
  w.add_kv("tokenizer.ggml.tokens", v.tokens);
  w.add_kv("tokenizer.ggml.token_type", v.token_types);
  w.add_kv("tokenizer.ggml.merges", v.merges);
  w.add_kv("tokenizer.ggml.eos_token_id", uint32_t(257));
  w.add_kv("tokenizer.chat_template", "{{ 'x' }}");
  return w;
}

} // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_errors)

BOOST_AUTO_TEST_CASE(the_valid_base_vocab_builds) {
  const tokenizer t(small_vocab());
  BOOST_TEST(t.encode("ab", false) == (std::vector<token_id>{256}));
}

BOOST_AUTO_TEST_CASE(unsupported_model_types) {
  for (const char* model : {"bert", "t5", "rwkv", ""}) {
    vocab_data v = small_vocab();
    v.model = model;
    std::string quoted = "'";
    quoted.append(model).append("'");
    expect_error(v, {"tokenizer.ggml.model", quoted, "gpt2", "llama"});
  }
}

BOOST_AUTO_TEST_CASE(unsupported_pre_type) {
  vocab_data v = small_vocab();
  v.pre = "tekken";
  expect_error(v, {"tokenizer.ggml.pre", "'tekken'", "smollm", "llama-bpe", "qwen2", "gpt-2", "default"});
  v.model = "llama";  // SentencePiece has no pre-tokenizer: tokenizer.ggml.pre is not read
  BOOST_CHECK_NO_THROW(tokenizer{v});
}

BOOST_AUTO_TEST_CASE(spm_scores_shorter_than_tokens) {
  vocab_data v = small_vocab();
  v.model = "llama";
  v.scores.assign(v.tokens.size() - 1, 0.0f);
  expect_error(v, {"tokenizer.ggml.scores", "257", "258"});
}

BOOST_AUTO_TEST_CASE(token_type_length_mismatch) {
  vocab_data v = small_vocab();
  v.token_types.pop_back();
  expect_error(v, {"token_type", "257", "258"});
}

BOOST_AUTO_TEST_CASE(token_type_out_of_range) {
  vocab_data v = small_vocab();
  v.token_types[5] = 9;
  expect_error(v, {"token_type[5]", "9"});
}

BOOST_AUTO_TEST_CASE(special_ids_out_of_range) {
  vocab_data v = small_vocab();
  v.bos = 258;
  expect_error(v, {"bos_token_id", "258", "258 tokens"});
  v = small_vocab();
  v.eos = -5;
  expect_error(v, {"eos_token_id", "-5"});
  v = small_vocab();
  v.add_bos = true;
  expect_error(v, {"add_bos_token", "bos_token_id"});
}

BOOST_AUTO_TEST_CASE(merges_referring_to_unknown_tokens) {
  vocab_data v = small_vocab();
  v.merges.push_back("q zz");
  expect_error(v, {"merges[1]", "'zz'"});
  v = small_vocab();
  v.merges.push_back("a c");  // "ac" is not a token
  expect_error(v, {"merges[1]", "'ac'"});
  v = small_vocab();
  v.merges.push_back("abc");
  expect_error(v, {"merges[1]", "'abc'", "left right"});
}

BOOST_AUTO_TEST_CASE(empty_vocabulary) {
  vocab_data v;
  expect_error(v, {"tokens", "empty"});
}

BOOST_AUTO_TEST_CASE(from_gguf_reads_the_metadata) {
  vocab_data v = small_vocab();
  v.pre = "llama-bpe";
  const std::string path = temp_gguf("ok.gguf");
  gguf_writer w = tokenizer_gguf(v);
  w.add_kv("tokenizer.ggml.bos_token_id", uint32_t(257));
  w.write(path);
  const tokenizer t = tokenizer::from_gguf(gguf_file::open(path));
  BOOST_TEST(t.vocab_size() == 258);
  BOOST_TEST(t.eos() == 257);
  BOOST_TEST(t.eog_ids() == (std::vector<token_id>{257}));
  BOOST_TEST(t.chat_template() == "{{ 'x' }}");
  BOOST_TEST((t.kind(257) == token_kind::control));
  // No add_bos_token key: llama-bpe defaults to adding BOS, as llama.cpp does.
  BOOST_TEST(t.encode("ab", false, true) == (std::vector<token_id>{257, 256}));
}

BOOST_AUTO_TEST_CASE(from_gguf_errors_name_the_file) {
  vocab_data v = small_vocab();
  v.model = "bert";
  const std::string path = temp_gguf("bert.gguf");
  tokenizer_gguf(v).write(path);
  try {
    tokenizer::from_gguf(gguf_file::open(path));
    BOOST_ERROR("no tokenizer_error thrown");
  } catch (const tokenizer_error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.rfind(path + ": ", 0) == 0, msg);
    BOOST_TEST(msg.find("'bert'") != std::string::npos, msg);
  }

  gguf_writer w;  // tokens stored as integers: the reader's type error, still a tokenizer_error
  w.add_kv("tokenizer.ggml.model", "gpt2");
  w.add_kv("tokenizer.ggml.tokens", std::vector<int32_t>{1, 2});
  const std::string bad = temp_gguf("badtype.gguf");
  w.write(bad);
  BOOST_CHECK_THROW(tokenizer::from_gguf(gguf_file::open(bad)), tokenizer_error);

  gguf_writer none;
  none.add_kv("general.architecture", "llama");
  const std::string empty = temp_gguf("notok.gguf");
  none.write(empty);
  try {
    tokenizer::from_gguf(gguf_file::open(empty));
    BOOST_ERROR("no tokenizer_error thrown");
  } catch (const tokenizer_error& e) {
    BOOST_TEST(std::string(e.what()).find("tokenizer.ggml.model is missing") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
