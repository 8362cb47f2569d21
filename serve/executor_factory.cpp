#include "serve/executor_factory.hpp"

#include "engine/enum_names.hpp"
#include "engine/null_executor.hpp"
#include "engine/sim/sim_executor.hpp"
#include "gpu/factory.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/formats/llama_config.hpp"

namespace conveyor::serve {

namespace {

/// The sizing settings every weight-running executor takes under the same names.
template <class Options>
void copy_sizing(Options& o, const executor_settings& s) {
  o.block_size = s.block_size;
  o.num_kv_blocks = s.num_kv_blocks;
  o.max_model_len = s.max_model_len;
}

constexpr auto device_names = make_enum_names<device_kind>(
    {{device_kind::cpu, "cpu"}, {device_kind::cuda, "cuda"}, {device_kind::null, "null"}, {device_kind::sim, "sim"}}, "cpu");

} // namespace

std::optional<device_kind> parse_device(std::string_view name) { return device_names.parse(name); }
const char* to_string(device_kind d) { return device_names.name(d); }

bool runs_weights(device_kind d) { return d == device_kind::cpu || d == device_kind::cuda; }

made_executor make_executor(device_kind d, const model::gguf_file& file, const model::tokenizer& tok, const executor_settings& s) {
  made_executor m;
  // The null and sim executors answer with a fixed token; small vocabularies get a small one.
  const int32_t fixed_token = tok.vocab_size() > 1000 ? 1000 : 3;
  switch (d) {
    case device_kind::sim: {
      // An H100 holds ~430k tokens of Llama-3-8B KV (bf16, 128 KiB each) at 0.9 utilization.
      executor_info info{s.num_kv_blocks > 0 ? s.num_kv_blocks : 27000, s.block_size, tok.vocab_size(), 1 << 20, "sim"};
      const auto cost = sim::cost_model_preset(s.sim_cost_model);
      if (!cost) throw device_unavailable("no sim cost model '" + s.sim_cost_model + "'");
      m.ex = std::make_shared<sim::sim_executor>(info, fixed_token, *cost);
      m.description = "tokenizer of " + file.path() + " (sim executor, " + s.sim_cost_model + " step times)";
      return m;
    }
    case device_kind::null: {
      executor_info info{s.num_kv_blocks > 0 ? s.num_kv_blocks : 4096, s.block_size, tok.vocab_size(), 1 << 20, "null"};
      m.ex = std::make_shared<null_executor>(info, fixed_token);
      m.description = "tokenizer of " + file.path() + " (null executor)";
      return m;
    }
    case device_kind::cuda: {
      std::string why;
      if (!gpu::cuda_device_available(&why)) throw device_unavailable("--device cuda: " + why);
      gpu::cuda_executor_options go;
      copy_sizing(go, s);
      go.gpu_memory_utilization = s.gpu_memory_utilization;
      go.max_num_batched_tokens = s.max_num_batched_tokens;
      go.max_num_seqs = s.max_num_seqs;
      go.max_drafts = s.max_drafts;
      m.ex = gpu::make_cuda_executor(file, go);
      const auto cfg = model::llama_config::from_gguf(file);
      m.description = cfg.name + " (" + cfg.summary() + "; bf16 on " + gpu::cuda_device_description(0) + ")";
      return m;
    }
    case device_kind::cpu: break;
  }
  model::cpu_executor_options eo;
  copy_sizing(eo, s);
  eo.kv_cache_bytes = s.kv_cache_bytes;
  eo.threads = s.threads;
  eo.math = model::parse_cpu_math(s.cpu_math);
  auto cpu = std::make_shared<model::cpu_executor>(file, eo);
  m.description = cpu->config().name + " (" + cpu->config().summary() + "; " + cpu->compute_summary() + ")";
  m.kv_sizing = cpu->kv_sizing();
  m.ex = cpu;
  return m;
}

} // namespace conveyor::serve
