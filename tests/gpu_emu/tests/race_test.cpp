// The emulator as a race detector (src/tsan.hpp, scripts/gpu_emu_tsan.sh): under ThreadSanitizer
// each CUDA thread is a fiber whose switches order nothing, so shared memory that one lane reads
// and another writes must be ordered by __syncwarp or __syncthreads, as CUDA's memory model says;
// shuffles and votes are not enough (compute-sanitizer's racecheck on an H200 flagged exactly
// that in gpu/attention.cu's softmax update). Outside a TSan build these kernels only check
// their results.
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// Each warp folds one row of values into a running maximum kept in shared memory: every lane
// reads the old maximum, the warp reduces its values with shuffles, lane 0 stores the new one.
template <bool kSyncWarp>
__global__ void running_max_kernel(const float* in, float* out) {
  CONVEYOR_SHARED(float[8], m_s);
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  if (lane == 0) m_s[warp] = -1.0f;
  __syncthreads();
  const float m_old = m_s[warp];  // every lane
  float mx = in[threadIdx.x];
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if constexpr (kSyncWarp) __syncwarp();  // every lane has read m_s[warp]
  if (lane == 0) m_s[warp] = fmaxf(m_old, mx);  // lane 0: races the reads unless ordered above
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < static_cast<int>(blockDim.x / 32)) out[threadIdx.x] = m_s[threadIdx.x];
}

template <bool kSyncWarp>
std::vector<float> run_running_max(int warps) {
  const int n = 32 * warps;
  std::vector<float> host(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) host[static_cast<size_t>(i)] = static_cast<float>((i * 37) % 101);
  float *in = nullptr, *out = nullptr;
  BOOST_REQUIRE(cudaMalloc(&in, host.size() * sizeof(float)) == cudaSuccess);
  BOOST_REQUIRE(cudaMalloc(&out, static_cast<size_t>(warps) * sizeof(float)) == cudaSuccess);
  BOOST_REQUIRE(cudaMemcpy(in, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  CONVEYOR_LAUNCH(running_max_kernel<kSyncWarp>, 1, n, 0, nullptr, in, out);  // one block: it writes out[0, warps)
  std::vector<float> got(static_cast<size_t>(warps));
  BOOST_REQUIRE(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  cudaFree(in);
  cudaFree(out);
  for (int w = 0; w < warps; ++w) {
    float want = -1.0f;
    for (int l = 0; l < 32; ++l) want = std::fmax(want, host[static_cast<size_t>(32 * w + l)]);
    BOOST_TEST(got[static_cast<size_t>(w)] == want);
  }
  return got;
}

// Block b stores b into words [first, first + blockDim) where first = b * stride: with stride <
// blockDim neighbouring blocks write the same words (a tile sized past its rows, a split writing
// another's partials), a race between blocks.
__global__ void block_rows_kernel(int* out, int stride) {
  out[static_cast<int>(blockIdx.x) * stride + static_cast<int>(threadIdx.x)] = static_cast<int>(blockIdx.x);
}

void run_block_rows(int blocks, int threads, int stride) {
  const int n = stride * (blocks - 1) + threads;
  int* out = nullptr;
  BOOST_REQUIRE(cudaMalloc(&out, static_cast<size_t>(n) * sizeof(int)) == cudaSuccess);
  CONVEYOR_LAUNCH(block_rows_kernel, blocks, threads, 0, nullptr, out, stride);
  std::vector<int> got(static_cast<size_t>(n));
  BOOST_REQUIRE(cudaMemcpy(got.data(), out, got.size() * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  cudaFree(out);
  for (int i = 0; i < n; ++i) {  // some block that covers word i wrote it
    const int b = got[static_cast<size_t>(i)];
    BOOST_TEST((b >= 0 && b < blocks && b * stride <= i && i < b * stride + threads), "word " << i << " holds " << b);
  }
}

// The planted races run only when scripts/gpu_emu_tsan.sh asks (CONVEYOR_EMU_EXPECT_RACE=threads
// or blocks, with the matching CONVEYOR_EMU_TSAN_MODE), and it fails unless TSan reports them.
boost::unit_test::precondition race_demo(const char* which) {
  return boost::unit_test::precondition([which](boost::unit_test::test_unit_id) {
    const char* want = std::getenv("CONVEYOR_EMU_EXPECT_RACE");
    boost::test_tools::assertion_result r(want != nullptr && std::string(want) == which);
    r.message() << "runs under ThreadSanitizer from scripts/gpu_emu_tsan.sh, which requires its race report";
    return r;
  });
}

} // namespace

BOOST_AUTO_TEST_SUITE(emulator_races)

BOOST_AUTO_TEST_CASE(shared_memory_ordered_by_syncwarp) { run_running_max<true>(4); }

BOOST_AUTO_TEST_CASE(blocks_writing_disjoint_rows) { run_block_rows(6, 32, 32); }

// Planted races (the results are right on any schedule the emulator runs; the race is in the model).
BOOST_AUTO_TEST_CASE(shared_memory_ordered_only_by_shuffles, *race_demo("threads")) { run_running_max<false>(4); }
BOOST_AUTO_TEST_CASE(blocks_writing_overlapping_rows, *race_demo("blocks")) { run_block_rows(6, 32, 24); }

BOOST_AUTO_TEST_SUITE_END()
