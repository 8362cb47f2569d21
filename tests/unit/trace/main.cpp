#define BOOST_TEST_MODULE unit_trace
#include <boost/test/unit_test.hpp>
