// One executor factory keyed by the device, for `conveyor serve` and `conveyor generate`: the
// CPU executor (model/cpu), the CUDA executor (gpu/, the plugin), the null executor (a fixed
// token, no arithmetic: the runtime's own overhead) and the sim executor (null, with step times
// from a cost model).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/executor.hpp"
#include "model/formats/gguf.hpp"
#include "model/text/tokenizer.hpp"

namespace conveyor::serve {

enum class device_kind { cpu, cuda, null, sim };

/// "cpu", "cuda", "null", "sim", or nullopt.
std::optional<device_kind> parse_device(std::string_view name);
const char* to_string(device_kind d);
/// Whether the device computes with the model's weights (cpu, cuda): their values are checked
/// at load, and a short max_model_len is worth a warning.
bool runs_weights(device_kind d);

/// The device asked for cannot be used here (no CUDA device, a build without CUDA); what()
/// says why and what to do. The command exits 2.
struct device_unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What sizes an executor (each device reads the settings it has).
struct executor_settings {
  int32_t block_size = 16;
  int64_t kv_cache_bytes = 0;  ///< cpu: 0 sized from the model and the machine
  int32_t num_kv_blocks = 0;   ///< > 0: exactly this many (overrides kv_cache_bytes)
  int32_t max_model_len = 0;   ///< 0: the model's context
  int32_t threads = 0;         ///< cpu: compute threads, 0 every core
  std::string cpu_math = "fast";
  double gpu_memory_utilization = 0.90;
  int32_t max_num_batched_tokens = 2048;  ///< cuda: sizes the activation buffers
  int32_t max_num_seqs = 256;             ///< cuda: sizes the sampling buffers and graph buckets
  int32_t max_drafts = 0;  ///< cuda: > 0 verifies up to this many drafts a step (batch-invariant; an explicit --speculative-config)
  std::string sim_cost_model = "h100-llama8b";
};

struct made_executor {
  std::shared_ptr<executor> ex;
  /// For the start-up line: the model and how it runs.
  std::string description;
  /// cpu: how the KV cache was sized ("" elsewhere).
  std::string kv_sizing;
};

/// Builds the executor for `d` on `file` (its tokenizer `tok` sizes the null and sim vocabularies).
/// Throws device_unavailable, model::model_error, or std::runtime_error (a CUDA failure).
made_executor make_executor(device_kind d, const model::gguf_file& file, const model::tokenizer& tok, const executor_settings& s);

} // namespace conveyor::serve
