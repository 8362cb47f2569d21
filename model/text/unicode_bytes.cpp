// UTF-8 decoding/encoding and the GPT-2 byte<->unicode map for the byte-level BPE tokenizer.
// The map: printable Latin-1 bytes (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) stand for themselves; the
// other 68 bytes, in ascending order, become U+0100 + n. Built once into constexpr-free statics.
#include "model/text/unicode_bytes.hpp"

#include <array>

namespace conveyor::model {
namespace {

bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/// Number of bytes of the sequence led by `c` and the allowed range of its second byte;
/// 0 when `c` cannot start a sequence.
struct lead_info {
  int len;
  unsigned char lo, hi;
};

lead_info lead(unsigned char c) {
  if (c < 0x80) return {1, 0, 0};
  if (c < 0xC2) return {0, 0, 0};
  if (c < 0xE0) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c < 0xF0) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c < 0xF4) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

struct byte_map {
  std::array<std::string, 256> to_text;
  std::array<int16_t, 0x144> from_cpt{};  // every mapped code point is < U+0144
  byte_map() {
    from_cpt.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cpt = printable ? uint32_t(b) : uint32_t(0x100 + n++);
      append_utf8(to_text[b], cpt);
      from_cpt[cpt] = int16_t(b);
    }
  }
};

const byte_map& the_map() {
  static const byte_map m;
  return m;
}

} // namespace

uint32_t next_codepoint(std::string_view s, size_t& pos) {
  const auto c0 = static_cast<unsigned char>(s[pos]);
  const lead_info li = lead(c0);
  if (li.len == 1) {
    ++pos;
    return c0;
  }
  if (li.len == 0 || pos + li.len > s.size()) {
    ++pos;
    return invalid_codepoint;
  }
  const auto c1 = static_cast<unsigned char>(s[pos + 1]);
  if (c1 < li.lo || c1 > li.hi) {
    ++pos;
    return invalid_codepoint;
  }
  uint32_t cpt = c0 & (0xFF >> (li.len + 1));
  for (int i = 1; i < li.len; ++i) {
    const auto c = static_cast<unsigned char>(s[pos + i]);
    if (!is_cont(c)) {
      ++pos;
      return invalid_codepoint;
    }
    cpt = (cpt << 6) | (c & 0x3F);
  }
  pos += li.len;
  return cpt;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt < 0x80) {
    out += char(cpt);
  } else if (cpt < 0x800) {
    out += char(0xC0 | (cpt >> 6));
    out += char(0x80 | (cpt & 0x3F));
  } else if (cpt < 0x10000) {
    out += char(0xE0 | (cpt >> 12));
    out += char(0x80 | ((cpt >> 6) & 0x3F));
    out += char(0x80 | (cpt & 0x3F));
  } else {
    out += char(0xF0 | (cpt >> 18));
    out += char(0x80 | ((cpt >> 12) & 0x3F));
    out += char(0x80 | ((cpt >> 6) & 0x3F));
    out += char(0x80 | (cpt & 0x3F));
  }
}

bool is_valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    if (next_codepoint(s, pos) == invalid_codepoint) return false;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t cpt = next_codepoint(s, pos);
    if (cpt == invalid_codepoint) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(s.substr(start, pos - start));
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  const size_t n = s.size();
  // A held-back tail is at most 3 bytes: find the lead byte of the last sequence.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const auto c0 = static_cast<unsigned char>(s[start]);
    if (is_cont(c0)) continue;
    const lead_info li = lead(c0);
    if (li.len <= int(back)) return n;  // ASCII, invalid lead, or a complete sequence
    // Incomplete: hold it only while every byte seen so far is a valid continuation.
    if (back >= 2) {
      const auto c1 = static_cast<unsigned char>(s[start + 1]);
      if (c1 < li.lo || c1 > li.hi) return n;
      for (size_t i = 2; i < back; ++i) {
        if (!is_cont(static_cast<unsigned char>(s[start + i]))) return n;
      }
    }
    return start;
  }
  return n;
}

std::string_view byte_to_unicode(uint8_t b) { return the_map().to_text[b]; }

void append_byte_encoded(std::string& out, std::string_view raw) {
  const byte_map& m = the_map();
  for (char c : raw) out += m.to_text[static_cast<unsigned char>(c)];
}

int unicode_to_byte(uint32_t cpt) {
  const byte_map& m = the_map();
  return cpt < m.from_cpt.size() ? m.from_cpt[cpt] : -1;
}

std::string spm_unescape_spaces(std::string_view text) {
  constexpr std::string_view space = "\xE2\x96\x81";
  std::string out;
  size_t pos = 0;
  for (size_t at; (at = text.find(space, pos)) != std::string_view::npos; pos = at + space.size())
    out.append(text, pos, at - pos).append(" ");
  return out.append(text, pos);
}

} // namespace conveyor::model
