// Linear layers through cuBLASLt: C(m, n) = A(m, k) * W(n, k)^T with bf16 A and W, f32
// accumulation, and C in f32 or bf16. One algorithm per shape class (n, k, output type, and m
// rounded up to a power of two), chosen by cuBLASLt's heuristic on first use and cached.
//
// Batch-invariant mode (set_invariant, docs/gpu.md §3): a row's bits must not depend on how many
// rows share its product. cuBLASLt's heuristic picks split-K for short products, and the split
// count changes the order a dot product is summed in, so here every product names its row class
// and each class has one algorithm for every m (chosen once, for the class's largest m), found
// with no split reduction (CUBLASLT_REDUCTION_SCHEME_NONE: each dot product in one sequence).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "gpu/kernels.hpp"

namespace conveyor::gpu {

/// Which rows a product holds (batch-invariant mode): each class has its own algorithm.
enum class row_class : uint8_t {
  any,     ///< plans per m class (the default mode only)
  decode,  ///< decode and drafted rows
  prompt,  ///< prompt-chunk rows
  head,    ///< the LM head's rows (sampled rows, prompt-logprob rows)
};

class gemm_runner {
public:
  explicit gemm_runner(size_t workspace_bytes = size_t{32} << 20);
  ~gemm_runner();
  gemm_runner(const gemm_runner&) = delete;
  gemm_runner& operator=(const gemm_runner&) = delete;

  /// c = a * w^T (+ beta * c). Row-major: a (m, k), w (n, k), c (m, n), f32 when c_f32 else bf16.
  /// Capturable into a CUDA graph (fixed workspace, no allocation after the first call of a shape).
  void run(const bf16* a, const bf16* w, void* c, bool c_f32, int32_t m, int32_t n, int32_t k, float beta,
           cudaStream_t stream, row_class cls = row_class::any);

  /// Batch-invariant mode from now on (before the first run): the most rows of each class, whose
  /// algorithms are chosen for those sizes. A run naming row_class::any then throws logic_error.
  void set_invariant(int32_t decode_rows, int32_t prompt_rows, int32_t head_rows);
  bool invariant() const { return class_rows_[0] > 0; }
  /// Chooses (and checks) the plan a product of this shape and class will use, without running it:
  /// a cuBLASLt that cannot give batch-invariant plans fails here, at start-up.
  void prepare(int32_t n, int32_t k, bool c_f32, float beta, row_class cls) { (void)get(1, n, k, c_f32, beta, cls); }

  /// Cached plans (one per shape class; bounded, tests check it).
  size_t plan_count() const { return plans_.size(); }

private:
  struct plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, a = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  plan& get(int32_t m, int32_t n, int32_t k, bool c_f32, float beta, row_class cls);
  int32_t class_rows_[3] = {0, 0, 0};  // decode, prompt, head (0: not invariant)

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int32_t, int32_t, int32_t, bool, bool>, plan> plans_;
};

} // namespace conveyor::gpu
