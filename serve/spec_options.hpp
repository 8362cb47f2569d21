// --speculative-config: vLLM's JSON shape for speculative decoding, read into the engine's
// speculative_config (engine/speculation.hpp).
//
//   --speculative-config '{"method": "ngram", "num_speculative_tokens": 8,
//                          "prompt_lookup_min": 1, "prompt_lookup_max": 5}'   (the default)
//   --speculative-config '{"method": "none"}'          (off)
//
// In a --config TOML file: speculative_config = '{...}' or a [speculative_config] table with the
// same keys.
#pragma once

#include <string>

#include "engine/speculation.hpp"

namespace conveyor::serve {

/// The server's setting when --speculative-config is not given.
speculative_config default_speculative_config();

/// Parses `text` over `out` (keys absent keep their value). Returns "" or an error that names
/// the key and the fix: not a JSON object, an unknown key or method, a value of the wrong type
/// or out of range, a draft model (not built yet).
std::string parse_speculative_config(const std::string& text, speculative_config& out);

/// "ngram, up to 4 drafted tokens a step (lookup 2..4 tokens)" or "off".
std::string describe(const speculative_config& c);

} // namespace conveyor::serve
