#define BOOST_TEST_MODULE gpu_tests
#include <boost/test/unit_test.hpp>

#include <iostream>

#include "gpu/device.hpp"

namespace {

// Says once, on stdout, why every suite of this tier is skipped (ctest's SKIP_REGULAR_EXPRESSION
// for gpu_tests matches "no CUDA device"); each suite's precondition skips it.
struct announce_device {
  announce_device() {
    std::string why;
    if (!conveyor::gpu::cuda_device_available(&why))
      std::cout << "gpu_tests: no CUDA device (" << why << "); every GPU test is skipped" << std::endl;
    else
      std::cout << "gpu_tests: running on " << conveyor::gpu::cuda_device_description(0) << std::endl;
  }
};

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(announce_device);
