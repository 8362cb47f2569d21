#include "engine/request.hpp"

namespace conveyor {

std::string stop_params::validate() const {
  if (max_tokens < 1)
    return "max_tokens is " + std::to_string(max_tokens) + "; it must be 1 or more";
  if (min_tokens < 0 || min_tokens > max_tokens)
    return "min_tokens is " + std::to_string(min_tokens) + "; it must be in [0, max_tokens = " +
           std::to_string(max_tokens) + "]";
  return {};
}

const char* to_string(finish_reason reason) {
  switch (reason) {
    case finish_reason::stop: return "stop";
    case finish_reason::length: return "length";
    case finish_reason::cancelled: return "cancelled";
    case finish_reason::deadline: return "deadline";
  }
  return "?";
}

} // namespace conveyor
