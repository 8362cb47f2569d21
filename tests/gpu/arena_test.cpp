// The device memory arena (gpu/arena.hpp): every piece 256-byte aligned (the kernels' 16-byte
// vector loads and stores and cuBLASLt's operands rely on it; only a real GPU faults on a
// misaligned one), pieces disjoint and inside the allocation, the measuring arena counting exactly
// what the real one carves, and an overflow refused.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "gpu/arena.hpp"
#include "gpu_support.hpp"

namespace conveyor::gpu::testing {

BOOST_AUTO_TEST_SUITE(gpu_arena, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(arena_pieces_are_aligned_disjoint_and_measured) {
  // Odd element counts of the types the executor carves (bf16 is 2 bytes, float2 8).
  const std::vector<std::pair<int64_t, size_t>> pieces{{3, 2}, {1, 4}, {7, 8}, {4095, 2}, {5, 4}, {1, 2}, {100, 8}, {33, 4}};
  auto carve = [&](device_arena& a) {
    std::vector<uintptr_t> at;
    for (const auto& [n, size] : pieces) {
      void* p = size == 2 ? static_cast<void*>(a.take<bf16>(n)) : size == 4 ? static_cast<void*>(a.take<float>(n))
                                                                            : static_cast<void*>(a.take<float2>(n));
      at.push_back(reinterpret_cast<uintptr_t>(p));
    }
    return at;
  };
  device_arena measure;
  BOOST_TEST(measure.measuring());
  carve(measure);
  device_arena real(measure.used(), "test pieces");
  const std::vector<uintptr_t> at = carve(real);
  BOOST_TEST(real.used() == measure.used());
  BOOST_TEST(real.used() <= real.capacity());
  const uintptr_t base = at.front();
  for (size_t i = 0; i < at.size(); ++i) {
    BOOST_TEST_CONTEXT("piece " << i) {
      BOOST_TEST(at[i] % 256 == 0u);
      const uintptr_t end = at[i] + static_cast<uintptr_t>(pieces[i].first) * pieces[i].second;
      BOOST_TEST(end - base <= real.capacity());
      if (i + 1 < at.size()) BOOST_TEST(end <= at[i + 1]);
    }
  }
  BOOST_CHECK_THROW(real.take<float>(int64_t(real.capacity())), std::logic_error);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
