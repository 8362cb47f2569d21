// Internal to tool_chat: ids for the calls a model makes, as OpenAI writes them ("call_" and 24
// letters and digits), unique per server run.
#pragma once

#include <random>
#include <string>

namespace conveyor::model {

inline std::string new_tool_call_id() {
  static constexpr char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{(uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()};
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += digits[rng() % (sizeof digits - 1)];
  return id;
}

} // namespace conveyor::model
