// Test support: paths for files the tests write (a fresh temp dir per process) and the real
// SmolLM2 model in the cache (a clear failure with the fix when it has not been fetched).
#pragma once

#include <string>

namespace conveyor::model::testing {

/// A path inside this test process's private temporary directory.
std::string temp_path(const std::string& name);
/// The fetched SmolLM2 GGUF. Fails the current test with "HINT: run ./setup.sh" when absent.
std::string smollm2_path();

} // namespace conveyor::model::testing
