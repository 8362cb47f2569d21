#include "model/sampler.hpp"

#include <algorithm>
#include <cmath>

namespace conveyor::model {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float log_softmax_at(std::span<const float> logits, token_id id) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
  return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)] - mx) - std::log(sum));
}

} // namespace

double sample_coin(uint64_t seed, int64_t position) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(position));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

sample_result sample_token(std::span<const float> logits, const sampling_params& p, int64_t position,
                           sampler_scratch& scratch) {
  if (p.temperature == 0.0f) {
    token_id best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
      if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<token_id>(i);
    return {best, log_softmax_at(logits, best)};
  }
  auto& cand = scratch.cand;
  cand.clear();
  const float inv_t = 1.0f / p.temperature;
  for (size_t i = 0; i < logits.size(); ++i) cand.emplace_back(logits[i] * inv_t, static_cast<token_id>(i));
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t n = cand.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::nth_element(cand.begin(), cand.begin() + p.top_k, cand.end(), by_logit);
    n = static_cast<size_t>(p.top_k);
  }
  std::sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n), by_logit);
  // Probabilities of the survivors, in place of the scaled logits.
  const float mx = cand[0].first;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(cand[i].first - mx));
  for (size_t i = 0; i < n; ++i) cand[i].first = static_cast<float>(std::exp(static_cast<double>(cand[i].first - mx)) / sum);
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = 0;
    while (keep < n) {
      cum += cand[keep++].first;
      if (cum >= p.top_p) break;
    }
    n = std::max<size_t>(keep, 1);
  }
  if (p.min_p > 0.0f) {
    const float floor_p = p.min_p * cand[0].first;
    size_t keep = 1;
    while (keep < n && cand[keep].first >= floor_p) ++keep;
    n = keep;
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += cand[i].first;
  const double target = sample_coin(p.seed, position) * total;
  double cum = 0.0;
  token_id chosen = cand[n - 1].second;
  for (size_t i = 0; i < n; ++i) {
    cum += cand[i].first;
    if (target < cum) {
      chosen = cand[i].second;
      break;
    }
  }
  return {chosen, log_softmax_at(logits, chosen)};
}

} // namespace conveyor::model
