#define BOOST_TEST_MODULE unit_bench
#include <boost/test/unit_test.hpp>
