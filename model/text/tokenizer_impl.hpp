// The state behind conveyor::model::tokenizer, shared by tokenizer.cpp (construction, metadata),
// tokenizer_encode.cpp (text -> ids) and detokenize.cpp (ids -> text). Internal to model/.
// Everything here is immutable after construction, so one tokenizer serves many threads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/text/bpe.hpp"
#include "model/text/pretokenize.hpp"
#include "model/text/spm.hpp"
#include "model/text/tokenizer.hpp"

namespace conveyor::model {

struct tokenizer::impl {
  /// Validates `v` and builds the indexes; throws tokenizer_error.
  explicit impl(vocab_data v);

  vocab_data vocab;
  pre_config pre;               ///< SentencePiece: pre_kind::none, no clean_spaces
  pretokenizer pretok;
  std::optional<bpe_model> bpe;  ///< byte-level BPE only
  std::optional<spm_model> spm;  ///< SentencePiece only (tokenizer.ggml.model "llama")
  std::vector<token_kind> kinds;     ///< per id (end/FIM texts made control, as llama.cpp does)
  std::vector<std::string> pieces;   ///< per id: decoded bytes (normal/byte) or literal text
  std::vector<token_id> specials;    ///< control, user_defined and unknown ids, longest text first
  std::vector<token_id> eog;         ///< sorted, unique
};

} // namespace conveyor::model
