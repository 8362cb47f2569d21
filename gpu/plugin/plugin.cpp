// libconveyor_cuda.so's one export: gpu/factory.hpp's entry points (gpu/factory.cpp, device.cpp)
// as a table for the loader in `conveyor` (gpu/plugin/loader.cpp).
#include "gpu/plugin_api.hpp"

extern "C" __attribute__((visibility("default"))) const conveyor::gpu::plugin_api* conveyor_cuda_plugin_api() {
  using namespace conveyor::gpu;
  static const plugin_api api{plugin_api_version,
                              [](std::string* why, int ordinal) { return cuda_device_available(why, ordinal); },
                              [](int ordinal) { return cuda_device_description(ordinal); },
                              &make_cuda_executor,
                              &make_cuda_executor_dummy,
                              &cuda_measure_copy_bandwidth,
                              &cuda_measure_gemm_flops};
  return &api;
}
