// Pure. One table per enum of each value with the one name it prints as and parses from, so
// to_string(E) and parse_E(text) cannot disagree and no enum repeats its names in two places.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace conveyor {

template <class E, std::size_t N>
struct enum_names {
  std::array<std::pair<E, const char*>, N> entries{};
  /// What name() answers for a value outside the table (a cast-in integer).
  const char* fallback = "?";

  constexpr const char* name(E value) const {
    for (const auto& [e, n] : entries)
      if (e == value) return n;
    return fallback;
  }

  constexpr std::optional<E> parse(std::string_view text) const {
    for (const auto& [e, n] : entries)
      if (text == n) return e;
    return std::nullopt;
  }
};

/// make_enum_names<E>({{E::a, "a"}, {E::b, "b"}}, fallback): the table, its size counted.
template <class E, std::size_t N>
constexpr enum_names<E, N> make_enum_names(const std::pair<E, const char*> (&entries)[N],
                                           const char* fallback = "?") {
  enum_names<E, N> t;
  for (std::size_t i = 0; i < N; ++i) t.entries[i] = entries[i];
  t.fallback = fallback;
  return t;
}

} // namespace conveyor
