// The `conveyor` subcommands. Each registers itself on the top-level CLI11 app; the callback
// it installs returns the process exit code through `exit_code`.
#pragma once

namespace CLI {
class App;
}

namespace conveyor::tools {

/// Exit codes: 0 success, 1 runtime failure, 2 bad input (file, flag or config).
void register_generate(CLI::App& app, int& exit_code);
void register_sim(CLI::App& app, int& exit_code);
void register_step_bench(CLI::App& app, int& exit_code);
void register_serve(CLI::App& app, int& exit_code);
void register_gpu_bench(CLI::App& app, int& exit_code);
void register_bench(CLI::App& app, int& exit_code);
void register_trace(CLI::App& app, int& exit_code);
void register_keygen(CLI::App& app, int& exit_code);

} // namespace conveyor::tools
