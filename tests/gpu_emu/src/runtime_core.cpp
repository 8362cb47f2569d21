// The emulator's runtime, part 1: errors (last, sticky), devices and their properties, device
// and pinned host memory with bounds-checked copies, and the control API of control.hpp.
// Device memory is host memory: small allocations come from posix_memalign (AddressSanitizer
// sees their bounds) and are filled with the poison (0xFF: NaN; CONVEYOR_EMU_POISON=finite: 0x7F,
// a large finite value) as a GPU's fresh memory holds garbage; large
// ones are mmap'd without reserve, so a 16 GiB "GPU" costs only the pages that are touched.
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "state.hpp"

namespace conveyor_emu::detail {
namespace {

constexpr size_t kMapThreshold = size_t{64} << 20;

thread_local cudaError_t tl_last = cudaSuccess;
thread_local std::string tl_detail;
thread_local int tl_device = 0;

std::vector<device_config> default_devices() {
  device_config d;
  if (const char* gib = std::getenv("CONVEYOR_EMU_MEM_GIB")) d.total_bytes = static_cast<size_t>(std::atof(gib) * (1 << 30));
  return {d};
}

void init_devices(state& s, const std::vector<device_config>& devs) {
  s.devices = devs;
  s.max_dyn_smem.resize(devs.size());  // attributes persist, as in a process (gpu/ caches what it set)
  while (s.legacy.size() < devs.size()) {
    auto* l = new CUstream_st();
    l->legacy = true;
    l->device = static_cast<int>(s.legacy.size());
    s.legacy.push_back(l);
  }
}

size_t device_used(const state& s, int device) {
  size_t used = 0;
  for (const auto& [p, a] : s.allocs)
    if (!a.pinned && a.device == device) used += a.bytes;
  return used;
}

} // namespace

state& st() {
  static state* s = [] {
    auto* n = new state();  // never destroyed: CUDA objects may be released from static destructors
    init_devices(*n, default_devices());
    return n;
  }();
  return *s;
}

cudaError_t fail(cudaError_t e, const std::string& detail) {
  tl_last = e;
  tl_detail = detail;
  return e;
}

int current_device() { return tl_device; }

const allocation* find_alloc(const void* p, size_t n, bool* partial) {
  state& s = st();
  const char* c = static_cast<const char*>(p);
  auto it = s.allocs.upper_bound(c);
  if (partial) *partial = false;
  if (it == s.allocs.begin()) return nullptr;
  --it;
  const char* base = it->first;
  if (c >= base + std::max<size_t>(it->second.bytes, 1)) return nullptr;
  if (c + n > base + it->second.bytes) {
    if (partial) *partial = true;
    return nullptr;
  }
  return &it->second;
}

} // namespace conveyor_emu::detail

using namespace conveyor_emu::detail;

#define EMU_STICKY()                           \
  do {                                         \
    if (st().sticky != cudaSuccess) return st().sticky; \
  } while (0)

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define EMU_NAME(x) case x: return #x;
    EMU_NAME(cudaSuccess) EMU_NAME(cudaErrorInvalidValue) EMU_NAME(cudaErrorMemoryAllocation)
    EMU_NAME(cudaErrorInitializationError) EMU_NAME(cudaErrorInvalidConfiguration) EMU_NAME(cudaErrorInvalidDevicePointer)
    EMU_NAME(cudaErrorInvalidMemcpyDirection) EMU_NAME(cudaErrorInsufficientDriver) EMU_NAME(cudaErrorNoDevice)
    EMU_NAME(cudaErrorInvalidDevice) EMU_NAME(cudaErrorNoKernelImageForDevice) EMU_NAME(cudaErrorInvalidResourceHandle)
    EMU_NAME(cudaErrorIllegalState) EMU_NAME(cudaErrorNotReady) EMU_NAME(cudaErrorIllegalAddress)
    EMU_NAME(cudaErrorLaunchOutOfResources) EMU_NAME(cudaErrorLaunchFailure) EMU_NAME(cudaErrorNotSupported)
    EMU_NAME(cudaErrorStreamCaptureUnsupported) EMU_NAME(cudaErrorStreamCaptureInvalidated)
    EMU_NAME(cudaErrorStreamCaptureImplicit) EMU_NAME(cudaErrorStreamCaptureWrongThread) EMU_NAME(cudaErrorUnknown)
#undef EMU_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  static thread_local std::string text;
  switch (e) {
    case cudaSuccess: text = "no error"; break;
    case cudaErrorInvalidValue: text = "invalid argument"; break;
    case cudaErrorMemoryAllocation: text = "out of memory"; break;
    case cudaErrorInvalidConfiguration: text = "invalid configuration argument"; break;
    case cudaErrorNoDevice: text = "no CUDA-capable device is detected"; break;
    case cudaErrorInvalidDevice: text = "invalid device ordinal"; break;
    case cudaErrorInvalidResourceHandle: text = "invalid resource handle"; break;
    case cudaErrorLaunchFailure: text = "unspecified launch failure"; break;
    case cudaErrorStreamCaptureUnsupported: text = "operation not permitted when stream is capturing"; break;
    case cudaErrorStreamCaptureInvalidated: text = "operation failed due to a previous error during capture"; break;
    case cudaErrorStreamCaptureImplicit: text = "operation would make the legacy stream depend on a capturing blocking stream"; break;
    default: text = cudaGetErrorName(e); break;
  }
  if (e != cudaSuccess && e == st().sticky && !st().fault.empty()) text += " [CUDA emulator: " + st().fault + "]";
  else if (e != cudaSuccess && e == tl_last && !tl_detail.empty()) text += " [CUDA emulator: " + tl_detail + "]";
  return text.c_str();
}

cudaError_t cudaGetLastError() {
  lock l(st().mu);
  if (st().sticky != cudaSuccess) return st().sticky;
  const cudaError_t e = tl_last;
  tl_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return st().sticky != cudaSuccess ? st().sticky : tl_last; }

cudaError_t cudaGetDeviceCount(int* n) {
  lock l(st().mu);
  *n = static_cast<int>(st().devices.size());
  return *n == 0 ? fail(cudaErrorNoDevice, "the emulator is configured with no device") : cudaSuccess;
}

cudaError_t cudaGetDevice(int* d) {
  *d = tl_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
  lock l(st().mu);
  if (d < 0 || d >= static_cast<int>(st().devices.size()))
    return fail(cudaErrorInvalidDevice, "device " + std::to_string(d) + " of " + std::to_string(st().devices.size()));
  tl_device = d;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  lock l(st().mu);
  if (d < 0 || d >= static_cast<int>(st().devices.size())) return fail(cudaErrorInvalidDevice, "no device " + std::to_string(d));
  const conveyor_emu::device_config& c = st().devices[static_cast<size_t>(d)];
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "%s", c.name.c_str());
  p->totalGlobalMem = c.total_bytes;
  p->sharedMemPerBlock = kStaticSmemLimit;
  p->sharedMemPerBlockOptin = static_cast<size_t>(c.smem_optin);
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7FFFFFFF;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->major = c.major;
  p->minor = c.minor;
  p->multiProcessorCount = c.sm_count;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d) {
  cudaDeviceProp p;
  if (const cudaError_t e = cudaGetDeviceProperties(&p, d); e != cudaSuccess) return e;
  switch (a) {
    case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = static_cast<int>(p.sharedMemPerBlock); return cudaSuccess;
    case cudaDevAttrWarpSize: *v = 32; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *v = p.major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *v = p.minor; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = static_cast<int>(p.sharedMemPerBlockOptin); return cudaSuccess;
  }
  return fail(cudaErrorInvalidValue, "device attribute " + std::to_string(static_cast<int>(a)) + " is not emulated");
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  lock l(st().mu);
  EMU_STICKY();
  const size_t total = st().devices.at(static_cast<size_t>(tl_device)).total_bytes, used = device_used(st(), tl_device);
  *total_bytes = total;
  *free_bytes = used < total ? total - used : 0;
  return cudaSuccess;
}

namespace {

cudaError_t allocate(void** p, size_t bytes, bool pinned, const char* call) {
  state& s = st();
  lock l(s.mu);
  EMU_STICKY();
  if (const cudaError_t e = check_not_capturing(call); e != cudaSuccess) return e;
  *p = nullptr;
  const size_t total = s.devices.at(static_cast<size_t>(tl_device)).total_bytes;
  if (!pinned && device_used(s, tl_device) + bytes > total)
    return fail(cudaErrorMemoryAllocation, std::string(call) + " of " + std::to_string(bytes) + " bytes: the emulated device has " +
                                               std::to_string(total - device_used(s, tl_device)) + " free");
  allocation a{bytes, tl_device, pinned, !pinned && bytes >= kMapThreshold};
  void* mem = nullptr;
  if (a.mapped) {
    mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return fail(cudaErrorMemoryAllocation, "mmap failed");
  } else {
    if (posix_memalign(&mem, 256, std::max<size_t>(bytes, 1)) != 0) return fail(cudaErrorMemoryAllocation, "host allocation failed");
    if (!pinned) std::memset(mem, ::conveyor_emu::poison_byte(), bytes);  // fresh device memory is garbage
  }
  s.allocs[static_cast<const char*>(mem)] = a;
  if (pinned) ++s.count.live_host_allocs;
  else ++s.count.live_device_allocs, s.count.device_bytes += bytes;
  *p = mem;
  return cudaSuccess;
}

cudaError_t release(void* p, bool pinned, const char* call) {
  state& s = st();
  lock l(s.mu);
  if (!p) return cudaSuccess;
  if (const cudaError_t e = check_not_capturing(call); e != cudaSuccess) return e;
  auto it = s.allocs.find(static_cast<const char*>(p));
  if (it == s.allocs.end() || it->second.pinned != pinned)
    return fail(cudaErrorInvalidValue, std::string(call) + ": pointer is not the start of a " + (pinned ? "pinned host" : "device") + " allocation");
  flush_device(-1);  // freeing synchronizes the device
  const allocation a = it->second;
  s.allocs.erase(it);
  if (a.mapped) munmap(p, a.bytes);
  else std::free(p);
  if (pinned) --s.count.live_host_allocs;
  else --s.count.live_device_allocs, s.count.device_bytes -= a.bytes;
  return s.sticky;
}

} // namespace

cudaError_t cudaMalloc(void** p, size_t bytes) { return allocate(p, bytes, false, "cudaMalloc"); }
cudaError_t cudaMallocHost(void** p, size_t bytes) { return allocate(p, bytes, true, "cudaMallocHost"); }
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) { return allocate(p, bytes, true, "cudaHostAlloc"); }
cudaError_t cudaFree(void* p) { return release(p, false, "cudaFree"); }
cudaError_t cudaFreeHost(void* p) { return release(p, true, "cudaFreeHost"); }

namespace conveyor_emu {

void configure(const std::vector<device_config>& devices) {
  lock l(st().mu);
  init_devices(st(), devices);
  st().sticky = cudaSuccess;
  st().fault.clear();
  tl_device = 0;
}

const std::vector<device_config>& devices() { return st().devices; }

void reset() {
  state& s = st();
  lock l(s.mu);
  s.sticky = cudaSuccess;
  s.fault.clear();
  tl_last = cudaSuccess;
  tl_detail.clear();
  for (CUstream_st* q : s.streams) q->pending.clear(), q->capturing = false;
  for (CUstream_st* q : s.legacy) q->pending.clear();
}

std::string last_fault() {
  lock l(st().mu);
  return st().fault;
}

counters stats() {
  lock l(st().mu);
  counters c = st().count;
  c.live_streams = static_cast<int64_t>(st().streams.size());
  c.live_events = static_cast<int64_t>(st().events.size());
  c.live_graphs = static_cast<int64_t>(st().graphs.size());
  c.live_graph_execs = static_cast<int64_t>(st().execs.size());
  return c;
}

std::vector<launch_record> launch_log() {
  lock l(st().mu);
  return {st().log.begin(), st().log.end()};
}

void clear_launch_log() {
  lock l(st().mu);
  st().log.clear();
}

} // namespace conveyor_emu

namespace conveyor_emu {
namespace {

struct order_setting {
  thread_order order = thread_order::forward;
  uint64_t seed = 1;
  order_setting() {
    const char* env = std::getenv("CONVEYOR_EMU_ORDER");
    const std::string v = env ? env : "";
    if (v == "reverse") order = thread_order::reverse;
    if (v.rfind("random", 0) == 0) {
      order = thread_order::random;
      if (v.size() > 7) seed = std::strtoull(v.c_str() + 7, nullptr, 10);
    }
  }
};
order_setting& setting() {
  static order_setting s;
  return s;
}

poison_kind& poison_setting() {
  static poison_kind k = [] {
    const std::string v = std::getenv("CONVEYOR_EMU_POISON") ? std::getenv("CONVEYOR_EMU_POISON") : "";
    if (v != "" && v != "nan" && v != "finite") {
      std::fprintf(stderr, "CONVEYOR_EMU_POISON=%s: expected nan or finite\n", v.c_str());
      std::abort();
    }
    return v == "finite" ? poison_kind::finite : poison_kind::nan;
  }();
  return k;
}

} // namespace

namespace detail {
uint64_t thread_order_seed() { return setting().seed; }
} // namespace detail

void set_thread_order(thread_order o, uint64_t seed) {
  setting().order = o;
  setting().seed = seed;
  detail::reseed_thread_order(seed);
}

thread_order current_thread_order() { return setting().order; }

void set_poison(poison_kind k) { poison_setting() = k; }
poison_kind current_poison() { return poison_setting(); }
unsigned char poison_byte() { return poison_setting() == poison_kind::finite ? 0x7F : 0xFF; }

const char* thread_order_name(thread_order o) {
  return o == thread_order::forward ? "forward" : o == thread_order::reverse ? "reverse" : "random";
}

} // namespace conveyor_emu
