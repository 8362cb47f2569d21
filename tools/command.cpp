#include "tools/command.hpp"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <new>
#include <string>

#include "actors/trace_writer.hpp"
#include "journal/journal.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/llama_config.hpp"
#include "model/text/tokenizer.hpp"
#include "serve/executor_factory.hpp"
#include "serve/server.hpp"
#include "transport/api_keys.hpp"
#include "transport/curve.hpp"
#include "transport/nats_link.hpp"
#include "transport/sockets.hpp"

namespace conveyor::tools {

namespace {

int say(error_sink sink, const char* name, const std::string& text, int code) {
  if (sink == error_sink::log)
    spdlog::error("conveyor {}: {}", name, text);
  else
    std::cerr << "conveyor " << name << ": " << text << "\n";
  return code;
}

template <class... Errors>
bool is_one_of(const std::exception& e) {
  return (... || (dynamic_cast<const Errors*>(&e) != nullptr));
}

/// A bad input the user can fix (a file, a flag, a setting, an address), not a bug.
bool user_error(const std::exception& e) {
  return is_one_of<serve::startup_error, serve::device_unavailable, model::gguf_error, model::model_error,
                   model::tokenizer_error, transport::bind_error, actors::trace_error, journal::journal_error,
                   transport::nats_error, transport::api_key_error, transport::curve_error>(e);
}

} // namespace

int run_reporting_errors(const char* name, error_sink sink, const std::function<int()>& body,
                         const char* oom_advice) {
  try {
    return body();
  } catch (const std::bad_alloc& e) {
    if (oom_advice) return say(sink, name, oom_advice, 2);
    return say(sink, name, std::string("internal error: ") + e.what(), 1);
  } catch (const std::exception& e) {
    if (user_error(e)) return say(sink, name, e.what(), 2);
    return say(sink, name, std::string("internal error: ") + e.what(), 1);
  }
}

bool write_output(const char* name, error_sink sink, const char* flag, const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (f) return true;
  say(sink, name, std::string("cannot write ") + flag + " " + path + " (check that its folder exists and is writable)", 1);
  return false;
}

int run_failing_with(const char* name, int code, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return say(error_sink::plain, name, e.what(), code);
  }
}

} // namespace conveyor::tools
