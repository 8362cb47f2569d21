// A job's output text as it grows token by token: incremental detokenization that never splits
// a UTF-8 character and is always valid UTF-8 (invalid bytes, and the bytes of a character cut
// off by the end of generation, become U+FFFD), stop strings (the text ends just before the first one found), and
// hold-back of a tail that could still become a stop string, so no client ever sees one.
#pragma once

#include <string>
#include <vector>

#include "model/text/tokenizer.hpp"

namespace conveyor::model {

class text_stream {
public:
  text_stream(const tokenizer& tok, std::vector<std::string> stop_strings);

  /// Appends one token. Returns true when a stop string appeared: the text is cut right before
  /// it and later tokens are ignored.
  bool push(token_id id);
  /// End of generation: releases bytes held for an incomplete character, each as U+FFFD (and
  /// checks them against the stop strings too).
  void finish();
  bool stopped() const { return stopped_; }

  /// The text not yet taken, minus a tail that is a prefix of some stop string (unless `final`
  /// or stopped: then everything). Never ends inside a UTF-8 character.
  std::string take_visible(bool final);
  /// All text so far (cut at the stop string when one matched).
  const std::string& full_text() const { return text_; }

private:
  void append(const std::string& raw);

  stream_decoder detok_;
  std::vector<std::string> stops_;
  std::string text_;
  size_t taken_ = 0;
  bool stopped_ = false;
};

} // namespace conveyor::model
