// Shared by the AVX2 and the AVX-512 legacy qmm kernels (qmm_avx2.cpp, qmm_avx512.cpp), which
// include it inside their own anonymous namespace with QMM_TARGET defined as their target
// attribute: the horizontal sum, the output store, and the F32/F16/BF16 tiles (f32 activations,
// 256-bit FMAs; the AVX-512 build gets 32 vector registers for bigger tiles). No include guard:
// one inclusion per translation unit.
#ifndef QMM_TARGET
#error "define QMM_TARGET (the kernel file's target attribute) before including qmm_f_tile.hpp"
#endif

QMM_TARGET inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

QMM_TARGET inline void store(const qmm_job& j, int32_t t, int32_t r, float v) {
  float& o = j.c[static_cast<size_t>(t) * static_cast<size_t>(j.ldc) + static_cast<size_t>(r)];
  o = j.accumulate ? o + v : v;
}

/// Eight consecutive weights of an F32 / F16 / BF16 row as f32.
template <ggml_type T> QMM_TARGET inline __m256 load8(const uint8_t* p) {
  if constexpr (T == ggml_type::f32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (T == ggml_type::f16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

template <ggml_type T> QMM_TARGET inline float load1(const uint8_t* p, int32_t i) {
  uint32_t v = 0;
  if constexpr (T == ggml_type::f32) {
    std::memcpy(&v, p + 4 * static_cast<size_t>(i), 4);
  } else {
    uint16_t h;
    std::memcpy(&h, p + 2 * static_cast<size_t>(i), 2);
    if constexpr (T == ggml_type::f16) return _cvtsh_ss(h);
    v = static_cast<uint32_t>(h) << 16;
  }
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}

/// R rows x N tokens of an F32 / F16 / BF16 matrix; Ctx: the including kernel's row tile (r0, w[]).
template <ggml_type T, int R, int N, class Ctx>
QMM_TARGET void tile_f(const qmm_job& j, const Ctx& rc, int ri, int32_t t0) {
  constexpr size_t es = T == ggml_type::f32 ? 4 : 2;
  const int32_t k8 = j.k & ~7;
  const float* a[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) a[t] = reinterpret_cast<const float*>(j.act + static_cast<size_t>(t0 + t) * j.act_stride);
  __m256 acc[R][N];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int32_t i = 0; i < k8; i += 8) {
    __m256 w[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = load8<T>(rc.w[ri + r] + es * static_cast<size_t>(i));
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const __m256 av = _mm256_loadu_ps(a[t] + i);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(w[r], av, acc[r][t]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t)
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m128 s = _mm_set_ss(hsum(acc[r][t]));
      for (int32_t i = k8; i < j.k; ++i) {
        float x;
        std::memcpy(&x, a[t] + i, 4);
        s = _mm_fmadd_ss(_mm_set_ss(load1<T>(rc.w[ri + r], i)), _mm_set_ss(x), s);
      }
      store(j, t0 + t, rc.r0 + ri + r, _mm_cvtss_f32(s));
    }
}

