// llama.cpp's rules for the special tokens GGUF metadata does not always name (llama_vocab::impl::
// load): EOT, EOM and the six FIM tokens are found by their text when their key is absent, and the
// end-of-generation set is built from those, a list of known end texts, and eos. Internal to model/.
#pragma once

#include <vector>

#include "model/text/tokenizer.hpp"

namespace conveyor::model {

/// Returns the end-of-generation ids, sorted and unique:
///   fim_pad, fim_rep, fim_sep (key or text), every token whose text is a known end text
///   (<|im_end|>, <|endoftext|>, <|eot_id|>, <|eom_id|>, <|end_of_text|>, </s>, <|end|>, ...),
///   and eos, eot, eom.
/// As llama.cpp does, a token found by text (an end text, or an EOT/EOM/FIM text) that is not a
/// control token becomes one in `kinds` (so it is hidden by decode and only parse_special makes it).
/// Where several texts of one category exist, the lowest id wins (llama.cpp takes whichever its
/// hash map yields first).
std::vector<token_id> find_eog_ids(const vocab_data& v, std::vector<token_kind>& kinds);

} // namespace conveyor::model
