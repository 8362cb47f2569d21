// The actor tier: the real actors on CAF's deterministic test coordinator (tests/actors/harness.hpp).
#define BOOST_TEST_MODULE actor_tests
#include <boost/test/unit_test.hpp>
