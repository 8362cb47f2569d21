// `conveyor generate`: one completion streamed to stdout as it is produced; timings to stderr.
// Drives the CPU executor directly with single-sequence plans (prompt in chunks, then one
// token per step); the server drives the same executor through the scheduler.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include "model/text/chat_template.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"
#include "model/model_path.hpp"
#include "model/formats/weight_check.hpp"
#include "model/text/tokenizer.hpp"
#include "serve/executor_factory.hpp"
#include "tools/command.hpp"
#include "tools/commands.hpp"

namespace conveyor::tools {
namespace {

struct generate_opts {
  std::string model = "smollm2";
  std::string prompt;
  bool chat = false;
  int32_t max_tokens = 128;
  float temperature = 0.7f, top_p = 0.9f, min_p = 0.0f;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f, repetition_penalty = 1.0f;
  int32_t top_k = 0;
  int64_t seed = -1;
  bool ignore_eos = false;
  int32_t chunk = 512;
  std::string device = "cpu";
  double gpu_memory_utilization = 0.90;
  int32_t threads = 0;
  std::string cpu_math = "fast";
};

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

int run_generate(const generate_opts& o) {
  sampling_params sp;
  sp.temperature = o.temperature;
  sp.top_p = o.top_p;
  sp.top_k = o.top_k;
  sp.min_p = o.min_p;
  sp.presence_penalty = o.presence_penalty;
  sp.frequency_penalty = o.frequency_penalty;
  sp.repetition_penalty = o.repetition_penalty;
  sp.seed = o.seed >= 0 ? static_cast<uint64_t>(o.seed) : std::random_device{}();
  if (auto err = sp.validate(); !err.empty()) {
    std::cerr << "conveyor generate: " << err << "\n";
    return 2;
  }
  if (o.max_tokens < 1 || o.chunk < 1) {
    std::cerr << "conveyor generate: --max-tokens and --chunk must be >= 1\n";
    return 2;
  }
  const auto t_load = clock_type::now();
  auto file = model::open_model(model::resolve_model(o.model));
  (void)model::llama_config::from_gguf(file);  // an unsupported model fails here, before the tokenizer
  model::check_weights_finite(file);            // NaN or Inf weights: refused, naming the tensor
  auto tok = model::tokenizer::from_gguf(file);
  std::vector<token_id> prompt;
  if (o.chat) {
    std::vector<model::chat_message> msgs{{"user", o.prompt}};
    prompt = tok.encode(model::chat_template::for_model(tok).render(msgs), /*parse_special=*/true);
  } else {
    prompt = tok.encode(o.prompt, /*parse_special=*/false);
  }
  if (prompt.empty()) {
    std::cerr << "conveyor generate: the prompt is empty; pass --prompt \"...\"\n";
    return 2;
  }
  // One sequence: a KV pool of exactly its blocks.
  serve::executor_settings es;
  const int32_t total = static_cast<int32_t>(prompt.size()) + o.max_tokens;
  es.num_kv_blocks = (total + es.block_size - 1) / es.block_size;
  es.threads = o.threads;
  es.cpu_math = o.cpu_math;
  es.gpu_memory_utilization = o.gpu_memory_utilization;
  es.max_num_batched_tokens = o.chunk;
  es.max_num_seqs = 1;
  serve::made_executor made = serve::make_executor(*serve::parse_device(o.device), file, tok, es);
  std::shared_ptr<executor> ex_owner = std::move(made.ex);
  std::cerr << "conveyor: " << made.description << "\n";
  executor& ex = *ex_owner;
  if (total > ex.info().max_model_len) {
    std::cerr << "conveyor generate: prompt (" << prompt.size() << " tokens) + --max-tokens " << o.max_tokens
              << " exceeds the model's context of " << ex.info().max_model_len << " tokens\n";
    return 2;
  }
  std::cerr << "conveyor: " << model::llama_config::from_gguf(file).summary() << " on " << o.device << "; loaded in " << static_cast<int>(ms_since(t_load))
            << " ms; seed " << sp.seed << "\n";

  scheduled_seq seq;
  seq.id = 1;
  seq.sampling = sp;
  for (int32_t b = 0; b < es.num_kv_blocks; ++b) seq.block_table.push_back(b);
  model::stream_decoder detok(tok);
  const auto t0 = clock_type::now();
  double prompt_ms = 0;
  int32_t generated = 0;
  size_t done = 0;
  token_id next = 0;
  std::vector<token_id> output;  // what the penalties see (the scheduler's make_logit_edits, as a job)
  while (generated < o.max_tokens) {
    seq.num_computed_tokens = static_cast<int32_t>(done);
    seq.tokens.clear();
    if (done < prompt.size()) {
      const size_t n = std::min(prompt.size() - done, static_cast<size_t>(o.chunk));
      seq.tokens.assign(prompt.begin() + static_cast<std::ptrdiff_t>(done), prompt.begin() + static_cast<std::ptrdiff_t>(done + n));
    } else {
      seq.tokens.push_back(next);
    }
    done += seq.tokens.size();
    seq.sample = done >= prompt.size();
    if (seq.sample) make_logit_edits(sp, prompt, output, seq.logit_edits);
    step_plan plan;
    plan.seqs.push_back(seq);
    step_result r = ex.step(plan);
    if (!seq.sample) continue;
    if (generated == 0) prompt_ms = ms_since(t0);
    next = r.sampled.at(0).token;
    output.push_back(next);
    ++generated;
    if (!o.ignore_eos && tok.is_eog(next)) break;
    std::cout << detok.push(next) << std::flush;
  }
  std::cout << detok.flush() << "\n" << std::flush;
  const double decode_ms = ms_since(t0) - prompt_ms;
  std::fprintf(stderr, "prompt: %zu tokens in %.1f ms (%.1f tokens/s); decode: %d tokens in %.1f ms (%.1f tokens/s)\n",
               prompt.size(), prompt_ms, 1000.0 * static_cast<double>(prompt.size()) / prompt_ms, generated - 1, decode_ms,
               generated > 1 ? 1000.0 * (generated - 1) / decode_ms : 0.0);
  return 0;
}

} // namespace

void register_generate(CLI::App& app, int& exit_code) {
  auto [cmd, o] = add_command<generate_opts>(
      app, exit_code, "generate", "Stream one completion of a prompt to stdout (timings go to stderr)",
      [](const generate_opts& opts) { return run_reporting_errors("generate", error_sink::plain, [&] { return run_generate(opts); }); });
  cmd->add_option("--model,-m", o->model, "Model name (smollm2), GGUF file or Hugging Face folder")->capture_default_str();
  cmd->add_option("--prompt,-p", o->prompt, "Prompt text")->required();
  cmd->add_flag("--chat", o->chat, "Wrap the prompt as a user message in the model's chat template");
  cmd->add_option("--max-tokens,-n", o->max_tokens, "Tokens to generate at most")->capture_default_str();
  cmd->add_option("--temperature,-t", o->temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-p", o->top_p, "Nucleus sampling mass (1 = off)")->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  cmd->add_option("--min-p", o->min_p, "Drop tokens below min_p x the best probability (0 = off)")->capture_default_str();
  cmd->add_option("--presence-penalty", o->presence_penalty, "Subtracted once from tokens already in the output, [-2, 2]")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", o->frequency_penalty, "Subtracted per occurrence in the output, [-2, 2]")
      ->capture_default_str();
  cmd->add_option("--repetition-penalty", o->repetition_penalty, "Divides (multiplies if negative) logits of tokens already seen (1 = off)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Sampling seed (default: random, printed to stderr)");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep going past end-of-generation tokens");
  cmd->add_option("--chunk", o->chunk, "Prompt tokens per step (chunked prefill)")->capture_default_str();
  cmd->add_option("--threads", o->threads, "cpu: compute threads (0: every core)")->check(CLI::Range(0, 1024))->capture_default_str();
  cmd->add_option("--cpu-math", o->cpu_math, "cpu: fast (8-bit activations, integer dot products) | exact (f32)")
      ->check(CLI::IsMember({"fast", "exact"}))->capture_default_str();
  cmd->add_option("--device", o->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", o->gpu_memory_utilization, "cuda: fraction of GPU memory to use")
      ->check(CLI::Range(0.01, 1.0))->capture_default_str();
}

} // namespace conveyor::tools
