// The emulator's interleaved block mode (control.hpp's block_mode, src/blocks.cpp): waves of
// consecutive blocks step from barrier to barrier in turn, so a kernel whose blocks share global
// scratch between their phases (correct only when each block runs alone to its end) gives wrong
// results there, in every thread order, while the sequential mode, in every order, cannot see it.
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace {

namespace emu = conveyor_emu;

// Thread 0 of each block takes a ticket before and after a barrier: out[2b], out[2b + 1].
__global__ void phase_ticket_kernel(int* out, int* counter) {
  if (threadIdx.x == 0) out[2 * blockIdx.x] = atomicAdd(counter, 1);
  __syncthreads();
  if (threadIdx.x == 0) out[2 * blockIdx.x + 1] = atomicAdd(counter, 1);
}

// Blocks 2i and 2i + 1 use the same scratch rows (a scratch sized per pair of blocks): each
// writes its id there, waits at a barrier, and copies the rows back out. Right only when one of
// the two has finished before the other starts.
__global__ void shared_scratch_kernel(int* scratch, int* out) {
  const int b = static_cast<int>(blockIdx.x), t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  scratch[(b / 2) * n + t] = b;
  __syncthreads();
  out[b * n + t] = scratch[(b / 2) * n + t];
}

__global__ void block_two_diverges_kernel(int* out) {
  if (blockIdx.x == 2 && threadIdx.x == 0) return;
  __syncthreads();
  out[blockIdx.x] = 1;
}

std::vector<int> fetch(const int* d, size_t n) {
  std::vector<int> v(n);
  BOOST_REQUIRE(cudaMemcpy(v.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

// Restores the order and block mode a test changed.
struct saved_modes {
  emu::thread_order order = emu::current_thread_order();
  emu::block_mode mode = emu::current_block_mode();
  int wave = emu::block_wave();
  ~saved_modes() {
    emu::set_thread_order(order, 1);
    emu::set_block_mode(mode, wave);
  }
};

const emu::thread_order kOrders[] = {emu::thread_order::forward, emu::thread_order::reverse, emu::thread_order::random};

} // namespace

BOOST_AUTO_TEST_SUITE(emulator_block_interleave)

BOOST_AUTO_TEST_CASE(waves_take_turns_at_barriers) {
  saved_modes keep;
  int *out = nullptr, *counter = nullptr;
  BOOST_REQUIRE(cudaMalloc(&out, 16 * sizeof(int)) == cudaSuccess);
  BOOST_REQUIRE(cudaMalloc(&counter, sizeof(int)) == cudaSuccess);
  auto tickets = [&](emu::thread_order o, emu::block_mode m) {
    emu::set_thread_order(o, 5);
    emu::set_block_mode(m, 4);
    BOOST_REQUIRE(cudaMemset(counter, 0, sizeof(int)) == cudaSuccess);
    CONVEYOR_LAUNCH(phase_ticket_kernel, 8, 64, 0, nullptr, out, counter);
    return fetch(out, 16);
  };
  // Forward, waves of 4: blocks 0-3 take 0-3 before their barrier and 4-7 after it.
  BOOST_TEST(tickets(emu::thread_order::forward, emu::block_mode::interleave) ==
                 (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15}),
             boost::test_tools::per_element());
  // Reverse: the last wave first, its blocks from the last.
  BOOST_TEST(tickets(emu::thread_order::reverse, emu::block_mode::interleave) ==
                 (std::vector<int>{11, 15, 10, 14, 9, 13, 8, 12, 3, 7, 2, 6, 1, 5, 0, 4}),
             boost::test_tools::per_element());
  for (emu::thread_order o : kOrders) {
    BOOST_TEST_CONTEXT(emu::thread_order_name(o)) {
      const std::vector<int> seq = tickets(o, emu::block_mode::sequential), il = tickets(o, emu::block_mode::interleave);
      for (int b = 0; b < 8; ++b) {
        BOOST_TEST(seq[2 * b + 1] == seq[2 * b] + 1, "sequential: block " << b << " runs alone to its end");
        for (int c = 4 * (b / 4); c < 4 * (b / 4) + 4; ++c)  // every block of its wave reached the barrier first
          BOOST_TEST(il[2 * b + 1] > il[2 * c], "interleave: block " << b << " after block " << c << "'s first phase");
      }
    }
  }
  cudaFree(out);
  cudaFree(counter);
}

BOOST_AUTO_TEST_CASE(blocks_sharing_scratch_fail_only_interleaved) {
  saved_modes keep;
  constexpr int blocks = 6, threads = 32;
  int *scratch = nullptr, *out = nullptr;
  BOOST_REQUIRE(cudaMalloc(&scratch, blocks / 2 * threads * sizeof(int)) == cudaSuccess);
  BOOST_REQUIRE(cudaMalloc(&out, blocks * threads * sizeof(int)) == cudaSuccess);
  auto wrong_words = [&](emu::thread_order o, emu::block_mode m) {
    emu::set_thread_order(o, 7);
    emu::set_block_mode(m, 4);
    CONVEYOR_LAUNCH(shared_scratch_kernel, blocks, threads, 0, nullptr, scratch, out);
    const std::vector<int> got = fetch(out, blocks * threads);
    int wrong = 0;
    for (int i = 0; i < blocks * threads; ++i) wrong += got[static_cast<size_t>(i)] != i / threads;
    return wrong;
  };
  for (emu::thread_order o : kOrders) {
    BOOST_TEST_CONTEXT(emu::thread_order_name(o)) {
      BOOST_TEST(wrong_words(o, emu::block_mode::sequential) == 0);
      BOOST_TEST(wrong_words(o, emu::block_mode::interleave) == blocks / 2 * threads);  // one block of each pair
    }
  }
  cudaFree(scratch);
  cudaFree(out);
}

BOOST_AUTO_TEST_CASE(faults_name_the_interleaved_block) {
  saved_modes keep;
  emu::set_block_mode(emu::block_mode::interleave, 4);
  int* out = nullptr;
  BOOST_REQUIRE(cudaMalloc(&out, 8 * sizeof(int)) == cudaSuccess);
  CONVEYOR_LAUNCH(block_two_diverges_kernel, 8, 64, 0, nullptr, out);
  BOOST_TEST(cudaDeviceSynchronize() != cudaSuccess);
  const std::string f = emu::last_fault();
  BOOST_TEST(f.find("block (2,0,0)") != std::string::npos, f);
  BOOST_TEST(f.find("divergence") != std::string::npos, f);
  emu::reset();
  cudaFree(out);
}

BOOST_AUTO_TEST_SUITE_END()
