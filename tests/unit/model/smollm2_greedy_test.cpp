// SmolLM2-135M-Instruct Q4_1: our greedy continuations equal llama.cpp's on the same weights
// (tests/data/smollm2_greedy.json, made by tools/make_generation_goldens.py; llama.cpp runs the
// Q4_1 weights dequantized to F32, so both multiply in f32), except after a step where
// llama.cpp's own top-2 logit margin is below 0.1: there float rounding may pick either token.
// Agreement with llama.cpp's native 8-bit-activation path is logged, not asserted (see the
// script's docstring and docs/benchmarks.md for why it cannot be followed token for token).
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "greedy_driver.hpp"
#include "model/cpu_executor.hpp"
#include "model/gguf.hpp"
#include "model/tokenizer.hpp"
#include "model_files.hpp"

namespace conveyor::model {

BOOST_AUTO_TEST_SUITE(smollm2_greedy)

BOOST_AUTO_TEST_CASE(continuations_equal_llama_cpp) {
  std::ifstream in(std::string(CONVEYOR_TEST_DATA) + "/smollm2_greedy.json");
  BOOST_REQUIRE_MESSAGE(in, "tests/data/smollm2_greedy.json missing; HINT: re-run tools/make_generation_goldens.py");
  const auto golden = nlohmann::json::parse(in);
  auto f = gguf_file::open(testing::smollm2_path());
  auto tok = tokenizer::from_gguf(f);
  cpu_executor_options o;
  o.num_kv_blocks = 64;
  cpu_executor ex(f, o);
  int32_t exact = 0, excused = 0, native_agree = 0, native_total = 0;
  for (const auto& c : golden["cases"]) {
    const std::string name = c["name"];
    BOOST_TEST_CONTEXT("prompt " << name) {
      const auto want = c["tokens"].get<std::vector<token_id>>();
      const auto margins = c["margins"].get<std::vector<double>>();
      const auto prompt = c["prompt_ids"].get<std::vector<token_id>>();
      BOOST_TEST(tok.encode(c["text"].get<std::string>(), c["chat"].get<bool>()) == prompt, boost::test_tools::per_element());
      std::vector<driven_seq> seqs(1);
      seqs[0].prompt = prompt;
      seqs[0].max_new = static_cast<int32_t>(want.size());
      run_greedy(ex, seqs, 64);
      const auto& got = seqs[0].out;
      const auto native = c["native_tokens"].get<std::vector<token_id>>();
      size_t n = 0;
      while (n < native.size() && n < got.size() && got[n] == native[n]) ++n;
      native_agree += static_cast<int32_t>(n);
      native_total += static_cast<int32_t>(native.size());
      size_t i = 0;
      while (i < want.size() && got[i] == want[i]) ++i;
      if (i == want.size()) {
        ++exact;
        continue;
      }
      BOOST_TEST(margins[i] < 0.1, "diverges at token " << i << " (ours " << got[i] << ", llama.cpp " << want[i]
                                                          << ") where llama.cpp's top-2 margin is " << margins[i]);
      if (margins[i] < 0.1) {
        ++excused;
        BOOST_TEST_MESSAGE("excused near-tie: " << name << " diverges at token " << i << " (margin " << margins[i] << ")");
      }
    }
  }
  BOOST_TEST_MESSAGE(exact << " prompts equal llama.cpp for all tokens, " << excused << " diverge after a near-tie");
  BOOST_TEST_MESSAGE(native_agree << " of " << native_total << " greedy tokens also equal llama.cpp's native Q8-activation run "
                                  << "(compared up to its first divergence per prompt)");
  BOOST_TEST(exact + excused == static_cast<int32_t>(golden["cases"].size()));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
