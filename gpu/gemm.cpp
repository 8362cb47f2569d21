#include "gpu/gemm.hpp"

#include <string>

#include "gpu/check.hpp"

namespace conveyor::gpu {

gemm_runner::gemm_runner(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

gemm_runner::~gemm_runner() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.w);
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

// Row-major C(m, n) = A(m, k) W(n, k)^T is column-major C^T(n, m) = W^T(n, k) A^T(k, m): W is a
// column-major (k, n) matrix used transposed, A a column-major (k, m) one used as is ("TN").
//
// Plans are cached per class of m (the next power of two), not per m: a server meets every m up
// to its token budget, and one cached plan per m would grow without bound. The algorithm is the
// heuristic's choice for the class's largest m; A's and C's layouts take the exact m per call.
gemm_runner::plan& gemm_runner::get(int32_t m, int32_t n, int32_t k, bool c_f32, float beta) {
  int32_t m_class = 1;
  while (m_class < m) m_class *= 2;
  const auto key = std::make_tuple(m_class, n, k, c_f32, beta != 0.0f);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  m = m_class;
  plan p;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.w, CUDA_R_16BF, k, n, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, m, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, c_f32 ? CUDA_R_32F : CUDA_R_16BF, n, m, n));
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                                    sizeof workspace_bytes_));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.w, p.a, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw std::runtime_error("cuBLASLt has no bf16 algorithm for GEMM m=" + std::to_string(m) + " n=" + std::to_string(n) +
                             " k=" + std::to_string(k) + " (status " + std::to_string(static_cast<int>(st)) +
                             ") ---> HINT: an unusual shape or a GPU without bf16 (sm_80+)");
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

// Napkin math: 2*m*n*k FLOP over 2*(m*k + n*k) + (4 or 2)*m*n bytes. Decode (m = batch) is
// weight-bound: Llama-3-8B's 15 GB of layer and head weights at 3 TB/s is 5 ms per step whatever
// the batch up to m ~ 300 (the ridge point: 2*m FLOP per 2 weight bytes vs ~990 TFLOP/s / 3 TB/s).
// Prefill is compute-bound: 2 * 7.5e9 FLOP per token, 2048 tokens in ~40 ms at ~750 TFLOP/s.
void gemm_runner::run(const bf16* a, const bf16* w, void* c, bool c_f32, int32_t m, int32_t n, int32_t k, float beta,
                      cudaStream_t stream) {
  if (m <= 0) return;
  plan& p = get(m, n, k, c_f32, beta);
  const uint64_t cols = static_cast<uint64_t>(m);  // host-side descriptors: fine during graph capture
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p.a, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols));
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p.c, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols));
  const float alpha = 1.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.w, a, p.a, &beta, c, p.c, c, p.c, &p.algo, workspace_,
                              workspace_bytes_, stream));
}

} // namespace conveyor::gpu
