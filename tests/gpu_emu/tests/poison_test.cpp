// What unwritten memory holds (control.hpp's poison): NaN (0xFF bytes) by default, a large finite
// value (0x7F bytes) with CONVEYOR_EMU_POISON=finite, as ctest's gpu_emu_reverse runs: fresh
// device allocations, and dynamic and static shared memory at the start of every block. A kernel
// that takes NaN for "empty" passes under one kind and fails under the other; one that reads
// before it writes reads garbage under both.
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

// Each block reads its shared memory before writing it, then writes it (the next block must not
// see those writes).
__global__ void read_unwritten_shared_kernel(float* out) {
  CONVEYOR_SHARED(float[32], tile);
  CONVEYOR_DYNAMIC_SHARED(float, buf);
  float* o = out + blockIdx.x * 64;
  o[threadIdx.x] = tile[threadIdx.x];
  o[32 + threadIdx.x] = buf[threadIdx.x];
  tile[threadIdx.x] = 1.0f;
  buf[threadIdx.x] = 2.0f;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cuda_emulator_poison)

BOOST_AUTO_TEST_CASE(unwritten_memory_holds_the_poison) {
  const conveyor_emu::poison_kind saved = conveyor_emu::current_poison();
  for (conveyor_emu::poison_kind kind : {conveyor_emu::poison_kind::nan, conveyor_emu::poison_kind::finite}) {
    conveyor_emu::set_poison(kind);
    const bool finite = kind == conveyor_emu::poison_kind::finite;
    const uint32_t want = finite ? 0x7F7F7F7Fu : 0xFFFFFFFFu;
    BOOST_TEST_CONTEXT((finite ? "finite" : "nan") << " poison") {
      BOOST_TEST(conveyor_emu::poison_byte() == (finite ? 0x7F : 0xFF));
      float* fresh = nullptr;
      BOOST_REQUIRE(cudaMalloc(&fresh, 2 * 64 * sizeof(float)) == cudaSuccess);
      std::vector<float> h(2 * 64);
      BOOST_REQUIRE(cudaMemcpy(h.data(), fresh, h.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
      for (float x : h) BOOST_TEST(std::bit_cast<uint32_t>(x) == want);
      BOOST_TEST(std::isfinite(h[0]) == finite);  // +3.39e38 as f32; bf16 0x7F7F is bf16's largest finite value
      CONVEYOR_LAUNCH(read_unwritten_shared_kernel, 2, 32, 32 * sizeof(float), nullptr, fresh);
      BOOST_REQUIRE(cudaMemcpy(h.data(), fresh, h.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
      for (size_t i = 0; i < h.size(); ++i) BOOST_TEST(std::bit_cast<uint32_t>(h[i]) == want, "block " << i / 64 << " word " << i % 64);
      cudaFree(fresh);
    }
  }
  conveyor_emu::set_poison(saved);
}

BOOST_AUTO_TEST_SUITE_END()
