// Test support for the GPU tier: the skip precondition, device buffers that are poisoned (NaN, or
// the emulator's finite poison) before every run, random inputs, and the relative error ||out - ref|| / ||ref||.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpu/check.hpp"
#include "gpu/kernels.hpp"

namespace conveyor::gpu::testing {

/// tests/data: $CONVEYOR_TEST_DATA when set (a prebuilt bundle run elsewhere), else the
/// directory compiled in.
std::string test_data_dir();

/// Precondition of every suite: a usable CUDA device (the reason is the skip message).
boost::test_tools::assertion_result have_gpu(boost::unit_test::test_unit_id);
/// Cases too slow for the CUDA emulator (tests/gpu_emu), e.g. SmolLM2 end to end: a real GPU only.
boost::test_tools::assertion_result native_gpu_only(boost::unit_test::test_unit_id);

/// What dev_array::poison() fills with.
inline int poison_byte() {
#if defined(CONVEYOR_CUDA_EMU)
  return conveyor_emu::poison_byte();
#else
  return 0xFF;
#endif
}

/// A device array of n T's, freed on destruction.
template <class T>
class dev_array {
public:
  explicit dev_array(size_t n) : n_(n) { CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T))); }
  explicit dev_array(const std::vector<T>& v) : dev_array(v.size()) { upload(v); }
  ~dev_array() { cudaFree(p_); }
  dev_array(const dev_array&) = delete;
  dev_array& operator=(const dev_array&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& v) { CUDA_CHECK(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  /// All bytes 0xFF: NaN as f32 and as bf16, -1 as int32. Under the CUDA emulator, its poison
  /// byte instead (CONVEYOR_EMU_POISON=finite: 0x7F, a large finite value; docs/gpu-emulator.md).
  void poison() { CUDA_CHECK(cudaMemset(p_, poison_byte(), n_ * sizeof(T))); }

private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

/// True when every byte of v still holds dev_array::poison()'s byte (nothing wrote there).
template <class T>
bool still_poison(const std::vector<T>& v) {
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  return std::all_of(b, b + v.size() * sizeof(T), [](unsigned char x) { return x == poison_byte(); });
}

/// bf16 stored as its bits on the host.
using bf16_bits = uint16_t;
inline bf16* as_bf16(const dev_array<bf16_bits>& a) { return reinterpret_cast<bf16*>(a.get()); }

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f);
/// Random values rounded to bf16: the bits, and (in *exact) their exact f32 values.
std::vector<bf16_bits> random_bf16(std::mt19937& rng, size_t n, float scale, std::vector<float>* exact);
std::vector<float> to_float(const std::vector<bf16_bits>& v);

/// ||out - ref|| / ||ref|| (NaN anywhere in out gives +inf).
double rel_error(const std::vector<float>& out, const std::vector<float>& ref);
bool all_finite(const std::vector<float>& v);
/// The mean of (|out| - |exact|) in units of bf16's spacing at |exact| (8 significant bits):
/// about 0 when out is exact rounded to nearest, -0.5 when rounded toward zero (zeros of exact
/// skipped; a non-finite out gives +inf).
double mean_ulp_error(const std::vector<float>& out, const std::vector<double>& exact);

/// Error bounds (METHOD.md): f32 arithmetic well under 1e-4 here; bf16 outputs or operands 1e-2.
constexpr double f32_bound = 1e-4;
constexpr double bf16_bound = 1e-2;

} // namespace conveyor::gpu::testing
