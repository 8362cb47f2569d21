#include "model/cpu/paged_kv.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "model/cpu/attn_kernels.hpp"
#include "model/cpu/simd_exp.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::model {
namespace {

constexpr int32_t max_queries = 32;     // queries (rows x heads) one attend_rows call handles at once
constexpr int32_t max_q_floats = 4096;  // its (fp16-rounded) queries live on the stack

// s[j] = softmax(s)[j], rounded through fp16 if asked. The sum is in double.
void softmax(float* s, int32_t n, bool fp16_out) {
  const int32_t nv = n / 8 * 8;
  float tail[8];
  const auto load_tail = [&](float pad) {
    for (int32_t j = 0; j < 8; ++j) tail[j] = nv + j < n ? s[nv + j] : pad;
  };
  __m256 mv = _mm256_set1_ps(-INFINITY);
  for (int32_t j = 0; j < nv; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + j));
  load_tail(-INFINITY);
  mv = _mm256_max_ps(mv, _mm256_loadu_ps(tail));
  mv = _mm256_max_ps(mv, _mm256_permute2f128_ps(mv, mv, 1));
  mv = _mm256_max_ps(mv, _mm256_shuffle_ps(mv, mv, 0x4E));
  mv = _mm256_max_ps(mv, _mm256_shuffle_ps(mv, mv, 0xB1));
  __m256d sum0 = _mm256_setzero_pd(), sum1 = _mm256_setzero_pd();
  const auto exp_block = [&](float* p) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p), mv));
    _mm256_storeu_ps(p, e);
    sum0 = _mm256_add_pd(sum0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum1 = _mm256_add_pd(sum1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  };
  for (int32_t j = 0; j < nv; j += 8) exp_block(s + j);
  load_tail(-INFINITY);  // pads become 0
  exp_block(tail);
  double parts[4];
  _mm256_storeu_pd(parts, _mm256_add_pd(sum0, sum1));
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / ((parts[0] + parts[1]) + (parts[2] + parts[3]))));
  const auto scale_block = [&](float* p) {
    __m256 x = _mm256_mul_ps(_mm256_loadu_ps(p), inv);
    if (fp16_out) x = _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    _mm256_storeu_ps(p, x);
  };
  for (int32_t j = 0; j < nv; j += 8) scale_block(s + j);
  scale_block(tail);
  for (int32_t j = nv; j < n; ++j) s[j] = tail[j - nv];
}

// paged_kv::attend for n_rows * n_kv * n_q <= one call's queries over one layer's K and V (k, v:
// its block 0; block b starts per_block values further on). Query (h, r, i): kv head kv_head0 + h,
// row r (position pos0 + r, causal over 0..pos0 + r) and that kv head's query head i. Scores:
// keys in lanes (attn_kernels.hpp) over every block up to the last row's position, each chunk of
// keys read once for every query of its kv head; then each query's softmax over its own
// positions, and P · V block by block (a row's heads together, each V vector loaded once for
// them). Several kv heads go block by block (a few blocks' keys of each head in turn, then each
// block's values of each head), so that a block's pieces of K and of V are read in one sweep.
// A query's operations, in order, are those of the query alone.
template <class T>
void attend_rows(cpu_isa isa, const T* k, const T* v, int64_t per_block, int32_t hd, int32_t bs,
                 const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head0, int32_t n_kv, int32_t n_q,
                 const float* q, int64_t q_stride, float scale, float* out, int64_t out_stride, bool fp16_inputs) {
  const int32_t n_max = pos0 + n_rows, per_head = n_rows * n_q, nq = n_kv * per_head;
  const auto query = [&](int32_t h, int32_t r, int32_t i) { return int64_t{h} * per_head + int64_t{r} * n_q + i; };
  float qr[max_q_floats];  // the queries, contiguous (rounded to fp16 when asked: F16C, nearest even)
  for (int32_t h = 0; h < n_kv; ++h)
    for (int32_t r = 0; r < n_rows; ++r) {
      const float* src = q + r * q_stride + int64_t{h} * n_q * hd;
      float* dst = qr + query(h, r, 0) * hd;
      int32_t d = 0;
      for (; fp16_inputs && d + 8 <= n_q * hd; d += 8)
        _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + d), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
      for (; d < n_q * hd; ++d) dst[d] = fp16_inputs ? fp16_to_fp32(fp32_to_fp16(src[d])) : src[d];
    }
  // Each query's scores, a row of n_max values and room for the last chunk's lanes past them.
  const int32_t lanes = score_lanes(isa, bs);
  const int64_t stride = n_max + lanes;
  thread_local std::vector<float> scores;
  thread_local std::vector<const T*> chunks;
  thread_local std::vector<int32_t> starts;
  if (scores.size() < static_cast<size_t>(nq * stride)) scores.resize(static_cast<size_t>(nq * stride));
  // One kv head: every chunk in one call. Several: enough blocks a call for the score kernel's
  // widest tile of chunks (4), each head's in turn.
  const int32_t group = n_kv == 1 ? (n_max + bs - 1) / bs : std::max(1, 4 * lanes / bs);
  for (int32_t j1 = 0; j1 < n_max; j1 += group * bs)
    for (int32_t h = 0; h < n_kv; ++h) {
      chunks.clear();
      starts.clear();
      const int64_t kt_off = int64_t{kv_head0 + h} * hd * bs;  // K^T of this kv head in a block: hd rows of bs slots
      for (int32_t j0 = j1; j0 < std::min(n_max, j1 + group * bs); j0 += bs) {
        const T* b = k + table[j0 / bs] * per_block + kt_off;
        for (int32_t x = 0; x < std::min(bs, n_max - j0); x += lanes) {
          chunks.push_back(b + x);
          starts.push_back(j0 + x);
        }
      }
      score_chunks(isa, lanes, chunks.data(), starts.data(), static_cast<int32_t>(chunks.size()), bs, hd,
                   qr + query(h, 0, 0) * hd, per_head, scale, scores.data() + query(h, 0, 0) * stride, stride);
    }
  for (int32_t h = 0; h < n_kv; ++h)
    for (int32_t r = 0; r < n_rows; ++r)
      for (int32_t i = 0; i < n_q; ++i) softmax(scores.data() + query(h, r, i) * stride, pos0 + r + 1, fp16_inputs);
  // out = P · V, block by block (a block's rows are contiguous): its V rows stay in L1 for every
  // query, and a row's heads share each V vector's load (accumulate_pv_group).
  for (int32_t r = 0; r < n_rows; ++r) std::fill_n(out + r * out_stride, n_kv * n_q * hd, 0.0f);
  const float* p[max_queries];
  float* o[max_queries];
  for (int32_t j0 = 0; j0 < n_max; j0 += bs)
    for (int32_t h = 0; h < n_kv; ++h) {
      const T* b = v + table[j0 / bs] * per_block + int64_t{kv_head0 + h} * bs * hd;  // bs rows of hd
      for (int32_t r = 0; r < n_rows; ++r) {
        const int32_t len = std::min(bs, pos0 + r + 1 - j0);
        if (len <= 0) continue;
        for (int32_t i = 0; i < n_q; ++i) {
          p[i] = scores.data() + query(h, r, i) * stride + j0;
          o[i] = out + r * out_stride + int64_t{h * n_q + i} * hd;
        }
        accumulate_pv_group(p, n_q, b, hd, len, o, hd);
      }
    }
}

} // namespace

paged_kv::paged_kv(int32_t n_layer, int32_t num_blocks, int32_t block_size, int32_t n_head_kv, int32_t head_dim,
                   kv_storage s, cpu_isa isa)
    : storage_(s), isa_(isa), num_blocks_(num_blocks), block_size_(block_size), n_head_kv_(n_head_kv), head_dim_(head_dim),
      row_(int64_t{n_head_kv} * head_dim) {
  if (head_dim < 1 || head_dim > max_q_floats)
    throw std::invalid_argument("head_dim " + std::to_string(head_dim) + " is outside [1, " + std::to_string(max_q_floats) + "]");
  const size_t n = static_cast<size_t>(n_layer) * num_blocks * block_size * row_;
  if (s == kv_storage::f16) {
    k16_ = lazy_array<uint16_t>(n);
    v16_ = lazy_array<uint16_t>(n);
  } else {
    k32_ = lazy_array<float>(n);
    v32_ = lazy_array<float>(n);
  }
}

int64_t paged_kv::resident_bytes() const {
  return static_cast<int64_t>(k16_.resident_bytes() + v16_.resident_bytes() + k32_.resident_bytes() + v32_.resident_bytes());
}

int64_t paged_kv::block_bytes(int32_t n_layer, int32_t block_size, int32_t n_head_kv, int32_t head_dim, kv_storage s) {
  const int64_t value_bytes = s == kv_storage::f16 ? 2 : 4;
  return 2 * int64_t{n_layer} * block_size * n_head_kv * head_dim * value_bytes;
}

// K goes in transposed (value d of kv head h at slot `slot` of the block's h-th hd x bs matrix),
// V as rows (kv head h's hd values at slot `slot` of the block's h-th bs x hd matrix).
void paged_kv::store(int32_t layer, block_id b, int32_t slot, const float* k, const float* v) {
  const int64_t o = offset(layer, b), bs = block_size_, hd = head_dim_;
  if (storage_ == kv_storage::f32) {
    for (int64_t e = 0; e < row_; ++e) k32_.data()[o + e * bs + slot] = k[e];
    for (int64_t h = 0; h < n_head_kv_; ++h) std::copy_n(v + h * hd, hd, v32_.data() + o + (h * bs + slot) * hd);
    return;
  }
  uint16_t* kt = k16_.data() + o + slot;
  constexpr int round = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t e = 0;
  for (; e + 8 <= row_; e += 8) {  // F16C rounds to nearest even, as fp32_to_fp16 does
    alignas(16) uint16_t h[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(h), _mm256_cvtps_ph(_mm256_loadu_ps(k + e), round));
    for (int64_t x = 0; x < 8; ++x) kt[(e + x) * bs] = h[x];
  }
  for (; e < row_; ++e) kt[e * bs] = fp32_to_fp16(k[e]);
  for (int64_t h = 0; h < n_head_kv_; ++h) {
    uint16_t* vr = v16_.data() + o + (h * bs + slot) * hd;
    const float* vh = v + h * hd;
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(vr + d), _mm256_cvtps_ph(_mm256_loadu_ps(vh + d), round));
    for (; d < hd; ++d) vr[d] = fp32_to_fp16(vh[d]);
  }
}

void paged_kv::load(int32_t layer, block_id b, int32_t slot, float* k, float* v) const {
  const int64_t o = offset(layer, b), bs = block_size_, hd = head_dim_;
  for (int64_t e = 0; e < row_; ++e) {
    const auto ki = static_cast<size_t>(o + e * bs + slot), vi = static_cast<size_t>(o + ((e / hd) * bs + slot) * hd + e % hd);
    k[e] = storage_ == kv_storage::f32 ? k32_[ki] : fp16_to_fp32(k16_[ki]);
    v[e] = storage_ == kv_storage::f32 ? v32_[vi] : fp16_to_fp32(v16_[vi]);
  }
}

void paged_kv::attend(int32_t layer, const block_id* table, int32_t pos, int32_t kv_head, int32_t n_q, const float* q,
                      float scale, float* out, bool fp16_inputs) const {
  attend(layer, table, pos, 1, kv_head, n_q, q, 0, scale, out, 0, fp16_inputs);
}

void paged_kv::attend(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head, int32_t n_q,
                      const float* q, int64_t q_stride, float scale, float* out, int64_t out_stride,
                      bool fp16_inputs) const {
  attend_heads(layer, table, pos0, n_rows, kv_head, 1, n_q, q, q_stride, scale, out, out_stride, fp16_inputs);
}

void paged_kv::attend_heads(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head0,
                            int32_t n_kv, int32_t n_q, const float* q, int64_t q_stride, float scale, float* out,
                            int64_t out_stride, bool fp16_inputs) const {
  const int32_t hd = head_dim_;
  const int32_t chunk = std::min(max_queries, max_q_floats / hd);  // queries one call takes
  if (n_kv > 1 && n_kv * n_q > chunk) {  // a head's result does not depend on the others
    for (int32_t h = 0; h < n_kv; ++h)
      attend_heads(layer, table, pos0, n_rows, kv_head0 + h, 1, n_q, q + int64_t{h} * n_q * hd, q_stride, scale,
                   out + int64_t{h} * n_q * hd, out_stride, fp16_inputs);
    return;
  }
  if (n_q > chunk) {  // nor on n_q, nor on n_rows, so split
    for (int32_t i = 0; i < n_q; i += chunk)
      attend_heads(layer, table, pos0, n_rows, kv_head0, 1, std::min(chunk, n_q - i), q + int64_t{i} * hd, q_stride,
                   scale, out + int64_t{i} * hd, out_stride, fp16_inputs);
    return;
  }
  const int32_t rows = std::max(1, chunk / (n_kv * n_q));
  const int64_t base = offset(layer, 0), per_block = int64_t{block_size_} * row_;
  for (int32_t r = 0; r < n_rows; r += rows) {
    const int32_t n = std::min(rows, n_rows - r);
    const float* qr = q + r * q_stride;
    float* o = out + r * out_stride;
    if (storage_ == kv_storage::f16)
      attend_rows(isa_, k16_.data() + base, v16_.data() + base, per_block, hd, block_size_, table, pos0 + r, n,
                  kv_head0, n_kv, n_q, qr, q_stride, scale, o, out_stride, fp16_inputs);
    else
      attend_rows(isa_, k32_.data() + base, v32_.data() + base, per_block, hd, block_size_, table, pos0 + r, n,
                  kv_head0, n_kv, n_q, qr, q_stride, scale, o, out_stride, fp16_inputs);
  }
}

} // namespace conveyor::model
