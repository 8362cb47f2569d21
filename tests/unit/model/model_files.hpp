// Test support: paths for files the tests write (a fresh temp dir per process) and the real
// SmolLM2 model in the cache and the tiny per-architecture models (a clear failure with the fix
// when they are absent).
#pragma once

#include <string>

namespace conveyor::model::testing {

/// A path inside this test process's private temporary directory.
std::string temp_path(const std::string& name);
/// The fetched SmolLM2 GGUF. Fails the current test with "HINT: run ./setup.sh" when absent.
std::string smollm2_path();
/// build/arch_models, written by the ctest fixture `arch_models` (scripts/make_arch_models.py).
/// Fails the current test with the command that writes it when it is absent.
std::string arch_models_dir();

} // namespace conveyor::model::testing
