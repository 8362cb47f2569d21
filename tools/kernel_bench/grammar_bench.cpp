// grammar_bench: what structured outputs cost per step. With the model's real vocabulary
// (SmolLM2 by default), 5 JSON schemas (the structured-output test's) and B constrained
// sequences (32 by default), each step: fill every sequence's token mask (XGrammar), draw a token
// from random logits through the masked sampler, advance the grammar; a sequence whose grammar
// completes starts over on the next schema. Times: compile (cold, cached), the masks per step,
// the masked draw against an unmasked one, accept. Prints a table; --json FILE writes it.
//   grammar-bench [--model PATH] [--batch 32] [--steps 2000] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/cpu/sampler.hpp"
#include "model/formats/gguf.hpp"
#include "model/model_path.hpp"
#include "model/text/grammar.hpp"

using namespace conveyor;
using namespace conveyor::model;
using clk = std::chrono::steady_clock;

namespace {

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":24},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"]})",
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":20},"country":{"type":"string","enum":["France","Japan","Peru","Kenya"]},"population_millions":{"type":"number","minimum":0,"maximum":50}},"required":["city","country","population_millions"]})",
    R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","maxLength":12},"minItems":1,"maxItems":3},"done":{"type":"boolean"}},"required":["tags","done"]})",
    R"({"type":"object","properties":{"sentiment":{"type":"string","enum":["positive","negative","neutral"]},"score":{"type":"integer","minimum":1,"maximum":5},"reason":{"type":"string","maxLength":30}},"required":["sentiment","score","reason"]})",
    R"({"type":"object","properties":{"id":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},"items":{"type":"array","maxItems":2,"items":{"type":"object","properties":{"sku":{"type":"string","maxLength":8},"qty":{"type":"integer","minimum":1,"maximum":9}},"required":["sku","qty"]}}},"required":["id","items"]})",
};

double us_since(clk::time_point t) { return std::chrono::duration<double, std::micro>(clk::now() - t).count(); }

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

} // namespace

int main(int argc, char** argv) {
  std::string model = "smollm2", json_path;
  int batch = 32, steps = 2000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--model" && has) model = argv[++i];
    else if (a == "--batch" && has) batch = std::max(1, std::atoi(argv[++i]));
    else if (a == "--steps" && has) steps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--json" && has) json_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: grammar-bench [--model PATH] [--batch 32] [--steps 2000] [--json FILE]\n");
      return 2;
    }
  }
  auto file = open_model(resolve_model(model));
  auto tok = tokenizer::from_gguf(file);
  const int32_t V = tok.vocab_size();
  auto t0 = clk::now();
  grammar_compiler gc(tok, V);
  const double vocab_ms = us_since(t0) / 1000.0;
  std::vector<double> cold_ms, cached_us;
  for (const char* s : kSchemas) {
    t0 = clk::now();
    (void)gc.constrain(grammar_kind::json_schema, s);
    cold_ms.push_back(us_since(t0) / 1000.0);
    t0 = clk::now();
    (void)gc.constrain(grammar_kind::json_schema, s);
    cached_us.push_back(us_since(t0));
  }
  std::vector<std::shared_ptr<token_constraint>> seqs;
  std::vector<int> schema_of;
  for (int b = 0; b < batch; ++b) {
    seqs.push_back(gc.constrain(grammar_kind::json_schema, kSchemas[b % 5]));
    schema_of.push_back(b % 5);
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<std::vector<float>> logits(static_cast<size_t>(batch), std::vector<float>(static_cast<size_t>(V)));
  std::vector<std::vector<uint32_t>> masks(static_cast<size_t>(batch));
  std::vector<double> fill_step, draw_masked_step, draw_free_step, accept_step;
  sampler_scratch scratch;
  sampling_params p;
  p.temperature = 1.0f;
  int64_t tokens = 0, completed = 0;
  for (int step = 0; step < steps; ++step) {
    for (auto& l : logits)
      for (auto& x : l) x = nd(rng);
    t0 = clk::now();
    for (int b = 0; b < batch; ++b) seqs[static_cast<size_t>(b)]->fill_mask(masks[static_cast<size_t>(b)]);
    fill_step.push_back(us_since(t0));
    std::vector<token_id> drawn(static_cast<size_t>(batch));
    t0 = clk::now();
    for (int b = 0; b < batch; ++b) {
      p.seed = static_cast<uint64_t>(b);
      drawn[static_cast<size_t>(b)] = sample_token(logits[static_cast<size_t>(b)], p, step, scratch, masks[static_cast<size_t>(b)]).token;
    }
    draw_masked_step.push_back(us_since(t0));
    t0 = clk::now();
    for (int b = 0; b < batch; ++b) (void)sample_token(logits[static_cast<size_t>(b)], p, step, scratch);
    draw_free_step.push_back(us_since(t0));
    t0 = clk::now();
    for (int b = 0; b < batch; ++b) (void)seqs[static_cast<size_t>(b)]->accept(drawn[static_cast<size_t>(b)]);
    accept_step.push_back(us_since(t0));
    tokens += batch;
    for (int b = 0; b < batch; ++b) {
      if (!seqs[static_cast<size_t>(b)]->terminated()) continue;
      ++completed;
      schema_of[static_cast<size_t>(b)] = (schema_of[static_cast<size_t>(b)] + 1) % 5;
      seqs[static_cast<size_t>(b)] = gc.constrain(grammar_kind::json_schema, kSchemas[schema_of[static_cast<size_t>(b)]]);
    }
  }
  double cold = 0, cached = 0;
  for (double x : cold_ms) cold = std::max(cold, x);
  for (double x : cached_us) cached = std::max(cached, x);
  std::printf("grammar-bench: %s, vocab %d, %d sequences x %d steps, %lld tokens, %lld grammars completed\n", file.path().c_str(), V,
              batch, steps, static_cast<long long>(tokens), static_cast<long long>(completed));
  std::printf("  vocabulary for XGrammar:     %8.1f ms (once per server)\n", vocab_ms);
  std::printf("  compile a schema (cold):     %8.2f ms (worst of 5)\n", cold);
  std::printf("  compile a schema (cached):   %8.1f us (worst of 5)\n", cached);
  std::printf("  %-28s %10s %10s %10s\n", "per step, all sequences", "p50 us", "p99 us", "mean us");
  const auto row = [](const char* name, const std::vector<double>& v) {
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(std::max<size_t>(1, v.size()));
    std::printf("  %-28s %10.1f %10.1f %10.1f\n", name, pct(v, 0.5), pct(v, 0.99), mean);
    return mean;
  };
  const double fill = row("fill masks", fill_step), masked = row("masked draw", draw_masked_step),
               free_draw = row("unmasked draw (reference)", draw_free_step), acc = row("accept tokens", accept_step);
  std::printf("  grammar overhead per step: %.1f us (masks + accept + masked draw - unmasked draw)\n", fill + acc + masked - free_draw);
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "grammar-bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f,
                 "{\"model\":\"%s\",\"vocab\":%d,\"batch\":%d,\"steps\":%d,\"vocab_ms\":%.3f,\"compile_cold_ms\":%.3f,"
                 "\"compile_cached_us\":%.3f,\"fill_p50_us\":%.2f,\"fill_p99_us\":%.2f,\"fill_mean_us\":%.2f,"
                 "\"masked_draw_mean_us\":%.2f,\"free_draw_mean_us\":%.2f,\"accept_mean_us\":%.2f}\n",
                 file.path().c_str(), V, batch, steps, vocab_ms, cold, cached, pct(fill_step, 0.5), pct(fill_step, 0.99), fill, masked,
                 free_draw, acc);
    std::fclose(f);
  }
  return 0;
}
