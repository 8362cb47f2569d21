#include "engine/draft_rows.hpp"

namespace conveyor {

void fill_drafted_masks(const scheduled_seq& s, std::span<std::vector<uint32_t>> masks) {
  token_constraint& g = *s.constraint;
  const size_t first_draft = s.tokens.size() - static_cast<size_t>(s.num_drafts);
  int32_t taken = 0;
  for (int32_t i = 0; i <= s.num_drafts; ++i) {
    std::vector<uint32_t>& mask = masks[static_cast<size_t>(i)];
    if (i > taken) {
      mask.clear();
      continue;
    }
    g.fill_mask(mask);
    if (i < s.num_drafts && g.accept(s.tokens[first_draft + static_cast<size_t>(i)])) ++taken;
  }
  g.rollback(taken);
}

std::span<const logit_edit> drafted_row_edits(const scheduled_seq& s, int32_t i, std::vector<logit_edit>& scratch) {
  if (i == 0 || !s.sampling.penalized()) return s.logit_edits;
  scratch.assign(s.logit_edits.begin(), s.logit_edits.end());
  const size_t first_draft = s.tokens.size() - static_cast<size_t>(s.num_drafts);
  extend_logit_edits(s.sampling, std::span<const token_id>(s.tokens).subspan(first_draft, static_cast<size_t>(i)), scratch);
  return scratch;
}

} // namespace conveyor
