// llama.cpp's GBNF grammars in XGrammar's EBNF dialect. The two are one notation but for empty
// alternatives: GBNF writes `space ::= | " "` (and llama.cpp's tool-call grammars do), XGrammar
// wants the empty string spelled `""`. Literals, character classes and comments are copied as
// they are.
#include "model/text/grammar.hpp"

namespace conveyor::model {

std::string gbnf_to_xgrammar(const std::string& g) {
  std::string out;
  out.reserve(g.size() + 16);
  bool open = false;  // after `::=`, `|` or `(`: an alternative starts, nothing of it seen yet
  auto close_empty = [&] {
    if (open) out += "\"\" ";
    open = false;
  };
  for (size_t i = 0; i < g.size(); ++i) {
    const char c = g[i];
    if (c == '"' || c == '[') {  // a literal or a class, escapes included
      const char end = c == '"' ? '"' : ']';
      const size_t start = i;
      for (++i; i < g.size() && g[i] != end; ++i)
        if (g[i] == '\\') ++i;
      out.append(g, start, i - start + 1);
      open = false;
      continue;
    }
    if (c == '#') {  // a comment, to the end of the line
      const size_t eol = g.find('\n', i);
      out.append(g, i, (eol == std::string::npos ? g.size() : eol) - i);
      i = (eol == std::string::npos ? g.size() : eol) - 1;
      continue;
    }
    if (c == '|' || c == ')') {
      close_empty();
      out += c;
      open = c == '|';
      continue;
    }
    if (c == '\n') {
      // A rule ends at a newline unless the next line continues it (starts with blank or `|`).
      const size_t next = g.find_first_not_of(" \t", i + 1);
      if (next == std::string::npos || (next == i + 1 && g[next] != '|')) close_empty();
      out += c;
      continue;
    }
    if (c == '(') {
      out += c;
      open = true;
      continue;
    }
    if (c == ':' && g.compare(i, 3, "::=") == 0) {
      out += "::=";
      i += 2;
      open = true;
      continue;
    }
    if (c != ' ' && c != '\t' && c != '\r') open = false;
    out += c;
  }
  close_empty();
  return out;
}

} // namespace conveyor::model
