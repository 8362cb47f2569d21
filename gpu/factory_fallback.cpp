// Linked instead of conveyor_gpu when the build has no CUDA toolkit: every entry point says so
// and how to fix it. (tools/CMakeLists.txt adds this file when the conveyor_gpu target is absent.)
#include <stdexcept>

#include "gpu/factory.hpp"

namespace conveyor::gpu {
namespace {

constexpr const char* no_cuda = "this conveyor was built without CUDA; install the CUDA toolkit at /usr/local/cuda and rebuild";

} // namespace

bool cuda_build_available() { return false; }

bool cuda_device_available(std::string* why, int) {
  if (why) *why = no_cuda;
  return false;
}

std::string cuda_device_description(int) { return {}; }

std::shared_ptr<executor> make_cuda_executor(const model::gguf_file&, const cuda_executor_options&) {
  throw std::runtime_error(no_cuda);
}

std::shared_ptr<executor> make_cuda_executor_dummy(const model::llama_config&, const cuda_executor_options&) {
  throw std::runtime_error(no_cuda);
}

double cuda_measure_copy_bandwidth(int64_t) { throw std::runtime_error(no_cuda); }

double cuda_measure_gemm_flops(int32_t, int32_t, int32_t) { throw std::runtime_error(no_cuda); }

} // namespace conveyor::gpu
