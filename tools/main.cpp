// The `conveyor` command: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "tools/commands.hpp"

int main(int argc, char** argv) {
  // Logs (start-up line, drains, errors) go to stderr; stdout carries only results.
  spdlog::set_default_logger(spdlog::stderr_color_mt("conveyor"));
  CLI::App app{"conveyor: an LLM serving runtime for data pipelines"};
  app.require_subcommand(1);
  int exit_code = 0;
  conveyor::tools::register_generate(app, exit_code);
  conveyor::tools::register_sim(app, exit_code);
  conveyor::tools::register_step_bench(app, exit_code);
  conveyor::tools::register_serve(app, exit_code);
  conveyor::tools::register_gpu_bench(app, exit_code);
  conveyor::tools::register_bench(app, exit_code);
  conveyor::tools::register_trace(app, exit_code);
  conveyor::tools::register_keygen(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
