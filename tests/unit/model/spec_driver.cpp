// The scheduler-driven job runner of spec_driver.hpp.
#include "spec_driver.hpp"

#include <boost/test/unit_test.hpp>

namespace conveyor::model {

bool job_out::operator==(const job_out& o) const {
  if (tokens != o.tokens || logprobs != o.logprobs || reason != o.reason || tops.size() != o.tops.size()) return false;
  for (size_t i = 0; i < tops.size(); ++i) {
    if (tops[i].size() != o.tops[i].size()) return false;
    for (size_t k = 0; k < tops[i].size(); ++k)
      if (tops[i][k].token != o.tops[i][k].token || tops[i][k].logprob != o.tops[i][k].logprob) return false;
  }
  return true;
}

// `draft`: a draft model for the "on" run instead of prompt lookup.
run_out run_jobs(executor& ex, const std::vector<request>& jobs, bool spec, int32_t max_num_seqs,
                 const std::shared_ptr<draft_proposer>& draft, bool pipelined) {
  scheduler_config sc;
  sc.max_model_len = ex.info().max_model_len;
  sc.max_num_seqs = max_num_seqs;
  sc.max_num_batched_tokens = 256;
  if (spec) {
    sc.speculative.method = draft ? spec_method::draft_model : spec_method::ngram;
    sc.speculative.num_speculative_tokens = 5;
    sc.speculative.prompt_lookup_min = 1;
    sc.speculative.fixed_cost_tokens = 64;  // draft eagerly, large batches included
    sc.speculative.draft = draft;
    sc.speculative.model = draft ? "draft" : "";
  }
  cache_config cc;
  cc.block_size = ex.info().block_size;
  scheduler s(sc, cc, ex.info().num_kv_blocks);
  for (const request& r : jobs) BOOST_REQUIRE(s.submit(r, 0).accepted);
  run_out out;
  const auto take = [&](const std::vector<seq_event>& events) {
    for (const seq_event& e : events) {
      job_out& j = out.jobs[e.id];
      if (e.kind == event_kind::finished) {
        j.reason = e.reason;
        continue;
      }
      j.tokens.push_back(e.token);
      j.logprobs.push_back(e.logprob);
      j.tops.push_back(e.top);
    }
  };
  int32_t outstanding = 0;  // pipelined: the scheduler actor's loop (plan N+1 while N runs)
  for (int step = 0; (s.has_unfinished() || outstanding > 0) && step < 10000; ++step) {
    const step_plan plan = s.schedule(0);
    if (!pipelined) {
      if (!plan.seqs.empty()) take(s.update(ex.step(plan), 0));
      continue;
    }
    if (!plan.seqs.empty()) {
      ex.submit(plan);
      ++outstanding;
    }
    if (outstanding > 0 && (outstanding == 2 || plan.seqs.empty())) {
      take(s.update(ex.collect(), 0));
      --outstanding;
    }
  }
  BOOST_TEST(!s.has_unfinished());
  out.stats = s.stats();
  return out;
}

// Prompts that repeat themselves (so that lookups find something), and others that do not.
std::vector<request> mixed_jobs(int32_t n, int32_t vocab, int32_t max_tokens) {
  std::vector<request> jobs;
  for (int32_t i = 0; i < n; ++i) {
    request r;
    r.id = static_cast<seq_id>(i + 1);
    const int32_t phrase = 3 + i % 5, len = 12 + (i * 7) % 20;
    for (int32_t p = 0; p < len; ++p) r.prompt_token_ids.push_back(3 + ((i % 3 == 2 ? p : p % phrase) * 31 + i * 17) % (vocab - 3));
    r.stop.max_tokens = max_tokens - i % 4;
    r.stop.eos_token_ids = {0};
    sampling_params& sp = r.sampling;
    sp.temperature = 0.0f;
    sp.seed = 1000 + static_cast<uint64_t>(i);
    if (i % 2 == 1) {  // seeded sampling
      sp.temperature = 0.8f;
      sp.top_p = 0.9f;
      sp.top_k = 40;
    }
    if (i % 4 == 1) sp.top_logprobs = 3;
    if (i % 6 == 3) sp.logit_bias = {{5, 2.5f}, {7, -1.0f}};
    if (i % 8 == 5) sp.repetition_penalty = 1.3f;  // drafted: each row's edits count the drafts before it
    if (i % 10 == 7) sp.frequency_penalty = 0.6f, sp.presence_penalty = 0.4f;
    r.speculate = i % 9 != 8;
    jobs.push_back(std::move(r));
  }
  return jobs;
}

std::vector<request> constrained_jobs(const grammar_compiler& gc, const tokenizer& tok, int32_t n, int32_t max_tokens) {
  const std::string record = R"({"name":"ab","tags":["x","y"],"n":12})";
  const std::pair<grammar_kind, std::string> grammars[] = {
      {grammar_kind::regex, "(ab|ba|abc|cab)( (ab|ba|abc|cab))*"},
      {grammar_kind::json_object, ""},
      {grammar_kind::json_schema, R"({"type":"object","properties":{"name":{"type":"string"},)"
                                  R"("tags":{"type":"array","items":{"enum":["x","y"]}},"n":{"type":"integer"}},)"
                                  R"("required":["name","tags","n"],"additionalProperties":false})"},
      {grammar_kind::regex, "[0-9]{3}(-[0-9]{3})+"},
  };
  const std::string text = "ab ba abc cab ab 123-456-789 " + record + " ab";  // short: tiny models hold 128
  std::vector<request> jobs = mixed_jobs(n, tok.vocab_size(), max_tokens);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (i % 3 == 2) continue;
    const auto& [kind, spec] = grammars[(i / 3 + i) % 4];
    jobs[i].constraint = gc.constrain(kind, spec);
    jobs[i].prompt_token_ids = tok.encode(text.substr(i % 7), false);
  }
  return jobs;
}

} // namespace conveyor::model
