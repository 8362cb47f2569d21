// Pre-tokenizer splits, checked piece by piece on hand-made strings: the smollm examples of
// model-format.md §5.2 (digits split one by one, "  multiple   spaces"), case-sensitive
// contractions, llama.cpp's whitespace set, and the llama3, gpt2 and default regex families.
#include <boost/test/unit_test.hpp>

#include "model/text/pretokenize.hpp"
#include "model/text/tokenizer.hpp"

using namespace conveyor::model;
using pieces = std::vector<std::string>;

namespace {

pieces split(pre_kind kind, std::string_view text) {
  const pretokenizer p(kind);
  std::vector<std::string_view> views;
  p.split(text, views);
  return pieces(views.begin(), views.end());
}

} // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_pretokenize)

BOOST_AUTO_TEST_CASE(smollm_examples_of_the_reference) {
  BOOST_TEST(split(pre_kind::smollm, " 123") == (pieces{" ", "1", "2", "3"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::smollm, "  multiple   spaces") == (pieces{" ", " multiple", "  ", " spaces"}),
             boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::smollm, "Hello world! 123") == (pieces{"Hello", " world", "!", " ", "1", "2", "3"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(smollm_splits_every_digit) {
  BOOST_TEST(split(pre_kind::smollm, "abc123def") == (pieces{"abc", "1", "2", "3", "def"}),
             boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::smollm, "x٣²") == (pieces{"x", "٣", "²"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::smollm, "3.14") == (pieces{"3", ".", "1", "4"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(smollm_contractions_are_case_sensitive) {
  BOOST_TEST(split(pre_kind::smollm, "I'm I'M we'll") == (pieces{"I", "'m", " I", "'", "M", " we", "'ll"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(smollm_whitespace_runs_and_newlines) {
  BOOST_TEST(split(pre_kind::smollm, "a\n\nb") == (pieces{"a", "\n", "\n", "b"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::smollm, "end   ") == (pieces{"end", "   "}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::smollm, "\t\tx") == (pieces{"\t", "\t", "x"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::smollm, "").empty());
}

BOOST_AUTO_TEST_CASE(whitespace_is_llama_cpp_set_including_nel) {
  // U+0085 is whitespace for llama.cpp (PCRE2's own \s lacks it): "  " stays apart from it.
  BOOST_TEST(split(pre_kind::smollm, "x  \u0085y") == (pieces{"x", "  ", "\u0085", "y"}),
             boost::test_tools::per_element());
  // U+200B is not whitespace: the second space joins it as punctuation.
  BOOST_TEST(split(pre_kind::smollm, "x  \u200By") == (pieces{"x", " ", " \u200B", "y"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(llama3_regex) {
  BOOST_TEST(split(pre_kind::llama3, "I'M here") == (pieces{"I", "'M", " here"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::llama3, "12345") == (pieces{"123", "45"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::llama3, "hello\n\nworld") == (pieces{"hello", "\n\n", "world"}),
             boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::llama3, ".Hello") == (pieces{".Hello"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::llama3, "a...\n\nb") == (pieces{"a", "...\n\n", "b"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::llama3, "  x") == (pieces{" ", " x"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::llama3, "x  ") == (pieces{"x", "  "}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::llama3, "\tword \n ") == (pieces{"\tword", " \n", " "}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gpt2_keeps_numbers_together) {
  BOOST_TEST(split(pre_kind::gpt2, "abc123 456") == (pieces{"abc", "123", " 456"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(default_runs_four_regexes_in_sequence) {
  BOOST_TEST(split(pre_kind::default_bpe, "1234567") == (pieces{"123", "456", "7"}), boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::default_bpe, "hello, world") == (pieces{"hello", ",", " world"}),
             boost::test_tools::per_element());
  BOOST_TEST(split(pre_kind::default_bpe, "a+b") == (pieces{"a", "+", "b"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(pieces_tile_long_pathological_input) {
  // Long runs must neither hit a PCRE2 limit nor lose bytes.
  for (const std::string unit : {" ", "!", "a", "1", " \n", "🚀"}) {
    std::string text;
    while (text.size() < 200000) text += unit;
    text += "x";
    for (pre_kind k : {pre_kind::smollm, pre_kind::llama3, pre_kind::gpt2, pre_kind::default_bpe}) {
      std::string joined;
      for (const std::string& p : split(k, text)) joined += p;
      BOOST_TEST(joined == text);
    }
  }
}

BOOST_AUTO_TEST_CASE(pre_names_and_flags) {
  BOOST_TEST(find_pre("smollm")->clean_spaces == false);
  BOOST_TEST((find_pre("starcoder")->kind == pre_kind::smollm));
  BOOST_TEST((find_pre("minerva-7b")->kind == pre_kind::smollm));
  BOOST_TEST(find_pre("llama-bpe")->ignore_merges);
  BOOST_TEST(find_pre("llama3")->add_bos);
  BOOST_TEST((find_pre("gpt-2")->kind == pre_kind::gpt2));
  BOOST_TEST((find_pre("default")->kind == pre_kind::default_bpe));
  BOOST_TEST((find_pre("qwen2")->kind == pre_kind::qwen2));
  BOOST_TEST(!find_pre("qwen2")->clean_spaces);
  BOOST_TEST(!find_pre("qwen2")->ignore_merges);
  BOOST_TEST(!find_pre("qwen2")->add_bos);
  BOOST_TEST((find_pre("deepseek-r1-qwen")->kind == pre_kind::qwen2));
  BOOST_TEST(!find_pre("tekken").has_value());
  BOOST_TEST(supported_pre_names().find("smollm") != std::string::npos);
  BOOST_TEST(supported_pre_names().find("qwen2") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
