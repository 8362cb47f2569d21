#define BOOST_TEST_MODULE unit_engine
#include <boost/test/unit_test.hpp>
