// Tool calling's shapes, shared by the model layer (model/text/tool_chat: renders the request with
// the model's chat template and parses the model's output) and the HTTP intake (reads the OpenAI
// request, writes message.tool_calls and the streamed deltas). Plain structs; JSON kept as text.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace conveyor::schemas {

/// A chat request with tools, or with tool calls and tool results in its history.
struct tool_chat_request {
  enum class choice { automatic, none, required };
  /// OpenAI's `messages` (a JSON array's text): system/developer, user, assistant (with
  /// `tool_calls`, content may be null) and tool (`tool_call_id`) messages.
  std::string messages;
  /// OpenAI's `tools` (a JSON array's text of {"type":"function","function":{...}}); "" for none.
  std::string tools;
  choice tool_choice = choice::automatic;
  /// tool_choice {"type":"function","function":{"name":...}}: only this tool is offered and the
  /// answer must call it (tool_choice is then `required`).
  std::string function;
  bool parallel_tool_calls = true;
  /// The server splits thinking (<think>...</think>) into reasoning (--reasoning-parser).
  bool reasoning = false;
  /// The prompt ends with the assistant's turn opener (false: the history as it stands).
  bool add_generation_prompt = true;
  /// chat_template_kwargs, as the request gave them.
  std::vector<std::pair<std::string, std::variant<bool, int64_t, double, std::string>>> kwargs;
};

/// One call the model made. `arguments` is a JSON object's text.
struct tool_call {
  std::string id;
  std::string name;
  std::string arguments;
};

/// The assistant's answer, parsed: thinking, text, calls.
struct chat_turn {
  std::string reasoning;
  std::string content;
  std::vector<tool_call> tool_calls;
};

/// What a streamed answer adds: text to the reasoning or the content, or (tool_index >= 0) a part
/// of call tool_index: its id and name when it first appears, then more of its arguments' text.
struct chat_turn_delta {
  std::string reasoning;
  std::string content;
  int32_t tool_index = -1;
  tool_call call;
};

/// Reads one answer as it streams. Not thread-safe (one per choice).
class turn_parser {
public:
  virtual ~turn_parser() = default;
  /// The next piece of output text; the deltas it completes (maybe none).
  virtual std::vector<chat_turn_delta> feed(std::string_view text) = 0;
  /// The output ended: the deltas still held back.
  virtual std::vector<chat_turn_delta> finish() = 0;
  /// The answer so far (whole after finish()).
  virtual const chat_turn& turn() const = 0;
};

} // namespace conveyor::schemas
