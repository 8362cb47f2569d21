#include "model/cpu/paged_kv.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "model/cpu/simd_exp.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::model {
namespace {

constexpr int32_t max_queries = 32;     // queries (rows x heads) one attend_rows call handles at once
constexpr int32_t max_q_floats = 4096;  // its (fp16-rounded) queries live on the stack

// Eight cached values as floats: f32 as is, f16 widened by F16C (exact). And one.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) { return _cvtsh_ss(*p); }

// Dots of q with four K rows, scaled. Each row: two 8-lane FMA partial sums over 16-float steps
// (one more 8-float step if left), summed, reduced across lanes by the same hadd tree, then the
// scalar tail. The result of a row depends only on q and that row.
template <class T>
void dot4(const float* q, const T* const k[4], int32_t n, float scale, float* s) {
  __m256 a[4], b[4];
  for (int r = 0; r < 4; ++r) a[r] = b[r] = _mm256_setzero_ps();
  int32_t d = 0;
  for (; d + 16 <= n; d += 16) {
    const __m256 qa = _mm256_loadu_ps(q + d), qb = _mm256_loadu_ps(q + d + 8);
    for (int r = 0; r < 4; ++r) {
      a[r] = _mm256_fmadd_ps(qa, load8(k[r] + d), a[r]);
      b[r] = _mm256_fmadd_ps(qb, load8(k[r] + d + 8), b[r]);
    }
  }
  if (d + 8 <= n) {
    const __m256 qa = _mm256_loadu_ps(q + d);
    for (int r = 0; r < 4; ++r) a[r] = _mm256_fmadd_ps(qa, load8(k[r] + d), a[r]);
    d += 8;
  }
  for (int r = 0; r < 4; ++r) a[r] = _mm256_add_ps(a[r], b[r]);
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m128 sum = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  if (d == n) {
    _mm_storeu_ps(s, _mm_mul_ps(sum, _mm_set1_ps(scale)));
    return;
  }
  _mm_storeu_ps(s, sum);
  for (int r = 0; r < 4; ++r) {
    for (int32_t e = d; e < n; ++e) s[r] = std::fma(q[e], load1(k[r] + e), s[r]);
    s[r] *= scale;
  }
}

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

// out[0..W*8) += sum over rows r of p[r] * v_r, in W registers: W independent FMA chains.
template <int W, class T>
void accumulate_pv_chunk(const float* p, const T* vb, int64_t stride, int32_t len, float* out) {
  __m256 a[W];
  for (int w = 0; w < W; ++w) a[w] = _mm256_loadu_ps(out + 8 * w);
  for (int32_t r = 0; r < len; ++r) {
    const __m256 pr = _mm256_set1_ps(p[r]);
    const T* v = vb + r * stride;
    for (int w = 0; w < W; ++w) a[w] = _mm256_fmadd_ps(pr, load8(v + 8 * w), a[w]);
  }
  for (int w = 0; w < W; ++w) _mm256_storeu_ps(out + 8 * w, a[w]);
}

// out += sum over the block's rows r of p[r] * v_r, each element summed in row order.
template <class T>
void accumulate_pv(const float* p, const T* vb, int64_t stride, int32_t len, float* out, int32_t n) {
  int32_t d = 0;
  for (; d + 64 <= n; d += 64) accumulate_pv_chunk<8, T>(p, vb + d, stride, len, out + d);
  for (; d + 32 <= n; d += 32) accumulate_pv_chunk<4, T>(p, vb + d, stride, len, out + d);
  for (; d + 8 <= n; d += 8) accumulate_pv_chunk<1, T>(p, vb + d, stride, len, out + d);
  for (; d < n; ++d)
    for (int32_t r = 0; r < len; ++r) out[d] = std::fma(p[r], load1(vb + r * stride + d), out[d]);
}

// Rows [x0, x0 + len) of one block's K or V for one kv head as f32 rows `hd` apart: f32 storage
// is read where it is, f16 is widened once into `buf` (F16C, exact) for every query that reads it.
template <class T>
const float* widen_rows(const T* src, int64_t row, int32_t len, int32_t hd, float* buf, int64_t& stride) {
  if constexpr (std::is_same_v<T, float>) {
    stride = row;
    return src;
  } else {
    for (int32_t x = 0; x < len; ++x) {
      const T* r = src + x * row;
      float* o = buf + int64_t{x} * hd;
      int32_t d = 0;
      for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(o + d, load8(r + d));
      for (; d < hd; ++d) o[d] = load1(r + d);
    }
    stride = hd;
    return buf;
  }
}

// paged_kv::attend for n_rows * n_q <= one call's queries over one layer's K and V (k, v: its
// block 0, slot 0; block b starts per_block values further on). Query (r, i): row r (position
// pos0 + r, causal over 0..pos0 + r) and head i. With several queries, each block's f16 rows are
// widened once for all of them; a query's operations, in order, are those of the query alone.
template <class T>
void attend_rows(const T* k, const T* v, int64_t per_block, int64_t row, int32_t hd, int32_t bs, const block_id* table,
                 int32_t pos0, int32_t n_rows, int32_t kv_head, int32_t n_q, const float* q, int64_t q_stride,
                 float scale, float* out, int64_t out_stride, float* scores, bool fp16_inputs) {
  const int32_t n_max = pos0 + n_rows;
  float qr[max_q_floats];  // the queries, contiguous (rounded to fp16 when asked: F16C, nearest even)
  for (int32_t r = 0; r < n_rows; ++r) {
    const float* src = q + r * q_stride;
    float* dst = qr + int64_t{r} * n_q * hd;
    int32_t d = 0;
    for (; fp16_inputs && d + 8 <= n_q * hd; d += 8)
      _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + d), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    for (; d < n_q * hd; ++d) dst[d] = fp16_inputs ? fp16_to_fp32(fp32_to_fp16(src[d])) : src[d];
  }
  const bool widen = !std::is_same_v<T, float> && n_rows * n_q > 1;
  thread_local std::vector<float> buf;
  if (widen && buf.size() < static_cast<size_t>(bs) * hd) buf.resize(static_cast<size_t>(bs) * hd);
  const int64_t kv_off = int64_t{kv_head} * hd;
  const auto query = [&](int32_t r, int32_t i) { return int64_t{r} * n_q + i; };
  // Scores of every query against one block's rows (f16 or widened f32, `stride` apart).
  const auto score_block = [&](const auto* kb, int64_t stride, int32_t j0) {
    using R = std::remove_cv_t<std::remove_pointer_t<decltype(kb)>>;
    for (int32_t r = 0; r < n_rows; ++r) {
      const int32_t len = std::min(bs, pos0 + r + 1 - j0);
      for (int32_t i = 0; len > 0 && i < n_q; ++i) {
        const float* qi = qr + query(r, i) * hd;
        float* s = scores + query(r, i) * n_max + j0;
        for (int32_t x = 0; x < len; x += 4) {
          const R* rows[4];
          for (int32_t u = 0; u < 4; ++u) rows[u] = kb + std::min(x + u, len - 1) * stride;  // pad: repeat the last row
          if (x + 4 <= len) {
            dot4(qi, rows, hd, scale, s + x);
          } else {
            float s4[4];
            dot4(qi, rows, hd, scale, s4);
            std::copy_n(s4, len - x, s + x);
          }
        }
      }
    }
  };
  const auto pv_block = [&](const auto* vb, int64_t stride, int32_t j0) {
    for (int32_t r = 0; r < n_rows; ++r) {
      const int32_t len = std::min(bs, pos0 + r + 1 - j0);
      for (int32_t i = 0; len > 0 && i < n_q; ++i)
        accumulate_pv(scores + query(r, i) * n_max + j0, vb, stride, len, out + r * out_stride + int64_t{i} * hd, hd);
    }
  };
  // Every block of `cache` (K or V) in order, to `use` as it is or widened.
  const auto each_block = [&](const T* cache, const auto& use) {
    for (int32_t j0 = 0; j0 < n_max; j0 += bs) {
      const T* b = cache + table[j0 / bs] * per_block + kv_off;
      if (widen) {
        int64_t stride = 0;
        const float* wide = widen_rows(b, row, std::min(bs, n_max - j0), hd, buf.data(), stride);
        use(wide, stride, j0);
      } else {
        use(b, row, j0);
      }
    }
  };
  // Scores, block by block (a block's rows are contiguous): its K rows stay in L1 for every query.
  each_block(k, score_block);
  for (int32_t r = 0; r < n_rows; ++r)
    for (int32_t i = 0; i < n_q; ++i) softmax(scores + query(r, i) * n_max, pos0 + r + 1, fp16_inputs);
  // out = P · V, block by block, likewise.
  for (int32_t r = 0; r < n_rows; ++r) std::fill_n(out + r * out_stride, n_q * hd, 0.0f);
  each_block(v, pv_block);
}

} // namespace

paged_kv::paged_kv(int32_t n_layer, int32_t num_blocks, int32_t block_size, int32_t n_head_kv, int32_t head_dim,
                   kv_storage s)
    : storage_(s), num_blocks_(num_blocks), block_size_(block_size), n_head_kv_(n_head_kv), head_dim_(head_dim),
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

void paged_kv::store(int32_t layer, block_id b, int32_t slot, const float* k, const float* v) {
  const int64_t o = offset(layer, b, slot);
  if (storage_ == kv_storage::f32) {
    std::copy_n(k, row_, k32_.data() + o);
    std::copy_n(v, row_, v32_.data() + o);
    return;
  }
  for (const auto& [src, dst] : {std::pair{k, k16_.data() + o}, std::pair{v, v16_.data() + o}}) {
    int64_t e = 0;
    for (; e + 8 <= row_; e += 8)  // F16C rounds to nearest even, as fp32_to_fp16 does
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + e),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; e < row_; ++e) dst[e] = fp32_to_fp16(src[e]);
  }
}

void paged_kv::load(int32_t layer, block_id b, int32_t slot, float* k, float* v) const {
  const int64_t o = offset(layer, b, slot);
  if (storage_ == kv_storage::f32) {
    std::copy_n(k32_.data() + o, row_, k);
    std::copy_n(v32_.data() + o, row_, v);
    return;
  }
  for (int64_t e = 0; e < row_; ++e) {
    k[e] = fp16_to_fp32(k16_[static_cast<size_t>(o + e)]);
    v[e] = fp16_to_fp32(v16_[static_cast<size_t>(o + e)]);
  }
}

void paged_kv::attend(int32_t layer, const block_id* table, int32_t pos, int32_t kv_head, int32_t n_q, const float* q,
                      float scale, float* out, float* scores, bool fp16_inputs) const {
  attend(layer, table, pos, 1, kv_head, n_q, q, 0, scale, out, 0, scores, fp16_inputs);
}

void paged_kv::attend(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head, int32_t n_q,
                      const float* q, int64_t q_stride, float scale, float* out, int64_t out_stride, float* scores,
                      bool fp16_inputs) const {
  const int32_t hd = head_dim_;
  const int32_t chunk = std::min(max_queries, max_q_floats / hd);  // queries one call takes
  if (n_q > chunk) {  // a head's result depends neither on n_q nor on n_rows, so split
    for (int32_t i = 0; i < n_q; i += chunk)
      attend(layer, table, pos0, n_rows, kv_head, std::min(chunk, n_q - i), q + int64_t{i} * hd, q_stride, scale,
             out + int64_t{i} * hd, out_stride, scores, fp16_inputs);
    return;
  }
  const int32_t rows = std::max(1, chunk / n_q);
  const int64_t base = offset(layer, 0, 0), per_block = int64_t{block_size_} * row_;
  for (int32_t r = 0; r < n_rows; r += rows) {
    const int32_t n = std::min(rows, n_rows - r);
    const float* qr = q + r * q_stride;
    float* o = out + r * out_stride;
    if (storage_ == kv_storage::f16)
      attend_rows(k16_.data() + base, v16_.data() + base, per_block, row_, hd, block_size_, table, pos0 + r, n, kv_head,
                  n_q, qr, q_stride, scale, o, out_stride, scores, fp16_inputs);
    else
      attend_rows(k32_.data() + base, v32_.data() + base, per_block, row_, hd, block_size_, table, pos0 + r, n, kv_head,
                  n_q, qr, q_stride, scale, o, out_stride, scores, fp16_inputs);
  }
}

} // namespace conveyor::model
