// Sampling on the device with model/cpu/sampler.cpp's semantics: greedy (ties to the lowest id), or
// temperature -> top-k -> top-p -> min-p -> one draw with sample_coin(seed, position) (the same
// splitmix64 counter-based coin, bit for bit). One CTA per row.
//
// No sort: every cut is "the element at which a cumulative weight, in descending order of
// (scaled logit, then lowest id), reaches a target", found by a radix descent over a 64-bit key
//   key = ordered_bits(logit / T) << 32 | (0xFFFFFFFF - id)
// one 8-bit digit per pass (8 passes), each pass a 256-bin shared-memory histogram. Weights are
// 1 (top-k) or exp(z - max) in 2^-40 fixed point (top-p, draw): integer sums make the result
// independent of the order atomics land in, so a seed gives the same token on every run.
#include "gpu/check.hpp"
#include "gpu/kernels.hpp"
#include "gpu/launch.hpp"

namespace conveyor::gpu {
namespace {

constexpr int kThreads = 512;
constexpr int kBins = 256;
constexpr float kFixed = 1099511627776.0f;  // 2^40

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// model::sample_coin, bit for bit.
__device__ double sample_coin(uint64_t seed, int64_t position) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(position));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

__device__ __forceinline__ uint64_t sort_key(float z, int i) {
  if (z == 0.0f) z = 0.0f;  // -0 ties +0, as the CPU's float comparison has it
  const uint32_t b = __float_as_uint(z);
  const uint32_t ordered = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(i));
}

enum weight_kind { count_weight, mass_weight };

struct row_view {
  const float* l;
  int vocab;
  float inv_t;
  float zmax;
  __device__ float z(int i) const { return l[i] * inv_t; }
  __device__ uint64_t weight(weight_kind k, float zi) const {
    return k == count_weight ? 1ull : static_cast<uint64_t>(__expf(zi - zmax) * kFixed + 0.5f);
  }
};

struct shared_state {
  unsigned long long hist[kBins];
  unsigned long long total;
  uint64_t prefix, above;
  double dsum[kThreads / 32];
  float fval[kThreads / 32];
  int ival[kThreads / 32];
};

// Sum of weights over keys >= floor_key.
__device__ uint64_t weight_sum(const row_view& v, weight_kind k, uint64_t floor_key, shared_state& sh) {
  if (threadIdx.x == 0) sh.total = 0;
  __syncthreads();
  unsigned long long acc = 0;
  for (int i = threadIdx.x; i < v.vocab; i += kThreads) {
    const float zi = v.z(i);
    if (sort_key(zi, i) >= floor_key) acc += v.weight(k, zi);
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) atomicAdd(&sh.total, acc);
  __syncthreads();
  const uint64_t t = sh.total;
  __syncthreads();
  return t;
}

// The key of the first element, in descending key order over keys >= floor_key, at which the
// cumulative weight reaches target (cum >= target), or exceeds it when `strict` (cum > target).
__device__ uint64_t select_key(const row_view& v, weight_kind k, uint64_t floor_key, uint64_t target, bool strict,
                               shared_state& sh) {
  uint64_t prefix = 0, above = 0;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    const uint64_t hi_mask = shift == 56 ? 0ull : (~0ull << (shift + 8));
    int run_bin = -1;
    unsigned long long run = 0;  // consecutive hits of one bin are summed before one atomic
    for (int i = threadIdx.x; i < v.vocab; i += kThreads) {
      const float zi = v.z(i);
      const uint64_t key = sort_key(zi, i);
      if ((key & hi_mask) != prefix || key < floor_key) continue;
      const int bin = static_cast<int>((key >> shift) & 0xFF);
      if (bin != run_bin) {
        if (run) atomicAdd(&sh.hist[run_bin], run);
        run_bin = bin;
        run = 0;
      }
      run += v.weight(k, zi);
    }
    if (run) atomicAdd(&sh.hist[run_bin], run);
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t cum = above;
      int chosen = 0;
      for (int b = kBins - 1; b >= 0; --b) {
        const uint64_t next = cum + sh.hist[b];
        if (strict ? next > target : next >= target) {
          chosen = b;
          break;
        }
        cum = next;
      }
      sh.prefix = prefix | (static_cast<uint64_t>(chosen) << shift);
      sh.above = cum;
    }
    __syncthreads();
    prefix = sh.prefix;
    above = sh.above;
    __syncthreads();
  }
  return prefix;
}

__global__ void __launch_bounds__(kThreads)
sample_radix_kernel(const float* __restrict__ logits, int vocab, const sample_param* __restrict__ params,
                    int32_t* __restrict__ out_ids, float* __restrict__ out_logprobs) {
  CONVEYOR_SHARED(shared_state, sh);
  const int row = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const float* l = logits + static_cast<int64_t>(row) * vocab;
  const sample_param p = params[row];

  // Pass 1: max and argmax (ties to the lowest id) of the raw logits.
  float best = -INFINITY;
  int best_i = 0x7FFFFFFF;
  for (int i = tid; i < vocab; i += kThreads)
    if (l[i] > best || best_i == 0x7FFFFFFF) best = l[i], best_i = i;
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (ob > best || (ob == best && oi < best_i)) best = ob, best_i = oi;
  }
  if (lane == 0) sh.fval[warp] = best, sh.ival[warp] = best_i;
  __syncthreads();
  best = sh.fval[0], best_i = sh.ival[0];
  for (int w = 1; w < kThreads / 32; ++w)
    if (sh.fval[w] > best || (sh.fval[w] == best && sh.ival[w] < best_i)) best = sh.fval[w], best_i = sh.ival[w];
  // Pass 2: log-sum-exp of the raw logits, for the log-probability (double across threads).
  double s = 0.0;
  for (int i = tid; i < vocab; i += kThreads) s += static_cast<double>(__expf(l[i] - best));
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) sh.dsum[warp] = s;
  __syncthreads();
  double lse_sum = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) lse_sum += sh.dsum[w];
  __syncthreads();

  int chosen = best_i;
  if (p.temperature != 0.0f) {
    row_view v{l, vocab, 1.0f / p.temperature, 0.0f};
    v.zmax = best * v.inv_t;  // x -> x * inv_t is monotonic, so the max maps to the max
    uint64_t cut = 0;         // the kept set is every key >= cut: a prefix of the sorted order
    if (p.top_k > 0 && p.top_k < vocab) cut = select_key(v, count_weight, 0, static_cast<uint64_t>(p.top_k), false, sh);
    if (p.top_p < 1.0f) {
      const uint64_t mass = weight_sum(v, mass_weight, cut, sh);
      uint64_t target = static_cast<uint64_t>(ceil(static_cast<double>(p.top_p) * static_cast<double>(mass)));
      target = target < 1 ? 1 : (target > mass ? mass : target);
      const uint64_t k = select_key(v, mass_weight, cut, target, false, sh);
      cut = k > cut ? k : cut;
    }
    if (p.min_p > 0.0f) {
      // Probabilities relative to the best are exp(z - zmax); those >= min_p form a prefix.
      if (tid == 0) sh.total = 0;
      __syncthreads();
      unsigned long long c = 0;
      for (int i = tid; i < vocab; i += kThreads) {
        const float zi = v.z(i);
        if (sort_key(zi, i) >= cut && __expf(zi - v.zmax) >= p.min_p) ++c;
      }
      for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
      if (lane == 0) atomicAdd(&sh.total, c);
      __syncthreads();
      const uint64_t keep = sh.total > 0 ? sh.total : 1;
      __syncthreads();
      const uint64_t k = select_key(v, count_weight, cut, keep, false, sh);
      cut = k > cut ? k : cut;
    }
    const uint64_t total = weight_sum(v, mass_weight, cut, sh);
    uint64_t target = static_cast<uint64_t>(sample_coin(p.seed, p.position) * static_cast<double>(total));
    if (target >= total) target = total - 1;
    const uint64_t key = select_key(v, mass_weight, cut, target, true, sh);
    const uint32_t id = 0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu);
    chosen = id < static_cast<uint32_t>(vocab) ? static_cast<int>(id) : best_i;
  }
  if (tid == 0) {
    out_ids[row] = chosen;
    out_logprobs[row] = static_cast<float>(static_cast<double>(l[chosen] - best) - log(lse_sum));
  }
}

} // namespace

// Napkin math per row: greedy reads the row twice (2 * 4 * vocab B: 1 MB for Llama-3's 128256,
// from L2 after the first pass); a full top-k + top-p + min-p draw makes ~30 passes of ~10
// integer ops per element: ~4e7 ops per row, ~20 us per row on one SM, rows in parallel across
// SMs (batch 256 on 132 SMs: ~2 waves, ~0.1-0.5 ms per step against ~10 ms of weights).
void launch_sample(const float* logits, int32_t n_rows, int32_t vocab, const sample_param* params, int32_t* out_ids,
                   float* out_logprobs, cudaStream_t stream) {
  if (n_rows <= 0) return;
  CONVEYOR_LAUNCH(sample_radix_kernel, n_rows, kThreads, 0, stream, logits, vocab, params, out_ids, out_logprobs);
  CUDA_CHECK_LAUNCH();
}

} // namespace conveyor::gpu
