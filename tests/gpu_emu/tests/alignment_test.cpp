// Misaligned vector accesses are faults in every emulated run, as on a GPU (where a 16-byte load
// from an address that is not a multiple of 16 is "misaligned address", and the context is
// lost): gpu/ and the tests' kernels build with UBSan's alignment check, unrecoverable
// (tests/gpu_emu/CMakeLists.txt), so the process ends with a report naming the source line, the
// address and the type, followed by the emulator's line naming the kernel, block and thread
// (src/fault_report.cpp). Each misaligned case runs in a forked child whose output is checked.
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

__global__ void vector_copy_kernel(const unsigned char* in, uint4* out, int offset) {
  out[threadIdx.x] = *reinterpret_cast<const uint4*>(in + offset + 16 * threadIdx.x);
}

__global__ void pair_store_kernel(unsigned char* out, int offset) {
  *reinterpret_cast<float2*>(out + offset + 8 * threadIdx.x) = make_float2(1.0f, static_cast<float>(threadIdx.x));
}

struct child_result {
  bool exited_cleanly = false;
  std::string output;
};

// Runs fn in a forked child with its stdout and stderr captured; the child exits 0 if fn returns.
child_result in_child(const std::function<void()>& fn) {
  int fds[2];
  BOOST_REQUIRE(pipe(fds) == 0);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    fn();
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
  }
  close(fds[1]);
  child_result r;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.output.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exited_cleanly = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return r;
}

// UBSan's words: "alignment_test.cpp:21:23: runtime error: reference binding to misaligned
// address 0x... for type 'const struct uint4', which requires 16 byte alignment". The thread
// that faults first depends on the thread order: the address must be the one thread t accesses,
// base + stride t, and the emulator's line must name thread t.
void expect_fault(const child_result& r, const void* base, int stride, const std::string& type, int align, const std::string& kernel) {
  BOOST_TEST_CONTEXT(r.output) {
    BOOST_TEST(!r.exited_cleanly);
    BOOST_TEST(r.output.find("alignment_test.cpp:") != std::string::npos);
    BOOST_TEST(r.output.find("struct " + type + "', which requires " + std::to_string(align) + " byte alignment") != std::string::npos);
    const size_t at = r.output.find("misaligned address 0x");
    BOOST_REQUIRE(at != std::string::npos);
    const uintptr_t addr = std::strtoull(r.output.c_str() + at + 19, nullptr, 16), b = reinterpret_cast<uintptr_t>(base);
    BOOST_REQUIRE((addr >= b && (addr - b) % stride == 0 && (addr - b) / stride < 32));
    const std::string thread = "thread (" + std::to_string((addr - b) / stride) + ",0,0)";
    BOOST_TEST(r.output.find("came from kernel " + kernel + ", block (0,0,0) of grid (1,1,1), " + thread) != std::string::npos);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(cuda_emulator_alignment)

BOOST_AUTO_TEST_CASE(misaligned_vector_accesses_are_faults) {
  unsigned char *in = nullptr, *bytes = nullptr;
  uint4* out = nullptr;
  BOOST_REQUIRE(cudaMalloc(&in, 16 * 33) == cudaSuccess);
  BOOST_REQUIRE(cudaMalloc(&out, 16 * 32) == cudaSuccess);
  BOOST_REQUIRE(cudaMalloc(&bytes, 8 * 33) == cudaSuccess);
  std::vector<unsigned char> host(16 * 33);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 7);
  BOOST_REQUIRE(cudaMemcpy(in, host.data(), host.size(), cudaMemcpyHostToDevice) == cudaSuccess);

  // Aligned: 16-byte loads at offset 16, 8-byte stores at offset 8.
  CONVEYOR_LAUNCH(vector_copy_kernel, 1, 32, 0, nullptr, in, out, 16);
  CONVEYOR_LAUNCH(pair_store_kernel, 1, 32, 0, nullptr, bytes, 8);
  std::vector<unsigned char> got(16 * 32);
  BOOST_REQUIRE(cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  BOOST_TEST(std::vector<unsigned char>(host.begin() + 16, host.end()) == got);

  // A 16-byte load 8 bytes off (aligned for 8, not 16), 4 bytes off; an 8-byte store 4 bytes off.
  for (int offset : {8, 4}) {
    const child_result r = in_child([&] {
      CONVEYOR_LAUNCH(vector_copy_kernel, 1, 32, 0, nullptr, in, out, offset);
      cudaDeviceSynchronize();
    });
    expect_fault(r, in + offset, 16, "uint4", 16, "vector_copy_kernel");
  }
  const child_result r = in_child([&] {
    CONVEYOR_LAUNCH(pair_store_kernel, 1, 32, 0, nullptr, bytes, 4);
    cudaDeviceSynchronize();
  });
  expect_fault(r, bytes + 4, 8, "float2", 8, "pair_store_kernel");
  cudaFree(in);
  cudaFree(out);
  cudaFree(bytes);
}

BOOST_AUTO_TEST_SUITE_END()
