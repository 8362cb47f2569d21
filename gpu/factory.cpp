// The factories and device probes of gpu/factory.hpp, for builds with CUDA.
#include "gpu/factory.hpp"

#include <vector>

#include "gpu/check.hpp"
#include "gpu/cuda_executor.hpp"
#include "gpu/gemm.hpp"
#include "gpu/kernels.hpp"

namespace conveyor::gpu {

bool cuda_build_available() { return true; }

std::shared_ptr<executor> make_cuda_executor(const model::gguf_file& f, const cuda_executor_options& o) {
  return std::make_shared<cuda_executor>(f, o);
}

std::shared_ptr<executor> make_cuda_executor_dummy(const model::llama_config& c, const cuda_executor_options& o) {
  return std::make_shared<cuda_executor>(c, o);
}

namespace {

// Mean seconds per call of `fn` on `stream` over `iters` runs after `warmup` runs (CUDA events).
template <class F>
double time_on_stream(cudaStream_t stream, int warmup, int iters, F&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  CUDA_CHECK(cudaEventRecord(a, stream));
  for (int i = 0; i < iters; ++i) fn();
  CUDA_CHECK(cudaEventRecord(b, stream));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 1000.0 / iters;
}

} // namespace

double cuda_measure_copy_bandwidth(int64_t bytes) {
  device_arena a(static_cast<size_t>(2 * bytes), "copy-bandwidth probe");
  char* src = a.take<char>(bytes);
  char* dst = a.take<char>(bytes);
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  launch_fill_random_f32(reinterpret_cast<float*>(src), bytes / 4, 7, 1.0f, 0.0f, s);  // never time zeros
  const double sec = time_on_stream(s, 3, 20, [&] { CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)); });
  cudaStreamDestroy(s);
  return 2.0 * static_cast<double>(bytes) / sec;  // read + write
}

double cuda_measure_gemm_flops(int32_t m, int32_t n, int32_t k) {
  device_arena arena(static_cast<size_t>(int64_t{m} * k * 2 + int64_t{n} * k * 2 + int64_t{m} * n * 4) + 4096, "GEMM probe");
  bf16* a = arena.take<bf16>(int64_t{m} * k);
  bf16* w = arena.take<bf16>(int64_t{n} * k);
  float* c = arena.take<float>(int64_t{m} * n);
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  launch_fill_random_bf16(a, int64_t{m} * k, 11, 1.0f, 0.0f, s);
  launch_fill_random_bf16(w, int64_t{n} * k, 13, 1.0f, 0.0f, s);
  gemm_runner g;
  const double sec = time_on_stream(s, 3, 10, [&] { g.run(a, w, c, true, m, n, k, 0.0f, s); });
  cudaStreamDestroy(s);
  return 2.0 * m * n * static_cast<double>(k) / sec;
}

} // namespace conveyor::gpu
