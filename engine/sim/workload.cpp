#include "engine/sim/workload.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/enum_names.hpp"

namespace conveyor::sim {

namespace {

constexpr auto workload_kind_names = make_enum_names<workload_kind>(
    {{workload_kind::anyscale, "anyscale"}, {workload_kind::fixed, "fixed"}, {workload_kind::uniform, "uniform"},
     {workload_kind::poisson, "poisson"}});

} // namespace

std::optional<workload_kind> parse_workload_kind(const std::string& text) { return workload_kind_names.parse(text); }
const char* to_string(workload_kind kind) { return workload_kind_names.name(kind); }

std::string workload_lengths::validate_lengths(bool as_flags) const {
  auto field = [as_flags](std::string name) {
    if (!as_flags) return name;
    std::replace(name.begin(), name.end(), '_', '-');
    return "--" + name;
  };
  if (num_prompts < 1) return field("num_prompts") + " must be >= 1";
  if (input_len < 1) return field("input_len") + " must be >= 1";
  if (output_len < 1) return field("output_len") + " must be >= 1";
  if (cap < 1) return field("cap") + " must be >= 1";
  if (!(range_ratio >= 0.0 && range_ratio < 1.0)) return field("range_ratio") + " must be in [0, 1)";
  return {};
}

std::string workload_params::validate() const {
  if (auto err = validate_lengths(false); !err.empty()) return err;
  if (!(request_rate > 0.0)) return "request_rate must be > 0 (inf = all at t=0)";
  if (kind == workload_kind::poisson && std::isinf(request_rate))
    return "the poisson workload needs a finite request_rate (requests per second)";
  return {};
}

namespace {

int32_t capped_exponential(std::mt19937_64& rng, double mean, int32_t cap) {
  // As Anyscale's gen_random_response_lens: draw, resample while above the cap; at least 1.
  std::exponential_distribution<double> exp(1.0 / mean);
  for (;;) {
    const auto len = static_cast<int64_t>(std::llround(exp(rng)));
    if (len <= cap) return static_cast<int32_t>(std::max<int64_t>(len, 1));
  }
}

int32_t uniform_len(std::mt19937_64& rng, int32_t centre, double ratio) {
  const auto lo = std::max<int32_t>(1, static_cast<int32_t>(std::floor(centre * (1.0 - ratio))));
  const auto hi = std::max<int32_t>(lo, static_cast<int32_t>(std::ceil(centre * (1.0 + ratio))));
  return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
}

} // namespace

std::vector<sim_request> make_workload(const workload_params& p) {
  std::mt19937_64 rng(p.seed);
  std::uniform_int_distribution<token_id> token(10, 50000);
  std::vector<sim_request> out(p.num_prompts);
  double t = 0.0;
  for (sim_request& r : out) {
    if (!std::isinf(p.request_rate)) {
      t += std::exponential_distribution<double>(p.request_rate)(rng);
      r.arrival_s = t;
    }
    int32_t input = p.input_len;
    switch (p.kind) {
      case workload_kind::anyscale:
        r.output_len = capped_exponential(rng, p.output_len, p.cap);
        break;
      case workload_kind::fixed:
        r.output_len = p.output_len;
        break;
      case workload_kind::uniform:
        input = uniform_len(rng, p.input_len, p.range_ratio);
        r.output_len = uniform_len(rng, p.output_len, p.range_ratio);
        break;
      case workload_kind::poisson:
        input = uniform_len(rng, p.input_len, p.range_ratio);
        r.output_len = capped_exponential(rng, p.output_len, p.cap);
        break;
    }
    r.prompt.resize(input);
    for (token_id& id : r.prompt) id = token(rng);
  }
  return out;
}

} // namespace conveyor::sim
