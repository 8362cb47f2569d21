// Kernel launches for the emulator: CONVEYOR_LAUNCH(kernel, grid, block, smem, stream, args...)
// converts the arguments to the kernel's parameter types and copies them now (a launch captures
// its arguments by value, also into a CUDA graph), checks the geometry and shared memory against
// the device's limits (an error here is the launch's cudaGetLastError, as on a GPU), and queues
// the launch on the stream; it runs when the stream is synchronized (src/runtime.cpp).
#pragma once

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "conveyor_emu/runtime_api.hpp"

namespace conveyor_emu {

namespace detail {
void enqueue_launch(const void* func, const char* name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                    std::function<void()> body);
}

template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "CONVEYOR_LAUNCH: argument count differs from the kernel's parameters");
  auto params = std::make_shared<const std::tuple<std::decay_t<P>...>>(std::forward<A>(args)...);
  detail::enqueue_launch(reinterpret_cast<const void*>(kernel), name, grid, block, smem, stream,
                         [kernel, params] { std::apply(kernel, *params); });
}

} // namespace conveyor_emu

#define CONVEYOR_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::conveyor_emu::launch(#kernel, kernel, grid, block, smem, stream, __VA_ARGS__)
