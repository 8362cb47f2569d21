#include "gpu_support.hpp"

#include <cmath>
#include <cstdlib>

#include "gpu/device.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::gpu::testing {

std::string test_data_dir() {
  const char* env = std::getenv("CONVEYOR_TEST_DATA");
  return env && *env ? env : CONVEYOR_TEST_DATA;
}

boost::test_tools::assertion_result have_gpu(boost::unit_test::test_unit_id) {
  std::string why;
  boost::test_tools::assertion_result r(cuda_device_available(&why));
  if (!r) r.message() << "no CUDA device: " << why;
  return r;
}

boost::test_tools::assertion_result native_gpu_only(boost::unit_test::test_unit_id) {
#if defined(CONVEYOR_CUDA_EMU)
  boost::test_tools::assertion_result r(false);
  r.message() << "too slow for the CUDA emulator; runs on a real GPU (scripts/run_gpu_checks.sh)";
  return r;
#else
  return boost::test_tools::assertion_result(true);
#endif
}

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<bf16_bits> random_bf16(std::mt19937& rng, size_t n, float scale, std::vector<float>* exact) {
  const auto f = random_floats(rng, n, scale);
  std::vector<bf16_bits> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = model::fp32_to_bf16(f[i]);
  if (exact) *exact = to_float(b);
  return b;
}

std::vector<float> to_float(const std::vector<bf16_bits>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = model::bf16_to_fp32(v[i]);
  return f;
}

double rel_error(const std::vector<float>& out, const std::vector<float>& ref) {
  if (out.size() != ref.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    const double d = static_cast<double>(out[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

double mean_ulp_error(const std::vector<float>& out, const std::vector<double>& exact) {
  if (out.size() != exact.size()) return INFINITY;
  double sum = 0.0;
  size_t n = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    if (exact[i] == 0.0) continue;
    int e = 0;
    std::frexp(exact[i], &e);  // |exact| in [2^(e-1), 2^e): bf16 spacing 2^(e-8) there
    sum += (std::abs(double(out[i])) - std::abs(exact[i])) / std::ldexp(1.0, e - 8);
    ++n;
  }
  return n ? sum / double(n) : 0.0;
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

} // namespace conveyor::gpu::testing
