// The CUDA executor as a plugin: `conveyor` loads libconveyor_cuda.so (built beside it) with
// dlopen only when a command asks for --device cuda, so a CPU run never maps cuBLASLt and the CUDA
// runtime (~150 MB resident). The plugin exports one C function returning this table of
// gpu/factory.hpp's entry points; both sides are built together, so the C++ types match.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpu/factory.hpp"

namespace conveyor::gpu {

inline constexpr int plugin_api_version = 2;  // 2: cuda_executor_options gained batch_invariant, max_drafts

struct plugin_api {
  int version = plugin_api_version;
  bool (*device_available)(std::string* why, int ordinal);
  std::string (*device_description)(int ordinal);
  std::shared_ptr<executor> (*make)(const model::gguf_file& f, const cuda_executor_options& o);
  std::shared_ptr<executor> (*make_dummy)(const model::llama_config& c, const cuda_executor_options& o);
  double (*copy_bandwidth)(int64_t bytes);
  double (*gemm_flops)(int32_t m, int32_t n, int32_t k);
};

/// The plugin's file name, looked for beside the running executable (or at $CONVEYOR_CUDA_PLUGIN).
inline constexpr const char* plugin_file = "libconveyor_cuda.so";

} // namespace conveyor::gpu

/// Exported by libconveyor_cuda.so.
extern "C" const conveyor::gpu::plugin_api* conveyor_cuda_plugin_api();
