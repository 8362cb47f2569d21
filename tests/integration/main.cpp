#define BOOST_TEST_MODULE integration
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

// Every `conveyor serve` these tests start journals by default: point the default state
// directory ($XDG_STATE_HOME/conveyor) at a fresh directory of this run, never the user's.
struct private_state_dir {
  std::string dir;
  private_state_dir() {
    char tmpl[] = "/tmp/conveyor-it-state-XXXXXX";
    dir = ::mkdtemp(tmpl);
    ::setenv("XDG_STATE_HOME", dir.c_str(), 1);
  }
  ~private_state_dir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(private_state_dir);
