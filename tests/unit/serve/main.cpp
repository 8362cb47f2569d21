#define BOOST_TEST_MODULE unit_serve
#include <boost/test/unit_test.hpp>
