// UTF-8 helpers and the GPT-2 byte<->unicode map (model-format.md §5.3) used by the byte-level BPE,
// and SentencePiece's U+2581 space.
// Pure functions, no tables outside this file. Invalid UTF-8 is never an error here: callers pick
// the policy (sanitize to U+FFFD before the regex split; pass through when streaming out).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace conveyor::model {

/// Returned by next_codepoint for a byte that does not start a valid UTF-8 sequence.
inline constexpr uint32_t invalid_codepoint = 0xFFFFFFFFu;

/// Decodes the strict-UTF-8 code point at `pos` and advances `pos` past it. On an invalid or
/// truncated sequence returns invalid_codepoint and advances by one byte.
uint32_t next_codepoint(std::string_view s, size_t& pos);

/// Appends the UTF-8 encoding of `cpt` (must be <= 0x10FFFF).
void append_utf8(std::string& out, uint32_t cpt);

/// Copy of `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD
/// (one replacement per byte, as llama.cpp's unicode_cpts_from_utf8 does for truncated
/// sequences and stray continuation bytes).
std::string sanitize_utf8(std::string_view s);
/// True when `s` is entirely strict UTF-8 (no overlongs, surrogates or code points > 0x10FFFF).
bool is_valid_utf8(std::string_view s);

/// Length of the longest prefix of `s` that does not end inside a sequence which is still a
/// valid, incomplete UTF-8 prefix (at most the last 3 bytes are held back). Invalid bytes count
/// as complete: they are never held.
size_t utf8_complete_prefix(std::string_view s);

/// GPT-2 bytes_to_unicode: the UTF-8 text of the code point that stands for byte `b`.
std::string_view byte_to_unicode(uint8_t b);

/// Byte-encodes raw bytes: each byte becomes its byte_to_unicode character.
void append_byte_encoded(std::string& out, std::string_view raw);

/// Inverse map: the byte for code point `cpt`, or -1 when `cpt` stands for no byte.
int unicode_to_byte(uint32_t cpt);

/// SentencePiece's space: `text` with every U+2581 (▁) replaced by ' '.
std::string spm_unescape_spaces(std::string_view text);

} // namespace conveyor::model
