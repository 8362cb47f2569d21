// What the `conveyor` subcommands do alike: declare themselves with options shared with their
// callback, and turn what their body throws into a message and an exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <type_traits>

namespace conveyor::tools {

/// A subcommand's CLI11 app (to declare its flags on) and its options.
template <class Opts>
struct command {
  CLI::App* cmd;
  std::shared_ptr<Opts> opts;
};

/// Adds subcommand `name`; when it is chosen, exit_code = run(opts) or run(opts, its app).
template <class Opts, class Run>
command<Opts> add_command(CLI::App& app, int& exit_code, const char* name, const char* about, Run run) {
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(name, about);
  cmd->callback([o, cmd, run, &exit_code] {
    if constexpr (std::is_invocable_v<Run&, Opts&, CLI::App&>)
      exit_code = run(*o, *cmd);
    else
      exit_code = run(*o);
  });
  return {cmd, o};
}

/// Where a command says why it failed: the log (spdlog::error) or a plain line on stderr.
enum class error_sink { log, plain };

/// body()'s exit code; what it throws becomes "conveyor <name>: <what>" on `sink`. A user error
/// (model file, tokenizer, device, start-up refusal, address, trace file, journal, NATS, keys)
/// exits 2; out of memory exits 2 with `oom_advice` where one is given; anything else is
/// "internal error: <what>" and exits 1.
int run_reporting_errors(const char* name, error_sink sink, const std::function<int()>& body,
                         const char* oom_advice = nullptr);

/// Writes `text` to `path` (what a flag such as --json or --plot names). False, after saying
/// "conveyor <name>: cannot write <flag> <path>" on `sink`, when it cannot (a missing folder, no
/// permission, a full disk): a benchmark's results are never lost without a word. The commands
/// exit 2 then, as for any input the user can fix.
bool write_output(const char* name, error_sink sink, const char* flag, const std::string& path, const std::string& text);

/// body()'s exit code; any exception becomes "conveyor <name>: <what>" on stderr and exit `code`
/// (the benchmarks, where every failure is reported alike).
int run_failing_with(const char* name, int code, const std::function<int()>& body);

} // namespace conveyor::tools
