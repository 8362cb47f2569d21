// Pipelined steps on the CUDA executor (docs/gpu.md §3, "Pipelined steps"): the engine's
// scheduler plans step N+1 while step N is in flight, exactly as the scheduler actor does with
// x_submit / x_collect, and the CUDA executor queues it behind N with k_previous_sample decodes
// resolved on the device. The same plans are then replayed one synchronous step() at a time on a
// fresh executor, with those tokens filled in on the host: every sampled id and log-probability
// must be bit-identical. In the emulator a stream runs only when waited on, so a pinned
// metadata or result buffer reused too early, or an id read from the wrong row, shows here.
#include <boost/test/unit_test.hpp>

#include <map>

#include "engine/scheduler.hpp"
#include "gpu/cuda_executor.hpp"
#include "gpu_support.hpp"
#include "lockstep.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {

namespace {

struct recorded {
  std::vector<step_plan> plans;     // as submitted, placeholders included
  std::vector<step_result> results;  // in the same order
  std::map<seq_id, std::vector<token_id>> streams;
  int32_t placeholders = 0, max_outstanding = 0;
};

request job(seq_id id, std::vector<token_id> prompt, int32_t max_tokens) {
  request r;
  r.id = id;
  r.prompt_token_ids = std::move(prompt);
  r.stop.max_tokens = max_tokens;
  return r;
}

// The scheduler actor's pipelined loop, without actors: submit, plan the next while it runs,
// collect the oldest when two are out or nothing new could be planned.
recorded run_pipelined(cuda_executor& gpu, std::vector<request> jobs) {
  scheduler_config sc;
  sc.max_num_seqs = 4;
  sc.max_num_batched_tokens = 24;  // the long prompt goes in chunks beside decodes
  sc.max_model_len = 64;
  cache_config cc;
  cc.block_size = gpu.info().block_size;
  cc.enable_prefix_caching = false;
  conveyor::scheduler s(sc, cc, gpu.info().num_kv_blocks);
  for (auto& r : jobs) BOOST_REQUIRE(s.submit(std::move(r), 0).accepted);
  recorded rec;
  int32_t outstanding = 0;
  for (int guard = 0; guard < 400 && (s.has_unfinished() || outstanding > 0); ++guard) {
    const step_plan plan = s.schedule(0);
    if (!plan.seqs.empty()) {
      for (const auto& p : plan.seqs) rec.placeholders += p.tokens.back() == k_previous_sample ? 1 : 0;
      gpu.submit(plan);
      rec.plans.push_back(plan);
      ++outstanding;
      rec.max_outstanding = std::max(rec.max_outstanding, gpu.num_outstanding());
    }
    if (outstanding == 2 || (outstanding == 1 && plan.seqs.empty())) {
      step_result r = gpu.collect();
      --outstanding;
      for (const auto& e : s.update(r, 0))
        if (e.kind == event_kind::token) rec.streams[e.id].push_back(e.token);
      rec.results.push_back(std::move(r));
    }
  }
  BOOST_TEST(!s.has_unfinished());
  return rec;
}

// The same plans, one step() at a time, each placeholder replaced by the previous result's token.
void replay_synchronously(cuda_executor& gpu, const recorded& rec) {
  BOOST_REQUIRE(rec.plans.size() == rec.results.size());
  std::map<seq_id, token_id> last;
  for (size_t i = 0; i < rec.plans.size(); ++i) {
    BOOST_TEST_CONTEXT("step " << i) {
      step_plan p = rec.plans[i];
      for (auto& s : p.seqs)
        if (s.tokens.back() == k_previous_sample) s.tokens.back() = last.at(s.id);
      const step_result r = gpu.step(p);
      last.clear();
      BOOST_REQUIRE(r.sampled.size() == rec.results[i].sampled.size());
      for (size_t k = 0; k < r.sampled.size(); ++k) {
        const sampled_token& a = r.sampled[k];
        const sampled_token& b = rec.results[i].sampled[k];
        BOOST_TEST(a.id == b.id);
        BOOST_TEST(a.token == b.token);
        BOOST_TEST(a.logprob == b.logprob);
        BOOST_TEST(a.top.size() == b.top.size());
        last[a.id] = a.token;
      }
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_pipeline, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(pipelined_steps_equal_synchronous_steps) {
  const model::tiny_llama_spec spec = model::tiny_config_a();
  const std::string path = model::testing::temp_path("gpu_pipeline.gguf");
  model::write_tiny_llama(path, spec);
  auto f = model::gguf_file::open(path);
  const int32_t V = static_cast<int32_t>(model::tiny_vocab(spec).size());
  for (bool graphs : {true, false}) {
    BOOST_TEST_CONTEXT((graphs ? "graphs" : "eager")) {
      std::vector<request> jobs{job(1, prompt_of(5, V, 0), 7), job(2, prompt_of(40, V, 1), 5), job(3, prompt_of(3, V, 2), 9),
                                job(4, prompt_of(11, V, 3), 6)};
      jobs[2].sampling.temperature = 0.9f;  // drawn on the device, seeded
      jobs[2].sampling.seed = 11;
      jobs[3].sampling.top_logprobs = 2;  // sampled on the host: that step waits in submit()
      cuda_executor pipelined(f, gpu_opts(4, 64, graphs));
      const recorded rec = run_pipelined(pipelined, jobs);
      BOOST_TEST(rec.placeholders > 10, "few decodes were planned ahead");
      BOOST_TEST(rec.max_outstanding == 2);
      for (const auto& r : jobs) BOOST_TEST(rec.streams.at(r.id).size() == static_cast<size_t>(r.stop.max_tokens));
      cuda_executor synchronous(f, gpu_opts(4, 64, graphs));
      replay_synchronously(synchronous, rec);
    }
  }
}

BOOST_AUTO_TEST_CASE(pipeline_misuse_is_refused) {
  const model::tiny_llama_spec spec = model::tiny_config_a();
  const std::string path = model::testing::temp_path("gpu_pipeline_misuse.gguf");
  model::write_tiny_llama(path, spec);
  auto f = model::gguf_file::open(path);
  cuda_executor gpu(f, gpu_opts(4, 16, false));
  BOOST_CHECK_THROW(gpu.collect(), std::logic_error);
  step_plan a;
  a.step_id = 1;
  a.seqs.push_back({1, 0, {5, 6, 7}, {0}, true, {}, nullptr, {}, {}, 0});
  step_plan orphan = a;  // seq 2 sampled nothing before
  orphan.seqs[0].id = 2;
  orphan.seqs[0].num_computed_tokens = 0;
  orphan.seqs[0].tokens = {k_previous_sample};
  orphan.seqs[0].block_table = {1};
  BOOST_CHECK_THROW(gpu.submit(orphan), std::invalid_argument);
  gpu.submit(a);
  step_plan b = a;
  b.step_id = 2;
  b.seqs[0].num_computed_tokens = 3;
  b.seqs[0].tokens = {k_previous_sample};
  gpu.submit(b);
  BOOST_CHECK_THROW(gpu.submit(b), std::logic_error);  // a third before a collect
  BOOST_TEST(gpu.collect().step_id == 1u);
  BOOST_TEST(gpu.collect().step_id == 2u);
  BOOST_TEST(gpu.num_outstanding() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
