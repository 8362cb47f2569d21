// qmm.hpp's dispatch: the CPU's instruction sets (cpuid through the compiler's builtins), the
// activation formats, and the kernel families of qmm_kernels.hpp.
#include "model/cpu/qmm.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "model/cpu/qmm_kernels.hpp"

namespace conveyor::model {

bool cpu_isa_available(cpu_isa isa) {
  switch (isa) {
    case cpu_isa::scalar: return true;
#if defined(__x86_64__) || defined(__i386__)
    case cpu_isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case cpu_isa::avxvnni: return cpu_isa_available(cpu_isa::avx2) && __builtin_cpu_supports("avxvnni");
    case cpu_isa::avx512:
      return cpu_isa_available(cpu_isa::avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vnni");
#else
    default: return false;
#endif
  }
  return false;
}

const char* cpu_isa_name(cpu_isa isa) {
  switch (isa) {
    case cpu_isa::scalar: return "scalar";
    case cpu_isa::avx2: return "avx2";
    case cpu_isa::avxvnni: return "avxvnni";
    case cpu_isa::avx512: return "avx512";
  }
  return "?";
}

cpu_isa cpu_best_isa() {
  cpu_isa cap = cpu_isa::avx512;
  if (const char* e = std::getenv("CONVEYOR_ISA")) {
    const std::string_view v(e);
    if (v == "scalar") cap = cpu_isa::scalar;
    else if (v == "avx2") cap = cpu_isa::avx2;
    else if (v == "avxvnni") cap = cpu_isa::avxvnni;
  }
  for (cpu_isa i : {cpu_isa::avx512, cpu_isa::avxvnni, cpu_isa::avx2})
    if (static_cast<int>(i) <= static_cast<int>(cap) && cpu_isa_available(i)) return i;
  return cpu_isa::scalar;
}

bool qmm_supports(ggml_type w) {
  switch (w) {
    case ggml_type::f32: case ggml_type::f16: case ggml_type::bf16:
    case ggml_type::q4_0: case ggml_type::q4_1: case ggml_type::q5_0: case ggml_type::q5_1: case ggml_type::q8_0:
    case ggml_type::q4_k: case ggml_type::q5_k: case ggml_type::q6_k:
      return true;
    default: return false;
  }
}

act_format act_format_for(ggml_type w) {
  switch (w) {
    case ggml_type::q4_0: case ggml_type::q5_0: case ggml_type::q8_0: return act_format::q8_0;
    case ggml_type::q4_1: case ggml_type::q5_1: return act_format::q8_1;
    case ggml_type::q4_k: case ggml_type::q5_k: case ggml_type::q6_k: return act_format::q8_k;
    default: return act_format::f32;
  }
}

size_t act_row_bytes(act_format f, int32_t k) {
  switch (f) {
    case act_format::f32: return sizeof(float) * static_cast<size_t>(k);
    case act_format::q8_0: return q8_0_row_bytes(k);
    case act_format::q8_1: return q8_1_row_bytes(k);
    case act_format::q8_k: return q8_k_row_bytes(k);
  }
  return 0;
}

void quantize_act_row(cpu_isa, act_format f, const float* x, uint8_t* out, int32_t k) {
  switch (f) {
    case act_format::f32: std::memcpy(out, x, sizeof(float) * static_cast<size_t>(k)); return;
    case act_format::q8_0: quantize_q8_0_row(x, out, k); return;
    case act_format::q8_1: quantize_q8_1_row(x, out, k); return;
    case act_format::q8_k: quantize_q8_k_row(x, out, k); return;
  }
}

bool qmm_packs(cpu_isa isa, ggml_type w) {
  if (isa == cpu_isa::scalar) return false;
  switch (w) {
    case ggml_type::q4_0: case ggml_type::q4_1: case ggml_type::q5_0: case ggml_type::q5_1: case ggml_type::q8_0:
      return true;
    default: return false;
  }
}

bool qmm_pack_by_default() {
  const char* e = std::getenv("CONVEYOR_PACK_WEIGHTS");
  return e == nullptr || std::string_view(e) != "0";
}

void qmm_pack_rows(cpu_isa isa, ggml_type w, const uint8_t* src, int32_t rows, int32_t k, uint8_t* dst) {
  if (!qmm_packs(isa, w))
    throw std::invalid_argument(std::string("qmm: no packed layout of ") + type_name(w) + " for " + cpu_isa_name(isa));
  if (k <= 0 || k % 32 != 0) throw std::invalid_argument("qmm: k = " + std::to_string(k) + " is not a multiple of 32");
  if (!cpu_isa_available(isa)) throw std::invalid_argument(std::string("qmm: this CPU cannot run ") + cpu_isa_name(isa));
  if (rows > 0) qmm_legacy_pack(w, src, rows, k, dst);
}

void qmm_run(cpu_isa isa, const qmm_job& j) {
  if (!qmm_supports(j.type)) throw std::invalid_argument("qmm: unsupported weight type " + type_name(j.type));
  const auto be = static_cast<int32_t>(block_elems(j.type));
  if (j.k <= 0 || j.k % be != 0 || (act_format_for(j.type) != act_format::f32 && j.k % 32 != 0))
    throw std::invalid_argument("qmm: k = " + std::to_string(j.k) + " is not a multiple of " + type_name(j.type) +
                                "'s block of " + std::to_string(be));
  if (!cpu_isa_available(isa)) throw std::invalid_argument(std::string("qmm: this CPU cannot run ") + cpu_isa_name(isa));
  if (j.packed && !qmm_packs(isa, j.type))
    throw std::invalid_argument(std::string("qmm: packed ") + type_name(j.type) + " rows for an ISA without their layout (" +
                                cpu_isa_name(isa) + ")");
  if (j.m <= 0 || j.n_rows <= 0) return;
  const bool kq = act_format_for(j.type) == act_format::q8_k;
  switch (isa) {
    case cpu_isa::scalar: return kq ? qmm_kquant_scalar(j) : qmm_legacy_scalar(j);
#if defined(__x86_64__) || defined(__i386__)
    case cpu_isa::avx2: return kq ? qmm_kquant_avx2(j) : qmm_legacy_avx2(j);
    case cpu_isa::avxvnni:  // its own kernel for the legacy quants, AVX2's for the rest
      return kq ? qmm_kquant_avx2(j) : act_format_for(j.type) == act_format::f32 ? qmm_legacy_avx2(j) : qmm_legacy_avxvnni_quant(j);
    case cpu_isa::avx512: return kq ? qmm_kquant_avx512(j) : qmm_legacy_avx512(j);
#else
    default: break;
#endif
  }
}

} // namespace conveyor::model
