#define BOOST_TEST_MODULE unit_model
#include <boost/test/unit_test.hpp>
