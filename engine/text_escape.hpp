// Pure. Text with some characters replaced by escape sequences: the one loop behind every format
// that needs it (Prometheus label values in /metrics, text in the benchmark's SVG charts).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace conveyor {

struct char_escape {
  char c;
  std::string_view with;
};

inline std::string escape_chars(std::string_view text, std::initializer_list<char_escape> table) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const char_escape* e = nullptr;
    for (const auto& t : table)
      if (t.c == c) e = &t;
    if (e) out += e->with;
    else out += c;
  }
  return out;
}

} // namespace conveyor
