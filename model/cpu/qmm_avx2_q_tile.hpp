// Shared by the AVX2 and the AVX-VNNI legacy qmm kernels for Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
// (qmm_avx2_q.cpp, qmm_avxvnni_q.cpp), rows in lanes on the AVX-512 kernel's packed layout
// (qmm_rl.hpp): a 16-row group is taken as two halves of 8 rows, one 256-bit vector each. A
// half's block is decoded once (nibbles split, Q5's high bits added, Q8_0 read as w + 128 when
// kQ8Offset) and run against up to kPass tokens; raw rows and a packed matrix's short last group
// go through a 16-lane scratch group. The float step per block is qmm_rl.hpp's, lane by lane.
//
// The including file defines, inside its anonymous namespace and before the include:
// QMM_TARGET (its target attribute), kPass (tokens per tile), kQ8Offset (Q8_0 weights made
// unsigned, with the -128 * sum(a) corrections) and idot<T>(w, qb, c): the exact int32 dots of
// the 8 lanes' block with the token's 8 activation dwords qb, plus c. No include guard: one
// inclusion per translation unit.
//
// NOTE: batch invariance. Every lane takes qmm_rl.hpp's order whatever m, the pass, the half or
// the row offset; the integer sums are exact however they are formed: the scalar kernel's bits.
#ifndef QMM_TARGET
#error "define QMM_TARGET (the kernel file's target attribute) before including qmm_avx2_q_tile.hpp"
#endif

QMM_TARGET inline __m256i ld(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

/// Q5: adds 16 to the bytes of v whose high bit is set (see qmm_avx512_q.cpp's add_high); qhv
/// lane r = row r's qh, `byte` the qh byte holding this vector's 4 elements' bits, in its high
/// nibble when `odd`. Called with constants (the callers' unrolled loops fold them).
QMM_TARGET inline __m256i add_high(__m256i v, __m256i qhv, int byte, bool odd) {
  const auto b = static_cast<char>(byte);
  const __m256i idx = _mm256_setr_epi8(b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b, 8 + b, 8 + b, 12 + b, 12 + b, 12 + b, 12 + b,
                                       b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b, 8 + b, 8 + b, 12 + b, 12 + b, 12 + b, 12 + b);
  const __m256i sel = _mm256_set1_epi32(odd ? static_cast<int>(0x80402010u) : 0x08040201);
  const __m256i bc = _mm256_and_si256(_mm256_shuffle_epi8(qhv, idx), sel);
  return _mm256_or_si256(v, _mm256_and_si256(_mm256_cmpeq_epi8(bc, sel), _mm256_set1_epi8(0x10)));
}

/// Half h of block p of a 16-lane group: 8 weight vectors (u8; Q8_0 without kQ8Offset: signed),
/// scales, mins.
template <ggml_type T> QMM_TARGET inline void decode(const uint8_t* p, int h, __m256i (&w)[8], __m256& dw, __m256& mw) {
  constexpr geom g = geom_of(T);
  if constexpr (T == ggml_type::q8_0) {
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      w[i] = kQ8Offset ? _mm256_xor_si256(ld(p + 64 * i + 32 * h), _mm256_set1_epi8(static_cast<char>(0x80))) : ld(p + 64 * i + 32 * h);
  } else {
    const __m256i nib = _mm256_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m256i v = ld(p + 64 * i + 32 * h);
      w[i] = _mm256_and_si256(v, nib);
      w[4 + i] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
    }
    if constexpr (g.qh) {
      const __m256i qhv = ld(p + qh_at(g, kLanes) + 32 * h);
      w[0] = add_high(w[0], qhv, 0, false);
      w[1] = add_high(w[1], qhv, 0, true);
      w[2] = add_high(w[2], qhv, 1, false);
      w[3] = add_high(w[3], qhv, 1, true);
      w[4] = add_high(w[4], qhv, 2, false);
      w[5] = add_high(w[5], qhv, 2, true);
      w[6] = add_high(w[6], qhv, 3, false);
      w[7] = add_high(w[7], qhv, 3, true);
    }
  }
  dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + d_at(g, kLanes) + 16 * h)));
  if constexpr (g.min) mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + m_at(g, kLanes) + 16 * h)));
}

/// The weight centre the corrections take out: Q4_0 8, Q5_0 16, Q8_0 read as w + 128.
template <ggml_type T> constexpr int32_t centre() { return T == ggml_type::q8_0 ? (kQ8Offset ? 128 : 0) : geom_of(T).off; }

/// The kAhead'th block ahead in the group's stream, every line of it (see qmm_avx512_q.cpp).
constexpr int kAhead = 16;
QMM_TARGET inline void prefetch_block(const uint8_t* p, size_t blk) {
  for (size_t o = 0; o < blk; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

/// One 16-lane group (both halves) x N tokens.
template <ggml_type T, int N> QMM_TARGET void tile(const uint8_t* w, size_t, const tile_io& io) {
  constexpr geom g = geom_of(T);
  constexpr bool corr = centre<T>() != 0;
  constexpr size_t blk = static_cast<size_t>(kLanes) * g.bytes;
  const int32_t nb = io.nb;
  for (int h = 0; h < 2; ++h) {
    const int32_t* q[N];
    const float* da[N];
    __m256 acc[N];
    #pragma GCC unroll 4
    for (int t = 0; t < N; ++t) {
      const uint8_t* row = io.act + io.astride * static_cast<size_t>(t);
      q[t] = reinterpret_cast<const int32_t*>(row);
      da[t] = reinterpret_cast<const float*>(row + 32 * static_cast<size_t>(nb));
      acc[t] = _mm256_setzero_ps();
    }
    for (int32_t b = 0; b < nb; ++b) {
      const uint8_t* p = w + blk * static_cast<size_t>(b);
      if (h == 0) prefetch_block(p + kAhead * blk, blk);  // the second half reads it from L1
      __m256i wv[8];
      __m256 dw, mw;
      decode<T>(p, h, wv, dw, mw);
      #pragma GCC unroll 4
      for (int t = 0; t < N; ++t) {
        const __m256i c0 = corr ? _mm256_set1_epi32(io.corr[static_cast<size_t>(nb) * t + b]) : _mm256_setzero_si256();
        const __m256 f = _mm256_cvtepi32_ps(idot<T>(wv, q[t] + 8 * b, c0));
        acc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, _mm256_set1_ps(da[t][b])), acc[t]);
        if constexpr (g.min) acc[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(da[t][nb + b]), acc[t]);
      }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < N; ++t) {
      float* o = io.c + static_cast<size_t>(io.ldc) * t + 8 * h;
      _mm256_storeu_ps(o, io.accumulate ? _mm256_add_ps(_mm256_loadu_ps(o), acc[t]) : acc[t]);
    }
  }
}

template <ggml_type T, size_t... I> constexpr std::array<tile_fn, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {{&tile<T, static_cast<int>(I) + 1>...}};
}

template <ggml_type T> void run(const qmm_job& j) {
  static constexpr auto table = make_table<T>(std::make_index_sequence<kPass>{});
  run_groups(j, centre<T>(), kPass, table.data(), nullptr);
}

/// qmm_legacy_*_quant: the quantized types' dispatch.
inline void run_quant(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_0: return run<ggml_type::q4_0>(j);
    case ggml_type::q4_1: return run<ggml_type::q4_1>(j);
    case ggml_type::q5_0: return run<ggml_type::q5_0>(j);
    case ggml_type::q5_1: return run<ggml_type::q5_1>(j);
    case ggml_type::q8_0: return run<ggml_type::q8_0>(j);
    default: return;
  }
}
