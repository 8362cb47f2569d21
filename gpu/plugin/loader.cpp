// gpu/factory.hpp for `conveyor` itself: every entry point loads libconveyor_cuda.so on first use
// (beside the executable, or $CONVEYOR_CUDA_PLUGIN) and forwards to it. A CPU run never loads it,
// so it never maps the CUDA runtime or cuBLASLt. A missing or broken plugin reads as "no CUDA".
#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "gpu/plugin_api.hpp"

namespace conveyor::gpu {
namespace {

struct loaded {
  const plugin_api* api = nullptr;
  std::string error;  // why api is null
};

const loaded& plugin() {
  static const loaded l = [] {
    loaded r;
    std::string path;
    if (const char* env = std::getenv("CONVEYOR_CUDA_PLUGIN"); env && *env) {
      path = env;
    } else {
      std::error_code ec;
      const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
      path = (ec ? std::filesystem::path(".") : exe.parent_path()) / plugin_file;
    }
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      r.error = std::string("the CUDA executor could not be loaded (") + (e ? e : path.c_str()) +
                "); this conveyor was built without CUDA, or " + plugin_file +
                " is not beside the conveyor binary (set CONVEYOR_CUDA_PLUGIN to its path)";
      return r;
    }
    using get_fn = const plugin_api* (*)();
    auto get = reinterpret_cast<get_fn>(::dlsym(h, "conveyor_cuda_plugin_api"));
    const plugin_api* api = get ? get() : nullptr;
    if (!api || api->version != plugin_api_version) {
      r.error = path + " is not a CUDA plugin of this conveyor build (rebuild conveyor and the plugin together)";
      return r;
    }
    r.api = api;
    return r;
  }();
  return l;
}

const plugin_api& api_or_throw() {
  const loaded& l = plugin();
  if (!l.api) throw std::runtime_error(l.error);
  return *l.api;
}

} // namespace

bool cuda_build_available() { return plugin().api != nullptr; }

bool cuda_device_available(std::string* why, int ordinal) {
  const loaded& l = plugin();
  if (!l.api) {
    if (why) *why = l.error;
    return false;
  }
  return l.api->device_available(why, ordinal);
}

std::string cuda_device_description(int ordinal) {
  const loaded& l = plugin();
  return l.api ? l.api->device_description(ordinal) : std::string();
}

std::shared_ptr<executor> make_cuda_executor(const model::gguf_file& f, const cuda_executor_options& o) {
  return api_or_throw().make(f, o);
}

std::shared_ptr<executor> make_cuda_executor_dummy(const model::llama_config& c, const cuda_executor_options& o) {
  return api_or_throw().make_dummy(c, o);
}

double cuda_measure_copy_bandwidth(int64_t bytes) { return api_or_throw().copy_bandwidth(bytes); }

double cuda_measure_gemm_flops(int32_t m, int32_t n, int32_t k) { return api_or_throw().gemm_flops(m, n, k); }

} // namespace conveyor::gpu
