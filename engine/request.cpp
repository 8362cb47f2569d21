#include "engine/request.hpp"

#include "engine/enum_names.hpp"

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
  static constexpr auto names = make_enum_names<finish_reason>(
      {{finish_reason::stop, "stop"}, {finish_reason::length, "length"}, {finish_reason::cancelled, "cancelled"},
       {finish_reason::deadline, "deadline"}});
  return names.name(reason);
}

} // namespace conveyor
