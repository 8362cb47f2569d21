// What kernel code calls, for host C++: the thread's coordinates (per fiber), __syncthreads,
// warp shuffles and votes (rendezvous of the named lanes, src/fiber.cpp), block shared memory,
// atomics and the math functions gpu/ uses. Every synchronizing call records its source line,
// so a divergence or deadlock names where each thread was.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "conveyor_emu/types.hpp"

// The running CUDA thread's coordinates; the fiber scheduler sets them on every switch. Plain
// globals: kernels run only inside a synchronizing call, under the runtime's lock, so one host
// thread at a time runs them.
extern uint3 threadIdx;
extern uint3 blockIdx;
extern uint3 blockDim;  // dim3 in CUDA; converts to dim3
extern uint3 gridDim;
constexpr int warpSize = 32;

namespace conveyor_emu {

enum class warp_op : int { shfl_xor, shfl_down, shfl_up, shfl_idx, ballot, any, all, syncwarp, wmma_load, wmma_store, wmma_mma };

namespace detail {
void syncthreads(const std::source_location& loc);
/// Rendezvous of the lanes in `mask` of the caller's warp; returns this lane's result bits.
uint64_t warp_exchange(warp_op op, unsigned mask, uint64_t value, int param, int width, const std::source_location& loc);
void* static_shared(const void* key, size_t bytes, size_t align, const char* type_name);
/// Faults when [p, p + bytes) starts inside the block's shared memory and runs past what the
/// launch has (dynamic plus the static variables declared so far).
void check_shared_range(const void* p, size_t bytes, const std::source_location& loc);
void* dynamic_shared();
[[noreturn]] void device_fault(const char* what, const std::source_location& loc);
} // namespace detail

/// A block-wide variable: every thread of the block gets the same object; filled with the poison
/// byte at block start (control.hpp: NaN or a large finite value), as shared memory holds garbage
/// on a GPU.
template <class T, class Tag>
T& block_shared(Tag) {
  static const char key = 0;
  static_assert(std::is_trivially_destructible_v<T>, "__shared__ variables must be trivial");
  return *static_cast<T*>(detail::static_shared(&key, sizeof(T), alignof(T), __PRETTY_FUNCTION__));
}

template <class T>
T shuffle(warp_op op, unsigned mask, T v, int param, int width, const std::source_location& loc) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = detail::warp_exchange(op, mask, bits, param, width, loc);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

} // namespace conveyor_emu

#define CONVEYOR_SHARED(T, name) std::type_identity_t<T>& name = ::conveyor_emu::block_shared<std::type_identity_t<T>>([] {})
#define CONVEYOR_DYNAMIC_SHARED(T, name) T* const name = static_cast<T*>(::conveyor_emu::detail::dynamic_shared())

inline void __syncthreads(const std::source_location& loc = std::source_location::current()) {
  conveyor_emu::detail::syncthreads(loc);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const std::source_location& loc = std::source_location::current()) {
  conveyor_emu::detail::warp_exchange(conveyor_emu::warp_op::syncwarp, mask, 0, 0, 32, loc);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, const std::source_location& loc = std::source_location::current()) {
  return conveyor_emu::shuffle(conveyor_emu::warp_op::shfl_xor, mask, v, lane_mask, width, loc);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32, const std::source_location& loc = std::source_location::current()) {
  return conveyor_emu::shuffle(conveyor_emu::warp_op::shfl_down, mask, v, static_cast<int>(delta), width, loc);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32, const std::source_location& loc = std::source_location::current()) {
  return conveyor_emu::shuffle(conveyor_emu::warp_op::shfl_up, mask, v, static_cast<int>(delta), width, loc);
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32, const std::source_location& loc = std::source_location::current()) {
  return conveyor_emu::shuffle(conveyor_emu::warp_op::shfl_idx, mask, v, src, width, loc);
}
inline unsigned __ballot_sync(unsigned mask, int pred, const std::source_location& loc = std::source_location::current()) {
  return static_cast<unsigned>(conveyor_emu::detail::warp_exchange(conveyor_emu::warp_op::ballot, mask, pred != 0, 0, 32, loc));
}
inline int __any_sync(unsigned mask, int pred, const std::source_location& loc = std::source_location::current()) {
  return static_cast<int>(conveyor_emu::detail::warp_exchange(conveyor_emu::warp_op::any, mask, pred != 0, 0, 32, loc));
}
inline int __all_sync(unsigned mask, int pred, const std::source_location& loc = std::source_location::current()) {
  return static_cast<int>(conveyor_emu::detail::warp_exchange(conveyor_emu::warp_op::all, mask, pred != 0, 0, 32, loc));
}

// Atomics: real atomics (blocks may one day run on several host threads).
template <class T>
T atomicAdd(T* p, std::type_identity_t<T> v) {
  if constexpr (std::is_floating_point_v<T>) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED), want = old + v;
    while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) want = old + v;
    return old;
  } else {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
  }
}
template <class T>
T atomicMax(T* p, std::type_identity_t<T> v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T>
T atomicMin(T* p, std::type_identity_t<T> v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T>
T atomicExch(T* p, std::type_identity_t<T> v) {
  return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);
}
template <class T>
T atomicCAS(T* p, std::type_identity_t<T> expected, std::type_identity_t<T> desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// Math: host libm (the GPU's fast approximations, e.g. __expf, are not modelled).
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
