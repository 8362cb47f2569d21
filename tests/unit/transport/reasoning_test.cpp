// The reasoning split (vLLM's --reasoning-parser qwen3 / deepseek_r1): whole texts against the
// expected parts, and every way of cutting a text into deltas gives the whole text's split.
#include <boost/test/unit_test.hpp>

#include <random>

#include "transport/reasoning.hpp"

using namespace conveyor::transport;

namespace {

struct split_case {
  reasoning_parser parser;
  std::string text, reasoning, content;
};

const std::vector<split_case> cases = {
    {reasoning_parser::qwen3, "<think>\nLet me see.\n</think>\n\nParis.", "\nLet me see.\n", "Paris."},
    {reasoning_parser::qwen3, "Paris.", "", "Paris."},                   // enable_thinking: false
    {reasoning_parser::qwen3, "<thin", "", "<thin"},                      // cut short: not a tag after all
    {reasoning_parser::qwen3, "<think>still thinking", "still thinking", ""},  // max_tokens inside the thought
    {reasoning_parser::qwen3, "<think></think>", "", ""},
    {reasoning_parser::qwen3, "x<think>a</think>b", "", "x<think>a</think>b"},  // only an opening tag counts
    {reasoning_parser::qwen3, "<think>a</thinker> b</think>c</think>", "a</thinker> b", "c</think>"},
    {reasoning_parser::deepseek_r1, "Hmm, 2+2.</think>\n4", "Hmm, 2+2.", "4"},
    {reasoning_parser::deepseek_r1, "<think>Hmm.</think>4", "Hmm.", "4"},
    {reasoning_parser::deepseek_r1, "no end tag", "no end tag", ""},
    {reasoning_parser::deepseek_r1, "<th", "<th", ""},
    {reasoning_parser::none, "<think>a</think>b", "", "<think>a</think>b"},
};

} // namespace

BOOST_AUTO_TEST_SUITE(reasoning)

BOOST_AUTO_TEST_CASE(whole_texts_split_as_expected) {
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.text) {
      const reasoning_split s = split_reasoning(c.parser, c.text);
      BOOST_TEST(s.reasoning == c.reasoning);
      BOOST_TEST(s.content == c.content);
    }
  }
}

BOOST_AUTO_TEST_CASE(any_cut_into_deltas_splits_as_the_whole) {
  std::mt19937 rng(5);
  for (const auto& c : cases) {
    for (int trial = 0; trial < 200; ++trial) {
      reasoning_stream s(c.parser);
      std::string reasoning, content;
      for (size_t at = 0; at < c.text.size();) {
        const size_t n = std::uniform_int_distribution<size_t>(0, 4)(rng);
        const reasoning_split d = s.feed(std::string_view(c.text).substr(at, n));
        reasoning += d.reasoning;
        content += d.content;
        at += n;
      }
      const reasoning_split end = s.finish();
      BOOST_TEST_CONTEXT(c.text << " trial " << trial) {
        BOOST_TEST(reasoning + end.reasoning == c.reasoning);
        BOOST_TEST(content + end.content == c.content);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(parser_names) {
  BOOST_TEST((parse_reasoning_parser("qwen3") == reasoning_parser::qwen3));
  BOOST_TEST((parse_reasoning_parser("deepseek_r1") == reasoning_parser::deepseek_r1));
  BOOST_TEST((parse_reasoning_parser("") == reasoning_parser::none));
  BOOST_TEST(!parse_reasoning_parser("granite").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
