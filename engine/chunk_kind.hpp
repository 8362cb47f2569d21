// Pure. What a sequence's share of a step is, as the iteration trace names it (actors/
// trace_writer writes it, tools/trace reads it): a prompt chunk, or a decode token.
#pragma once

#include "engine/enum_names.hpp"

namespace conveyor {

enum class chunk_kind { prompt, decode };

inline constexpr auto chunk_kind_names =
    make_enum_names<chunk_kind>({{chunk_kind::prompt, "prompt"}, {chunk_kind::decode, "decode"}});

} // namespace conveyor
