// The emulator's runtime, part 3: CUDA graphs (stream capture, instantiate, replay of the
// captured operations with the arguments they were captured with) and kernel launches: the
// geometry and shared-memory limits a GPU checks at launch, per-device function attributes,
// and the launch log.
#include <algorithm>
#include <memory>

#include "state.hpp"

using namespace conveyor_emu::detail;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  lock l(st().mu);
  if (st().sticky != cudaSuccess) return st().sticky;
  CUstream_st* s = resolve(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, "cudaStreamBeginCapture: unknown stream");
  if (s->legacy) return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture on the legacy default stream");
  if (s->capturing) return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: the stream is already capturing");
  s->capturing = true;
  s->capture_invalid = false;
  s->capture_mode = mode;
  s->capture_thread = std::this_thread::get_id();
  s->graph = new CUgraph_st();
  st().graphs.insert(s->graph);
  thread_captures().push_back(s);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* g) {
  lock l(st().mu);
  CUstream_st* s = resolve(stream);
  *g = nullptr;
  if (!s || !s->capturing) return fail(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
  if (s->capture_mode != cudaStreamCaptureModeRelaxed && s->capture_thread != std::this_thread::get_id())
    return fail(cudaErrorStreamCaptureWrongThread, "cudaStreamEndCapture from another thread than the capture's");
  auto& caps = thread_captures();
  caps.erase(std::remove(caps.begin(), caps.end(), s), caps.end());
  s->capturing = false;
  CUgraph_st* graph = s->graph;
  s->graph = nullptr;
  if (s->capture_invalid) {
    st().graphs.erase(graph);
    delete graph;
    return fail(cudaErrorStreamCaptureInvalidated, "the capture was invalidated by a prohibited call");
  }
  *g = graph;
  return st().sticky;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  lock l(st().mu);
  CUstream_st* s = resolve(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, "cudaStreamIsCapturing: unknown stream");
  *status = !s->capturing ? cudaStreamCaptureStatusNone : s->capture_invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long) {
  lock l(st().mu);
  if (st().sticky != cudaSuccess) return st().sticky;
  if (!st().graphs.count(g)) return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: unknown graph");
  *exec = new CUgraphExec_st{g->nodes};
  st().execs.insert(*exec);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  lock l(st().mu);
  if (!st().graphs.erase(g)) return fail(cudaErrorInvalidValue, "cudaGraphDestroy: unknown graph");
  delete g;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  lock l(st().mu);
  if (!st().execs.erase(exec)) return fail(cudaErrorInvalidValue, "cudaGraphExecDestroy: unknown graph exec");
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  lock l(st().mu);
  if (st().sticky != cudaSuccess) return st().sticky;
  CUstream_st* s = resolve(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, "cudaGraphLaunch: unknown stream");
  if (!st().execs.count(exec)) return fail(cudaErrorInvalidValue, "cudaGraphLaunch: unknown graph exec");
  for (const auto& node : exec->nodes) {
    const cudaError_t e = enqueue(s, [node] {
      st().in_graph_launch = true;
      try {
        node();
      } catch (...) {
        st().in_graph_launch = false;
        throw;
      }
      st().in_graph_launch = false;
    }, "cudaGraphLaunch");
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

namespace conveyor_emu {

cudaError_t func_set_attribute(const void* func, cudaFuncAttribute a, int value) {
  lock l(st().mu);
  if (st().sticky != cudaSuccess) return st().sticky;
  const int dev = current_device();
  const device_config& c = st().devices.at(static_cast<size_t>(dev));
  if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > c.smem_optin)
      return fail(cudaErrorInvalidValue, "cudaFuncAttributeMaxDynamicSharedMemorySize " + std::to_string(value) +
                                             " exceeds device " + std::to_string(dev) + "'s opt-in limit " + std::to_string(c.smem_optin));
    st().max_dyn_smem.at(static_cast<size_t>(dev))[func] = value;
    return cudaSuccess;
  }
  if (a == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  return fail(cudaErrorInvalidValue, "function attribute " + std::to_string(static_cast<int>(a)) + " is not emulated");
}

namespace detail {

void enqueue_launch(const void* func, const char* name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                    std::function<void()> body) {
  lock l(st().mu);
  if (st().sticky != cudaSuccess) return;
  CUstream_st* s = resolve(stream);
  std::string where = std::string("launch of ") + name + ": ";
  if (!s) {
    fail(cudaErrorInvalidResourceHandle, where + "unknown stream");
    return;
  }
  if (s->device != current_device()) {
    fail(cudaErrorInvalidResourceHandle, where + "the stream belongs to device " + std::to_string(s->device) +
                                             " but the current device is " + std::to_string(current_device()));
    return;
  }
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7FFFFFFFu || grid.y > 65535 || grid.z > 65535 || threads == 0 ||
      threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
    fail(cudaErrorInvalidConfiguration, where + "grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
                                            std::to_string(grid.z) + ") block (" + std::to_string(block.x) + "," +
                                            std::to_string(block.y) + "," + std::to_string(block.z) + ") is outside CUDA's limits");
    return;
  }
  const int dev = s->device;
  const auto& attrs = st().max_dyn_smem.at(static_cast<size_t>(dev));
  const auto it = attrs.find(func);
  const size_t allowed = it == attrs.end() ? kStaticSmemLimit : static_cast<size_t>(it->second);
  if (smem > allowed) {
    fail(cudaErrorInvalidValue, where + std::to_string(smem) + " B of dynamic shared memory exceeds the " + std::to_string(allowed) +
                                    " B this function may use on device " + std::to_string(dev) +
                                    (it == attrs.end() ? " (no cudaFuncAttributeMaxDynamicSharedMemorySize set there)" : ""));
    return;
  }
  auto k = std::make_shared<kernel_launch>();
  k->func = func;
  k->name = name;
  k->grid = grid;
  k->block = block;
  k->dyn_smem = smem;
  k->smem_optin = static_cast<size_t>(st().devices.at(static_cast<size_t>(dev)).smem_optin);
  k->body = std::move(body);
  enqueue(s, [k, dev] {
    state& g = st();
    launch_record rec{k->name, k->grid, k->block, k->dyn_smem, dev, g.in_graph_launch};
    run_kernel(*k);
    ++g.count.kernels_run;
    g.count.blocks_run += int64_t{k->grid.x} * k->grid.y * k->grid.z;
    g.log.push_back(std::move(rec));
    if (g.log.size() > 4096) g.log.pop_front();
  }, name);
}

} // namespace detail
} // namespace conveyor_emu
