// The emulator's process-wide state (one lock), shared by the runtime's translation units:
// devices, allocations, streams with their queues, capture state, errors, counters.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "internal.hpp"

struct CUstream_st {
  int device = 0;
  bool blocking = true, legacy = false;
  std::deque<std::function<void()>> pending;
  bool capturing = false, capture_invalid = false;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  std::thread::id capture_thread;
  CUgraph_st* graph = nullptr;
};
struct CUevent_st {
  CUstream_st* stream = nullptr;
  bool recorded = false, done = false;
  double ms = 0.0;
};
struct CUgraph_st {
  std::vector<std::function<void()>> nodes;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> nodes;
};

namespace conveyor_emu::detail {

struct allocation {
  size_t bytes = 0;
  int device = 0;
  bool pinned = false;  ///< cudaMallocHost; else device memory
  bool mapped = false;  ///< mmap'd (large), else posix_memalign'd
};

struct state {
  std::recursive_mutex mu;
  std::vector<device_config> devices;
  std::vector<std::map<const void*, int>> max_dyn_smem;  ///< per device: cudaFuncAttributeMaxDynamicSharedMemorySize
  std::vector<CUstream_st*> legacy;                      ///< per device: the legacy default stream
  std::set<CUstream_st*> streams;                        ///< created streams
  std::set<CUevent_st*> events;
  std::set<CUgraph_st*> graphs;
  std::set<CUgraphExec_st*> execs;
  std::map<const char*, allocation, std::less<>> allocs;  ///< by base address
  cudaError_t sticky = cudaSuccess;
  std::string fault;
  counters count;
  std::deque<launch_record> log;
  bool in_graph_launch = false;
};

state& st();
using lock = std::lock_guard<std::recursive_mutex>;

/// Records `e` as this thread's last error (with an emulator detail for cudaGetErrorString).
cudaError_t fail(cudaError_t e, const std::string& detail);
/// The current device of this host thread.
int current_device();
/// The stream a handle names (nullptr: the current device's legacy stream), or nullptr if unknown.
CUstream_st* resolve(cudaStream_t s);
/// Runs a stream's queued work; a kernel fault becomes the sticky error. Returns the error.
cudaError_t flush(CUstream_st* s);
/// Runs every stream of `device` (-1: all devices).
cudaError_t flush_device(int device);
/// cudaSuccess, or the refusal of a call CUDA prohibits while this thread captures a graph
/// (the capture is invalidated, as CUDA does).
cudaError_t check_not_capturing(const char* call);
/// The streams this host thread is capturing into.
std::vector<CUstream_st*>& thread_captures();
/// Queues `op` on `s` (or appends it to the graph `s` captures), with the legacy default
/// stream's implicit synchronization.
cudaError_t enqueue(CUstream_st* s, std::function<void()> op, const char* call);
/// The allocation containing [p, p + n) (nullptr if none); `partial` set when p is inside one but
/// p + n runs past its end.
const allocation* find_alloc(const void* p, size_t n, bool* partial = nullptr);

} // namespace conveyor_emu::detail
