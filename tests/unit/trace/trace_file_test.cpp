// The trace reader: what a good trace gives, and a one-line error for everything else.
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "tools/trace/trace_file.hpp"
#include "trace_lines.hpp"

namespace conveyor::trace {
namespace {

using namespace testing;

trace_file parse(const std::string& text) {
  std::istringstream in(text);
  return parse_trace(in, "t.jsonl");
}

// Parses `text` and returns the error message ("" when it parsed).
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const trace_format_error& e) {
    return e.what();
  }
  return "";
}

} // namespace

BOOST_AUTO_TEST_SUITE(trace_file_reader)

BOOST_AUTO_TEST_CASE(reads_header_steps_and_interns_jobs_in_order_of_first_appearance) {
  const trace_file t = parse(header_line("static") + step_line(1, {{"b", 40, true}, {"a", 24, true}}, 3, 7) +
                             step_line(2, {{"a", 1, false}, {"b", 1, false}, {"c", 16, true}}, 2, 9, 1));
  BOOST_TEST(t.header.batching == "static");
  BOOST_TEST(t.header.max_num_seqs == 4);
  BOOST_TEST(t.header.max_num_batched_tokens == 64);
  BOOST_TEST(t.header.num_kv_blocks == 100);
  BOOST_TEST(t.header.block_size == 16);
  BOOST_TEST(t.header.model == "tiny");
  BOOST_TEST(t.jobs == (std::vector<std::string>{"b", "a", "c"}), boost::test_tools::per_element());
  BOOST_REQUIRE(t.steps.size() == 2u);
  BOOST_TEST(t.steps[0].step == 1);
  BOOST_TEST(t.steps[0].num_tokens() == 64);
  BOOST_TEST(t.steps[0].waiting == 3);
  BOOST_TEST(t.steps[0].kv_blocks_used == 7);
  BOOST_TEST(t.steps[0].seqs[0].job == 0);
  BOOST_TEST(t.steps[0].seqs[0].prompt);
  BOOST_TEST(t.steps[1].seqs[0].job == 1);
  BOOST_TEST(!t.steps[1].seqs[0].prompt);
  BOOST_TEST(t.steps[1].seqs[2].job == 2);
  BOOST_TEST(t.steps[1].preemptions == 1);
  BOOST_TEST(t.steps[1].duration_ms == 5.0);
  BOOST_TEST(!t.truncated_tail);
}

BOOST_AUTO_TEST_CASE(a_header_without_steps_is_an_empty_trace) {
  const trace_file t = parse(header_line() + "\n");
  BOOST_TEST(t.steps.empty());
  BOOST_TEST(t.jobs.empty());
}

BOOST_AUTO_TEST_CASE(drops_a_last_line_cut_short_by_a_kill) {
  const std::string full = step_line(2, {{"a", 1, false}});
  const trace_file t = parse(header_line() + step_line(1, {{"a", 8, true}}) + full.substr(0, full.size() / 2));
  BOOST_TEST(t.steps.size() == 1u);
  BOOST_TEST(t.truncated_tail);
}

BOOST_AUTO_TEST_CASE(refuses_what_is_not_a_trace_with_one_line_naming_file_and_line) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "t.jsonl: empty file"},
      {"hello world\n", "t.jsonl:1: not a conveyor trace (the first line is not JSON)"},
      {"{\"a\":1}\n", "t.jsonl:1: not a conveyor trace"},
      {"[1,2]\n", "t.jsonl:1: not a conveyor trace"},
      {header_line("continuous", 2), "t.jsonl:1: trace format version 2; this conveyor reads version 1"},
      {"{\"format\":\"conveyor-trace\",\"version\":\"1\"}\n", "no integer 'version'"},
      {"{\"format\":\"conveyor-trace\",\"version\":1}\n", "t.jsonl:1: bad header"},
      {header_line() + "garbage\n" + step_line(2, {}), "t.jsonl:2: not a JSON line"},
      {header_line() + "{\"step\":1}\n", "t.jsonl:2: bad step line"},
      {header_line() + "\n" + step_line(1, {{"a", 1, false}}).replace(step_line(1, {{"a", 1, false}}).find("decode"), 6, "verify"),
       "t.jsonl:3: bad step line: kind 'verify' is not prompt or decode"},
  };
  for (const auto& [text, expected] : cases) {
    BOOST_TEST_CONTEXT("input: " << text) {
      const std::string e = error_of(text);
      BOOST_TEST(e.find(expected) != std::string::npos, "error '" << e << "' lacks '" << expected << "'");
      BOOST_TEST(e.find('\n') == std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(read_trace_says_when_the_file_is_missing) {
  try {
    read_trace("/nonexistent/trace.jsonl");
    BOOST_FAIL("no error");
  } catch (const trace_format_error& e) {
    BOOST_TEST(std::string(e.what()) == "/nonexistent/trace.jsonl: cannot open: No such file or directory");
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::trace
