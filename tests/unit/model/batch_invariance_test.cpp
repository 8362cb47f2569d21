// Batch invariance: a prompt's greedy tokens do not depend on what else is in the step nor on how
// its prompt is chunked (acceptance 2 of the foundation). Logits agree to float rounding, not bit
// for bit: OpenBLAS picks different sgemm kernels by row count (measured: row 0 of an M=1 and an
// M=16 product differ in the last bit for most columns); through SmolLM2's 30 layers that grows
// to ~1.5e-4 of the largest logit, hence the 1e-3 bound.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "greedy_driver.hpp"
#include "model/cpu_executor.hpp"
#include "model/gguf.hpp"
#include "model/tokenizer.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  double err = 0, mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, static_cast<double>(std::abs(a[i] - b[i])));
    mag = std::max(mag, static_cast<double>(std::abs(b[i])));
  }
  return err / mag;
}

constexpr int32_t kBlocksPerSeq = 16;  // block_size 16 -> 256 positions per sequence

cpu_executor make_executor(const gguf_file& f) {
  cpu_executor_options o;
  o.block_size = 16;
  o.num_kv_blocks = 8 * kBlocksPerSeq;
  return cpu_executor(f, o);
}

driven_seq seq_of(std::vector<token_id> prompt, int32_t chunk, int32_t start, int32_t max_new) {
  driven_seq s;
  s.prompt = std::move(prompt);
  s.chunk = chunk;
  s.start_step = start;
  s.max_new = max_new;
  return s;
}

// Runs `prompt` alone with each chunking, then inside a batch of 8 where 7 others (different
// prompts, started at different steps) are mid-prompt or mid-decode; all must agree exactly.
void check_invariance(const gguf_file& f, const std::vector<token_id>& prompt, const std::vector<std::vector<token_id>>& others,
                      int32_t max_new) {
  cpu_executor ex = make_executor(f);
  auto logits_of = [&](size_t k) {
    const int32_t v = ex.info().vocab_size;
    return std::vector<float>(ex.last_logits().begin() + static_cast<std::ptrdiff_t>(k) * v,
                              ex.last_logits().begin() + static_cast<std::ptrdiff_t>(k + 1) * v);
  };
  std::vector<driven_seq> alone{seq_of(prompt, 0, 0, max_new)};
  run_greedy(ex, alone, kBlocksPerSeq, logits_of);
  const driven_seq& base = alone[0];
  for (int32_t chunk : {1, 7, 64, 0}) {
    BOOST_TEST_CONTEXT("chunk " << chunk) {
      std::vector<driven_seq> one{seq_of(prompt, chunk, 0, max_new)};
      run_greedy(ex, one, kBlocksPerSeq, logits_of);
      BOOST_TEST(one[0].out == base.out, boost::test_tools::per_element());
      BOOST_TEST(rel_diff(one[0].first_logits, base.first_logits) < 1e-3);
    }
  }
  std::vector<driven_seq> batch;
  for (size_t i = 0; i < others.size(); ++i)
    batch.push_back(seq_of(others[i], static_cast<int32_t>(3 + 5 * i), static_cast<int32_t>(i % 3), max_new + static_cast<int32_t>(i)));
  batch.push_back(seq_of(prompt, 0, 4, max_new));  // joins while the others are mid-prompt or decoding
  run_greedy(ex, batch, kBlocksPerSeq, logits_of);
  BOOST_TEST(batch.back().out == base.out, boost::test_tools::per_element());
  BOOST_TEST(rel_diff(batch.back().first_logits, base.first_logits) < 1e-3);
}

} // namespace

BOOST_AUTO_TEST_SUITE(batch_invariance)

BOOST_AUTO_TEST_CASE(tiny_model_tokens_independent_of_batch_and_chunking) {
  const std::string path = testing::temp_path("invariance.gguf");
  write_tiny_llama(path, tiny_config_a());
  auto f = gguf_file::open(path);
  std::vector<token_id> prompt;
  for (int32_t i = 0; i < 90; ++i) prompt.push_back(3 + (i * 29 + 7) % 250);
  std::vector<std::vector<token_id>> others;
  for (int32_t s = 0; s < 7; ++s) {
    others.emplace_back();
    for (int32_t i = 0; i < 20 + 13 * s; ++i) others.back().push_back(3 + (i * 17 + s * 31) % 250);
  }
  check_invariance(f, prompt, others, 12);
}

BOOST_AUTO_TEST_CASE(smollm2_tokens_independent_of_batch_and_chunking) {
  auto f = gguf_file::open(testing::smollm2_path());
  auto tok = tokenizer::from_gguf(f);
  const auto prompt = tok.encode(
      "Continuous batching schedules every step anew: running sequences decode one token each, and waiting prompts "
      "are admitted in chunks while the token budget lasts. The main benefit of this design is",
      false);
  const char* texts[] = {"Hello", "def add(a, b):\n    return", "1, 1, 2, 3, 5, 8,", "Paris is the capital of",
                         "Le chat est", "The quick brown fox jumps over the lazy dog. The quick brown fox", "Once upon a time"};
  std::vector<std::vector<token_id>> others;
  for (const char* t : texts) others.push_back(tok.encode(t, false));
  check_invariance(f, prompt, others, 8);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
