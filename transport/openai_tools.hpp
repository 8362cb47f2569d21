// Internal to openai_request.cpp: the tool-calling fields of a /v1/chat/completions body
// (tools, tool_choice, parallel_tool_calls, and a history holding tool calls or tool results).
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "schemas/chat_turn.hpp"

namespace conveyor::transport {

/// A field's bad value: the field's name and the message.
struct openai_field_error : std::runtime_error {
  openai_field_error(std::string field, const std::string& message) : std::runtime_error(message), param(std::move(field)) {}
  std::string param;
};

/// The request's tool chat, or nullopt when it has no tools and its history no tool calls or
/// tool results (a plain chat). Throws openai_field_error naming the field. The deprecated
/// `functions` and `function_call` are refused with the fields to use instead.
std::optional<schemas::tool_chat_request> read_tool_chat(const nlohmann::json& body, size_t max_messages, size_t max_tools);

} // namespace conveyor::transport
