// The emulator's own checks: each fault it claims to find is provoked by a small kernel and must
// be reported (divergent __syncthreads, deadlocks, shuffles naming absent or exited lanes, shared
// memory over the limits or stored past the launch's size, launch geometry), warp operations
// must compute what CUDA defines, and the runtime must behave like CUDA where gpu/ relies on it:
// lazy streams, pinned vs pageable copies, graph capture refusing prohibited calls, replay with
// the captured arguments.
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using conveyor_emu::reset;

// Runs the queued work and returns the sticky fault's description ("" when none).
std::string run_and_fault() {
  const cudaError_t e = cudaDeviceSynchronize();
  std::string f = e == cudaSuccess ? "" : conveyor_emu::last_fault();
  reset();
  return f;
}

__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void early_exit_barrier_kernel(int* out) {
  if (threadIdx.x >= 64) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void shuffle_vs_barrier_kernel(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x % 32 < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
  else __syncthreads();
  out[threadIdx.x] = v;
}

__global__ void warp_ops_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  int* o = out + threadIdx.x * 6;
  o[0] = __shfl_xor_sync(0xffffffffu, lane, 5);
  o[1] = __shfl_down_sync(0xffffffffu, lane, 3);
  o[2] = __shfl_up_sync(0xffffffffu, lane, 2, 8);
  o[3] = __shfl_sync(0xffffffffu, lane * 10, 7);
  o[4] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  o[5] = __all_sync(0xffffffffu, lane < 40) + 2 * __any_sync(0xffffffffu, lane == 31);
}

__global__ void partial_warp_kernel(int* out) { out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1); }

__global__ void static_smem_kernel(int* out) {
  CONVEYOR_SHARED(int[256], tile);
  tile[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = tile[255 - threadIdx.x];
}

__global__ void big_static_smem_kernel(int* out) {
  CONVEYOR_SHARED(float[13000], big);  // 52 KB > 48 KB
  big[threadIdx.x] = 1.0f;
  out[0] = 1;
}

__global__ void dynamic_smem_kernel(float* out, int n) {
  CONVEYOR_DYNAMIC_SHARED(float, buf);
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) buf[i] = static_cast<float>(i);
  __syncthreads();
  out[threadIdx.x] = buf[n - 1 - static_cast<int>(threadIdx.x)];
}

__global__ void static_and_dynamic_smem_kernel(int* out, int n) {
  CONVEYOR_SHARED(int[32], tile);
  CONVEYOR_DYNAMIC_SHARED(int, buf);
  tile[threadIdx.x] = 1;
  if (static_cast<int>(threadIdx.x) < n) buf[threadIdx.x] = 2;
  __syncthreads();
  out[threadIdx.x] = tile[31 - threadIdx.x] + (static_cast<int>(threadIdx.x) < n ? buf[threadIdx.x] : 0);
}

__global__ void add_kernel(int* p, int v) { p[threadIdx.x] += v; }

// out[block] = the order the block ran in (a ticket from one counter).
__global__ void block_ticket_kernel(int* out, int* counter) {
  if (threadIdx.x == 0) out[blockIdx.x + gridDim.x * blockIdx.y] = atomicAdd(counter, 1);
}

struct device_ints {
  int* p = nullptr;
  explicit device_ints(size_t n) { BOOST_REQUIRE(cudaMalloc(&p, n * sizeof(int)) == cudaSuccess); }
  ~device_ints() { cudaFree(p); }
  std::vector<int> get(size_t n) const {
    std::vector<int> v(n);
    BOOST_REQUIRE(cudaMemcpy(v.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(cuda_emulator)

BOOST_AUTO_TEST_CASE(divergent_barriers_are_faults) {
  device_ints d(256);
  CONVEYOR_LAUNCH(divergent_barrier_kernel, 2, 128, 0, nullptr, d.p);
  std::string f = run_and_fault();
  BOOST_TEST(f.find("divergent __syncthreads") != std::string::npos, f);
  BOOST_TEST(f.find("divergent_barrier_kernel") != std::string::npos, f);
  CONVEYOR_LAUNCH(early_exit_barrier_kernel, 1, 128, 0, nullptr, d.p);
  f = run_and_fault();
  BOOST_TEST(f.find("exited while others wait") != std::string::npos, f);
  CONVEYOR_LAUNCH(shuffle_vs_barrier_kernel, 1, 64, 0, nullptr, d.p);
  f = run_and_fault();
  BOOST_TEST(f.find("deadlock") != std::string::npos, f);
  CONVEYOR_LAUNCH(partial_warp_kernel, 1, 48, 0, nullptr, d.p);  // lanes 48..63 do not exist
  f = run_and_fault();
  BOOST_TEST(f.find("does not have") != std::string::npos, f);
  // After reset() the device works again.
  CONVEYOR_LAUNCH(static_smem_kernel, 1, 256, 0, nullptr, d.p);
  BOOST_TEST(run_and_fault() == "");
}

BOOST_AUTO_TEST_CASE(warp_operations_follow_cuda) {
  for (auto order : {conveyor_emu::thread_order::forward, conveyor_emu::thread_order::reverse, conveyor_emu::thread_order::random}) {
    const auto saved = conveyor_emu::current_thread_order();
    conveyor_emu::set_thread_order(order, 7);
    device_ints d(64 * 6);
    CONVEYOR_LAUNCH(warp_ops_kernel, 1, 64, 0, nullptr, d.p);
    const auto v = d.get(64 * 6);
    conveyor_emu::set_thread_order(saved);
    unsigned ballot = 0;
    for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
    for (int t = 0; t < 64; ++t) {
      const int lane = t % 32;
      BOOST_TEST_CONTEXT("thread " << t << " order " << conveyor_emu::thread_order_name(order)) {
        BOOST_TEST(v[t * 6 + 0] == (lane ^ 5));
        BOOST_TEST(v[t * 6 + 1] == (lane + 3 < 32 ? lane + 3 : lane));
        BOOST_TEST(v[t * 6 + 2] == (lane % 8 >= 2 ? lane - 2 : lane));
        BOOST_TEST(v[t * 6 + 3] == 70);
        BOOST_TEST(static_cast<unsigned>(v[t * 6 + 4]) == ballot);
        BOOST_TEST(v[t * 6 + 5] == 3);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(thread_orders_also_order_blocks) {
  const auto saved = conveyor_emu::current_thread_order();
  device_ints d(25), counter(1);
  auto tickets = [&](conveyor_emu::thread_order o) {
    conveyor_emu::set_thread_order(o, 3);
    BOOST_REQUIRE(cudaMemset(counter.p, 0, sizeof(int)) == cudaSuccess);
    CONVEYOR_LAUNCH(block_ticket_kernel, dim3(5, 5), 32, 0, nullptr, d.p, counter.p);
    BOOST_REQUIRE(run_and_fault() == "");
    return d.get(25);
  };
  std::vector<int> forward(25), reverse(25);
  for (int i = 0; i < 25; ++i) forward[size_t(i)] = i, reverse[size_t(i)] = 24 - i;
  BOOST_TEST(tickets(conveyor_emu::thread_order::forward) == forward, boost::test_tools::per_element());
  BOOST_TEST(tickets(conveyor_emu::thread_order::reverse) == reverse, boost::test_tools::per_element());
  std::vector<int> shuffled = tickets(conveyor_emu::thread_order::random);
  BOOST_TEST(shuffled != forward);
  BOOST_TEST(shuffled != reverse);
  std::sort(shuffled.begin(), shuffled.end());
  BOOST_TEST(shuffled == forward, boost::test_tools::per_element());  // each block once
  conveyor_emu::set_thread_order(saved, 1);
}

BOOST_AUTO_TEST_CASE(shared_memory_and_its_limits) {
  device_ints d(256);
  CONVEYOR_LAUNCH(static_smem_kernel, 3, 256, 0, nullptr, d.p);
  const auto v = d.get(256);
  BOOST_TEST(v[0] == 255);
  BOOST_TEST(v[255] == 0);
  CONVEYOR_LAUNCH(big_static_smem_kernel, 1, 32, 0, nullptr, d.p);
  const std::string f = run_and_fault();
  BOOST_TEST(f.find("exceeds the limits") != std::string::npos, f);

  float* out = nullptr;
  BOOST_REQUIRE(cudaMalloc(&out, 128 * sizeof(float)) == cudaSuccess);
  const int n = 20000;  // 80 KB of dynamic shared memory: needs the opt-in attribute
  CONVEYOR_LAUNCH(dynamic_smem_kernel, 1, 128, n * sizeof(float), nullptr, out, n);
  BOOST_TEST(cudaGetLastError() == cudaErrorInvalidValue);
  BOOST_REQUIRE(cudaFuncSetAttribute(dynamic_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n * 4) == cudaSuccess);
  CONVEYOR_LAUNCH(dynamic_smem_kernel, 1, 128, n * sizeof(float), nullptr, out, n);
  BOOST_TEST(cudaGetLastError() == cudaSuccess);
  std::vector<float> h(128);
  BOOST_REQUIRE(cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  BOOST_TEST(h[0] == float(n - 1));
  BOOST_TEST(cudaFuncSetAttribute(dynamic_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 300000) == cudaErrorInvalidValue);
  cudaFree(out);
}

#if !defined(__SANITIZE_ADDRESS__)  // under ASan the bytes past the launch's size are poisoned: an ASan report
BOOST_AUTO_TEST_CASE(stores_past_the_dynamic_size_are_faults) {
  float* out = nullptr;
  BOOST_REQUIRE(cudaMalloc(&out, 128 * sizeof(float)) == cudaSuccess);
  CONVEYOR_LAUNCH(dynamic_smem_kernel, 2, 128, 1000 * sizeof(float) - 4, nullptr, out, 1000);  // one float short
  std::string f = run_and_fault();
  BOOST_TEST(f.find("written past the block's own at byte 3996 (dynamic 3996 B") != std::string::npos, f);
  BOOST_TEST(f.find("dynamic_smem_kernel") != std::string::npos, f);
  cudaFree(out);

  device_ints d(32);
  CONVEYOR_LAUNCH(static_and_dynamic_smem_kernel, 1, 32, 25 * sizeof(int), nullptr, d.p, 25);  // fits
  BOOST_REQUIRE(run_and_fault() == "");
  BOOST_TEST(d.get(32)[24] == 3);
  BOOST_TEST(d.get(32)[25] == 1);
  // 26 ints in 100 B: the last lands in the padding before the static tile (byte 256).
  CONVEYOR_LAUNCH(static_and_dynamic_smem_kernel, 1, 32, 25 * sizeof(int), nullptr, d.p, 26);
  f = run_and_fault();
  BOOST_TEST(f.find("at byte 100 (dynamic 100 B from the launch, static 128 B from byte 256)") != std::string::npos, f);
}
#endif

BOOST_AUTO_TEST_CASE(launch_geometry_limits) {
  device_ints d(1);
  CONVEYOR_LAUNCH(add_kernel, 1, 2048, 0, nullptr, d.p, 1);
  BOOST_TEST(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CONVEYOR_LAUNCH(add_kernel, dim3(1, 70000), 1, 0, nullptr, d.p, 1);
  BOOST_TEST(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CONVEYOR_LAUNCH(add_kernel, 0, 1, 0, nullptr, d.p, 1);
  BOOST_TEST(cudaGetLastError() == cudaErrorInvalidConfiguration);
  BOOST_TEST(cudaGetLastError() == cudaSuccess);  // launch errors are not sticky
}

BOOST_AUTO_TEST_CASE(streams_are_lazy_and_pinned_copies_read_late) {
  cudaStream_t s;
  BOOST_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  device_ints d(4);
  int* pinned = nullptr;
  BOOST_REQUIRE(cudaMallocHost(&pinned, 4 * sizeof(int)) == cudaSuccess);
  std::vector<int> pageable{1, 2, 3, 4};
  for (int i = 0; i < 4; ++i) pinned[i] = 10 + i;
  BOOST_REQUIRE(cudaMemcpyAsync(d.p, pinned, 4 * sizeof(int), cudaMemcpyHostToDevice, s) == cudaSuccess);
  for (int i = 0; i < 4; ++i) pinned[i] = 20 + i;  // reused before the copy ran: the copy sees 20..23
  BOOST_REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  BOOST_TEST(d.get(4)[0] == 20);
  BOOST_REQUIRE(cudaMemcpyAsync(d.p, pageable.data(), 4 * sizeof(int), cudaMemcpyHostToDevice, s) == cudaSuccess);
  pageable[0] = 99;  // pageable memory is staged at the call
  BOOST_REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  BOOST_TEST(d.get(4)[0] == 1);
  CONVEYOR_LAUNCH(add_kernel, 1, 4, 0, s, d.p, 5);
  BOOST_REQUIRE(cudaMemcpyAsync(pinned, d.p, 4 * sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  BOOST_TEST(pinned[0] == 20);  // not synchronized yet: the result is not there
  BOOST_REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  BOOST_TEST(pinned[0] == 6);
  BOOST_TEST(cudaMemcpy(d.p, pinned, 64, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);  // past the allocation
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
}

BOOST_AUTO_TEST_CASE(graphs_capture_by_value_and_refuse_prohibited_calls) {
  cudaStream_t s;
  BOOST_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  device_ints d(4);
  BOOST_REQUIRE(cudaMemset(d.p, 0, 16) == cudaSuccess);
  int v = 3;
  BOOST_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CONVEYOR_LAUNCH(add_kernel, 1, 4, 0, s, d.p, v);
  v = 100;  // the graph keeps 3
  cudaGraph_t g = nullptr;
  BOOST_REQUIRE(cudaStreamEndCapture(s, &g) == cudaSuccess);
  BOOST_TEST(d.get(4)[0] == 0);  // capturing does not run anything
  cudaGraphExec_t exec = nullptr;
  BOOST_REQUIRE(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess);
  cudaGraphDestroy(g);
  for (int i = 0; i < 3; ++i) BOOST_REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  BOOST_REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  BOOST_TEST(d.get(4)[3] == 9);
  cudaGraphExecDestroy(exec);

  for (int which = 0; which < 3; ++which) {
    BOOST_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    void* p = nullptr;
    cudaError_t e = which == 0 ? cudaMalloc(&p, 16) : which == 1 ? cudaStreamSynchronize(s) : cudaMemcpy(d.p, &v, 4, cudaMemcpyHostToDevice);
    BOOST_TEST(e == cudaErrorStreamCaptureUnsupported, "prohibited call " << which);
    BOOST_TEST(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated);
    BOOST_TEST(g == nullptr);
  }
  cudaGetLastError();
  const auto c = conveyor_emu::stats();
  BOOST_TEST(c.live_graphs == 0);
  BOOST_TEST(c.live_graph_execs == 0);
  cudaStreamDestroy(s);
}

BOOST_AUTO_TEST_SUITE_END()
