// Pure interface. A constraint on what a sequence may generate (structured outputs: a JSON
// schema, a regex, a grammar). The engine asks it for the tokens allowed next when it plans a
// step that samples the sequence, and tells it each token drawn; the grammar engine behind it
// lives outside engine/ (model/text/grammar.cpp, XGrammar). Used by one thread at a time: the
// scheduler's between steps, the executor's during a step that samples the sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/types.hpp"

namespace conveyor {

class token_constraint {
public:
  virtual ~token_constraint() = default;
  /// The tokens allowed next as a bitmask: `mask` is resized to ceil(vocab / 32) words and bit
  /// t % 32 of word t / 32 is set when token t is allowed.
  virtual void fill_mask(std::vector<uint32_t>& mask) = 0;
  /// Advances past the drawn token; false when the constraint refuses it (its state unchanged).
  virtual bool accept(token_id token) = 0;
  /// The constraint is complete and has taken its end token: nothing may follow.
  virtual bool terminated() const = 0;
  /// Undoes the last `n` accepted tokens (speculative decoding: drafts are tried on the grammar,
  /// then taken back). 0 <= n <= the tokens accepted so far.
  virtual void rollback(int32_t n) = 0;
};

} // namespace conveyor
