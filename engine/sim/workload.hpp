// Pure. Synthetic workloads for `conveyor sim`, drawn from a seeded std::mt19937_64:
//   anyscale  N prompts of input_len random ids; outputs exponential with mean output_len,
//             resampled until <= cap (Anyscale's continuous-batching benchmark);
//   fixed     N prompts of input_len, outputs of exactly output_len;
//   uniform   input and output lengths uniform in [len * (1 - range_ratio), len * (1 + range_ratio)];
//   poisson   Anyscale's latency test: inputs uniform as above, outputs capped exponential.
// Arrivals: all at t = 0 when request_rate is infinite, else a Poisson process at that rate
// (poisson requires a finite rate). Token ids are uniform in [10, 50000], as Anyscale's.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/types.hpp"

namespace conveyor::sim {

enum class workload_kind { anyscale, fixed, uniform, poisson };

std::optional<workload_kind> parse_workload_kind(const std::string& text);
const char* to_string(workload_kind kind);

/// The lengths every synthetic workload shares (this one's and `conveyor bench`'s), and their checks.
struct workload_lengths {
  /// Requests in the run. >= 1.
  int32_t num_prompts = 1000;
  /// Prompt length, or the centre / mean of its distribution. Unit: tokens. >= 1.
  int32_t input_len = 512;
  /// Output length, or the centre / mean of its distribution. Unit: tokens. >= 1.
  int32_t output_len = 128;
  /// Longest length drawn from an unbounded distribution (the capped exponential). Unit: tokens. >= 1.
  int32_t cap = 512;
  /// Half-width of uniform lengths, as a fraction of the centre. In [0, 1).
  double range_ratio = 0.5;

  /// "" when valid, else a message naming the first bad field as a setting ("num_prompts") or,
  /// with `as_flags`, as a command-line flag ("--num-prompts").
  std::string validate_lengths(bool as_flags) const;
};

/// fixed: input_len and output_len exactly; uniform: both around their centre; anyscale and
/// poisson: output_len is the exponential's mean.
struct workload_params : workload_lengths {
  workload_kind kind = workload_kind::anyscale;
  /// Mean arrivals per second; infinity sends everything at t = 0.
  double request_rate = std::numeric_limits<double>::infinity();
  uint64_t seed = 0;

  /// Returns "" when valid, else a message naming the field and the fix.
  std::string validate() const;
};

struct sim_request {
  double arrival_s = 0.0;
  std::vector<token_id> prompt;
  /// Tokens to generate (the request ignores EOS, so it gets exactly these).
  int32_t output_len = 0;
};

/// The requests of a workload, sorted by arrival. `params` must validate.
std::vector<sim_request> make_workload(const workload_params& params);

} // namespace conveyor::sim
