#define BOOST_TEST_MODULE conveyor_journal
#include <boost/test/unit_test.hpp>
