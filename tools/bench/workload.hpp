// Pure (no sockets, no clocks, no files). The requests of a `conveyor bench` run, drawn from a
// seeded std::mt19937_64, and their arrival times:
//   random    prompt_tokens of input_len random ids; input and output lengths fixed, uniform,
//             capped-exponential or lognormal; output lengths forced (ignore_eos + min_tokens);
//   anyscale  Anyscale's continuous-batching benchmark: 512 (anyscale_input_len) random ids, outputs exponential
//             with mean 128 resampled until <= cap, forced. Lengths equal `conveyor sim
//             --workload anyscale` with the same seed and cap;
//   chat      `messages`: a system turn, 0-2 earlier exchanges and a user turn of English words
//             (about one token each), about input_len words in all; max_tokens lognormal around
//             output_len, capped; ends naturally unless ignore_eos;
//   file      JSONL, one {"prompt": S} | {"messages": [...]} | {"prompt_tokens": [I]} per line,
//             optional "max_tokens"; cycled to num_prompts.
// Arrivals: all at t = 0 (rate inf), else gaps drawn from a gamma distribution with shape
// `burstiness` and mean 1/rate (burstiness 1 = Poisson), first request at t = 0, as vLLM's.
#pragma once

#include <cstdint>
#include <istream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/sim/workload.hpp"

namespace conveyor::bench {

enum class workload_name { random, anyscale, chat, file };
enum class length_dist { fixed, uniform, capped_exponential, lognormal };

std::optional<workload_name> parse_workload_name(const std::string& text);
std::optional<length_dist> parse_length_dist(const std::string& text);
const char* to_string(workload_name w);
const char* to_string(length_dist d);

struct chat_message {
  std::string role;
  std::string content;
};

struct bench_request {
  /// Seconds after the run's start when it is due.
  double arrival_s = 0.0;
  /// Exactly one of the three prompt forms is set.
  std::vector<int32_t> prompt_tokens;
  std::string prompt;
  std::vector<chat_message> messages;
  int32_t max_tokens = 1;
  /// ignore_eos and min_tokens = max_tokens: the job produces exactly max_tokens tokens.
  bool force_length = false;
};

/// The lengths (sim::workload_lengths): input_len is the prompt tokens (random) or the centre / mean
/// of their distribution, 1024 unless set; cap is the longest length drawn by capped-exponential
/// and lognormal (and chat's max_tokens).
struct workload_options : sim::workload_lengths {
  workload_options() { input_len = 1024; }

  workload_name name = workload_name::random;
  /// anyscale: prompt tokens (Anyscale's experiment used 512). >= 1.
  int32_t anyscale_input_len = 512;
  length_dist input_dist = length_dist::fixed;
  length_dist output_dist = length_dist::fixed;
  /// Lognormal lengths: sigma of the underlying normal; the mean is the length. > 0.
  double lognormal_sigma = 0.5;
  /// Prompt token ids are uniform in [100, min(vocab_size, 50001)). > 100.
  int32_t vocab_size = 32000;
  /// chat and file: force output lengths too.
  bool ignore_eos = false;
  uint64_t seed = 0;

  /// "" when valid, else a message naming the option and the fix.
  std::string validate() const;
};

struct arrival_options {
  /// Mean requests per second; infinity sends everything at t = 0.
  double request_rate = std::numeric_limits<double>::infinity();
  /// Gamma shape of the inter-arrival gaps; 1 is Poisson, lower is burstier. > 0.
  double burstiness = 1.0;
};

/// One length from `dist` around `len` (at least 1; capped at `cap` where the dist is unbounded).
int32_t draw_length(std::mt19937_64& rng, length_dist dist, int32_t len, double range_ratio,
                    double sigma, int32_t cap);

/// The generated workloads (random, anyscale, chat). Arrival times are left at 0.
std::vector<bench_request> make_requests(const workload_options& o);

/// The file workload: parses JSONL from `in`, cycles it to o.num_prompts. Throws
/// std::invalid_argument naming the line on a bad line or an empty file.
std::vector<bench_request> read_requests(std::istream& in, const workload_options& o);

/// Arrival times for n requests (seconds, non-decreasing, the first at 0). Its own seed stream,
/// so lengths do not depend on the rate.
std::vector<double> arrival_times(int32_t n, const arrival_options& a, uint64_t seed);

} // namespace conveyor::bench
