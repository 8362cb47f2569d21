// Speculative decoding in the engine: the n-gram proposer, the drafting rule, and seeded random
// workloads through kv_toy_executor (whose tokens are read back from the paged KV cache, so a
// rejected draft left in the cache, a wrong num_computed_tokens or a rejected token in the
// prefix cache all change the tokens): every job's events must be identical with speculation on
// and off, synchronous and pipelined, under preemption, chunking, prefix caching, cancels and
// grammars (a toy one: drafts it refuses are cut, and it must see exactly the output tokens),
// with prompt lookup and with a draft model stand-in (released with every ended sequence).
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>
#include <random>

#include "engine/speculation.hpp"
#include "engine_test_util.hpp"
#include "kv_toy_executor.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

int32_t pick(std::mt19937_64& rng, int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); }

// Refuses one token; complete after `length` tokens. Records what it was made to accept.
struct toy_grammar final : token_constraint {
  token_id refused = 0;
  int32_t length = 0;
  std::vector<token_id> seen;
  void fill_mask(std::vector<uint32_t>& mask) override { mask.assign(1, ~0u); }
  bool accept(token_id t) override {
    if (t == refused || terminated()) return false;
    seen.push_back(t);
    return true;
  }
  bool terminated() const override { return static_cast<int32_t>(seen.size()) >= length; }
  void rollback(int32_t n) override {
    BOOST_TEST_REQUIRE(n <= static_cast<int32_t>(seen.size()));
    seen.resize(seen.size() - static_cast<size_t>(n));
  }
};

// A draft model stand-in: prompt lookup, else the newest token again; records the sequences it
// was asked about until they are released.
struct toy_draft final : draft_proposer {
  std::set<seq_id> live;
  int64_t calls = 0;
  int32_t propose(seq_id id, std::span<const token_id> tokens, int32_t k, std::vector<token_id>& out) override {
    live.insert(id);
    ++calls;
    if (propose_ngram(tokens, 1, 3, k, out) == 0) out.assign(1, tokens.back());
    return static_cast<int32_t>(out.size());
  }
  void release(seq_id id) override { live.erase(id); }
};

struct job_log {
  std::vector<std::pair<token_id, float>> tokens;
  finish_reason reason = finish_reason::stop;
  int32_t num_output_tokens = -1;
  bool finished = false;
};

struct run_result {
  std::map<seq_id, job_log> jobs;
  std::map<seq_id, request> requests;
  int64_t drafts = 0, accepted = 0, max_step_tokens = 0, draft_calls = 0;
  int32_t max_model_len = 0;
  scheduler_stats stats;
};

scheduler_config spec_config(int32_t k = 4) {
  scheduler_config c;
  c.speculative.method = spec_method::ngram;
  c.speculative.num_speculative_tokens = k;
  return c;
}

// One seeded workload; `spec` turns drafting on (the workload is the same either way).
run_result run_seed(uint64_t seed, bool spec, bool pipelined, bool draft = false) {
  std::mt19937_64 rng(seed);
  scheduler_config sched = spec_config(pick(rng, 1, 6));
  if (!spec) sched.speculative.method = spec_method::none;
  auto toy = std::make_shared<toy_draft>();
  if (spec && draft) {
    sched.speculative.method = spec_method::draft_model;
    sched.speculative.model = "toy";
    sched.speculative.draft = toy;
  }
  sched.speculative.prompt_lookup_min = pick(rng, 1, 2);
  sched.speculative.prompt_lookup_max = pick(rng, 2, 4);
  sched.speculative.fixed_cost_tokens = pick(rng, 1, 64);
  cache_config cache;
  cache.block_size = 1 << pick(rng, 0, 3);
  const int32_t num_blocks = pick(rng, 8, 48);
  sched.max_model_len = std::min(num_blocks * cache.block_size, pick(rng, 8, 80));
  sched.max_num_seqs = pick(rng, 1, 8);
  sched.max_num_batched_tokens = pick(rng, 1, 48);
  sched.policy = pick(rng, 0, 1) ? scheduling_policy::priority : scheduling_policy::fcfs;
  sched.batching = pick(rng, 0, 4) == 0 ? batching_mode::static_batch : batching_mode::continuous;
  cache.enable_prefix_caching = pick(rng, 0, 1) == 1;
  cache.kv_watermark = pick(rng, 0, 2) == 0 ? 0.1 : 0.0;
  conveyor::scheduler s(sched, cache, num_blocks);
  kv_toy_executor ex(num_blocks, cache.block_size, sched.max_model_len, toy_copy_next_token);
  ex.set_verifies_drafts();

  run_result out;
  std::vector<token_id> stem;
  for (int i = 0; i < 12; ++i) stem.push_back(pick(rng, 10, 14));
  const int32_t num_jobs = pick(rng, 4, 24);
  for (seq_id id = 1; id <= static_cast<seq_id>(num_jobs); ++id) {
    request r;
    r.id = id;
    const int32_t len = pick(rng, 1, sched.max_model_len - 1);
    for (int32_t i = 0; i < len; ++i) r.prompt_token_ids.push_back(i < 12 && pick(rng, 0, 2) ? stem[static_cast<size_t>(i)] : pick(rng, 10, 14));
    r.stop.max_tokens = pick(rng, 1, 40);
    r.stop.min_tokens = pick(rng, 0, 2) == 0 ? pick(rng, 0, r.stop.max_tokens) : 0;
    r.stop.eos_token_ids = {0};
    r.stop.stop_token_ids = pick(rng, 0, 3) == 0 ? std::vector<token_id>{3} : std::vector<token_id>{};
    r.stop.ignore_eos = pick(rng, 0, 1) == 1;
    r.priority = pick(rng, 0, 3);
    r.speculate = pick(rng, 0, 5) != 0;
    if (pick(rng, 0, 3) == 0) {
      auto g = std::make_shared<toy_grammar>();
      g->refused = pick(rng, 10, 20);  // 15..20 never come: only the length ends it
      g->length = pick(rng, 1, 30);
      r.constraint = g;
    }
    out.requests[id] = r;
  }
  seq_id next_id = 1;
  int32_t outstanding = 0;
  auto take = [&](const std::vector<seq_event>& events) {
    for (const seq_event& e : events) {
      job_log& j = out.jobs[e.id];
      BOOST_TEST(!j.finished, "event after the finish of " << e.id);
      if (e.kind == event_kind::token) {
        j.tokens.emplace_back(e.token, e.logprob);
      } else {
        j.finished = true;
        j.reason = e.reason;
        j.num_output_tokens = e.num_output_tokens;
      }
    }
  };
  for (int step = 0; step < 20000; ++step) {
    BOOST_TEST_CONTEXT("seed " << seed << (spec ? " spec" : " plain") << (pipelined ? " pipelined" : "") << " step " << step) {
      // Arrivals depend on the step number only through the rng: the same in both runs.
      if (next_id <= static_cast<seq_id>(num_jobs) && (step % 3 == 0)) {
        const request& r = out.requests.at(next_id++);
        BOOST_REQUIRE(s.submit(r, step).accepted);
      }
      const step_plan plan = s.schedule(step);
      take(s.take_events());
      BOOST_TEST(plan.num_tokens() <= sched.max_num_batched_tokens);
      out.max_step_tokens = std::max<int64_t>(out.max_step_tokens, plan.num_tokens());
      for (const scheduled_seq& p : plan.seqs) {
        if (p.num_drafts == 0) continue;
        const request& r = out.requests.at(p.id);
        BOOST_TEST(r.speculate, "drafted for a job that opted out");
        // Never past max_model_len; every draft could stand without passing max_tokens.
        BOOST_TEST(p.num_computed_tokens + static_cast<int32_t>(p.tokens.size()) < sched.max_model_len);
        const sequence* seq = s.find(p.id);
        BOOST_TEST(seq->num_output_tokens() + p.num_drafts + 1 <= r.stop.max_tokens);
        if (const auto* g = dynamic_cast<const toy_grammar*>(r.constraint.get())) {  // only what it takes
          for (size_t i = p.tokens.size() - static_cast<size_t>(p.num_drafts); i < p.tokens.size(); ++i) BOOST_TEST(p.tokens[i] != g->refused);
          BOOST_TEST(static_cast<int32_t>(g->seen.size()) + p.num_drafts <= g->length);
        }
      }
      if (!plan.seqs.empty()) {
        ex.submit(plan);
        ++outstanding;
      }
      if (outstanding > 0 && (!pipelined || outstanding == 2 || plan.seqs.empty())) {
        take(s.update(ex.collect(), step));
        --outstanding;
      }
      const std::string inv = s.check_invariants();
      BOOST_REQUIRE_MESSAGE(inv.empty(), inv);
    }
    if (next_id > static_cast<seq_id>(num_jobs) && !s.has_unfinished() && outstanding == 0) break;
  }
  BOOST_TEST(!s.has_unfinished());
  BOOST_TEST(s.kv().num_used_blocks() == 0);
  BOOST_TEST(toy->live.empty(), "the draft model still holds " << toy->live.size() << " ended sequences");
  out.draft_calls = toy->calls;
  // A grammar saw exactly the job's tokens (a draft tried and not rolled back would show).
  for (const auto& [id, r] : out.requests) {
    const auto* g = dynamic_cast<const toy_grammar*>(r.constraint.get());
    if (g == nullptr) continue;
    std::vector<token_id> ids;
    for (const auto& [t, lp] : out.jobs[id].tokens) ids.push_back(t);
    if (!ids.empty() && ids.back() == g->refused) ids.pop_back();
    BOOST_TEST((g->seen == ids), "job " << id << ": the grammar saw other tokens than the output");
  }
  out.stats = s.stats();
  // Static batch members reserve their whole life: drafts never make them short of blocks.
  if (sched.batching == batching_mode::static_batch) BOOST_TEST(out.stats.num_preemptions == 0);
  out.drafts = ex.num_drafts();
  out.max_model_len = sched.max_model_len;
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(speculation)

BOOST_AUTO_TEST_CASE(prompt_lookup_proposes_what_followed_the_newest_ngram) {
  std::vector<token_id> out;
  // "5 6" occurs once earlier (at 1), followed by 7 8 9; a match of 2 proposes at most 4.
  const std::vector<token_id> t{4, 5, 6, 7, 8, 9, 1, 2, 5, 6};
  BOOST_TEST(propose_ngram(t, 2, 2, 3, out) == 3);
  BOOST_TEST(out == (std::vector<token_id>{7, 8, 9}));
  BOOST_TEST(propose_ngram(t, 2, 2, 8, out) == 4);
  BOOST_TEST(out == (std::vector<token_id>{7, 8, 9, 1}));
  // Longest n first: "2 5 6" occurs nowhere earlier, "5 6" does.
  BOOST_TEST(propose_ngram(t, 2, 3, 2, out) == 2);
  BOOST_TEST(out == (std::vector<token_id>{7, 8}));
  // Capped by the end of the sequence.
  const std::vector<token_id> u{1, 2, 3, 1, 2};
  BOOST_TEST(propose_ngram(u, 2, 2, 8, out) == 3);
  BOOST_TEST(out == (std::vector<token_id>{3, 1, 2}));
  // A longer match wins over a later shorter one: "2 3" at 1 (then 4), "3" alone later (then 9).
  const std::vector<token_id> v{1, 2, 3, 4, 3, 9, 2, 3};
  BOOST_TEST(propose_ngram(v, 1, 2, 1, out) == 1);
  BOOST_TEST(out == (std::vector<token_id>{4}));
  // Nothing: no earlier occurrence, too short, or k 0.
  BOOST_TEST(propose_ngram(std::vector<token_id>{1, 2, 3, 4}, 1, 3, 4, out) == 0);
  BOOST_TEST(out.empty());
  BOOST_TEST(propose_ngram(std::vector<token_id>{7}, 1, 3, 4, out) == 0);
  BOOST_TEST(propose_ngram(t, 2, 2, 0, out) == 0);
}

BOOST_AUTO_TEST_CASE(prompt_lookup_drafts_while_the_occurrences_agree) {
  std::vector<token_id> out;
  // "3" occurs at 0, 3 and 6 (latest first: 6, 3, 0), followed by 7 8 | 7 8 | 7 9. All three
  // say 7; of those, two of three say 8 then (2/3 >= 3/5); a match of one token drafts <= 2.
  const std::vector<token_id> t{3, 7, 9, 3, 7, 8, 3, 7, 8, 3};
  BOOST_TEST(propose_ngram(t, 1, 1, 8, out) == 2);
  BOOST_TEST(out == (std::vector<token_id>{7, 8}));
  // Two occurrences that disagree at once (1/2 < 3/5): nothing, and no shorter n is tried.
  const std::vector<token_id> u{4, 5, 6, 7, 8, 5, 6, 9, 1, 5, 6};
  BOOST_TEST(propose_ngram(u, 1, 2, 3, out) == 0);
  BOOST_TEST(out.empty());
  // They agree on 1 2, then split: the vote stops there (the latest one's 5 is not proposed).
  const std::vector<token_id> w{8, 9, 1, 2, 4, 0, 8, 9, 1, 2, 5, 0, 8, 9};
  BOOST_TEST(propose_ngram(w, 2, 2, 8, out) == 2);
  BOOST_TEST(out == (std::vector<token_id>{1, 2}));
  // An occurrence that runs out stops voting: "2" occurs at 1 and at 0, both followed by 2; at
  // the second token only the older one reaches that far, and it proposes alone.
  const std::vector<token_id> x{2, 2, 2};
  BOOST_TEST(propose_ngram(x, 1, 1, 8, out) == 2);
  BOOST_TEST(out == (std::vector<token_id>{2, 2}));
}

BOOST_AUTO_TEST_CASE(a_grammar_cuts_the_proposal_and_is_left_as_it_was) {
  toy_grammar g;
  g.refused = 13;
  g.length = 10;
  g.seen = {5};
  BOOST_TEST(grammar_prefix(g, std::vector<token_id>{6, 7, 13, 8}) == 2);  // refused at 13
  BOOST_TEST((g.seen == std::vector<token_id>{5}));
  BOOST_TEST(grammar_prefix(g, std::vector<token_id>{6, 7, 8}) == 3);
  g.length = 3;  // complete after two more: nothing follows the draft that completes it
  BOOST_TEST(grammar_prefix(g, std::vector<token_id>{6, 7, 8}) == 2);
  BOOST_TEST((g.seen == std::vector<token_id>{5}));
  BOOST_TEST(grammar_prefix(g, std::vector<token_id>{13}) == 0);
  BOOST_TEST(grammar_prefix(g, std::vector<token_id>{}) == 0);
}

BOOST_AUTO_TEST_CASE(drafts_follow_the_record_and_stop_when_the_step_is_compute_bound) {
  spec_history fresh;  // 1/2
  const double one_decode_cpu = draft_threshold(4.0, 1), batch_32 = draft_threshold(4.0, 32);
  BOOST_TEST(one_decode_cpu == 0.2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(batch_32 == 32.0 / 36.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(draft_budget(fresh, 8, one_decode_cpu) == 2);  // 0.5, 0.25 > 0.2; 0.125 is not
  BOOST_TEST(draft_budget(fresh, 8, batch_32) == 0);
  spec_history good;
  for (int i = 0; i < 20; ++i) good.record(4, 4);  // always accepted: p near 1
  BOOST_TEST(good.accept_rate() > 0.95);
  BOOST_TEST(draft_budget(good, 4, one_decode_cpu) == 4);
  BOOST_TEST(draft_budget(good, 8, batch_32) >= 1);
  BOOST_TEST(draft_budget(good, 3, batch_32) <= 3);
  spec_history bad;
  for (int i = 0; i < 20; ++i) bad.record(2, 0);  // always rejected at once
  BOOST_TEST(bad.accept_rate() < 0.15);
  BOOST_TEST(draft_budget(bad, 4, one_decode_cpu) == 0);
  bad.idle_steps = spec_retry_steps;  // a long pause: one draft to look again
  BOOST_TEST(draft_budget(bad, 4, one_decode_cpu) == 1);
  BOOST_TEST(draft_budget(bad, 0, one_decode_cpu) == 0);
  bad.record(1, 1);
  BOOST_TEST(bad.idle_steps == 0);
  // The geometric estimate: 3 of 4 reached accepted (one rejection after three).
  spec_history h;
  h.record(4, 3);
  BOOST_TEST(h.accepted == 3.0);
  BOOST_TEST(h.reached == 4.0);
  h.record(2, 2);  // all accepted: nothing rejected was reached
  BOOST_TEST(h.reached == 4.0 * spec_history_decay + 2.0, boost::test_tools::tolerance(1e-12));
}

// A prompt chunk in the step does not make drafting look cheap: the threshold is the step's
// decodes' output per row (here one decode and one whole prompt, both sampling: 2 / (6 + 2)),
// not lowered by the chunk's rows (2 / (6 + 1 + 20) would let a fresh record, p = 1/2, draft 3).
BOOST_AUTO_TEST_CASE(a_prompt_chunk_in_the_step_does_not_lower_the_draft_threshold) {
  scheduler_config sc = spec_config(8);
  sc.speculative.fixed_cost_tokens = 6.0;
  sc.max_num_batched_tokens = 64;
  sc.max_model_len = 256;
  cache_config cache;
  cache.block_size = 16;
  conveyor::scheduler s(sc, cache, 64);
  request a;
  a.id = 1;
  a.prompt_token_ids = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3};
  a.stop.max_tokens = 32;
  a.stop.ignore_eos = true;
  BOOST_REQUIRE(s.submit(a, 0.0).accepted);
  const step_plan first = s.schedule(0.0);
  BOOST_REQUIRE(first.seqs.size() == 1u);
  step_result r;
  r.step_id = first.step_id;
  r.sampled.push_back({1, 4, 0.0f, {}});  // the pattern goes on: lookup finds it
  s.update(r, 0.0);
  request b;
  b.id = 2;
  for (int i = 0; i < 20; ++i) b.prompt_token_ids.push_back(100 + i);
  b.stop.max_tokens = 8;
  BOOST_REQUIRE(s.submit(b, 1.0).accepted);
  const step_plan second = s.schedule(1.0);
  BOOST_REQUIRE(second.seqs.size() == 2u);
  int32_t drafts_a = -1;
  for (const scheduled_seq& q : second.seqs) {
    if (q.id == 1) drafts_a = q.num_drafts;
    else BOOST_TEST((q.tokens.size() == 20u && q.sample));  // b's whole prompt, sampling
  }
  BOOST_TEST(drafts_a == 1);  // 0.5 > 0.25; 0.25 is not
}

BOOST_AUTO_TEST_CASE(settings_are_checked) {
  speculative_config c;
  c.method = spec_method::ngram;
  BOOST_TEST(c.validate() == "");
  c.num_speculative_tokens = 0;
  BOOST_TEST(c.validate().find("num_speculative_tokens") != std::string::npos);
  c.num_speculative_tokens = 4;
  c.prompt_lookup_min = c.prompt_lookup_max + 1;
  BOOST_TEST(c.validate().find("prompt_lookup_min") != std::string::npos);
  BOOST_TEST((parse_spec_method("ngram") == spec_method::ngram));
  BOOST_TEST(!parse_spec_method("eagle").has_value());
  scheduler_config sc = spec_config();
  sc.speculative.prompt_lookup_max = 40;
  BOOST_TEST(sc.validate().find("prompt_lookup_max") != std::string::npos);
  // A draft model: named, and loaded before the scheduler runs.
  speculative_config d;
  d.method = spec_method::draft_model;
  BOOST_TEST(d.validate().find("needs model") != std::string::npos);
  d.model = "small.gguf";
  BOOST_TEST(d.validate() == "");
  scheduler_config with_draft;
  with_draft.speculative = d;
  BOOST_TEST(with_draft.validate().find("'small.gguf' is not loaded") != std::string::npos);
  with_draft.speculative.draft = std::make_shared<toy_draft>();
  BOOST_TEST(with_draft.validate() == "");
  c.prompt_lookup_min = 1;
  c.model = "small.gguf";  // ngram with a model
  BOOST_TEST(c.validate().find("only for method draft_model") != std::string::npos);
  BOOST_TEST((parse_spec_method("draft_model") == spec_method::draft_model));
}

BOOST_AUTO_TEST_CASE(random_workloads_are_identical_with_speculation_on_and_off) {
  int64_t drafts = 0, accepted = 0, verifications = 0, rejected_steps = 0, draft_calls = 0;
  for (uint64_t seed = 1; seed <= 120; ++seed) {
    for (bool pipelined : {false, true}) {
      const bool draft = seed % 3 == 0;  // a third with the draft model stand-in
      BOOST_TEST_CONTEXT("seed " << seed << (pipelined ? " pipelined" : " synchronous") << (draft ? " draft model" : "")) {
        const run_result off = run_seed(seed, false, pipelined), on = run_seed(seed, true, pipelined, draft);
        BOOST_TEST(off.drafts == 0);
        for (const auto& [id, r] : off.requests) {
          BOOST_TEST_CONTEXT("job " << id) {
            const job_log& a = off.jobs.at(id);
            const job_log& b = on.jobs.at(id);
            BOOST_TEST(a.finished);
            BOOST_TEST(b.finished);
            BOOST_TEST((a.tokens == b.tokens), "the events differ with speculation on");
            BOOST_TEST(a.reason == b.reason);
            BOOST_TEST(a.num_output_tokens == b.num_output_tokens);
            // Both are the reference stream, read through the KV cache.
            std::vector<token_id> ids;
            for (const auto& [t, lp] : b.tokens) ids.push_back(t);
            const request ref_req = r.stop.min_tokens > 0 ? request{} : r;  // reference_stream ignores min_tokens
            if (r.stop.min_tokens == 0 && r.stop.stop_token_ids.empty() && !r.constraint)
              BOOST_TEST((ids == reference_stream(ref_req, on.max_model_len, toy_copy_next_token)), "not the reference stream");
          }
        }
        draft_calls += on.draft_calls;
        if (!draft) {  // prompt lookup's record
          drafts += on.drafts;
          accepted += on.stats.num_spec_accepted_tokens;
          verifications += on.stats.num_spec_drafts;
          rejected_steps += on.stats.num_spec_draft_tokens - on.stats.num_spec_accepted_tokens > 0 ? 1 : 0;
        }
        BOOST_TEST(on.stats.num_spec_draft_tokens == on.drafts);
      }
    }
  }
  // The workloads do exercise speculation: many drafts, most but not all accepted.
  BOOST_TEST(verifications > 1000);
  BOOST_TEST(accepted > drafts / 3);
  BOOST_TEST(accepted < drafts);
  BOOST_TEST(rejected_steps > 100);
  BOOST_TEST(draft_calls > 300);  // the draft model stand-in was asked
}

BOOST_AUTO_TEST_SUITE_END()
