// Is there a GPU this build can use? No CUDA types here: tools and tests include it whether or
// not the build has CUDA (gpu/factory_fallback.cpp answers "no" when it does not).
#pragma once

#include <string>

namespace conveyor::gpu {

/// True when device `ordinal` exists and has compute capability 8.0+ (bf16). Otherwise false
/// with the reason in *why (when given): no driver, no such device, too old a device, or a build
/// without CUDA. Never aborts, also without a driver.
bool cuda_device_available(std::string* why = nullptr, int ordinal = 0);

/// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)" for device `ordinal`, "" when none.
std::string cuda_device_description(int ordinal = 0);

} // namespace conveyor::gpu
