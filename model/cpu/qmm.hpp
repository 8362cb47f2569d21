// Quantized-weight matrix products for every step size, with the weights read in their GGUF
// block types and the activations quantized per block to 8 bits (as ggml's CPU backend does:
// Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants; F32/F16/BF16 weights take
// f32 activations). Integer dot products (AVX2 maddubs, AVX-512 VNNI dpbusd) picked at run time.
//
// Batch invariance is a contract of every kernel here: an output element depends only on its
// weight row and its activation row, bit for bit, whatever m, the number of rows, the row offset
// (threads split rows) and the tile the kernel chose. A sequence's logits therefore do not depend
// on its batch or on how its prompt was chunked.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/formats/ggml_type.hpp"

namespace conveyor::model {

/// Instruction sets of the qmm kernels.
enum class cpu_isa {
  scalar,  ///< portable C++
  avx2,     ///< AVX2 + FMA + F16C
  avxvnni,  ///< the AVX2 set + AVX-VNNI (256-bit vpdpbusd, no AVX-512): the quantized types' dots
  avx512,   ///< AVX-512 F/BW/VL + VNNI (+ the AVX2 set)
};

/// True when this CPU can run `isa` (cpuid).
bool cpu_isa_available(cpu_isa isa);
/// The fastest available ISA; CONVEYOR_ISA=scalar|avx2|avxvnni|avx512 in the environment caps
/// it (avx2 on a newer CPU stands in for an AVX2-only host).
cpu_isa cpu_best_isa();
/// "scalar", "avx2", "avxvnni", "avx512".
const char* cpu_isa_name(cpu_isa isa);

/// How activations are encoded for a weight type's kernels.
enum class act_format {
  f32,   ///< plain floats (F32, F16, BF16 weights)
  q8_0,  ///< 32-element blocks, one scale (Q4_0, Q5_0, Q8_0 weights)
  q8_1,  ///< 32-element blocks, scale and scaled sum (Q4_1, Q5_1 weights)
  q8_k,  ///< 256-element blocks, f32 scale, 16 partial sums (Q4_K, Q5_K, Q6_K weights)
};

/// True for the weight types qmm runs: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K.
bool qmm_supports(ggml_type w);
/// The activation format of weight type `w`. Precondition: qmm_supports(w).
act_format act_format_for(ggml_type w);
/// Bytes of one activation row of k elements (k a multiple of the format's block).
size_t act_row_bytes(act_format f, int32_t k);
/// Encodes k floats of x into out (act_row_bytes(f, k) bytes). Deterministic: the same x gives
/// the same bytes on every ISA.
void quantize_act_row(cpu_isa isa, act_format f, const float* x, uint8_t* out, int32_t k);

/// One product: c[t * ldc + r] (+)= dot(weight row r, activation row t), r < n_rows, t < m.
struct qmm_job {
  ggml_type type = ggml_type::f32;  ///< weight block type
  const uint8_t* w = nullptr;       ///< first weight row
  size_t w_row_bytes = 0;           ///< bytes from one weight row to the next
  int32_t n_rows = 0;
  int32_t k = 0;                    ///< elements per row, a multiple of the type's block
  const uint8_t* act = nullptr;     ///< first activation row, in act_format_for(type)
  size_t act_stride = 0;            ///< bytes from one activation row to the next
  int32_t m = 0;                    ///< activation rows (tokens)
  float* c = nullptr;
  int32_t ldc = 0;                  ///< floats from one output row (token) to the next
  bool accumulate = false;          ///< add to c instead of overwriting it
  /// w holds rows repacked by qmm_pack_rows() for this ISA. Packed rows sit in groups of 16
  /// from the packed matrix's first row: the job's first row must start a group, and a job whose
  /// n_rows is not a multiple of 16 must end at the packed matrix's last row.
  bool packed = false;
};

/// True when `isa`'s kernels have a packed layout for type `w` (AVX2 and AVX-512: Q4_0 Q4_1
/// Q5_0 Q5_1 Q8_0, one layout for both): rows interleaved once at load in groups of 16, so that
/// lane r of a vector holds row r's bytes (qmm_rl.hpp). Packed and raw rows give the same bits;
/// every ISA gives the scalar kernel's bits for these types (one float order, no horizontal sum).
bool qmm_packs(cpu_isa isa, ggml_type w);
/// False when CONVEYOR_PACK_WEIGHTS=0 is in the environment (packing off, for A/B runs).
bool qmm_pack_by_default();
/// Repacks `rows` rows of k elements of type `w` (raw GGUF blocks at src) into dst, which takes
/// exactly as many bytes (rows 16g .. 16g + 15 in the bytes of those rows; the last group short
/// when rows % 16 != 0). Throws std::invalid_argument unless
/// qmm_packs(isa, w) and k is a positive multiple of 32.
void qmm_pack_rows(cpu_isa isa, ggml_type w, const uint8_t* src, int32_t rows, int32_t k, uint8_t* dst);

/// Runs `j` on the calling thread. Throws std::invalid_argument when `isa` is unavailable, the
/// type unsupported, k not a multiple of its block, or the job packed where `isa` has no packed
/// layout for the type.
void qmm_run(cpu_isa isa, const qmm_job& j);

} // namespace conveyor::model
