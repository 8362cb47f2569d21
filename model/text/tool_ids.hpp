// Internal to tool_chat: ids for the calls a model makes, as OpenAI writes them ("call_" and 24
// letters and digits), or as Mistral's templates demand them back (9 letters and digits).
#pragma once

#include <random>
#include <string>

namespace conveyor::model {

inline std::string new_tool_call_id(bool mistral = false) {
  static constexpr char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{(uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()};
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += digits[rng() % (sizeof digits - 1)];
  return id;
}

} // namespace conveyor::model
