// Linear layers through cuBLASLt: C(m, n) = A(m, k) * W(n, k)^T with bf16 A and W, f32
// accumulation, and C in f32 or bf16. One algorithm per shape class (n, k, output type, and m
// rounded up to a power of two), chosen by cuBLASLt's heuristic on first use and cached.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "gpu/kernels.hpp"

namespace conveyor::gpu {

class gemm_runner {
public:
  explicit gemm_runner(size_t workspace_bytes = size_t{32} << 20);
  ~gemm_runner();
  gemm_runner(const gemm_runner&) = delete;
  gemm_runner& operator=(const gemm_runner&) = delete;

  /// c = a * w^T (+ beta * c). Row-major: a (m, k), w (n, k), c (m, n), f32 when c_f32 else bf16.
  /// Capturable into a CUDA graph (fixed workspace, no allocation after the first call of a shape).
  void run(const bf16* a, const bf16* w, void* c, bool c_f32, int32_t m, int32_t n, int32_t k, float beta,
           cudaStream_t stream);

  /// Cached plans (one per shape class; bounded, tests check it).
  size_t plan_count() const { return plans_.size(); }

private:
  struct plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, a = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  plan& get(int32_t m, int32_t n, int32_t k, bool c_f32, float beta);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int32_t, int32_t, int32_t, bool, bool>, plan> plans_;
};

} // namespace conveyor::gpu
