// SentencePiece (tokenizer.ggml.model = "llama") on small hand-made vocabularies: merge order by
// score then position, byte fallback (<0xXX>, then unk), invalid UTF-8 grouped by lead byte as
// llama.cpp does, the space prefix at the start and after special tokens, decode's leading-space
// removal, from_gguf's SentencePiece defaults; and llama.cpp's end-of-generation rules.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <tuple>
#include <unistd.h>

#include "model/formats/gguf.hpp"
#include "model/formats/gguf_writer.hpp"
#include "model/text/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace conveyor::model;
using conveyor::token_id;
using ids = std::vector<token_id>;

namespace {

/// <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258, then `add`ed tokens (normal unless given).
struct spm_builder {
  vocab_data v;
  explicit spm_builder(bool byte_tokens = true) {
    v.model = "llama";
    v.add_space_prefix = true;
    v.bos = 1, v.eos = 2, v.unk = 0;
    add("<unk>", 0, token_kind::unknown);
    add("<s>", 0, token_kind::control);
    add("</s>", 0, token_kind::control);
    for (int b = 0; byte_tokens && b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      add(hex, 0, token_kind::byte);
    }
  }
  token_id add(std::string text, float score, token_kind k = token_kind::normal) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.token_types.push_back(int32_t(k));
    return token_id(v.tokens.size() - 1);
  }
};

token_id byte_tok(unsigned char b) { return token_id(3 + b); }

const std::string sp = "\xE2\x96\x81";  // ▁

} // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_spm)

BOOST_AUTO_TEST_CASE(highest_score_merges_first_then_leftmost) {
  for (const auto& [ab_score, bc_score, want_ab] : {std::tuple{-1.0f, -5.0f, true}, {-5.0f, -1.0f, false},
                                                    {-2.0f, -2.0f, true}}) {
    spm_builder b;
    b.v.add_space_prefix = false;
    const token_id a = b.add("a", -9), bb = b.add("b", -9), c = b.add("c", -9);
    const token_id ab = b.add("ab", ab_score), bc = b.add("bc", bc_score);
    const tokenizer t(b.v);
    BOOST_TEST(t.encode("abc", false, false) == (want_ab ? ids{ab, c} : ids{a, bc}));
    (void)bb;
  }
}

BOOST_AUTO_TEST_CASE(merges_chain_into_longer_tokens) {
  spm_builder b;
  const token_id w = b.add(sp, -20);
  b.add("h", -20), b.add("i", -20), b.add(sp + "h", -3);
  const token_id hi = b.add(sp + "hi", -1);
  const tokenizer t(b.v);
  BOOST_TEST(t.encode("hi", false, false) == (ids{hi}));
  BOOST_TEST(t.encode(" hi", false, false) == (ids{w, hi}));  // "▁▁hi": no "▁▁" token
  BOOST_TEST(t.decode(ids{w, hi}) == " hi");                    // one space off the first piece
  BOOST_TEST(t.decode(ids{hi, hi}) == "hi hi");
  BOOST_TEST(t.piece(hi) == " hi");
}

BOOST_AUTO_TEST_CASE(byte_fallback_and_invalid_utf8) {
  spm_builder b;
  b.v.add_space_prefix = false;
  const token_id a = b.add("a", -1);
  const tokenizer t(b.v);
  BOOST_TEST(t.encode("a\xC3\xA9", false, false) == (ids{a, byte_tok(0xC3), byte_tok(0xA9)}));
  // 0xFF announces four bytes: "\xFF" and the "a" after it form one symbol, which is no token.
  BOOST_TEST(t.encode("\xFF" "a", false, false) == (ids{byte_tok(0xFF), byte_tok('a')}));
  BOOST_TEST(t.decode(ids{a, byte_tok(0xC3), byte_tok(0xA9)}) == "a\xC3\xA9");
  BOOST_TEST(t.piece(byte_tok(0x0A)) == "\n");
}

BOOST_AUTO_TEST_CASE(a_byte_without_a_byte_token_is_unk) {
  spm_builder b(/*byte_tokens=*/false);
  b.v.add_space_prefix = false;
  const token_id a = b.add("a", -1);
  const tokenizer t(b.v);
  BOOST_TEST(t.encode("a\xC3\xA9", false, false) == (ids{a, 0, 0}));
  BOOST_TEST(t.decode(ids{a, 0}) == "a");  // <unk> is hidden like a control token
}

BOOST_AUTO_TEST_CASE(space_prefix_at_start_and_after_special_tokens) {
  spm_builder b;
  const token_id w = b.add(sp, -20);
  b.add("a", -20);
  const token_id wa = b.add(sp + "a", -1);
  const tokenizer t(b.v);
  BOOST_TEST(t.encode("a", false, false) == (ids{wa}));
  BOOST_TEST(t.encode("a", false, true) == (ids{wa}));  // add_bos is false in a hand-made vocab_data
  BOOST_TEST(t.encode("<s>a</s>a", true, false) == (ids{1, wa, 2, wa}));
  BOOST_TEST(t.encode("a<s>", true, false) == (ids{wa, 1}));
  BOOST_TEST(t.encode("", true, false) == (ids{}));
  BOOST_TEST(t.encode("<s>", true, false) == (ids{1}));
  BOOST_TEST(t.encode(" ", false, false) == (ids{w, w}));
  // Decode: the first token's leading space goes, a hidden <s> first still uses up the removal.
  BOOST_TEST(t.decode(ids{wa, wa}) == "a a");
  BOOST_TEST(t.decode(ids{1, wa}) == " a");
  BOOST_TEST(t.decode(ids{1, wa}, true) == "<s> a");
}

BOOST_AUTO_TEST_CASE(from_gguf_applies_sentencepiece_defaults) {
  spm_builder b;
  b.add(sp, -20), b.add("a", -20);
  const token_id wa = b.add(sp + "a", -1);
  const fs::path dir = fs::temp_directory_path() / ("conveyor_spm_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, bool prefix_key) {
    gguf_writer w;
    w.add_kv("general.architecture", "llama");
    w.add_kv("tokenizer.ggml.model", "llama");
    w.add_kv("tokenizer.ggml.tokens", b.v.tokens);
    w.add_kv("tokenizer.ggml.token_type", b.v.token_types);
    std::vector<int32_t> int_scores(b.v.scores.begin(), b.v.scores.end());  // llama.cpp takes int32 too
    w.add_kv("tokenizer.ggml.scores", int_scores);
    if (prefix_key) w.add_kv("tokenizer.ggml.add_space_prefix", false);
    const std::string path = (dir / name).string();
    w.write(path);
    return tokenizer::from_gguf(gguf_file::open(path));
  };
  const tokenizer t = write("defaults.gguf", false);
  BOOST_TEST(t.bos() == 1);
  BOOST_TEST(t.eos() == 2);
  BOOST_TEST(t.eog_ids() == (ids{2}));
  BOOST_TEST(t.encode("a", false, true) == (ids{1, wa}));  // add_bos true, space prefix on
  const tokenizer np = write("no_prefix.gguf", true);
  BOOST_TEST(np.encode("a", false, false) == (ids{wa - 1}));  // "a" alone
  BOOST_TEST(np.decode(ids{wa}) == " a");                      // no leading-space removal either
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(end_of_generation_follows_llama_cpp) {
  spm_builder b;
  const token_id im_end = b.add("<|im_end|>", 0);  // normal in the file: made control, as llama.cpp does
  const token_id pad = b.add("<|fim_pad|>", 0, token_kind::control);
  const token_id rep = b.add("<|repo_name|>", 0, token_kind::control);
  const token_id pre = b.add("<|fim_prefix|>", 0);
  const token_id eom = b.add("<|eom_id|>", 0, token_kind::control);
  const token_id mine = b.add("<my_end>", 0, token_kind::control);
  b.v.fim_sep = mine;  // a FIM file separator named by its key is end-of-generation too
  const tokenizer t(b.v);
  BOOST_TEST(t.eog_ids() == (ids{2, im_end, pad, rep, eom, mine}));
  BOOST_TEST((t.kind(im_end) == token_kind::control));
  BOOST_TEST((t.kind(pre) == token_kind::control));  // FIM prefix: control, not end-of-generation
  BOOST_TEST(!t.is_eog(pre));
  BOOST_TEST(t.piece(im_end) == "");
  BOOST_TEST(t.encode("<|im_end|>", true, false) == (ids{im_end}));
}

BOOST_AUTO_TEST_CASE(gpt_oss_end_is_not_end_of_generation) {
  spm_builder b;
  const token_id end = b.add("<|end|>", 0, token_kind::control);
  b.add("<|return|>", 0, token_kind::control);
  b.add("<|call|>", 0, token_kind::control);
  const tokenizer t(b.v);
  BOOST_TEST(!t.is_eog(end));
  BOOST_TEST((t.kind(end) == token_kind::user_defined));
  BOOST_TEST(t.eog_ids().size() == 3u);  // </s>, <|return|>, <|call|>
}

BOOST_AUTO_TEST_SUITE_END()
