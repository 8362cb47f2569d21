// Pure. A reasoning model's thinking split from its answer (vLLM's --reasoning-parser): the text
// between <think> and </think> becomes `reasoning_content`, the rest `content`.
//   qwen3        the output may open with <think>: thinking until </think>; an output that does
//                not open with it (enable_thinking: false puts the empty pair in the prompt) is
//                all answer.
//   deepseek_r1  the template opens <think> in the prompt: the output is thinking until
//                </think> (a leading <think> of its own is dropped).
// The newlines after </think> are dropped. A streamed answer is split as it comes, holding back
// only text that may be the start of a tag, and ends exactly as the whole answer splits; a text
// cut off before </think> is all thinking.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace conveyor::transport {

enum class reasoning_parser { none, qwen3, deepseek_r1 };

/// "qwen3", "deepseek_r1" or "" (none); nullopt for any other name.
std::optional<reasoning_parser> parse_reasoning_parser(std::string_view name);

/// Thinking and answer text (a delta of each, or the whole of each).
struct reasoning_split {
  std::string reasoning;
  std::string content;
};

class reasoning_stream {
public:
  explicit reasoning_stream(reasoning_parser p);
  /// The next text delta; what of it can be told apart yet.
  reasoning_split feed(std::string_view delta);
  /// The end of the text: what was held back.
  reasoning_split finish();

private:
  enum class state { opening, thinking, answer_start, answer };
  reasoning_parser parser_;
  state state_;
  std::string held_;
};

/// A whole text split (feed, then finish).
reasoning_split split_reasoning(reasoning_parser p, std::string_view text);

} // namespace conveyor::transport
