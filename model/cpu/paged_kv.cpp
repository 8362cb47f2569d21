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

// One layer's K and V (k, v: its block 0; block b starts per_block values further on) as seen by
// the rows pos0 .. pos0 + n_rows - 1 of one sequence and kv heads kv_head0 .. + n_kv - 1, with
// n_rows * n_kv * n_q <= max_queries. Query (h, r, i): kv head kv_head0 + h, row r (position
// pos0 + r, causal over 0..pos0 + r) and that kv head's query head i.
template <class T>
struct rows_view {
  cpu_isa isa;
  const T *k, *v;
  int64_t per_block;
  int32_t hd, bs;
  const block_id* table;
  int32_t pos0, n_rows, kv_head0, n_kv, n_q;
  int64_t query(int32_t h, int32_t r, int32_t i) const { return (int64_t{h} * n_rows + r) * n_q + i; }
};

// The queries, contiguous in query() order (rounded to fp16 when asked: F16C, nearest even).
template <class T>
void gather_queries(const rows_view<T>& w, const float* q, int64_t q_stride, bool fp16_inputs, float* qr) {
  const int32_t n = w.n_q * w.hd;
  for (int32_t h = 0; h < w.n_kv; ++h)
    for (int32_t r = 0; r < w.n_rows; ++r) {
      const float* src = q + r * q_stride + int64_t{h} * n;
      float* dst = qr + w.query(h, r, 0) * w.hd;
      int32_t d = 0;
      for (; fp16_inputs && d + 8 <= n; d += 8)
        _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + d), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
      for (; d < n; ++d) dst[d] = fp16_inputs ? fp16_to_fp32(fp32_to_fp16(src[d])) : src[d];
    }
}

// The scores of keys j_lo .. j_hi - 1 (j_lo a block's first key; j_hi past the last row's
// position is cut there) into s + query(h, r, i) * stride + j: keys in lanes (attn_kernels.hpp),
// each chunk of keys read once for every query of its kv head; the last chunk writes its lanes
// past j_hi (stride leaves room). Several kv heads go a few blocks at a time (enough for the score
// kernel's widest tile of chunks, 4), each head's in turn. A key's score depends on its query and
// itself alone.
template <class T>
void score_range(const rows_view<T>& w, const float* qr, float scale, int32_t j_lo, int32_t j_hi, float* s, int64_t stride) {
  const int32_t bs = w.bs, hd = w.hd, n_max = std::min(j_hi, w.pos0 + w.n_rows), per_head = w.n_rows * w.n_q;
  const int32_t lanes = score_lanes(w.isa, bs);
  thread_local std::vector<const T*> chunks;
  thread_local std::vector<int32_t> starts;
  const int32_t group = w.n_kv == 1 ? (n_max - j_lo + bs - 1) / bs : std::max(1, 4 * lanes / bs);
  for (int32_t j1 = j_lo; j1 < n_max; j1 += group * bs)
    for (int32_t h = 0; h < w.n_kv; ++h) {
      chunks.clear();
      starts.clear();
      const int64_t kt_off = int64_t{w.kv_head0 + h} * hd * bs;  // K^T of this kv head in a block: hd rows of bs slots
      for (int32_t j0 = j1; j0 < std::min(n_max, j1 + group * bs); j0 += bs) {
        const T* b = w.k + w.table[j0 / bs] * w.per_block + kt_off;
        for (int32_t x = 0; x < std::min(bs, n_max - j0); x += lanes) {
          chunks.push_back(b + x);
          starts.push_back(j0 + x);
        }
      }
      score_chunks(w.isa, lanes, chunks.data(), starts.data(), static_cast<int32_t>(chunks.size()), bs, hd,
                   qr + w.query(h, 0, 0) * hd, per_head, scale, s + w.query(h, 0, 0) * stride, stride);
    }
}

// out = P · V (p: the softmax of each query's scores, at query(h, r, i) * stride), block by block:
// a block's V rows stay in L1 for every query, and a row's heads share each V vector's load
// (accumulate_pv_group).
template <class T>
void values(const rows_view<T>& w, const float* s, int64_t stride, float* out, int64_t out_stride) {
  const int32_t bs = w.bs, hd = w.hd, n_max = w.pos0 + w.n_rows;
  for (int32_t r = 0; r < w.n_rows; ++r) std::fill_n(out + r * out_stride, w.n_kv * w.n_q * hd, 0.0f);
  const float* p[max_queries];
  float* o[max_queries];
  for (int32_t j0 = 0; j0 < n_max; j0 += bs)
    for (int32_t h = 0; h < w.n_kv; ++h) {
      const T* b = w.v + w.table[j0 / bs] * w.per_block + int64_t{w.kv_head0 + h} * bs * hd;  // bs rows of hd
      for (int32_t r = 0; r < w.n_rows; ++r) {
        const int32_t len = std::min(bs, w.pos0 + r + 1 - j0);
        if (len <= 0) continue;
        for (int32_t i = 0; i < w.n_q; ++i) {
          p[i] = s + w.query(h, r, i) * stride + j0;
          o[i] = out + r * out_stride + int64_t{h * w.n_q + i} * hd;
        }
        accumulate_pv_group(p, w.n_q, b, hd, len, o, hd);
      }
    }
}

// paged_kv::attend for one rows_view: the scores of every key up to the last row's position, each
// query's softmax over its own positions, then P · V. Several kv heads go block by block (a few
// blocks' keys of each head in turn, then each block's values of each head), so that a block's
// pieces of K and of V are read in one sweep. A query's operations, in order, are those of the
// query alone.
template <class T>
void attend_rows(const rows_view<T>& w, const float* q, int64_t q_stride, float scale, float* out, int64_t out_stride,
                 bool fp16_inputs) {
  const int32_t n_max = w.pos0 + w.n_rows, nq = w.n_kv * w.n_rows * w.n_q;
  float qr[max_q_floats];
  gather_queries(w, q, q_stride, fp16_inputs, qr);
  // Each query's scores, a row of n_max values and room for the last chunk's lanes past them.
  const int64_t stride = n_max + score_lanes(w.isa, w.bs);
  thread_local std::vector<float> scores;
  if (scores.size() < static_cast<size_t>(nq * stride)) scores.resize(static_cast<size_t>(nq * stride));
  score_range(w, qr, scale, 0, n_max, scores.data(), stride);
  for (int32_t h = 0; h < w.n_kv; ++h)
    for (int32_t r = 0; r < w.n_rows; ++r)
      for (int32_t i = 0; i < w.n_q; ++i) softmax(scores.data() + w.query(h, r, i) * stride, w.pos0 + r + 1, fp16_inputs);
  values(w, scores.data(), stride, out, out_stride);
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

template <class F>
void paged_kv::with_view(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head0, int32_t n_kv,
                         int32_t n_q, const F& f) const {
  const int64_t base = offset(layer, 0), per_block = int64_t{block_size_} * row_;
  if (storage_ == kv_storage::f16)
    f(rows_view<uint16_t>{isa_, k16_.data() + base, v16_.data() + base, per_block, head_dim_, block_size_, table, pos0, n_rows,
                          kv_head0, n_kv, n_q});
  else
    f(rows_view<float>{isa_, k32_.data() + base, v32_.data() + base, per_block, head_dim_, block_size_, table, pos0, n_rows,
                       kv_head0, n_kv, n_q});
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
  for (int32_t r = 0; r < n_rows; r += rows) {
    const int32_t n = std::min(rows, n_rows - r);
    with_view(layer, table, pos0 + r, n, kv_head0, n_kv, n_q, [&](const auto& w) {
      attend_rows(w, q + r * q_stride, q_stride, scale, out + r * out_stride, out_stride, fp16_inputs);
    });
  }
}

int32_t paged_kv::split_max_heads() const { return std::min(max_queries, max_q_floats / head_dim_); }

void paged_kv::check_split_heads(int32_t n_q) const {
  if (n_q < 1 || n_q > split_max_heads())
    throw std::invalid_argument("score_keys / attend_values take 1.." + std::to_string(split_max_heads()) + " query heads, not " +
                                std::to_string(n_q));
}

int32_t paged_kv::score_stride(int32_t positions) const { return positions + score_lanes(isa_, block_size_); }

void paged_kv::score_keys(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head, int32_t n_q,
                          const float* q, int64_t q_stride, float scale, bool fp16_inputs, int32_t j0, int32_t j1, float* s,
                          int64_t s_stride) const {
  check_split_heads(n_q);
  const int32_t rows = std::max(1, std::min(max_queries, max_q_floats / head_dim_) / n_q);
  for (int32_t r = 0; r < n_rows; r += rows) {
    const int32_t n = std::min(rows, n_rows - r);
    with_view(layer, table, pos0 + r, n, kv_head, 1, n_q, [&](const auto& w) {
      float qr[max_q_floats];
      gather_queries(w, q + r * q_stride, q_stride, fp16_inputs, qr);
      score_range(w, qr, scale, j0, j1, s + int64_t{r} * n_q * s_stride, s_stride);
    });
  }
}

void paged_kv::attend_values(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head, int32_t n_q,
                             float* s, int64_t s_stride, bool fp16_inputs, float* out, int64_t out_stride) const {
  check_split_heads(n_q);
  const int32_t rows = std::max(1, max_queries / n_q);
  for (int32_t r = 0; r < n_rows; r += rows) {
    const int32_t n = std::min(rows, n_rows - r);
    float* sr = s + int64_t{r} * n_q * s_stride;
    with_view(layer, table, pos0 + r, n, kv_head, 1, n_q, [&](const auto& w) {
      for (int32_t x = 0; x < n; ++x)
        for (int32_t i = 0; i < n_q; ++i) softmax(sr + (int64_t{x} * n_q + i) * s_stride, pos0 + r + x + 1, fp16_inputs);
      values(w, sr, s_stride, out + r * out_stride, out_stride);
    });
  }
}

} // namespace conveyor::model
