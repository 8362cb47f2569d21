#include "transport/reasoning.hpp"

#include <algorithm>

namespace conveyor::transport {
namespace {

constexpr std::string_view open_tag = "<think>";
constexpr std::string_view close_tag = "</think>";

// The length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

} // namespace

std::optional<reasoning_parser> parse_reasoning_parser(std::string_view name) {
  if (name.empty() || name == "none") return reasoning_parser::none;
  if (name == "qwen3") return reasoning_parser::qwen3;
  if (name == "deepseek_r1") return reasoning_parser::deepseek_r1;
  return std::nullopt;
}

reasoning_stream::reasoning_stream(reasoning_parser p)
    : parser_(p), state_(p == reasoning_parser::none ? state::answer : state::opening) {}

reasoning_split reasoning_stream::feed(std::string_view delta) {
  reasoning_split out;
  held_.append(delta);
  for (bool again = true; again;) {
    again = false;
    switch (state_) {
      case state::opening:  // does the text open with <think>?
        if (held_.size() < open_tag.size() && open_tag.substr(0, held_.size()) == held_) return out;  // can't tell yet
        if (held_.compare(0, open_tag.size(), open_tag) == 0) {
          held_.erase(0, open_tag.size());
          state_ = state::thinking;
        } else {
          state_ = parser_ == reasoning_parser::qwen3 ? state::answer : state::thinking;
        }
        again = true;
        break;
      case state::thinking:
        if (const size_t at = held_.find(close_tag); at != std::string::npos) {
          out.reasoning += held_.substr(0, at);
          held_.erase(0, at + close_tag.size());
          state_ = state::answer_start;
          again = true;
        } else {
          const size_t keep = partial_tag(held_, close_tag);
          out.reasoning += held_.substr(0, held_.size() - keep);
          held_.erase(0, held_.size() - keep);
        }
        break;
      case state::answer_start:  // the newlines after </think> are dropped
        held_.erase(0, held_.find_first_not_of('\n') == std::string::npos ? held_.size() : held_.find_first_not_of('\n'));
        if (held_.empty()) return out;
        state_ = state::answer;
        again = true;
        break;
      case state::answer:
        out.content += held_;
        held_.clear();
        break;
    }
  }
  return out;
}

reasoning_split reasoning_stream::finish() {
  reasoning_split out;
  if (state_ == state::opening) {  // a text shorter than <think> and a prefix of it
    (parser_ == reasoning_parser::qwen3 ? out.content : out.reasoning) = held_;
  } else if (state_ == state::thinking) {
    out.reasoning = held_;
  } else if (state_ == state::answer) {
    out.content = held_;
  }
  held_.clear();
  return out;
}

reasoning_split split_reasoning(reasoning_parser p, std::string_view text) {
  reasoning_stream s(p);
  reasoning_split a = s.feed(text), b = s.finish();
  return {a.reasoning + b.reasoning, a.content + b.content};
}

} // namespace conveyor::transport
