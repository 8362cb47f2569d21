// Pure interface. An executor owns a model and a KV-cache pool on one device and runs one
// fused forward step per plan. The scheduler owns the block ids; the executor owns the memory.
#pragma once

#include <cstdint>
#include <string>

#include "engine/step.hpp"

namespace conveyor {

/// What an executor tells the engine about itself, fixed at construction.
struct executor_info {
  /// Blocks in the KV-cache pool; block ids are 0 .. num_kv_blocks-1.
  int32_t num_kv_blocks = 0;
  /// Token slots per block.
  int32_t block_size = 16;
  int32_t vocab_size = 0;
  /// The longest sequence (prompt + output) the model supports.
  int32_t max_model_len = 0;
  /// "cpu" or "cuda".
  std::string device;
};

class executor {
public:
  virtual ~executor() = default;
  virtual const executor_info& info() const = 0;
  /// Runs one fused step over every token of the plan and samples where asked.
  /// Throws std::runtime_error on a device failure (engine-fatal: the caller fails every job).
  virtual step_result step(const step_plan& plan) = 0;
};

} // namespace conveyor
