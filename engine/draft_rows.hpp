// Pure. How an executor samples the rows of a drafted sequence (scheduled_seq::num_drafts): row
// i draws as if drafts 1..i stood. Shared by the CPU and CUDA executors so both follow one rule.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/step.hpp"

namespace conveyor {

/// The grammar masks of `s`'s 1 + num_drafts sampled rows (s.constraint set): row i's is the
/// constraint's after drafts 1..i, accepted one by one and then rolled back, so the constraint
/// ends as it began. Rows past a draft the constraint refuses get an empty mask: they cannot
/// stand, since the row before them could not draw that draft. masks.size() == 1 + num_drafts.
void fill_drafted_masks(const scheduled_seq& s, std::span<std::vector<uint32_t>> masks);

/// The logit edits row i (0 .. num_drafts) of `s` draws with: the plan's, and for penalties the
/// drafts 1..i counted as output too (written to `scratch`). Returns the edits to use.
std::span<const logit_edit> drafted_row_edits(const scheduled_seq& s, int32_t i, std::vector<logit_edit>& scratch);

} // namespace conveyor
