#include "model/cpu/sampler.hpp"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "model/cpu/simd_exp.hpp"

namespace conveyor::model {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

using candidate = std::pair<float, token_id>;

// e^(x - mx) summed in double: exp8 (about 1 ulp) eight at a time, two vectors of four double
// lanes, then the lanes in a fixed order, so a sum depends on its inputs' order alone.
// A vocabulary's worth of std::exp in double cost ~0.5 ms a sampled row.
struct exp_sum {
  __m256 m8;
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  double norm;  // > 0: each term is float(e^(x - mx) / norm)
  explicit exp_sum(float mx, double norm_ = 0.0) : m8(_mm256_set1_ps(mx)), norm(norm_) {}
  __m256d term(__m128 e) const {
    const __m256d d = _mm256_cvtps_pd(e);
    return norm > 0.0 ? _mm256_cvtps_pd(_mm256_cvtpd_ps(_mm256_div_pd(d, _mm256_set1_pd(norm)))) : d;
  }
  void add(__m256 x) {
    const __m256 e = exp8(_mm256_sub_ps(x, m8));
    s0 = _mm256_add_pd(s0, term(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, term(_mm256_extractf128_ps(e, 1)));
  }
  /// Adds get(0) .. get(n - 1), n < 8, the rest of the vector -inf (e^-inf = 0).
  template <class Get> void add_tail(size_t n, const Get& get) {
    alignas(32) float tail[8];
    for (size_t j = 0; j < 8; ++j) tail[j] = j < n ? get(j) : -INFINITY;
    add(_mm256_load_ps(tail));
  }
  double total() const {
    alignas(32) double parts[4];
    _mm256_store_pd(parts, _mm256_add_pd(s0, s1));
    return (parts[0] + parts[1]) + (parts[2] + parts[3]);
  }
};

// log(sum(exp(logits))), computed around the maximum.
double log_sum_exp(std::span<const float> logits) {
  const float* p = logits.data();
  const size_t n = logits.size(), nv = n / 8 * 8;
  __m256 mv = _mm256_set1_ps(-INFINITY);
  for (size_t j = 0; j < nv; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(p + j));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mv);
  float mx = *std::max_element(lanes, lanes + 8);
  for (size_t j = nv; j < n; ++j) mx = std::max(mx, p[j]);
  exp_sum sum(mx);
  for (size_t j = 0; j < nv; j += 8) sum.add(_mm256_loadu_ps(p + j));
  sum.add_tail(n - nv, [&](size_t j) { return p[nv + j]; });
  return static_cast<double>(mx) + std::log(sum.total());
}

// sum over c[0..n) of e^(c.first - mx): the softmax's normaliser over the candidates; with `norm`,
// of float(e^(c.first - mx) / norm) instead (the probabilities' total). Eight (logit, id) pairs are
// two vectors; their logits are the even lanes.
double sum_exp(const candidate* c, size_t n, float mx, double norm = 0.0) {
  static_assert(sizeof(candidate) == 8, "a candidate is a float and a 32-bit id");
  exp_sum sum(mx, norm);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_loadu_ps(reinterpret_cast<const float*>(c + i)), b = _mm256_loadu_ps(reinterpret_cast<const float*>(c + i + 4));
    sum.add(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));  // the logits, lanes permuted
  }
  sum.add_tail(n - i, [&](size_t j) { return c[i + j].first; });
  return sum.total();
}

// Higher logit first, then the lower id: a strict total order, as a row's ids are distinct.
// (A lambda, not a function: std::sort and nth_element inline it.)
constexpr auto by_logit = [](const candidate& a, const candidate& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
};

// Moves the k best of c[0..n) to c[0..k), sorted, the others after them in some order: what
// nth_element(c, c + k, c + n) and a sort of c[0..k) give (the order is total, so the k best and
// their order are the same whichever way they are found), in one pass over the logits with a
// vector filter (eight at a time while none reaches the worst kept) instead of nth_element's
// several. `pick` holds positions, best first. k <= kFrontBest.
constexpr size_t kFrontBest = 64;
void front_best(candidate* c, size_t n, size_t k, std::vector<size_t>& pick) {
  pick.clear();
  const auto take = [&](size_t i) {
    if (pick.size() == k) {
      if (!by_logit(c[i], c[pick.back()])) return;
      pick.pop_back();
    }
    auto at = std::find_if(pick.begin(), pick.end(), [&](size_t j) { return by_logit(c[i], c[j]); });
    pick.insert(at, i);
  };
  size_t i = 0;
  for (; i < n && pick.size() < k; ++i) take(i);
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_loadu_ps(reinterpret_cast<const float*>(c + i)), b = _mm256_loadu_ps(reinterpret_cast<const float*>(c + i + 4));
    const __m256 x = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // the eight logits
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_set1_ps(c[pick.back()].first), _CMP_GE_OQ)) == 0) continue;
    for (size_t j = i; j < i + 8; ++j) take(j);
  }
  for (; i < n; ++i) take(i);
  std::array<candidate, kFrontBest> best;
  for (size_t r = 0; r < pick.size(); ++r) best[r] = c[pick[r]];
  // Each non-picked element below k moves to the place a picked one leaves at k or beyond.
  std::sort(pick.begin(), pick.end());
  size_t below = 0, mover = static_cast<size_t>(std::lower_bound(pick.begin(), pick.end(), k) - pick.begin());
  for (size_t h = 0; h < k && mover < pick.size(); ++h) {
    if (below < pick.size() && pick[below] == h) {
      ++below;
      continue;
    }
    c[pick[mover++]] = c[h];
  }
  std::copy_n(best.begin(), pick.size(), c);
}

float log_softmax_at(std::span<const float> logits, token_id id) {
  return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_sum_exp(logits));
}

bool is_allowed(std::span<const uint32_t> allowed, size_t t) { return allowed.empty() || ((allowed[t / 32] >> (t % 32)) & 1u) != 0; }

// True when the mask lets at least one token of the vocabulary through.
bool allows_any(std::span<const uint32_t> allowed, size_t vocab) {
  for (size_t w = 0; w * 32 < vocab && w < allowed.size(); ++w) {
    const size_t bits = std::min<size_t>(32, vocab - w * 32);
    const uint32_t live = bits == 32 ? ~0u : ((1u << bits) - 1u);
    if (allowed[w] & live) return true;
  }
  return false;
}

} // namespace

double sample_coin(uint64_t seed, int64_t position) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(position));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

namespace {

// The first position of the largest logit (the scalar loop's answer: ties go to the lowest id),
// found eight at a time; logits.size() when a NaN is among them (the caller's loop decides then).
size_t argmax_first(std::span<const float> logits) {
  const float* p = logits.data();
  const size_t n = logits.size(), nv = n / 8 * 8;
  if (nv == 0) return n;
  __m256 mv = _mm256_loadu_ps(p), nan = _mm256_cmp_ps(mv, mv, _CMP_UNORD_Q);
  for (size_t j = 8; j < nv; j += 8) {
    const __m256 x = _mm256_loadu_ps(p + j);
    mv = _mm256_max_ps(mv, x);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  if (_mm256_movemask_ps(nan) != 0) return n;
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mv);
  float mx = *std::max_element(lanes, lanes + 8);
  for (size_t j = nv; j < n; ++j) {
    if (std::isnan(p[j])) return n;
    mx = std::max(mx, p[j]);
  }
  const __m256 m8 = _mm256_set1_ps(mx);
  for (size_t j = 0; j < nv; j += 8)
    if (const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + j), m8, _CMP_EQ_OQ)); hit != 0)
      return j + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(hit)));
  for (size_t j = nv; j < n; ++j)
    if (p[j] == mx) return j;
  return n;
}

// The drawn token (see sample_token) from `logits`, edits already applied.
token_id draw(std::span<const float> logits, const sampling_params& p, int64_t position, sampler_scratch& scratch,
              std::span<const uint32_t> allowed) {
  if (!allowed.empty() && (allowed.size() * 32 < logits.size() || !allows_any(allowed, logits.size()))) allowed = {};
  if (p.temperature == 0.0f) {
    if (allowed.empty())
      if (const size_t best = argmax_first(logits); best < logits.size()) return static_cast<token_id>(best);
    size_t best = logits.size();
    for (size_t i = 0; i < logits.size(); ++i)
      if (is_allowed(allowed, i) && (best == logits.size() || logits[i] > logits[best])) best = i;
    return static_cast<token_id>(best);
  }
  auto& cand = scratch.cand;
  cand.clear();
  const float inv_t = 1.0f / p.temperature;
  for (size_t i = 0; i < logits.size(); ++i)
    if (is_allowed(allowed, i)) cand.emplace_back(logits[i] * inv_t, static_cast<token_id>(i));
  size_t n = cand.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::nth_element(cand.begin(), cand.begin() + p.top_k, cand.end(), by_logit);
    n = static_cast<size_t>(p.top_k);
  }
  // Every step below walks the candidates from the most likely down and usually stops within the
  // first few dozen, so they are sorted lazily: a prefix at a time (partial sorts of a growing
  // chunk), never the whole vocabulary (a full sort of 49k candidates cost ~4 ms per token).
  const size_t n0 = n;
  const auto end = cand.begin() + static_cast<std::ptrdiff_t>(n);
  const float mx = std::max_element(cand.begin(), end, [](const auto& a, const auto& b) { return a.first < b.first; })->first;
  const double sum = sum_exp(cand.data(), n, mx);
  auto& prob = scratch.prob;  // probabilities of the sorted prefix
  prob.clear();
  const auto sorted_through = [&](size_t i) {  // cand[0..i] sorted, prob[0..i] known
    if (i < prob.size()) return;
    // Chunks of 64, 512, 4096, ...: a flat distribution (a walk deep into the candidates) ends
    // in one sort of the rest once a chunk would pass a quarter of them.
    const size_t from = prob.size();
    size_t to = std::max(i + 1, from == 0 ? size_t{64} : 8 * from);
    if (to > n / 4) to = n;
    const auto first = cand.begin() + static_cast<std::ptrdiff_t>(from), last = cand.begin() + static_cast<std::ptrdiff_t>(to);
    if (from == 0 && last < end && to <= kFrontBest) {
      front_best(cand.data(), n0, to, scratch.pick);  // the first chunk: one pass, sorted
    } else {
      if (last < end) std::nth_element(first, last, end, by_logit);  // O(rest), then sort the chunk alone
      std::sort(first, last, by_logit);
    }
    for (size_t j = from; j < to; ++j) prob.push_back(static_cast<float>(std::exp(static_cast<double>(cand[j].first - mx)) / sum));
  };
  bool truncated = false;
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = 0;
    while (keep < n) {
      sorted_through(keep);
      cum += prob[keep++];
      if (cum >= p.top_p) break;
    }
    truncated = std::max<size_t>(keep, 1) < n;
    n = std::max<size_t>(keep, 1);
  }
  if (p.min_p > 0.0f) {
    sorted_through(0);
    const float floor_p = p.min_p * prob[0];
    size_t keep = 1;
    while (keep < n) {
      sorted_through(keep);
      if (prob[keep] < floor_p) break;
      ++keep;
    }
    truncated = truncated || keep < n;
    n = keep;
  }
  double total = 0.0;
  if (truncated) {
    for (size_t i = 0; i < n; ++i) total += prob[i];  // a prefix: already sorted
  } else {
    total = sum_exp(cand.data(), n, mx, sum);  // every probability, rounded to float as prob[] holds them
  }
  const double target = sample_coin(p.seed, position) * total;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    sorted_through(i);
    cum += prob[i];
    if (target < cum) return cand[i].second;
  }
  sorted_through(n - 1);  // rounding left the target past the end: the least likely survivor
  return cand[n - 1].second;
}

} // namespace

sample_result sample_token(std::span<const float> logits, const sampling_params& p, int64_t position,
                           sampler_scratch& scratch, std::span<const uint32_t> allowed,
                           std::span<const logit_edit> edits) {
  std::span<const float> seen = logits;
  if (!edits.empty()) {
    scratch.edited.assign(logits.begin(), logits.end());
    apply_logit_edits(scratch.edited, edits, p);
    seen = scratch.edited;
  }
  const token_id t = draw(seen, p, position, scratch, allowed);
  return {t, p.logprobs ? log_softmax_at(logits, t) : 0.0f};
}

float logprob_of(std::span<const float> logits, token_id token) { return log_softmax_at(logits, token); }

void top_logprobs(std::span<const float> logits, int32_t n, std::vector<token_logprob>& out, sampler_scratch& scratch) {
  out.clear();
  if (n <= 0 || logits.empty()) return;
  // The k best (highest logit, then lowest id), kept sorted in one pass: ids come in increasing
  // order, so a logit equal to the worst kept one never displaces it, and one that ties a kept
  // logit goes after it; the same list and order as sorting every token by (logit desc, id asc).
  auto& cand = scratch.cand;
  cand.clear();
  const size_t k = std::min(static_cast<size_t>(n), logits.size());
  const auto take = [&](size_t i) {
    const float x = logits[i];
    if (cand.size() == k) {
      if (!(x > cand.back().first)) return;
      cand.pop_back();
    }
    auto at = std::find_if(cand.begin(), cand.end(), [x](const auto& c) { return c.first < x; });
    cand.emplace(at, x, static_cast<token_id>(i));
  };
  size_t i = 0;
  for (; i < logits.size() && cand.size() < k; ++i) take(i);
  for (; i + 8 <= logits.size(); i += 8) {  // eight at a time while none beats the worst kept
    if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(&logits[i]), _mm256_set1_ps(cand.back().first), _CMP_GT_OQ)) == 0) continue;
    for (size_t j = i; j < i + 8; ++j) take(j);
  }
  for (; i < logits.size(); ++i) take(i);
  const double lse = log_sum_exp(logits);
  for (size_t i = 0; i < k; ++i) out.push_back({cand[i].second, static_cast<float>(static_cast<double>(cand[i].first) - lse)});
}

} // namespace conveyor::model
