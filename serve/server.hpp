// `conveyor serve` up to the moment it serves, composed in one place: the settings checked, API
// keys read, the journal opened (none with NATS: JetStream keeps a fleet's jobs), every endpoint
// bound or connected before the model loads, the model and its tokenizer read, the executor made
// for the device, the derived sizes checked, the runtime started. cmd_serve.cpp adds the flags,
// the signals and the drain.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "serve/executor_factory.hpp"
#include "serve/options.hpp"
#include "serve/runtime.hpp"
#include "transport/api_keys.hpp"

namespace conveyor::serve {

/// A setting or a derived size that cannot serve: what() says which and how to fix it. The
/// command exits 2 (as for every error that stops start-up).
struct startup_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What the executor's sizes mean for serving: an error, or warnings to log.
struct sizing_verdict {
  std::string error;
  std::vector<std::string> warnings;
};

/// The engine's limits against the executor's pool; a max_model_len derived from the KV pool (a
/// quarter of it) below the model's context (a warning on cpu / cuda; an error when too small to
/// serve at all), or one given that is more than a quarter of the pool (a warning).
sizing_verdict check_sizing(const serve_options& o, const runtime_options& ro, const executor_info& info);

/// A started server. Member order is the destruction order (reverse): the runtime goes first,
/// then the tokenizer and the model file it reads.
struct server {
  std::shared_ptr<transport::api_keys> keys;
  std::shared_ptr<journal::journal> journal;  ///< null: off (--no-journal or NATS)
  std::vector<std::string> warnings;          ///< for the start-up log
  std::unique_ptr<model::gguf_file> file;
  std::unique_ptr<model::tokenizer> tok;
  std::string model_desc;
  std::string kv_sizing;
  executor_info info;
  runtime_options options;
  std::unique_ptr<runtime> rt;
};

/// Starts serving with `o`. Throws startup_error, device_unavailable, and the errors of each
/// part (bind_error, journal_error, nats_error, model and tokenizer errors, ...).
std::unique_ptr<server> start_server(const serve_options& o);

} // namespace conveyor::serve
