// Shared by the row-per-lane K-quant kernels (qmm_k_avx512_wide.cpp, qmm_k_avx2_wide.cpp), which
// include it inside their own anonymous namespace with QMM_TARGET defined as their target
// attribute: a block's 256 elements unpacked to unsigned bytes in element order, the per-row
// scale data the tiles read, written lane by lane, and the loop over rows, blocks and token tiles
// (rl_run). Plain AVX2 instructions only. No include guard: one inclusion per namespace.
#ifndef QMM_TARGET
#error "define QMM_TARGET (the kernel's target attribute) before including qmm_k_rowlane.hpp"
#endif

QMM_TARGET inline __m256i rl_ld(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
QMM_TARGET inline void rl_st(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline int32_t ld_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

/// The row's next block: a row group is 8 or 16 short strided streams that the hardware
/// prefetcher does not follow well (a block's tiles take long enough for it to arrive).
/// NOTE: past the last block it prefetches the next row's start (harmless: never faults).
template <ggml_type T> inline void prefetch_next(const uint8_t* blk) {
  constexpr size_t bb = kq::block_bytes_of(T);
  for (size_t o = 0; o < bb + 63; o += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + bb + std::min(o, bb - 1)), _MM_HINT_T0);
}

/// One block's 256 elements as unsigned bytes in element order (Q6_K: q + 32, i.e. 0..63).
template <ggml_type T> QMM_TARGET inline void unpack_bytes(const uint8_t* blk, uint8_t* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  if constexpr (T == ggml_type::q6_k) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int n = 0; n < 2; ++n) {
      const __m256i a = rl_ld(blk + 64 * n), b = rl_ld(blk + 64 * n + 32), h = rl_ld(blk + 128 + 32 * n);
      const auto hi = [&](int s) { return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, s), m3), 4); };
      rl_st(out + 128 * n, _mm256_or_si256(_mm256_and_si256(a, m4), hi(0)));
      rl_st(out + 128 * n + 32, _mm256_or_si256(_mm256_and_si256(b, m4), hi(2)));
      rl_st(out + 128 * n + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), hi(4)));
      rl_st(out + 128 * n + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), hi(6)));
    }
  } else {
    constexpr bool five = T == ggml_type::q5_k;
    const uint8_t* qs = blk + (five ? 48 : 16);
    const __m256i qh = five ? rl_ld(blk + 16) : _mm256_setzero_si256(), b4 = _mm256_set1_epi8(0x10);
    const auto bit = [&](int u) {  // 0x10 where bit u of qh is set
      const __m256i m = _mm256_set1_epi8(static_cast<char>(1 << u));
      return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m), m), b4);
    };
    for (int g = 0; g < 4; ++g) {
      const __m256i q = rl_ld(qs + 32 * g);
      __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (five) {
        lo = _mm256_or_si256(lo, bit(2 * g));
        hi = _mm256_or_si256(hi, bit(2 * g + 1));
      }
      rl_st(out + 64 * g, lo);
      rl_st(out + 64 * g + 32, hi);
    }
  }
}

/// Row r's (of R lanes) scale data of block `blk`, into int32 lanes sc[R * sub-block + r]
/// (Q4_K/Q5_K: 8 six-bit scales; Q6_K: 16 signed), int16 pairs pr[2 * (R * i + r) + 0/1] for the
/// bsums dwords i < 8 (Q4_K/Q5_K: (min_i, min_i); Q6_K: (-32 sc_2i, -32 sc_2i+1)), d and dmin.
template <ggml_type T, int R> inline void row_scales(const uint8_t* blk, int r, int32_t* sc, int16_t* pr, float* d, float* dmin) {
  if constexpr (T == ggml_type::q6_k) {
    for (int p = 0; p < 16; ++p) {
      const int v = static_cast<int8_t>(blk[192 + p]);
      sc[R * p + r] = v;
      pr[2 * (R * (p / 2) + r) + p % 2] = static_cast<int16_t>(-32 * v);
    }
    d[r] = kq::load_f16(blk + 208);
  } else {
    uint64_t scv, mnv;
    kq::unpack_scales(blk + 4, &scv, &mnv);
    for (int j = 0; j < 8; ++j) {
      sc[R * j + r] = static_cast<int32_t>((scv >> (8 * j)) & 0xFF);
      const auto mn = static_cast<int16_t>((mnv >> (8 * j)) & 0xFF);
      pr[2 * (R * j + r)] = mn;
      pr[2 * (R * j + r) + 1] = mn;
    }
    d[r] = kq::load_f16(blk);
    dmin[r] = kq::load_f16(blk + 2);
  }
}

/// The kernels' loop. Rows go in passes of up to G groups of R rows (kq::wide_groups_used()); per
/// block, each group's scratch is prepared, then every tile of NT tokens runs over all the groups
/// while its activations (NT Q8_K blocks, ~1-2 KB) sit in L1. A group at a time read the whole
/// job's block column (128 tokens: ~37 KB of Q8_K, past L1) from L2 once per R rows. Per (row,
/// token) the blocks still go in order through the same steps: the bits do not change.
///   prepare(rows, row_bytes, nr, block, bytes, scratch)   tiles[n - 1](j, scratch, block, t0, acc)
///   store(j, first_row, nr, acc)
template <int R, int NT, int G, size_t SB, class Prepare, class Tile, class Store>
QMM_TARGET void rl_run(const qmm_job& j, Prepare prepare, const Tile (&tiles)[NT], Store store) {
  static_assert(SB % 64 == 0, "each group's scratch stays 64-byte aligned");
  using acc_rows = float (*)[R];
  const int32_t nb = j.k / 256, gmax = std::min(G, kq::wide_groups_used());
  const size_t per_group = static_cast<size_t>(R) * static_cast<size_t>(j.m);  // floats: m rows of R
  alignas(64) uint8_t bytes[R][256];
  alignas(64) uint8_t scratch[G][SB];
  thread_local std::vector<float> accbuf;
  accbuf.resize(per_group * G + 16);
  float* const acc = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(accbuf.data()) + 63) & ~uintptr_t{63});
  const auto group_acc = [&](int g) { return reinterpret_cast<acc_rows>(acc + per_group * static_cast<size_t>(g)); };
  for (int32_t r0 = 0; r0 < j.n_rows; r0 += R * gmax) {
    const int ng = std::min<int32_t>(gmax, (j.n_rows - r0 + R - 1) / R);
    const auto rows_of = [&](int g) { return std::min<int32_t>(R, j.n_rows - r0 - R * g); };
    std::memset(acc, 0, sizeof(float) * per_group * static_cast<size_t>(ng));
    for (int32_t b = 0; b < nb; ++b) {
      for (int g = 0; g < ng; ++g) {
        const int nr = rows_of(g);
        if (nr < R) std::memset(bytes, 0, sizeof bytes);  // lanes past nr stay zero
        prepare(j.w + j.w_row_bytes * static_cast<size_t>(r0 + R * g), j.w_row_bytes, nr, b, bytes, scratch[g]);
      }
      for (int32_t t0 = 0; t0 < j.m; t0 += NT) {
        const Tile tile = tiles[std::min(NT, j.m - t0) - 1];
        for (int g = 0; g < ng; ++g) tile(j, scratch[g], b, t0, group_acc(g));
      }
    }
    for (int g = 0; g < ng; ++g) store(j, r0 + R * g, rows_of(g), group_acc(g));
  }
}
