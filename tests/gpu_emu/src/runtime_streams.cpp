// The emulator's runtime, part 2: streams as lazy FIFOs (work runs when something synchronizes
// on it, so reading a result before synchronizing, or reusing a pinned buffer before its copy ran,
// shows up as wrong data), the legacy default stream's implicit synchronization, copies (pinned
// and device memory queue; pageable host memory is copied at the call, as CUDA stages it),
// events, CUDA graph capture (calls CUDA prohibits while capturing are refused and invalidate
// the capture), instantiation and replay, and kernel launches with their limits.
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <sstream>

#include "state.hpp"

namespace conveyor_emu::detail {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string hex(const void* p) {
  std::ostringstream m;
  m << p;
  return m.str();
}

// Which memory a copy touches: device, pinned host, or pageable host.
enum class mem { device, pinned, pageable };

cudaError_t classify(const void* p, size_t n, const char* call, const char* side, mem* out) {
  bool partial = false;
  const allocation* a = find_alloc(p, n, &partial);
  if (partial)
    return fail(cudaErrorInvalidValue, std::string(call) + ": " + side + " " + hex(p) + " + " + std::to_string(n) +
                                           " bytes runs past the end of its allocation");
  *out = !a ? mem::pageable : a->pinned ? mem::pinned : mem::device;
  return cudaSuccess;
}

cudaError_t check_kind(cudaMemcpyKind kind, mem dst, mem src, const char* call) {
  auto is_dev = [](mem m) { return m == mem::device; };
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToDevice: ok = is_dev(dst) && !is_dev(src); break;
    case cudaMemcpyDeviceToHost: ok = !is_dev(dst) && is_dev(src); break;
    case cudaMemcpyDeviceToDevice: ok = is_dev(dst) && is_dev(src); break;
    case cudaMemcpyHostToHost: ok = !is_dev(dst) && !is_dev(src); break;
    case cudaMemcpyDefault: break;
  }
  if (ok) return cudaSuccess;
  return fail(cudaErrorInvalidValue, std::string(call) + ": the pointers do not match the copy's kind " + std::to_string(kind) +
                                         " (destination is " + (is_dev(dst) ? "device" : "host") + " memory, source " +
                                         (is_dev(src) ? "device" : "host") + " memory)");
}

// Zeroing whole pages of a mapped allocation drops them instead of touching them.
void device_memset(void* p, int value, size_t n) {
  const allocation* a = find_alloc(p, n);
  const size_t page = 4096;
  char* c = static_cast<char*>(p);
  if (a && a->mapped && value == 0 && n >= 4 * page) {
    char* lo = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(c) + page - 1) / page * page);
    char* hi = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(c + n) / page * page);
    std::memset(c, 0, static_cast<size_t>(lo - c));
    madvise(lo, static_cast<size_t>(hi - lo), MADV_DONTNEED);
    std::memset(hi, 0, static_cast<size_t>(c + n - hi));
    return;
  }
  std::memset(p, value, n);
}

} // namespace

std::vector<CUstream_st*>& thread_captures() {
  static thread_local std::vector<CUstream_st*> captures;  // streams this thread captures into
  return captures;
}

CUstream_st* resolve(cudaStream_t s) {
  state& g = st();
  if (!s) return g.legacy.at(static_cast<size_t>(current_device()));
  return g.streams.count(s) ? s : nullptr;
}

cudaError_t flush(CUstream_st* s) {
  state& g = st();
  while (!s->pending.empty() && g.sticky == cudaSuccess) {
    auto op = std::move(s->pending.front());
    s->pending.pop_front();
    try {
      op();
    } catch (const fault_error& e) {
      g.sticky = cudaErrorLaunchFailure;
      g.fault = e.what();
    }
  }
  if (g.sticky != cudaSuccess) {
    for (CUstream_st* q : g.streams) q->pending.clear();
    for (CUstream_st* q : g.legacy) q->pending.clear();
  }
  return g.sticky;
}

cudaError_t flush_device(int device) {
  state& g = st();
  for (CUstream_st* l : g.legacy)
    if (device < 0 || l->device == device) flush(l);
  for (CUstream_st* q : std::set<CUstream_st*>(g.streams))
    if (device < 0 || q->device == device) flush(q);
  return g.sticky;
}

cudaError_t check_not_capturing(const char* call) {
  for (CUstream_st* s : thread_captures())
    if (s->capture_mode != cudaStreamCaptureModeRelaxed) {
      for (CUstream_st* q : thread_captures()) q->capture_invalid = true;
      return fail(cudaErrorStreamCaptureUnsupported,
                  std::string(call) + " while this thread captures a CUDA graph: prohibited during capture (the capture is invalidated)");
    }
  return cudaSuccess;
}

cudaError_t enqueue(CUstream_st* s, std::function<void()> op, const char* call) {
  state& g = st();
  if (g.sticky != cudaSuccess) return g.sticky;
  if (s->capturing) {
    if (!s->capture_invalid) s->graph->nodes.push_back(std::move(op));
    return cudaSuccess;
  }
  if (s->legacy) {
    for (CUstream_st* q : g.streams)
      if (q->capturing && q->blocking && q->device == s->device) {
        q->capture_invalid = true;
        return fail(cudaErrorStreamCaptureImplicit, std::string(call) + " on the legacy default stream while a blocking stream captures");
      }
    for (CUstream_st* q : std::set<CUstream_st*>(g.streams))
      if (q->blocking && q->device == s->device) flush(q);
  } else if (s->blocking) {
    flush(g.legacy.at(static_cast<size_t>(s->device)));
  }
  s->pending.push_back(std::move(op));
  return g.sticky;
}

} // namespace conveyor_emu::detail

using namespace conveyor_emu::detail;

namespace {

cudaError_t copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t stream, bool async, const char* call) {
  state& g = st();
  lock l(g.mu);
  if (g.sticky != cudaSuccess) return g.sticky;
  CUstream_st* s = resolve(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, std::string(call) + ": unknown stream");
  if (!async)
    if (const cudaError_t e = check_not_capturing(call); e != cudaSuccess) return e;
  mem d{}, sr{};
  if (cudaError_t e = classify(dst, n, call, "destination", &d); e != cudaSuccess) return e;
  if (cudaError_t e = classify(src, n, call, "source", &sr); e != cudaSuccess) return e;
  if (cudaError_t e = check_kind(kind, d, sr, call); e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  const bool pageable = d == mem::pageable || sr == mem::pageable;
  if (!async || pageable) {  // synchronous, or staged through pageable memory at the call
    if (s->capturing) {
      s->capture_invalid = true;
      return fail(cudaErrorStreamCaptureUnsupported, std::string(call) + " with pageable host memory while capturing a graph");
    }
    if (async) {
      if (const cudaError_t e = flush(s); e != cudaSuccess) return e;
    } else if (const cudaError_t e = flush_device(s->device); e != cudaSuccess) {
      return e;
    }
    std::memmove(dst, src, n);
    return cudaSuccess;
  }
  return enqueue(s, [dst, src, n] { std::memmove(dst, src, n); }, call);
}

cudaError_t set(void* p, int value, size_t n, cudaStream_t stream, bool async, const char* call) {
  state& g = st();
  lock l(g.mu);
  if (g.sticky != cudaSuccess) return g.sticky;
  CUstream_st* s = resolve(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, std::string(call) + ": unknown stream");
  bool partial = false;
  const allocation* a = find_alloc(p, n, &partial);
  if (!a || a->pinned)
    return fail(cudaErrorInvalidValue, std::string(call) + ": " + (partial ? "runs past the end of its allocation" : "not device memory"));
  if (!async) {
    if (const cudaError_t e = check_not_capturing(call); e != cudaSuccess) return e;
    if (const cudaError_t e = flush_device(s->device); e != cudaSuccess) return e;
    device_memset(p, value, n);
    return cudaSuccess;
  }
  return enqueue(s, [p, value, n] { device_memset(p, value, n); }, call);
}

} // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  return copy(dst, src, n, kind, nullptr, false, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  return copy(dst, src, n, kind, s, true, "cudaMemcpyAsync");
}
cudaError_t cudaMemset(void* p, int value, size_t n) { return set(p, value, n, nullptr, false, "cudaMemset"); }
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) { return set(p, value, n, s, true, "cudaMemsetAsync"); }

cudaError_t cudaDeviceSynchronize() {
  lock l(st().mu);
  if (const cudaError_t e = check_not_capturing("cudaDeviceSynchronize"); e != cudaSuccess) return e;
  return flush_device(current_device());
}

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  lock l(st().mu);
  if (st().sticky != cudaSuccess) return st().sticky;
  auto* n = new CUstream_st();
  n->device = current_device();
  n->blocking = (flags & cudaStreamNonBlocking) == 0;
  st().streams.insert(n);
  *s = n;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  lock l(st().mu);
  if (!s || !st().streams.count(s)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: unknown stream");
  if (s->capturing) return fail(cudaErrorIllegalState, "cudaStreamDestroy: the stream is capturing");
  flush(s);  // CUDA finishes the queued work before releasing the stream
  st().streams.erase(s);
  delete s;
  return st().sticky;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  lock l(st().mu);
  CUstream_st* s = resolve(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: unknown stream");
  if (const cudaError_t e = check_not_capturing("cudaStreamSynchronize"); e != cudaSuccess) return e;
  if (s->legacy) return flush_device(s->device) == cudaSuccess ? flush(s) : st().sticky;
  return flush(s);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  lock l(st().mu);
  CUstream_st* s = resolve(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle, "cudaStreamQuery: unknown stream");
  if (s->capturing) return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamQuery on a capturing stream");
  return flush(s);  // lazy streams finish when asked
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t e, unsigned) {
  lock l(st().mu);
  CUstream_st* s = resolve(stream);
  if (!s || !st().events.count(e)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: unknown stream or event");
  CUstream_st* other = e->stream;
  if (!e->recorded || !other || other == s) return cudaSuccess;
  return enqueue(s, [other] { flush(other); }, "cudaStreamWaitEvent");
}

cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  lock l(st().mu);
  *e = new CUevent_st();
  st().events.insert(*e);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  lock l(st().mu);
  if (!st().events.erase(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: unknown event");
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  lock l(st().mu);
  CUstream_st* s = resolve(stream);
  if (!s || !st().events.count(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: unknown stream or event");
  e->stream = s;
  e->recorded = true;
  e->done = false;
  return enqueue(s, [e] {
    if (st().events.count(e)) e->done = true, e->ms = now_ms();
  }, "cudaEventRecord");
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  lock l(st().mu);
  if (!st().events.count(e)) return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: unknown event");
  if (const cudaError_t err = check_not_capturing("cudaEventSynchronize"); err != cudaSuccess) return err;
  return e->stream ? flush(e->stream) : cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (const cudaError_t err = cudaEventSynchronize(e); err != cudaSuccess) return err;
  return e->done || !e->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  lock l(st().mu);
  if (!st().events.count(a) || !st().events.count(b)) return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: unknown event");
  if (!a->done || !b->done) return fail(cudaErrorNotReady, "cudaEventElapsedTime: an event has not completed (synchronize first)");
  *ms = static_cast<float>(b->ms - a->ms);
  return cudaSuccess;
}
