// cuBLASLt for the emulator: descriptors are plain structs; cublasLtMatmulAlgoGetHeuristic
// accepts exactly what this subset computes (f32 compute and scale, bf16 or f32 A and B, C and D
// of one type and layout) and records the problem in the algorithm; cublasLtMatmul checks the
// layouts against the operation, the pointers against device allocations and the algorithm
// against the problem, then queues the product on the stream (captured into a graph like any
// launch). bf16 D is rounded to nearest even. beta = 0 never reads C (NaN garbage there does not
// propagate), as cuBLAS promises.
//
// The heuristic models what makes a real cuBLASLt's bits depend on the problem's shape: for a
// short product (few columns of D, the rows of a decode step) it picks split-K, as cuBLASLt does
// to fill the SMs, and the split count is recorded in the algorithm. Each element of D is then
// its split count's K ranges, each summed in one ascending f32 FMA chain, added in order: so a
// plan chosen per shape gives a row different bits at different batch sizes, and an algorithm
// found with CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = NONE (one sequence per dot product)
// gives every batch size the same bits (gpu/gemm.hpp's batch-invariant plans rely on that).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "conveyor_emu/cublaslt_api.hpp"
#include "state.hpp"

struct cublasLtContext {
  int device = 0;
};
struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
};
struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct cublasLtMatmulPreferenceOpaque_t {
  size_t workspace = 0;
  uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_MASK;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D: what the algorithms found may assume
};

namespace {

thread_local std::string tl_error;

cublasStatus_t bad(cublasStatus_t s, const std::string& why) {
  tl_error = why;
  return s;
}

size_t elem_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

float load(const void* p, cudaDataType_t t, size_t i) {
  if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
  uint16_t b;
  std::memcpy(&b, static_cast<const char*>(p) + 2 * i, 2);
  return __bfloat162float(__nv_bfloat16{b});
}

void store(void* p, cudaDataType_t t, size_t i, float v) {
  if (t == CUDA_R_32F) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  const __nv_bfloat16 h = __float2bfloat16_rn(v);
  std::memcpy(static_cast<char*>(p) + 2 * i, &h.__x, 2);
}

struct problem {
  int64_t m, n, k;
};

// Checks the descriptors against each other; fills the GEMM's m, n, k.
cublasStatus_t check(const cublasLtMatmulDescOpaque_t* op, const cublasLtMatrixLayoutOpaque_t* a, const cublasLtMatrixLayoutOpaque_t* b,
                     const cublasLtMatrixLayoutOpaque_t* c, const cublasLtMatrixLayoutOpaque_t* d, problem* pr) {
  if (!op || !a || !b || !c || !d) return bad(CUBLAS_STATUS_INVALID_VALUE, "a null descriptor");
  if (op->compute != CUBLAS_COMPUTE_32F || op->scale != CUDA_R_32F)
    return bad(CUBLAS_STATUS_NOT_SUPPORTED, "the emulator computes CUBLAS_COMPUTE_32F with CUDA_R_32F scale only");
  if (a->type != b->type || (a->type != CUDA_R_16BF && a->type != CUDA_R_32F))
    return bad(CUBLAS_STATUS_NOT_SUPPORTED, "A and B must both be CUDA_R_16BF or both CUDA_R_32F");
  if (c->type != d->type || (d->type != CUDA_R_32F && d->type != CUDA_R_16BF) || (a->type == CUDA_R_32F && d->type != CUDA_R_32F))
    return bad(CUBLAS_STATUS_NOT_SUPPORTED, "C and D must share a type: CUDA_R_32F, or CUDA_R_16BF with bf16 inputs");
  if (c->rows != d->rows || c->cols != d->cols || c->ld != d->ld) return bad(CUBLAS_STATUS_NOT_SUPPORTED, "C and D layouts differ");
  const int64_t am = op->ta == CUBLAS_OP_N ? a->rows : a->cols, ak = op->ta == CUBLAS_OP_N ? a->cols : a->rows;
  const int64_t bk = op->tb == CUBLAS_OP_N ? b->rows : b->cols, bn = op->tb == CUBLAS_OP_N ? b->cols : b->rows;
  if (ak != bk || am != static_cast<int64_t>(d->rows) || bn != static_cast<int64_t>(d->cols))
    return bad(CUBLAS_STATUS_INVALID_VALUE, "shapes do not chain: op(A) " + std::to_string(am) + "x" + std::to_string(ak) + ", op(B) " +
                                                std::to_string(bk) + "x" + std::to_string(bn) + ", D " + std::to_string(d->rows) + "x" +
                                                std::to_string(d->cols));
  for (const auto* l : {a, b, d})
    if (l->ld < static_cast<int64_t>(l->rows) || l->ld < 1)
      return bad(CUBLAS_STATUS_INVALID_VALUE, "leading dimension " + std::to_string(l->ld) + " < rows " + std::to_string(l->rows));
  *pr = {am, bn, ak};
  return CUBLAS_STATUS_SUCCESS;
}

bool on_device(const void* p, const cublasLtMatrixLayoutOpaque_t* l) {
  using namespace conveyor_emu::detail;
  const size_t bytes = ((l->cols - 1) * static_cast<uint64_t>(l->ld) + l->rows) * elem_bytes(l->type);
  const allocation* a = find_alloc(p, bytes);
  return a && !a->pinned;
}

} // namespace

namespace conveyor_emu {
const char* cublaslt_last_error() { return tl_error.c_str(); }
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = new cublasLtContext{conveyor_emu::detail::current_device()};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType_t scale) {
  *d = new cublasLtMatmulDescOpaque_t{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void* buf, size_t n) {
  if (n != sizeof(int32_t)) return bad(CUBLAS_STATUS_INVALID_VALUE, "attribute size");
  int32_t v;
  std::memcpy(&v, buf, sizeof v);
  switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: d->ta = static_cast<cublasOperation_t>(v); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: d->tb = static_cast<cublasOperation_t>(v); break;
    default: return bad(CUBLAS_STATUS_NOT_SUPPORTED, "matmul attribute " + std::to_string(static_cast<int>(a)) + " is not emulated");
  }
  if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) return bad(CUBLAS_STATUS_INVALID_VALUE, "transpose must be N or T");
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld) {
  *l = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, const void* buf, size_t n) {
  if (a == CUBLASLT_MATRIX_LAYOUT_ROWS || a == CUBLASLT_MATRIX_LAYOUT_COLS) {
    if (n != sizeof(uint64_t)) return bad(CUBLAS_STATUS_INVALID_VALUE, "attribute size");
    std::memcpy(a == CUBLASLT_MATRIX_LAYOUT_ROWS ? &l->rows : &l->cols, buf, n);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (a == CUBLASLT_MATRIX_LAYOUT_LD && n == sizeof(int64_t)) {
    std::memcpy(&l->ld, buf, n);
    return CUBLAS_STATUS_SUCCESS;
  }
  return bad(CUBLAS_STATUS_NOT_SUPPORTED, "layout attribute " + std::to_string(static_cast<int>(a)) + " is not emulated");
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = new cublasLtMatmulPreferenceOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void* buf,
                                                    size_t n) {
  if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && n == sizeof(size_t)) {
    std::memcpy(&p->workspace, buf, n);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (a == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK && n == sizeof(uint32_t)) {
    std::memcpy(&p->reductions, buf, n);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES && n == sizeof(uint32_t)) {
    uint32_t v = 0;
    std::memcpy(&v, buf, n);
    if (v == 0 || (v & (v - 1)) != 0 || v > 256) return bad(CUBLAS_STATUS_INVALID_VALUE, "alignment must be a power of two up to 256");
    p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = v;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (a == CUBLASLT_MATMUL_PREF_SEARCH_MODE) return CUBLAS_STATUS_SUCCESS;
  return bad(CUBLAS_STATUS_INVALID_VALUE, "preference attribute");
}

// The algorithm records transposes and types (data[0]), so using it for another kind of problem
// is caught; m, n, k are free (cuBLASLt's heuristic results are tile configurations). data[1] is
// the split-K count: 3 for D of at most 4 columns, 2 up to 16 (K of 32 or more), else 1; 1
// whenever the preference allows no split reduction. data[2] holds the alignments of A, B, C and D
// the preference let the algorithm assume (256 bytes unless told less), 16 bits each: a real
// cuBLASLt algorithm may use loads that fault or fail on less aligned pointers, so cublasLtMatmul
// refuses them (CUBLAS_STATUS_NOT_SUPPORTED).
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t* results, int* found) {
  *found = 0;
  if (!h || !pref || requested < 1) return bad(CUBLAS_STATUS_INVALID_VALUE, "handle, preference or count");
  problem pr{};
  if (const cublasStatus_t s = check(op, a, b, c, d, &pr); s != CUBLAS_STATUS_SUCCESS) return s;
  std::memset(&results[0], 0, sizeof results[0]);
  results[0].algo.data[0] = 0xC0FE0000ull | (uint64_t{op->ta} << 12) | (uint64_t{op->tb} << 8) | (uint64_t(a->type) << 4) |
                            uint64_t(d->type == CUDA_R_32F);
  const bool may_split = (pref->reductions & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) != 0;
  results[0].algo.data[1] = !may_split || pr.k < 32 ? 1 : pr.n <= 4 ? 3 : pr.n <= 16 ? 2 : 1;
  results[0].algo.data[2] = uint64_t{pref->align[0]} | uint64_t{pref->align[1]} << 16 | uint64_t{pref->align[2]} << 32 |
                            uint64_t{pref->align[3]} << 48;
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *found = 1;
  tl_error.clear();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void* alpha, const void* A, cublasLtMatrixLayout_t a,
                              const void* B, cublasLtMatrixLayout_t b, const void* beta, const void* C, cublasLtMatrixLayout_t c,
                              void* D, cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  using namespace conveyor_emu::detail;
  lock l(st().mu);
  if (!h || !alpha || !beta) return bad(CUBLAS_STATUS_INVALID_VALUE, "null handle or scalar");
  problem pr{};
  if (const cublasStatus_t s = check(op, a, b, c, d, &pr); s != CUBLAS_STATUS_SUCCESS) return s;
  if (algo) {
    const uint64_t want = 0xC0FE0000ull | (uint64_t{op->ta} << 12) | (uint64_t{op->tb} << 8) | (uint64_t(a->type) << 4) |
                          uint64_t(d->type == CUDA_R_32F);
    if (algo->data[0] != want) return bad(CUBLAS_STATUS_INVALID_VALUE, "the algorithm was chosen for another kind of problem");
  }
  if (algo) {
    const void* const ptrs[4] = {A, B, C, D};
    const char* const names[4] = {"A", "B", "C", "D"};
    for (int i = 0; i < 4; ++i) {
      const uint64_t want = (algo->data[2] >> (16 * i)) & 0xFFFF;
      if (want > 1 && (i != 2 || *static_cast<const float*>(beta) != 0.0f) && reinterpret_cast<uintptr_t>(ptrs[i]) % want != 0)
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, std::string(names[i]) + " is less aligned than the " + std::to_string(want) +
                                                    " bytes the algorithm was found for (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_" + names[i] + "_BYTES)");
    }
  }
  if (workspace_bytes > 0 && !find_alloc(workspace, workspace_bytes)) return bad(CUBLAS_STATUS_INVALID_VALUE, "workspace is not device memory");
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);  // host scalars, read at the call
  if (!on_device(A, a) || !on_device(B, b) || !on_device(D, d) || (be != 0.0f && !on_device(C, c)))
    return bad(CUBLAS_STATUS_INVALID_VALUE, "an operand is not (entirely) inside one device allocation");
  if (h->device != current_device()) return bad(CUBLAS_STATUS_INVALID_VALUE, "the handle was created on another device");
  CUstream_st* s = resolve(stream);
  if (!s) return bad(CUBLAS_STATUS_INVALID_VALUE, "unknown stream");
  const int64_t splits = algo ? std::max<int64_t>(1, static_cast<int64_t>(algo->data[1])) : 1;
  const auto da = *op;
  const auto la = *a, lb = *b, lc = *c, ld = *d;
  const cudaError_t e = enqueue(s, [=] {
    auto dense = [](const void* p, const cublasLtMatrixLayoutOpaque_t& L) {
      std::vector<float> v(L.rows * L.cols);
      for (uint64_t j = 0; j < L.cols; ++j)
        for (uint64_t i = 0; i < L.rows; ++i) v[j * L.rows + i] = load(p, L.type, j * static_cast<uint64_t>(L.ld) + i);
      return v;
    };
    const std::vector<float> fa = dense(A, la), fb = dense(B, lb);
    // op(A) rows and op(B) columns contiguous in k, then each element as `splits` ascending chains.
    std::vector<float> ra(static_cast<size_t>(pr.m * pr.k)), cb(static_cast<size_t>(pr.n * pr.k));
    for (int64_t i = 0; i < pr.m; ++i)
      for (int64_t q = 0; q < pr.k; ++q)
        ra[static_cast<size_t>(i * pr.k + q)] = da.ta == CUBLAS_OP_N ? fa[static_cast<size_t>(q * la.rows + i)] : fa[static_cast<size_t>(i * la.rows + q)];
    for (int64_t j = 0; j < pr.n; ++j)
      for (int64_t q = 0; q < pr.k; ++q)
        cb[static_cast<size_t>(j * pr.k + q)] = da.tb == CUBLAS_OP_N ? fb[static_cast<size_t>(j * lb.rows + q)] : fb[static_cast<size_t>(q * lb.rows + j)];
    const int64_t piece = (pr.k + splits - 1) / splits;
    std::vector<float> fd(static_cast<size_t>(pr.m * pr.n), 0.0f);
    for (int64_t j = 0; j < pr.n; ++j)
      for (int64_t i = 0; i < pr.m; ++i) {
        const float* x = &ra[static_cast<size_t>(i * pr.k)];
        const float* y = &cb[static_cast<size_t>(j * pr.k)];
        float total = 0.0f;
        for (int64_t q0 = 0; q0 < pr.k; q0 += piece) {
          float part = 0.0f;
          for (int64_t q = q0; q < std::min(pr.k, q0 + piece); ++q) part = std::fma(x[q], y[q], part);
          total = q0 == 0 ? part : total + part;
        }
        fd[static_cast<size_t>(j * pr.m + i)] = al * total;
      }
    for (int64_t j = 0; j < pr.n; ++j)
      for (int64_t i = 0; i < pr.m; ++i) {
        float v = fd[static_cast<size_t>(j * pr.m + i)];
        if (be != 0.0f) v += be * load(C, lc.type, static_cast<size_t>(j * lc.ld + i));
        store(D, ld.type, static_cast<size_t>(j * ld.ld + i), v);
      }
  }, "cublasLtMatmul");
  if (e != cudaSuccess) return bad(CUBLAS_STATUS_EXECUTION_FAILED, std::string("queueing the product: ") + cudaGetErrorName(e));
  tl_error.clear();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                                                   void* buf, size_t size, size_t* written) {
  if (!algo || !buf) return bad(CUBLAS_STATUS_INVALID_VALUE, "null algorithm or buffer");
  const uint64_t splits = std::max<uint64_t>(1, algo->data[1]);
  if (attr == CUBLASLT_ALGO_CONFIG_SPLITK_NUM && size == sizeof(int32_t)) {
    const auto v = static_cast<int32_t>(splits);
    std::memcpy(buf, &v, sizeof v);
  } else if (attr == CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME && size == sizeof(uint32_t)) {
    const uint32_t v = splits > 1 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE : CUBLASLT_REDUCTION_SCHEME_NONE;
    std::memcpy(buf, &v, sizeof v);
  } else {
    return bad(CUBLAS_STATUS_INVALID_VALUE, "algorithm attribute or size");
  }
  if (written) *written = size;
  tl_error.clear();
  return CUBLAS_STATUS_SUCCESS;
}
