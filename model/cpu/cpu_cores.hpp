// How many cores this process may really use: the CPUs in its affinity mask, capped by a cgroup
// v2 CPU quota (cpu.max) when one is set. std::thread::hardware_concurrency() counts every online
// CPU of the host, so in a container limited to 2 CPUs of a 64-core host it says 64, and 64
// spinning workers on 2 CPUs make every fork-join wait for the scheduler.
#pragma once

#include <cstdint>
#include <string>

namespace conveyor::model {

/// The cores this process may use (>= 1): affinity mask, capped by the cgroup quota.
int32_t usable_cores();

/// The quota in cores that a cgroup v2 `cpu.max` text sets ("max 100000" or malformed: 0, no
/// limit); a fraction rounds up ("150000 100000" -> 2).
int32_t cgroup_quota_cores(const std::string& cpu_max);

} // namespace conveyor::model
