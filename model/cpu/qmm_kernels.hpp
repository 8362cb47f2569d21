// The per-ISA kernels behind qmm_run() and quantize_act_row() (qmm.hpp). Internal to qmm*.cpp
// and their tests. Each takes a validated job (type supported, k a multiple of the block).
//   qmm_legacy_*: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0      (qmm_scalar/avx2/avx512.cpp;
//                 AVX-VNNI: the quantized types only, qmm_avxvnni_q.cpp)
//   qmm_kquant_*: Q4_K Q5_K Q6_K                             (qmm_k_scalar/avx2/avx512.cpp)
// Every kernel keeps the batch-invariance contract of qmm.hpp, and the activation quantizers
// give identical bytes on every ISA.
#pragma once

#include "model/cpu/qmm.hpp"

namespace conveyor::model {

void qmm_legacy_scalar(const qmm_job& j);
void qmm_kquant_scalar(const qmm_job& j);
/// Q8_0 / Q8_1 rows (portable; the only implementation: quantizing is ~0.1% of a step).
void quantize_q8_0_row(const float* x, uint8_t* out, int32_t k);
void quantize_q8_1_row(const float* x, uint8_t* out, int32_t k);
void quantize_q8_k_row(const float* x, uint8_t* out, int32_t k);
/// Activation row bytes of each format (k a multiple of its block).
size_t q8_0_row_bytes(int32_t k);
size_t q8_1_row_bytes(int32_t k);
size_t q8_k_row_bytes(int32_t k);

#if defined(__x86_64__) || defined(__i386__)
void qmm_legacy_avx2(const qmm_job& j);
void qmm_legacy_avx512(const qmm_job& j);
/// Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 with AVX-VNNI (qmm_avxvnni_q.cpp); the other types take AVX2's.
void qmm_legacy_avxvnni_quant(const qmm_job& j);
void qmm_kquant_avx2(const qmm_job& j);
void qmm_kquant_avx512(const qmm_job& j);
#endif
/// qmm_pack_rows() for the AVX2 and AVX-512 legacy kernels: the rows-in-lanes layout of
/// qmm_rl.hpp, the same for both (portable; qmm_rl.cpp).
void qmm_legacy_pack(ggml_type t, const uint8_t* src, int32_t rows, int32_t k, uint8_t* dst);

} // namespace conveyor::model
