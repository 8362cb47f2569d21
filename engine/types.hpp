// Pure. The scalar ids every layer of conveyor shares. Standard library only.
#pragma once

#include <cstdint>

namespace conveyor {

/// A vocabulary index.
using token_id = int32_t;
/// A scheduler-side sequence (one per accepted job).
using seq_id = uint64_t;
/// An index into the KV-cache block pool.
using block_id = int32_t;

} // namespace conveyor
