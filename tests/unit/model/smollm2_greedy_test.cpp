// SmolLM2-135M-Instruct Q4_1: our greedy continuations equal llama.cpp's on the same weights
// (tests/data/smollm2_greedy.json, made by scripts/make_generation_goldens.py; llama.cpp runs the
// Q4_1 weights dequantized to F32, so both multiply in f32), except after a step where
// llama.cpp's own top-2 logit margin is below 0.1: there float rounding may pick either token.
// Agreement with llama.cpp's native 8-bit-activation path is logged, not asserted (see the
// script's docstring and docs/benchmarks.md for why it cannot be followed token for token).
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "greedy_driver.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"
#include "model/text/tokenizer.hpp"
#include "model_files.hpp"

namespace conveyor::model {

BOOST_AUTO_TEST_SUITE(smollm2_greedy)

BOOST_AUTO_TEST_CASE(continuations_equal_llama_cpp) {
  std::ifstream in(std::string(CONVEYOR_TEST_DATA) + "/smollm2_greedy.json");
  BOOST_REQUIRE_MESSAGE(in, "tests/data/smollm2_greedy.json missing; HINT: re-run scripts/make_generation_goldens.py");
  const auto golden = nlohmann::json::parse(in);
  auto f = gguf_file::open(testing::smollm2_path());
  auto tok = tokenizer::from_gguf(f);
  cpu_executor_options o;
  o.num_kv_blocks = 64;
  o.math = cpu_math::exact;  // llama.cpp's goldens come from f32 weights and f32 activations
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

// The fast numerics (8-bit activations, as llama.cpp's native Q4_1 path) against llama.cpp's
// native run: tokens agree up to where llama.cpp's own top-2 margin is a near-tie. Both sides round
// activations to 8 bits but not identically (per-block scales in another order, different sums),
// so a divergence is excused only at a native margin below 0.5 (measured: see the log line).
BOOST_AUTO_TEST_CASE(fast_math_follows_llama_cpp_native_run) {
  std::ifstream in(std::string(CONVEYOR_TEST_DATA) + "/smollm2_greedy.json");
  BOOST_REQUIRE(in);
  const auto golden = nlohmann::json::parse(in);
  auto f = gguf_file::open(testing::smollm2_path());
  cpu_executor_options o;
  o.num_kv_blocks = 64;
  cpu_executor ex(f, o);
  BOOST_REQUIRE(o.math == cpu_math::fast);
  int32_t agree = 0, total = 0, whole = 0;
  for (const auto& c : golden["cases"]) {
    BOOST_TEST_CONTEXT("prompt " << c["name"].get<std::string>()) {
      const auto native = c["native_tokens"].get<std::vector<token_id>>();
      const auto margins = c["native_margins"].get<std::vector<double>>();
      std::vector<driven_seq> seqs(1);
      seqs[0].prompt = c["prompt_ids"].get<std::vector<token_id>>();
      seqs[0].max_new = static_cast<int32_t>(native.size());
      run_greedy(ex, seqs, 64);
      size_t n = 0;
      while (n < native.size() && seqs[0].out[n] == native[n]) ++n;
      agree += static_cast<int32_t>(n);
      total += static_cast<int32_t>(native.size());
      whole += n == native.size();
      if (n < native.size())
        BOOST_TEST(margins[n] < 0.5, "diverges from llama.cpp's native run at token " << n << " where its margin is " << margins[n]);
    }
  }
  BOOST_TEST_MESSAGE("fast math: " << agree << " of " << total << " tokens equal llama.cpp's native run up to the first divergence; "
                                   << whole << " of 10 prompts equal throughout");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
