#define BOOST_TEST_MODULE unit_schemas
#include <boost/test/unit_test.hpp>
