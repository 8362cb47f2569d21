#define BOOST_TEST_MODULE unit_transport
#include <boost/test/unit_test.hpp>
