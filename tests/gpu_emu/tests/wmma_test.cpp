// The emulator's nvcuda::wmma (include/conveyor_emu/wmma.hpp): a 16x16x16 product equals the
// f32 reference in every thread order, uniform elementwise work on a fragment stays valid, and
// what CUDA leaves undefined is caught: a kernel that assumes a fragment layout (here sm_80's
// documented one) computes garbage, a divergent or non-uniform call, a bad ldm or alignment, a
// tile past the shared memory are faults, and reading other lanes' stored elements without a
// __syncwarp reads stale data.
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>
#include <mma.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;
using a_frag = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using b_frag = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using c_frag = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

std::string run_and_fault() {
  const cudaError_t e = cudaDeviceSynchronize();
  std::string f = e == cudaSuccess ? "" : conveyor_emu::last_fault();
  conveyor_emu::reset();
  return f;
}

// d = 2 * (A B + C), stored row-major to d_row and column-major to d_col; A row-major, B
// column-major (B[k][n] at b[n * 16 + k]), C row-major.
__global__ void mma_kernel(const bf16* a, const bf16* b, const float* c, float* d_row, float* d_col) {
  a_frag fa;
  b_frag fb;
  c_frag fc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
  wmma::mma_sync(fc, fa, fb, fc);
  for (int i = 0; i < fc.num_elements; ++i) fc.x[i] *= 2.0f;  // uniform: valid under any layout
  wmma::store_matrix_sync(d_row, fc, 16, wmma::mem_row_major);
  wmma::store_matrix_sync(d_col, fc, 16, wmma::mem_col_major);
}

// Writes A B with sm_80's m16n16k16 accumulator layout assumed (groupID = lane / 4, ...).
__global__ void layout_assuming_kernel(const bf16* a, const bf16* b, float* d) {
  a_frag fa;
  b_frag fb;
  c_frag fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  const int lane = static_cast<int>(threadIdx.x % 32), group = lane / 4, t = lane % 4;
  for (int i = 0; i < 8; ++i) d[(group + 8 * ((i / 2) % 2)) * 16 + t * 2 + i % 2 + 8 * (i / 4)] = fc.x[i];
}

// Stores A B to shared memory, then each lane copies the whole tile out (sync: with __syncwarp).
__global__ void store_then_read_kernel(const bf16* a, const bf16* b, float* d, int sync) {
  CONVEYOR_DYNAMIC_SHARED(float, tile);
  a_frag fa;
  b_frag fb;
  c_frag fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(tile, fc, 16, wmma::mem_row_major);
  if (sync) __syncwarp();
  for (int i = 0; i < 256; ++i) d[threadIdx.x * 256 + i] = tile[i];
}

// mode 0: lanes 16..31 skip the load; 1: a lane-dependent pointer; 2: ldm 12; 3: pointer + 8 B;
// 4: a tile past the 1 KiB of dynamic shared memory; 5: two halves of the warp at two loads.
__global__ void bad_call_kernel(const bf16* a, int mode) {
  CONVEYOR_DYNAMIC_SHARED(bf16, buf);
  a_frag fa;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (mode == 0 && lane >= 16) return;
  if (mode == 5 && lane >= 16) {
    wmma::load_matrix_sync(fa, a, 16);
    return;
  }
  const bf16* p = mode == 1 ? a + 16 * (lane % 2) : mode == 3 ? a + 4 : mode == 4 ? buf + 384 : a;
  wmma::load_matrix_sync(fa, p, mode == 2 ? 12u : 16u);
}

struct operands {
  std::vector<bf16> a, b;
  std::vector<float> c, ab;  // ab: A B in double, rounded
  operands() : a(256), b(256), c(256), ab(256) {
    for (int i = 0; i < 256; ++i) {
      a[i] = __float2bfloat16(std::sin(0.37f * i) * 1.5f);
      b[i] = __float2bfloat16(std::cos(0.11f * i + 0.5f));
      c[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    }
    for (int r = 0; r < 16; ++r)
      for (int n = 0; n < 16; ++n) {
        double s = 0.0;
        for (int k = 0; k < 16; ++k) s += double(__bfloat162float(a[r * 16 + k])) * __bfloat162float(b[n * 16 + k]);
        ab[r * 16 + n] = static_cast<float>(s);
      }
  }
};

template <class T>
T* to_device(const std::vector<T>& v) {
  T* p = nullptr;
  BOOST_REQUIRE(cudaMalloc(&p, v.size() * sizeof(T)) == cudaSuccess);
  BOOST_REQUIRE(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  return p;
}
std::vector<float> from_device(const float* p, size_t n) {
  std::vector<float> v(n);
  BOOST_REQUIRE(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cuda_emulator_wmma)

BOOST_AUTO_TEST_CASE(wmma_product_and_uniform_ops_match_the_reference) {
  const operands o;
  bf16* a = to_device(o.a);
  bf16* b = to_device(o.b);
  float* c = to_device(o.c);
  float* d = to_device(std::vector<float>(512, NAN));
  CONVEYOR_LAUNCH(mma_kernel, 1, 32, 0, nullptr, a, b, c, d, d + 256);
  const auto out = from_device(d, 512);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) {
      const float want = 2.0f * (o.ab[r * 16 + n] + o.c[r * 16 + n]);
      BOOST_TEST(std::fabs(out[r * 16 + n] - want) <= 1e-5f * (1.0f + std::fabs(want)), "row " << r << " col " << n);
      BOOST_TEST(out[256 + n * 16 + r] == out[r * 16 + n]);
    }
  cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(d);
}

BOOST_AUTO_TEST_CASE(a_kernel_assuming_a_fragment_layout_is_caught) {
  const operands o;
  bf16* a = to_device(o.a);
  bf16* b = to_device(o.b);
  float* d = to_device(std::vector<float>(256, 0.0f));
  CONVEYOR_LAUNCH(layout_assuming_kernel, 1, 32, 0, nullptr, a, b, d);
  const auto out = from_device(d, 256);
  int wrong = 0;
  for (int i = 0; i < 256; ++i) wrong += std::fabs(out[i] - o.ab[i]) > 1e-3f;
  BOOST_TEST(wrong > 200, wrong << " of 256 elements land where sm_80's layout would put them");
  cudaFree(a), cudaFree(b), cudaFree(d);
}

BOOST_AUTO_TEST_CASE(reading_other_lanes_stores_needs_syncwarp) {
  const operands o;
  bf16* a = to_device(o.a);
  bf16* b = to_device(o.b);
  float* d = to_device(std::vector<float>(32 * 256, 0.0f));
  cudaFuncSetAttribute(store_then_read_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);
  for (int sync : {1, 0}) {
    CONVEYOR_LAUNCH(store_then_read_kernel, 1, 32, 1024, nullptr, a, b, d, sync);
    const auto out = from_device(d, 32 * 256);
    int stale = 0;
    for (int i = 0; i < 32 * 256; ++i) stale += !(std::fabs(out[i] - o.ab[i % 256]) <= 1e-4f);
    if (sync) BOOST_TEST(stale == 0);
    else BOOST_TEST(stale > 0, "without __syncwarp every lane but the last to leave the store reads unwritten elements");
  }
  cudaFree(a), cudaFree(b), cudaFree(d);
}

BOOST_AUTO_TEST_CASE(wmma_misuse_is_a_fault) {
  const operands o;
  bf16* a = to_device(std::vector<bf16>(1024, __float2bfloat16(1.0f)));
  cudaFuncSetAttribute(bad_call_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);
  const std::vector<std::string> want{"exited", "warp-uniform", "ldm 12", "256-bit aligned", "runs past the block's 1024 B",
                                      "divergent warp"};
  for (int mode = 0; mode < 6; ++mode) {
    CONVEYOR_LAUNCH(bad_call_kernel, 1, 64, 1024, nullptr, a, mode);
    const std::string f = run_and_fault();
    BOOST_TEST(f.find(want[size_t(mode)]) != std::string::npos, "mode " << mode << ": " << f);
    BOOST_TEST(f.find("bad_call_kernel") != std::string::npos, f);
  }
  CONVEYOR_LAUNCH(bad_call_kernel, 1, 64, 1024, nullptr, a, 6);  // a valid call after reset()
  BOOST_TEST(run_and_fault() == "");
  cudaFree(a);
}

BOOST_AUTO_TEST_SUITE_END()
