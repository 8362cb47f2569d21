// Test support: runs jobs through the real scheduler and an executor, with speculative decoding
// on or off, and collects each job's tokens, logprobs, alternatives and finish reason (the
// equality tests of the CPU executor, tests/unit/model/cpu_speculation_test.cpp, and of the CUDA
// executor, tests/gpu/speculation_test.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "engine/executor.hpp"
#include "engine/scheduler.hpp"
#include "model/text/grammar.hpp"
#include "model/text/tokenizer.hpp"

namespace conveyor::model {

struct job_out {
  std::vector<token_id> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<token_logprob>> tops;
  finish_reason reason = finish_reason::stop;
  bool operator==(const job_out& o) const;
};

struct run_out {
  std::map<seq_id, job_out> jobs;
  scheduler_stats stats;
};

/// Every job to its end, one synchronous step at a time (a token budget of 256), or pipelined as
/// the scheduler actor runs them (submit step N + 1 before collecting N). spec: n-gram drafting (5
/// tokens, lookup from 1, drafting at any batch size), or `draft` as a draft model.
run_out run_jobs(executor& ex, const std::vector<request>& jobs, bool spec, int32_t max_num_seqs,
                 const std::shared_ptr<draft_proposer>& draft, bool pipelined = false);

/// n jobs whose prompts repeat themselves (so that lookups find something) and others that do
/// not: greedy and seeded sampling, top logprobs, logit_bias, penalties, a job opting out.
std::vector<request> mixed_jobs(int32_t n, int32_t vocab, int32_t max_tokens);

/// mixed_jobs with structured outputs on two jobs of three (regexes, a JSON object, a JSON
/// schema) and prompts their grammars can copy from. Fresh grammars each call (a grammar is the
/// state of its job).
std::vector<request> constrained_jobs(const grammar_compiler& gc, const tokenizer& tok, int32_t n, int32_t max_tokens);

} // namespace conveyor::model
