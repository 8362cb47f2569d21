// The tokenizer on small hand-made vocabularies: BPE merge order (rank, then position), the
// per-byte fallback, ignore_merges, special-token parsing on and off (longest first), BOS/EOS,
// pieces and decode (clean_spaces), EOG ids, and the streaming decoder byte by byte.
#include <boost/test/unit_test.hpp>

#include <random>

#include "model/text/text_stream.hpp"
#include "model/text/tokenizer.hpp"
#include "model/text/unicode_bytes.hpp"

using namespace conveyor::model;
using conveyor::token_id;
using ids = std::vector<token_id>;

namespace {

/// 256 byte tokens (id = byte value), then `extra` tokens in order, all NORMAL unless given.
struct vocab_builder {
  vocab_data v;
  explicit vocab_builder(std::string pre = "smollm") {
    v.pre = std::move(pre);
    for (int b = 0; b < 256; ++b) add(std::string(byte_to_unicode(uint8_t(b))));
  }
  token_id add(std::string text, token_kind k = token_kind::normal) {
    v.tokens.push_back(std::move(text));
    v.token_types.push_back(int32_t(k));
    return token_id(v.tokens.size() - 1);
  }
  /// Adds the merge and its result token.
  token_id merge(const std::string& l, const std::string& r) {
    v.merges.push_back(l + " " + r);
    return add(l + r);
  }
};

token_id byte_id(char c) { return token_id(static_cast<unsigned char>(c)); }

ids bytes_of(std::string_view s) {
  ids out;
  for (char c : s) out.push_back(byte_id(c));
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_bpe)

BOOST_AUTO_TEST_CASE(lower_rank_merges_first) {
  vocab_builder a;
  const token_id ab = a.merge("a", "b");
  a.merge("b", "c");
  BOOST_TEST(tokenizer(a.v).encode("abc", false) == (ids{ab, byte_id('c')}));

  vocab_builder b;
  const token_id bc = b.merge("b", "c");
  b.merge("a", "b");
  BOOST_TEST(tokenizer(b.v).encode("abc", false) == (ids{byte_id('a'), bc}));
}

BOOST_AUTO_TEST_CASE(equal_rank_merges_leftmost_first_then_merged_pairs) {
  vocab_builder vb;
  const token_id aa = vb.merge("a", "a");
  const token_id aaaa = vb.merge("aa", "aa");
  const tokenizer t(vb.v);
  BOOST_TEST(t.encode("aaa", false) == (ids{aa, byte_id('a')}));
  BOOST_TEST(t.encode("aaaa", false) == (ids{aaaa}));
  BOOST_TEST(t.encode("aaaaa", false) == (ids{aaaa, byte_id('a')}));
}

BOOST_AUTO_TEST_CASE(space_is_byte_encoded_before_merging) {
  vocab_builder vb;
  vb.merge("Ġ", "h");
  const token_id ghi = vb.merge("Ġh", "i");
  const tokenizer t(vb.v);
  BOOST_TEST(t.encode(" hi hi", false) == (ids{ghi, ghi}));
  BOOST_TEST(t.decode(ids{ghi}) == " hi");
}

BOOST_AUTO_TEST_CASE(missing_byte_token_is_skipped) {
  vocab_builder vb;
  vb.v.tokens[byte_id('z')] = "<|not z|>";  // no token for 'z' any more
  const tokenizer t(vb.v);
  BOOST_TEST(t.encode("azb", false) == (ids{byte_id('a'), byte_id('b')}));
}

BOOST_AUTO_TEST_CASE(ignore_merges_takes_whole_word_tokens) {
  vocab_builder smol("smollm"), l3("llama-bpe");
  for (vocab_builder* vb : {&smol, &l3}) {
    vb->merge("a", "b");
    vb->add("abc");
  }
  BOOST_TEST(tokenizer(smol.v).encode("abc", false) == (ids{256, byte_id('c')}));
  BOOST_TEST(tokenizer(l3.v).encode("abc", false) == (ids{257}));
}

BOOST_AUTO_TEST_CASE(invalid_utf8_input_becomes_replacement_characters) {
  vocab_builder vb;
  const tokenizer t(vb.v);
  // Each bad byte reads as U+FFFD (EF BF BD), as in llama.cpp's unicode_cpts_from_utf8.
  BOOST_TEST(t.encode("a\xff", false) == bytes_of("a\xEF\xBF\xBD"));
  BOOST_TEST(t.encode("\xE2\x82", false) == bytes_of("\xEF\xBF\xBD\xEF\xBF\xBD"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tokenizer_special)

struct special_fixture {
  vocab_builder vb;
  token_id start = vb.add("<|im_start|>", token_kind::control);
  token_id tool = vb.add("<tool>", token_kind::user_defined);
  token_id unk = vb.add("<unk>", token_kind::unknown);
  token_id x = vb.add("<|x|>", token_kind::control);
  token_id xy = vb.add("<|x|>y", token_kind::control);
  token_id unused = vb.add("<unused>", token_kind::unused);
};

BOOST_FIXTURE_TEST_CASE(parse_special_on_and_off, special_fixture) {
  const tokenizer t(vb.v);
  ids plain = bytes_of("a");
  plain.push_back(tool);
  for (token_id id : bytes_of("<|im_start|><unk>")) plain.push_back(id);
  BOOST_TEST(t.encode("a<tool><|im_start|><unk>", false) == plain);
  BOOST_TEST(t.encode("a<tool><|im_start|><unk>", true) == (ids{byte_id('a'), tool, start, unk}));
  BOOST_TEST(t.encode("<unused>", true) == bytes_of("<unused>"));  // unused tokens are never parsed
}

BOOST_FIXTURE_TEST_CASE(longest_special_text_wins, special_fixture) {
  const tokenizer t(vb.v);
  BOOST_TEST(t.encode("a<|x|>y<|x|>", true) == (ids{byte_id('a'), xy, x}));
  BOOST_TEST(t.encode("<|x|><|x|>y", true) == (ids{x, xy}));
}

BOOST_FIXTURE_TEST_CASE(bos_and_eos_when_asked, special_fixture) {
  vb.v.bos = start;
  vb.v.eos = x;
  vb.v.add_bos = true;
  vb.v.add_eos = true;
  const tokenizer t(vb.v);
  BOOST_TEST(t.encode("a", false, true) == (ids{start, byte_id('a'), x}));
  BOOST_TEST(t.encode("a", false, false) == (ids{byte_id('a')}));
  BOOST_TEST(t.encode("", false, true) == (ids{start, x}));
}

BOOST_FIXTURE_TEST_CASE(pieces_by_kind, special_fixture) {
  const tokenizer t(vb.v);
  BOOST_TEST(t.piece(start).empty());
  BOOST_TEST(t.piece(start, true) == "<|im_start|>");
  BOOST_TEST(t.piece(unk).empty());
  BOOST_TEST(t.piece(unk, true) == "<unk>");
  BOOST_TEST(t.piece(tool) == "<tool>");
  BOOST_TEST(t.piece(unused, true).empty());
  BOOST_TEST(t.piece(byte_id(' ')) == " ");  // "Ġ"
  BOOST_TEST(t.piece(0x0A) == "\n");         // "Ċ"
  BOOST_TEST(t.decode(ids{start, byte_id('h'), tool, x}) == "h<tool>");
  BOOST_TEST(t.decode(ids{start, byte_id('h'), tool, x}, true) == "<|im_start|>h<tool><|x|>");
  BOOST_CHECK_THROW(t.piece(-1), std::out_of_range);
  BOOST_CHECK_THROW(t.piece(t.vocab_size()), std::out_of_range);
}

BOOST_AUTO_TEST_CASE(unmapped_code_point_in_a_token) {
  vocab_builder vb;
  const token_id euro = vb.add("a€");  // U+20AC stands for no byte
  BOOST_TEST(tokenizer(vb.v).piece(euro) == "a[UNK_BYTE_0xe282aca€]");
}

BOOST_AUTO_TEST_CASE(empty_token_text_is_renamed_like_llama_cpp) {
  vocab_builder vb;
  const token_id empty = vb.add("", token_kind::user_defined);
  const tokenizer t(vb.v);
  BOOST_TEST(t.piece(empty) == "[EMPTY_256]");
  BOOST_TEST(t.encode("[EMPTY_256]", false) == (ids{empty}));
}

BOOST_AUTO_TEST_CASE(clean_spaces_only_for_pre_types_that_ask) {
  for (const char* pre : {"gpt-2", "smollm"}) {
    vocab_builder vb(pre);
    const tokenizer t(vb.v);
    const std::string text = "Hi , you ' re here . Isn 't it ?";
    const std::string want = std::string(pre) == "smollm" ? text : "Hi, you're here. Isn 't it?";
    BOOST_TEST(t.decode(bytes_of(text)) == want, pre);
  }
}

BOOST_AUTO_TEST_CASE(eog_ids_are_eos_plus_known_end_texts) {
  vocab_builder vb;
  const token_id eot = vb.add("<|endoftext|>", token_kind::control);
  const token_id im_end = vb.add("<|im_end|>", token_kind::control);
  const token_id eos = vb.add("</s>", token_kind::control);
  const token_id eot_id = vb.add("<|eot_id|>", token_kind::control);
  vb.v.eos = eos;
  const tokenizer t(vb.v);
  BOOST_TEST(t.eog_ids() == (ids{eot, im_end, eos, eot_id}));
  BOOST_TEST(t.is_eog(eot_id));
  BOOST_TEST(!t.is_eog(byte_id('a')));
  BOOST_TEST(t.eos() == eos);
  BOOST_TEST(t.bos() == -1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tokenizer_stream)

BOOST_AUTO_TEST_CASE(multibyte_characters_byte_by_byte) {
  vocab_builder vb;
  const tokenizer t(vb.v);
  stream_decoder sd(t);
  std::vector<std::string> got;
  for (token_id id : bytes_of("a€🚀中b")) got.push_back(sd.push(id));
  got.push_back(sd.flush());
  const std::vector<std::string> want{"a", "", "", "€", "", "", "", "🚀", "", "", "中", "b", ""};
  BOOST_TEST(got == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(invalid_bytes_are_passed_through_not_held) {
  vocab_builder vb;
  const tokenizer t(vb.v);
  stream_decoder sd(t);
  BOOST_TEST(sd.push(0xFF) == "\xFF");                // can never start a character
  BOOST_TEST(sd.push(0x80) == "\x80");                // stray continuation byte
  BOOST_TEST(sd.push(0xE2) == "");                    // could start "€": held
  BOOST_TEST(sd.push(byte_id('a')) == "\xE2" "a");    // ...until it cannot be completed
  BOOST_TEST(sd.push(0xE0) == "");
  BOOST_TEST(sd.push(0x80) == "\xE0\x80");            // overlong: E0 needs A0..BF next
  BOOST_TEST(sd.push(0xED) == "");
  BOOST_TEST(sd.push(0xA0) == "\xED\xA0");            // surrogate: ED needs 80..9F next
  BOOST_TEST(sd.push(0xF0) == "");
  BOOST_TEST(sd.push(0x9F) == "");
  BOOST_TEST(sd.flush() == "\xF0\x9F");               // end of stream: the rest, as is
  BOOST_TEST(sd.flush() == "");
}

BOOST_AUTO_TEST_CASE(published_text_is_valid_utf8_when_a_job_ends_inside_a_character) {
  vocab_builder vb;
  const tokenizer t(vb.v);
  // The job ends after the first two bytes of "漢" (E6 BC A2): each held byte becomes U+FFFD.
  text_stream ts(t, {});
  for (token_id id : bytes_of("a\xE6\xBC")) ts.push(id);
  BOOST_TEST(ts.take_visible(false) == "a");
  ts.finish();
  const std::string tail = ts.take_visible(true);
  BOOST_TEST(tail == "\xEF\xBF\xBD\xEF\xBF\xBD");
  BOOST_TEST(ts.full_text() == "a" + tail);
  BOOST_TEST(is_valid_utf8(ts.full_text()));
}

BOOST_AUTO_TEST_CASE(published_text_replaces_every_invalid_byte) {
  vocab_builder vb;
  const tokenizer t(vb.v);
  std::mt19937 rng(99);
  const std::vector<uint8_t> pool{'a', 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x9A, 0x80, 0xFF, 0xED, 0xBF, 0x80};
  for (int round = 0; round < 2000; ++round) {
    text_stream ts(t, {"zz"});
    std::string shown;
    const int n = int(rng() % 12);
    for (int i = 0; i < n; ++i) {
      ts.push(pool[rng() % pool.size()]);
      shown += ts.take_visible(false);
      BOOST_REQUIRE(is_valid_utf8(shown));
    }
    ts.finish();
    shown += ts.take_visible(true);
    BOOST_REQUIRE(is_valid_utf8(shown));
    BOOST_REQUIRE(shown == ts.full_text());
  }
}

BOOST_AUTO_TEST_CASE(random_byte_streams_concatenate_to_decode) {
  vocab_builder vb;
  const tokenizer t(vb.v);
  std::mt19937 rng(1234);
  const std::vector<uint8_t> pool{'a', ' ', 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x9A, 0x80, 0xFF, 0xED, 0xBF};
  for (int round = 0; round < 2000; ++round) {
    ids seq;
    const int n = int(rng() % 12);
    for (int i = 0; i < n; ++i) seq.push_back(pool[rng() % pool.size()]);
    stream_decoder sd(t);
    std::string all;
    size_t fed = 0;
    for (token_id id : seq) {
      all += sd.push(id);
      fed += t.piece(id).size();
      BOOST_REQUIRE_LE(fed - all.size(), 3u);  // never more than an incomplete character held
    }
    all += sd.flush();
    BOOST_REQUIRE(all == t.decode(seq));
  }
}

BOOST_AUTO_TEST_SUITE_END()
