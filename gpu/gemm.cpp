#include "gpu/gemm.hpp"

#include <stdexcept>
#include <string>

#include "gpu/check.hpp"

namespace conveyor::gpu {
namespace {

// The largest power of two up to 256 dividing `bytes`: how aligned a row offset of that length keeps a pointer.
uint32_t alignment_of(uint64_t bytes) {
  uint32_t a = 1;
  while (a < 256 && bytes % (2 * a) == 0) a *= 2;
  return a;
}

} // namespace

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
//
// Batch-invariant mode: the key is the row class (a negative m class) and the algorithm is the
// heuristic's for the class's largest m among those without a split reduction; it is checked to
// be one sequence per dot product (split-K 1) before it is used.
void gemm_runner::set_invariant(int32_t decode_rows, int32_t prompt_rows, int32_t head_rows) {
  if (!plans_.empty()) throw std::logic_error("gemm_runner::set_invariant after the first product");
  if (decode_rows < 1 || prompt_rows < 1 || head_rows < 1) throw std::invalid_argument("gemm_runner::set_invariant: rows must be >= 1");
  class_rows_[0] = decode_rows;
  class_rows_[1] = prompt_rows;
  class_rows_[2] = head_rows;
}

gemm_runner::plan& gemm_runner::get(int32_t m, int32_t n, int32_t k, bool c_f32, float beta, row_class cls) {
  if (invariant() && cls == row_class::any)
    throw std::logic_error("gemm_runner: a product without a row class in batch-invariant mode");
  int32_t m_class = 1;
  if (invariant()) {
    m_class = -static_cast<int32_t>(cls);
  } else {
    while (m_class < m) m_class *= 2;
  }
  const auto key = std::make_tuple(m_class, n, k, c_f32, beta != 0.0f);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  m = invariant() ? class_rows_[static_cast<int>(cls) - 1] : m_class;
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
  if (invariant()) {
    const uint32_t one_sequence = CUBLASLT_REDUCTION_SCHEME_NONE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &one_sequence,
                                                      sizeof one_sequence));
    // A class's rows may start past the buffer's start (the prompt rows follow the decode rows):
    // the activations and outputs are only as aligned as one row is long.
    const uint32_t b_align = alignment_of(uint64_t{static_cast<uint32_t>(k)} * 2);
    const uint32_t cd_align = alignment_of(uint64_t{static_cast<uint32_t>(n)} * (c_f32 ? 4 : 2));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b_align, sizeof b_align));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &cd_align, sizeof cd_align));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &cd_align, sizeof cd_align));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.w, p.a, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  const auto release = [&p] {  // before a throw: the plan is not kept
    cublasLtMatrixLayoutDestroy(p.w);
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  };
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    release();
    throw std::runtime_error("cuBLASLt has no bf16 algorithm for GEMM m=" + std::to_string(m) + " n=" + std::to_string(n) +
                             " k=" + std::to_string(k) + " (status " + std::to_string(static_cast<int>(st)) +
                             ") ---> HINT: an unusual shape or a GPU without bf16 (sm_80+)");
  }
  p.algo = result.algo;
  if (invariant()) {
    int32_t splits = 0;
    size_t written = 0;
    const cublasStatus_t got = cublasLtMatmulAlgoConfigGetAttribute(&p.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits, &written);
    if (got != CUBLAS_STATUS_SUCCESS || splits != 1) {
      release();
      throw std::runtime_error("cuBLASLt offered a split-K algorithm (" + std::to_string(splits) + " splits) for GEMM n=" +
                               std::to_string(n) + " k=" + std::to_string(k) +
                               " although asked for none: batch-invariant products are not possible with this cuBLASLt "
                               "---> HINT: run without speculative decoding on this GPU");
    }
  }
  return plans_.emplace(key, p).first->second;
}

// Napkin math: 2*m*n*k FLOP over 2*(m*k + n*k) + (4 or 2)*m*n bytes. Decode (m = batch) is
// weight-bound: Llama-3-8B's 15 GB of layer and head weights at 3 TB/s is 5 ms per step whatever
// the batch up to m ~ 300 (the ridge point: 2*m FLOP per 2 weight bytes vs ~990 TFLOP/s / 3 TB/s).
// Prefill is compute-bound: 2 * 7.5e9 FLOP per token, 2048 tokens in ~40 ms at ~750 TFLOP/s.
void gemm_runner::run(const bf16* a, const bf16* w, void* c, bool c_f32, int32_t m, int32_t n, int32_t k, float beta,
                      cudaStream_t stream, row_class cls) {
  if (m <= 0) return;
  plan& p = get(m, n, k, c_f32, beta, cls);
  const uint64_t cols = static_cast<uint64_t>(m);  // host-side descriptors: fine during graph capture
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p.a, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols));
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p.c, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols));
  const float alpha = 1.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.w, a, p.a, &beta, c, p.c, c, p.c, &p.algo, workspace_,
                              workspace_bytes_, stream));
}

} // namespace conveyor::gpu
