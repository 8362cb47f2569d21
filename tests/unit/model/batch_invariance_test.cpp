// Batch invariance: a sequence's logits are bit-identical whether it runs alone or in any batch,
// whatever its prompt chunking, in both numerics (cpu_matmul.hpp: every product element depends
// only on its weight row and its token's activations; attention per token over the cache;
// sampling a pure function of logits, params, seed and position). So greedy and seeded outputs are
// identical too, and a job resumed after a crash continues exactly as it would have.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "greedy_driver.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"
#include "model/text/tokenizer.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

constexpr int32_t kBlocksPerSeq = 16;  // block_size 16 -> 256 positions per sequence

cpu_executor make_executor(const gguf_file& f, cpu_math math, int32_t seqs, int32_t split_keys = 1024) {
  cpu_executor_options o;
  o.block_size = 16;
  if (split_keys != 1024) {  // two threads, so that a lone run's attention is split wherever it runs
    o.threads = 2;
    o.attention_split_keys = split_keys;
  }
  o.num_kv_blocks = seqs * kBlocksPerSeq;
  o.math = math;
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

std::function<std::vector<float>(size_t)> logits_reader(const cpu_executor& ex) {
  return [&ex](size_t k) {
    const int32_t v = ex.info().vocab_size;
    return std::vector<float>(ex.last_logits().begin() + static_cast<std::ptrdiff_t>(k) * v,
                              ex.last_logits().begin() + static_cast<std::ptrdiff_t>(k + 1) * v);
  };
}

// Runs `prompt` alone with each chunking, then inside a batch of 8 where 7 others (different
// prompts, started at different steps) are mid-prompt or mid-decode; every sampled row's logits
// must be bit-identical (hash over all of them) and so the tokens.
void check_invariance(const gguf_file& f, cpu_math math, const std::vector<token_id>& prompt,
                      const std::vector<std::vector<token_id>>& others, int32_t max_new) {
  BOOST_TEST_CONTEXT("math " << to_string(math)) {
    cpu_executor ex = make_executor(f, math, 8);
    std::vector<driven_seq> alone{seq_of(prompt, 0, 0, max_new)};
    run_greedy(ex, alone, kBlocksPerSeq, logits_reader(ex));
    const driven_seq& base = alone[0];
    for (int32_t chunk : {1, 7, 64, 0}) {
      BOOST_TEST_CONTEXT("chunk " << chunk) {
        std::vector<driven_seq> one{seq_of(prompt, chunk, 0, max_new)};
        run_greedy(ex, one, kBlocksPerSeq, logits_reader(ex));
        BOOST_TEST(one[0].out == base.out, boost::test_tools::per_element());
        BOOST_TEST(one[0].logits_hash == base.logits_hash);
      }
    }
    // A lone run's attention split over the threads (cpu_attention_split.cpp) from 16 positions
    // on: decodes and single-row prompt chunks by ranges of keys, then of dimensions.
    cpu_executor split = make_executor(f, math, 8, 16);
    for (int32_t chunk : {1, 7, 0}) {
      BOOST_TEST_CONTEXT("split attention, chunk " << chunk) {
        std::vector<driven_seq> one{seq_of(prompt, chunk, 0, max_new)};
        run_greedy(split, one, kBlocksPerSeq, logits_reader(split));
        BOOST_TEST(one[0].out == base.out, boost::test_tools::per_element());
        BOOST_TEST(one[0].logits_hash == base.logits_hash);
      }
    }
    std::vector<driven_seq> batch;
    for (size_t i = 0; i < others.size(); ++i)
      batch.push_back(seq_of(others[i], static_cast<int32_t>(3 + 5 * i), static_cast<int32_t>(i % 3), max_new + static_cast<int32_t>(i)));
    batch.push_back(seq_of(prompt, 0, 4, max_new));  // joins while the others are mid-prompt or decoding
    run_greedy(ex, batch, kBlocksPerSeq, logits_reader(ex));
    BOOST_TEST(batch.back().out == base.out, boost::test_tools::per_element());
    BOOST_TEST(batch.back().logits_hash == base.logits_hash);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(batch_invariance)

BOOST_AUTO_TEST_CASE(tiny_models_logits_independent_of_batch_and_chunking) {
  std::vector<token_id> prompt;
  for (int32_t i = 0; i < 90; ++i) prompt.push_back(3 + (i * 29 + 7) % 250);
  std::vector<std::vector<token_id>> others;
  for (int32_t s = 0; s < 7; ++s) {
    others.emplace_back();
    for (int32_t i = 0; i < 20 + 13 * s; ++i) others.back().push_back(3 + (i * 17 + s * 31) % 250);
  }
  // A: the legacy types; B: K-quants and BF16.
  for (const auto& [name, spec] : {std::pair{"a", tiny_config_a()}, std::pair{"b", tiny_config_b()}}) {
    BOOST_TEST_CONTEXT("config " << name) {
      const std::string path = testing::temp_path(std::string("invariance_") + name + ".gguf");
      write_tiny_llama(path, spec);
      auto f = gguf_file::open(path);
      for (cpu_math math : {cpu_math::fast, cpu_math::exact}) check_invariance(f, math, prompt, others, 12);
    }
  }
}

// The test: 32 prompts, each alone and all together with staggered arrivals and mixed
// chunk sizes, greedy and seeded (temperature 0.9, top-p 0.95, a seed per prompt): identical
// tokens and bit-identical logits, in the default (fast) numerics on the real model.
BOOST_AUTO_TEST_CASE(smollm2_32_prompts_alone_and_in_staggered_batches) {
  auto f = gguf_file::open(testing::smollm2_path());
  auto tok = tokenizer::from_gguf(f);
  const char* topics[] = {"the sea", "a clock", "bread", "rivers", "printing", "glass", "rain", "maps"};
  const char* forms[] = {"Write one sentence about", "Explain to a child", "def describe_", "List three facts about"};
  std::vector<std::vector<token_id>> prompts;
  for (int i = 0; i < 32; ++i)
    prompts.push_back(tok.encode(std::string(forms[i % 4]) + " " + topics[i % 8] + (i >= 16 ? ", briefly:" : ":"), false));
  cpu_executor ex = make_executor(f, cpu_math::fast, 32);
  for (bool seeded : {false, true}) {
    BOOST_TEST_CONTEXT((seeded ? "seeded" : "greedy")) {
      auto make = [&](size_t i, int32_t chunk, int32_t start) {
        driven_seq s = seq_of(prompts[i], chunk, start, 6 + static_cast<int32_t>(i % 5));
        if (seeded) {
          s.sampling.temperature = 0.9f;
          s.sampling.top_p = 0.95f;
          s.sampling.seed = 1000 + i;
        }
        return s;
      };
      std::vector<driven_seq> alone;
      for (size_t i = 0; i < prompts.size(); ++i) {
        std::vector<driven_seq> one{make(i, 0, 0)};
        run_greedy(ex, one, kBlocksPerSeq, logits_reader(ex));
        alone.push_back(one[0]);
      }
      std::vector<driven_seq> mixed;
      for (size_t i = 0; i < prompts.size(); ++i)
        mixed.push_back(make(i, static_cast<int32_t>(i % 4 == 0 ? 0 : 1 + i % 6), static_cast<int32_t>(i % 7)));
      run_greedy(ex, mixed, kBlocksPerSeq, logits_reader(ex));
      int32_t same = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        BOOST_TEST(mixed[i].out == alone[i].out, "prompt " << i << " tokens differ in the batch");
        BOOST_TEST(mixed[i].logits_hash == alone[i].logits_hash, "prompt " << i << " logits differ in the batch");
        same += mixed[i].out == alone[i].out;
      }
      BOOST_TEST_MESSAGE(same << " of 32 prompts identical alone and batched");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
