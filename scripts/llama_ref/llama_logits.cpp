// Reference logits from llama.cpp itself, for the architecture goldens (scripts/make_arch_goldens.py).
// Loads a GGUF with llama.cpp on the CPU, decodes the prompt ids in one batch, prints the last
// position's logits (f32 KV cache, no flash attention, one thread), then extends greedily (argmax, ties to the lowest id, no end-of-generation
// stop) and prints every step's token and its logits. Output: one JSON object on stdout.
//
//   llama_logits MODEL.gguf "1,2,3" N_GEN
//
// Built against llama.cpp's static libraries by scripts/llama_ref/build.sh.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

void quiet(ggml_log_level, const char*, void*) {}

void print_floats(const float* v, int n) {
  std::printf("[");
  for (int i = 0; i < n; ++i) std::printf("%s%.9g", i ? "," : "", v[i]);
  std::printf("]");
}

int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf IDS(comma-separated) N_GEN\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> prompt;
  std::stringstream ids(argv[2]);
  for (std::string t; std::getline(ids, t, ',');) prompt.push_back(std::atoi(t.c_str()));
  const int n_gen = std::atoi(argv[3]);
  if (prompt.empty() || n_gen < 0) {
    std::fprintf(stderr, "need at least one prompt id and N_GEN >= 0\n");
    return 2;
  }

  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "llama.cpp could not load %s\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(prompt.size() + n_gen + 8);
  cp.n_batch = cp.n_ctx;
  cp.n_ubatch = cp.n_ctx;
  cp.n_threads = cp.n_threads_batch = 1;  // one thread: the same sums on every machine
  cp.type_k = cp.type_v = GGML_TYPE_F32;    // no fp16 rounding of the cache: the goldens are for f32 math
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "llama.cpp could not create a context\n");
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  if (llama_decode(ctx, llama_batch_get_one(prompt.data(), static_cast<int32_t>(prompt.size()))) != 0) {
    std::fprintf(stderr, "llama_decode failed on the prompt\n");
    return 1;
  }
  std::printf("{\"n_vocab\":%d,\"prompt_logits\":", n_vocab);
  const float* lg = llama_get_logits_ith(ctx, -1);
  print_floats(lg, n_vocab);
  std::printf(",\"greedy\":[");
  for (int i = 0; i < n_gen; ++i) {
    llama_token tok = argmax(lg, n_vocab);
    std::printf("%s{\"token\":%d,\"logits\":", i ? "," : "", tok);
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) {
      std::fprintf(stderr, "llama_decode failed at generated token %d\n", i);
      return 1;
    }
    lg = llama_get_logits_ith(ctx, -1);
    print_floats(lg, n_vocab);
    std::printf("}");
  }
  std::printf("]}\n");
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
