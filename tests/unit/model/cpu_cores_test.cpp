// usable_cores(): the affinity mask counts (a thread pinned to one CPU sees 1), and a cgroup v2
// cpu.max quota caps it, rounded up to whole cores; malformed or unlimited quotas set no cap.
#include <boost/test/unit_test.hpp>

#include <pthread.h>
#include <sched.h>
#include <thread>

#include "model/cpu/cpu_cores.hpp"
#include "model/cpu/qgemv_pool.hpp"

using conveyor::model::cgroup_quota_cores;
using conveyor::model::usable_cores;

BOOST_AUTO_TEST_SUITE(cpu_cores)

BOOST_AUTO_TEST_CASE(quota_text_parses_to_whole_cores) {
  BOOST_TEST(cgroup_quota_cores("max 100000") == 0);
  BOOST_TEST(cgroup_quota_cores("200000 100000\n") == 2);
  BOOST_TEST(cgroup_quota_cores("150000 100000") == 2);
  BOOST_TEST(cgroup_quota_cores("50000 100000") == 1);
  BOOST_TEST(cgroup_quota_cores("") == 0);
  BOOST_TEST(cgroup_quota_cores("x 100000") == 0);
  BOOST_TEST(cgroup_quota_cores("100000 0") == 0);
  BOOST_TEST(cgroup_quota_cores("-5 100000") == 0);
}

BOOST_AUTO_TEST_CASE(affinity_mask_limits_the_count_and_the_default_pool) {
  const int32_t all = usable_cores();
  BOOST_TEST(all >= 1);
  BOOST_TEST(all <= static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency())));
  // On a thread pinned to the first CPU it may run on: one core, and a default pool of one.
  std::thread t([&] {
    cpu_set_t mine, one;
    BOOST_REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &mine)) {
        CPU_SET(c, &one);
        break;
      }
    BOOST_REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
    BOOST_TEST(usable_cores() == 1);
    conveyor::model::spinning_pool pool;
    BOOST_TEST(pool.size() == 1);
  });
  t.join();
  BOOST_TEST(usable_cores() == all);  // the main thread's mask is untouched
}

BOOST_AUTO_TEST_SUITE_END()
