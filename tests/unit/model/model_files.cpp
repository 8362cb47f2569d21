#include "model_files.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <unistd.h>

#include "model/model_path.hpp"

namespace conveyor::model::testing {

std::string temp_path(const std::string& name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("conveyor-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return (dir / name).string();
}

std::string smollm2_path() {
  const std::string p = models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  BOOST_REQUIRE_MESSAGE(std::filesystem::is_regular_file(p), "SmolLM2 not found at " << p << "; HINT: run ./setup.sh (fetches the model)");
  return p;
}

std::string arch_models_dir() {
  const std::string d = std::string(CONVEYOR_BINARY_DIR) + "/arch_models";
  BOOST_REQUIRE_MESSAGE(std::filesystem::is_regular_file(d + "/manifest.json"),
                        "tiny architecture models not found in " << d << "; HINT: ctest -R arch_models, or "
                        ".venv/bin/python scripts/make_arch_models.py " << d);
  return d;
}

} // namespace conveyor::model::testing
