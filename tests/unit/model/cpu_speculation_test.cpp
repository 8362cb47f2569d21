// Speculative decoding on the CPU executor changes nothing but the speed: the real scheduler and
// the real executor, each job's tokens, logprobs, alternatives and finish reason identical with
// n-gram drafting on and off, greedy and seeded (temperature 0.8 with top-p / top-k), with
// logit_bias and penalties, with structured outputs (XGrammar: regexes, JSON objects, a JSON
// schema), alone and in a batch of 32 mixed jobs, on random-weight models of every architecture
// (both numerics) and on SmolLM2; and with a draft model (a random small model of the same
// vocabulary, and the model as its own draft).
#include <boost/test/unit_test.hpp>

#include <functional>
#include <map>

#include "engine/scheduler.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/cpu/draft_model.hpp"
#include "model/formats/gguf.hpp"
#include "model/text/grammar.hpp"
#include "model/text/tokenizer.hpp"
#include "model_files.hpp"
#include "spec_driver.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

// Jobs made afresh for each run: a grammar is the state of its job.
using job_maker = std::function<std::vector<request>()>;

void check_equal(executor& ex, const job_maker& make, int32_t max_num_seqs, int64_t& accepted,
                 const std::shared_ptr<draft_proposer>& draft = nullptr) {
  const std::vector<request> jobs = make();
  const run_out off = run_jobs(ex, jobs, false, max_num_seqs, nullptr), on = run_jobs(ex, make(), true, max_num_seqs, draft);
  BOOST_TEST(off.stats.num_spec_drafts == 0);
  for (const request& r : jobs) {
    BOOST_TEST_CONTEXT("job " << r.id) {
      BOOST_REQUIRE(off.jobs.count(r.id) == 1u);
      BOOST_TEST(!off.jobs.at(r.id).tokens.empty());
      BOOST_TEST((off.jobs.at(r.id) == on.jobs.at(r.id)), "tokens, logprobs or alternatives differ with speculation on");
    }
  }
  accepted += on.stats.num_spec_accepted_tokens;
}

void check_equal(executor& ex, const std::vector<request>& jobs, int32_t max_num_seqs, int64_t& accepted,
                 const std::shared_ptr<draft_proposer>& draft = nullptr) {
  check_equal(ex, [&] { return jobs; }, max_num_seqs, accepted, draft);
}

// mixed_jobs with grammars on two of every three, whose prompts hold text the grammar allows (so
// that lookups propose it): ab-words, dashed digits, JSON objects, a JSON schema's records.
// The random-weight models of every architecture, written once per test as `name`-ARCH.gguf.
const char* const k_archs[] = {"llama", "qwen2", "qwen3", "config-b"};

gguf_file arch_model(const std::string& arch, const std::string& name, int32_t& vocab) {
  tiny_llama_spec spec = arch == "config-b" ? tiny_config_b() : tiny_config_a();
  if (arch != "config-b") spec.arch = arch;
  const std::string path = testing::temp_path(name + "-" + arch + ".gguf");
  write_tiny_llama(path, spec);
  vocab = static_cast<int32_t>(tiny_vocab(spec).size());
  return gguf_file::open(path);
}

cpu_executor_options options(cpu_math math) {
  cpu_executor_options o;
  o.block_size = 16;
  o.num_kv_blocks = 32 * 8;
  o.max_model_len = 128;
  o.math = math;
  o.threads = 2;
  return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cpu_speculation)

BOOST_AUTO_TEST_CASE(every_architecture_gives_the_same_output_with_drafts) {
  int64_t accepted = 0;
  for (const std::string arch : k_archs) {
    int32_t vocab = 0;
    auto f = arch_model(arch, "spec", vocab);
    for (cpu_math math : {cpu_math::fast, cpu_math::exact}) {
      BOOST_TEST_CONTEXT(arch << " " << to_string(math)) {
        cpu_executor ex(f, options(math));
        BOOST_TEST(ex.info().verifies_drafts);
        for (const request& r : mixed_jobs(6, vocab, 40)) check_equal(ex, {r}, 1, accepted);  // alone
        check_equal(ex, mixed_jobs(32, vocab, 24), 32, accepted);                             // a batch of 32
      }
    }
  }
  BOOST_TEST_MESSAGE("drafted tokens accepted: " << accepted);
  BOOST_TEST(accepted > 100);  // drafts did stand, and so were not all rejected
}

// Penalties (repetition over prompt and output, frequency and presence over the output) with
// drafts: row i of a verification draws with the drafts before it counted, so penalized jobs
// draft, have drafts accepted, and give the tokens they give without drafting.
BOOST_AUTO_TEST_CASE(penalized_jobs_draft_and_change_nothing) {
  int32_t vocab = 0;
  auto f = arch_model("llama", "spec-penalties", vocab);
  cpu_executor ex(f, options(cpu_math::fast));
  std::vector<request> jobs = mixed_jobs(12, vocab, 40);
  for (size_t i = 0; i < jobs.size(); ++i) {
    sampling_params& sp = jobs[i].sampling;
    sp.repetition_penalty = i % 3 == 1 ? 1.0f : 1.2f;
    sp.frequency_penalty = i % 3 == 0 ? 0.0f : 0.5f;
    sp.presence_penalty = i % 2 == 0 ? 0.0f : 0.3f;
    jobs[i].speculate = true;
  }
  int64_t alone = 0, batched = 0;
  for (const request& r : jobs) check_equal(ex, {r}, 1, alone);
  check_equal(ex, jobs, 12, batched);
  BOOST_TEST_MESSAGE("drafted tokens of penalized jobs accepted: " << alone << " alone, " << batched << " in a batch");
  BOOST_TEST(alone > 10);
}

BOOST_AUTO_TEST_CASE(smollm2_gives_the_same_output_with_drafts) {
  auto f = gguf_file::open(testing::smollm2_path());
  int64_t accepted = 0;
  cpu_executor ex(f, options(cpu_math::fast));
  check_equal(ex, mixed_jobs(1, 4000, 48), 1, accepted);
  check_equal(ex, mixed_jobs(32, 4000, 24), 32, accepted);
  BOOST_TEST_MESSAGE("drafted tokens accepted: " << accepted);
  BOOST_TEST(accepted > 20);
}

BOOST_AUTO_TEST_CASE(structured_outputs_give_the_same_output_with_drafts) {
  int64_t accepted = 0, accepted_constrained = 0;
  const auto check = [&](const gguf_file& f, cpu_math math, int32_t max_tokens) {
    const tokenizer tok = tokenizer::from_gguf(f);
    cpu_executor ex(f, options(math));
    const grammar_compiler gc(tok, ex.info().vocab_size);
    for (int32_t i = 0; i < 6; ++i)  // alone; jobs 2 and 5 have no grammar
      check_equal(ex, [&] { return std::vector<request>{constrained_jobs(gc, tok, 6, max_tokens)[static_cast<size_t>(i)]}; }, 1,
                  i % 3 == 2 ? accepted : accepted_constrained);
    check_equal(ex, [&] { return constrained_jobs(gc, tok, 32, max_tokens); }, 32, accepted);  // a batch of 32
  };
  for (const std::string arch : k_archs) {
    int32_t vocab = 0;
    auto f = arch_model(arch, "spec-grammar", vocab);
    for (cpu_math math : {cpu_math::fast, cpu_math::exact})
      BOOST_TEST_CONTEXT(arch << " " << to_string(math)) { check(f, math, 40); }
  }
  BOOST_TEST_CONTEXT("SmolLM2") { check(gguf_file::open(testing::smollm2_path()), cpu_math::fast, 48); }
  BOOST_TEST_MESSAGE("drafted tokens accepted: " << accepted << ", by constrained jobs alone: " << accepted_constrained);
  BOOST_TEST(accepted_constrained > 100);  // grammars did draft, and drafts stood
}

BOOST_AUTO_TEST_CASE(a_draft_model_changes_nothing_but_the_speed) {
  tiny_llama_spec target = tiny_config_a(), small = tiny_config_a();
  small.n_layer = 1;  // fewer parameters, other weights, the same vocabulary
  small.n_embd = 64;
  small.n_head = 2;
  small.output = ggml_type::q8_0;
  small.tied = false;  // its own LM head: its drafts are not the target's (tied heads repeat the last token)
  small.n_ff = 96;
  small.seed = 7;
  const std::string target_path = testing::temp_path("spec-target.gguf"), small_path = testing::temp_path("spec-draft.gguf");
  write_tiny_llama(target_path, target);
  write_tiny_llama(small_path, small);
  auto f = gguf_file::open(target_path);
  const int32_t vocab = static_cast<int32_t>(tiny_vocab(target).size());
  cpu_executor ex(f, options(cpu_math::fast));
  const auto drafting = [&](const std::string& path) {
    draft_model_options d;
    d.vocab_size = ex.info().vocab_size;
    d.num_kv_blocks = ex.info().num_kv_blocks + 64;
    d.threads = 2;
    return std::make_shared<cpu_draft_proposer>(std::make_unique<gguf_file>(gguf_file::open(path)), d);
  };
  for (const std::string& path : {small_path, target_path}) {
    BOOST_TEST_CONTEXT("draft " << path) {
      auto draft = drafting(path);
      int64_t accepted = 0, greedy_accepted = 0;
      for (const request& r : mixed_jobs(6, vocab, 40))
        check_equal(ex, {r}, 1, r.sampling.temperature == 0.0f ? greedy_accepted : accepted, draft);
      check_equal(ex, mixed_jobs(32, vocab, 24), 32, accepted, draft);
      BOOST_TEST(draft->num_sequences() == 0u);  // every ended sequence released
      BOOST_TEST_MESSAGE("accepted: greedy alone " << greedy_accepted << ", others " << accepted << "; draft tokens computed "
                                                   << draft->num_computed_tokens());
      BOOST_TEST(draft->num_computed_tokens() > 0);
      // The model as its own draft: a greedy job's drafts are its own tokens, all accepted.
      if (path == target_path) BOOST_TEST(greedy_accepted > 60);
    }
  }
  draft_model_options wrong;
  wrong.vocab_size = vocab + 1;
  BOOST_CHECK_THROW(cpu_draft_proposer(std::make_unique<gguf_file>(gguf_file::open(small_path)), wrong), model_error);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
