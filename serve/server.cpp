#include "serve/server.hpp"

#include "model/cpu/draft_model.hpp"
#include "model/formats/llama_config.hpp"
#include "model/formats/weight_check.hpp"
#include "model/model_path.hpp"

namespace conveyor::serve {

sizing_verdict check_sizing(const serve_options& o, const runtime_options& ro, const executor_info& info) {
  sizing_verdict v;
  if (ro.sched.speculative.enabled() && !info.verifies_drafts) {
    v.error = "speculative_config: the " + info.device + " executor does not verify drafts; serve with --device cpu, or leave " +
              "--speculative-config out (or set '{\"method\": \"none\"}')";
    return v;
  }
  if (auto err = validate_engine_config(ro.sched, ro.cache, info.num_kv_blocks); !err.empty()) {
    v.error = err;
    return v;
  }
  // The executor holds positions up to its own limit (the model's context, or less): a longer
  // max_model_len would admit jobs that fail the executor mid-run.
  if (o.max_model_len > 0 && info.max_model_len > 0 && o.max_model_len > info.max_model_len) {
    v.error = "max_model_len " + std::to_string(o.max_model_len) + " is more than this model's context of " +
              std::to_string(info.max_model_len) + " tokens; HINT: set --max-model-len " + std::to_string(info.max_model_len) +
              " or less (0: the model's context)";
    return v;
  }
  constexpr int32_t min_useful = 64;
  const int32_t derived = ro.sched.max_model_len, pool = info.num_kv_blocks * info.block_size;
  const bool weights = runs_weights(parse_device(o.device).value_or(device_kind::cpu));
  if (o.max_model_len == 0 && derived < info.max_model_len) {
    if (derived < min_useful) {
      v.error = "the KV pool holds " + std::to_string(pool) + " tokens (" + std::to_string(info.num_kv_blocks) + " blocks x " +
                std::to_string(info.block_size) + "), so max_model_len would be " + std::to_string(derived) +
                " tokens (a quarter of it): too small to serve. Give the pool more blocks (--num-kv-blocks, --kv-cache-bytes) or "
                "set --max-model-len (at most the pool's size)";
      return v;
    }
    if (weights)
      v.warnings.push_back("max_model_len is " + std::to_string(derived) + " tokens, a quarter of the KV pool (" + std::to_string(pool) +
                           " tokens), below the model's context of " + std::to_string(info.max_model_len) +
                           ": longer jobs are refused (too_long); raise --kv-cache-bytes / --num-kv-blocks or set --max-model-len");
  }
  if (o.max_model_len > 0 && o.max_model_len > default_max_model_len(o.max_model_len, pool))
    v.warnings.push_back("max_model_len " + std::to_string(o.max_model_len) + " is more than a quarter of the KV pool (" +
                         std::to_string(pool) + " tokens): one long job can hold most of the pool while others wait; raise "
                         "kv_cache_bytes or lower max_model_len");
  return v;
}

// speculative_config.model: opened, checked against the model's vocabulary token by token, and
// run by its own CPU executor with a KV pool of the model's size plus a block per sequence.
std::shared_ptr<draft_proposer> load_draft_model(const std::string& name, const model::tokenizer& tok, const executor_info& info,
                                                 const serve_options& o) {
  const std::string where = "speculative_config.model '" + name + "': ";
  auto file = std::make_unique<model::gguf_file>(model::open_model(model::resolve_model(name)));
  (void)model::llama_config::from_gguf(*file);
  model::check_weights_finite(*file);
  const model::tokenizer draft_tok = model::tokenizer::from_gguf(*file);
  if (draft_tok.vocab_size() != tok.vocab_size())
    throw startup_error(where + "its tokenizer has " + std::to_string(draft_tok.vocab_size()) + " tokens, the model's " +
                        std::to_string(tok.vocab_size()) + "; a draft model must share the model's vocabulary");
  for (int32_t i = 0; i < tok.vocab_size(); ++i)
    if (draft_tok.piece(i, true) != tok.piece(i, true))
      throw startup_error(where + "its token " + std::to_string(i) + " is '" + draft_tok.piece(i, true) + "', the model's '" +
                          tok.piece(i, true) + "'; a draft model must share the model's vocabulary");
  model::draft_model_options d;
  d.vocab_size = info.vocab_size;
  d.block_size = info.block_size;
  d.num_kv_blocks = info.num_kv_blocks + o.max_num_seqs * (1 + 16 / info.block_size);  // + room for 16 drafts each
  d.threads = o.threads;
  d.math = model::parse_cpu_math(o.cpu_math);
  try {
    return std::make_shared<model::cpu_draft_proposer>(std::move(file), d);
  } catch (const model::model_error& e) {
    throw startup_error(where + e.what());
  }
}

std::unique_ptr<server> start_server(const serve_options& o) {
  if (auto err = o.validate(); !err.empty()) throw startup_error(err);
  auto s = std::make_unique<server>();
  s->keys = std::make_shared<transport::api_keys>(o.api_key, o.api_key_file);
  if (auto err = o.check_http_security(s->keys->enabled(), s->warnings); !err.empty()) throw startup_error(err);
  // A bad journal fails here too, before the model loads.
  if (const std::string path = o.journal_file(); !path.empty())
    s->journal = std::make_shared<journal::journal>(path, *journal::sync_mode_from_string(o.journal_sync));
  // Every endpoint is bound (NATS connected) before the model loads: a taken port, an unreachable
  // NATS or a bad CURVE key file fails start-up at once.
  const std::string model_path = model::resolve_model(o.model);
  runtime_options bind_opts = o.runtime(executor_info{}, model_path);
  bind_opts.api_keys = s->keys;
  auto endpoints = std::make_unique<bound_endpoints>(bind_opts);
  s->file = std::make_unique<model::gguf_file>(model::open_model(model_path));
  (void)model::llama_config::from_gguf(*s->file);  // an unsupported model fails here, before the tokenizer
  const device_kind device = *parse_device(o.device);
  if (runs_weights(device)) model::check_weights_finite(*s->file);  // NaN or Inf weights: refused, naming the tensor
  s->tok = std::make_unique<model::tokenizer>(model::tokenizer::from_gguf(*s->file));
  made_executor made = make_executor(device, *s->file, *s->tok, o.executor());
  s->model_desc = std::move(made.description);
  s->kv_sizing = std::move(made.kv_sizing);
  s->info = made.ex->info();
  s->options = o.runtime(s->info, s->file->path());
  s->options.journal = s->journal;
  s->options.api_keys = s->keys;
  if (s->options.sched.speculative.method == spec_method::draft_model && s->info.verifies_drafts)
    s->options.sched.speculative.draft = load_draft_model(s->options.sched.speculative.model, *s->tok, s->info, o);
  sizing_verdict v = check_sizing(o, s->options, s->info);
  if (!v.error.empty()) throw startup_error(v.error);
  s->warnings.insert(s->warnings.end(), v.warnings.begin(), v.warnings.end());
  s->rt = std::make_unique<runtime>(s->options, std::move(endpoints), std::move(made.ex), *s->tok);
  return s;
}

} // namespace conveyor::serve
