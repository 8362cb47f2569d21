// Reads llama_config from GGUF metadata and checks it against the tensors present.
#include "model/llama_config.hpp"

#include <filesystem>
#include <sstream>

#include "model/gguf.hpp"

namespace conveyor::model {
namespace {

[[noreturn]] void fail(const gguf_file& f, const std::string& what) {
  throw model_error(f.path() + ": " + what);
}

int32_t required_int(const gguf_file& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v) fail(f, "missing metadata key '" + key + "'");
  if (*v <= 0 || *v > (int64_t{1} << 30)) fail(f, "metadata '" + key + "' = " + std::to_string(*v) + " is out of range");
  return static_cast<int32_t>(*v);
}

} // namespace

llama_config llama_config::from_gguf(const gguf_file& f) {
  llama_config c;
  auto arch = f.get_string("general.architecture");
  if (!arch) fail(f, "missing metadata key 'general.architecture'");
  if (*arch != "llama")
    fail(f, "unsupported architecture '" + *arch + "' (conveyor runs 'llama': Llama, SmolLM, Mistral-style GGUFs)");
  c.name = f.get_string("general.name").value_or(std::filesystem::path(f.path()).filename().string());
  c.n_embd = required_int(f, "llama.embedding_length");
  c.n_layer = required_int(f, "llama.block_count");
  c.n_head = required_int(f, "llama.attention.head_count");
  c.n_ff = required_int(f, "llama.feed_forward_length");
  c.n_ctx_train = required_int(f, "llama.context_length");
  c.n_head_kv = f.get_int("llama.attention.head_count_kv") ? required_int(f, "llama.attention.head_count_kv") : c.n_head;
  if (c.n_head % c.n_head_kv != 0)
    fail(f, "head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " + std::to_string(c.n_head_kv));
  c.head_dim = f.get_int("llama.attention.key_length") ? required_int(f, "llama.attention.key_length") : c.n_embd / c.n_head;
  if (auto vl = f.get_int("llama.attention.value_length"); vl && *vl != c.head_dim)
    fail(f, "attention.value_length differs from key_length; not supported");
  if (c.head_dim % 2 != 0) fail(f, "head dimension " + std::to_string(c.head_dim) + " is odd; RoPE needs pairs");
  c.n_rot = f.get_int("llama.rope.dimension_count") ? required_int(f, "llama.rope.dimension_count") : c.head_dim;
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    fail(f, "rope.dimension_count " + std::to_string(c.n_rot) + " must be even and <= head dim " + std::to_string(c.head_dim));
  c.rope_theta = static_cast<float>(f.get_float("llama.rope.freq_base").value_or(10000.0));
  auto eps = f.get_float("llama.attention.layer_norm_rms_epsilon");
  if (!eps) fail(f, "missing metadata key 'llama.attention.layer_norm_rms_epsilon'");
  c.rms_eps = static_cast<float>(*eps);
  if (auto st = f.get_string("llama.rope.scaling.type"); st && *st != "none")
    fail(f, "rope scaling type '" + *st + "' is not supported (only Llama 3.1's rope_freqs tensor is)");

  const auto* embd = f.find_tensor("token_embd.weight");
  if (!embd) fail(f, "missing tensor 'token_embd.weight'");
  if (embd->ne[0] != c.n_embd)
    fail(f, "token_embd.weight has width " + std::to_string(embd->ne[0]) + ", expected embedding_length " + std::to_string(c.n_embd));
  c.vocab_size = static_cast<int32_t>(embd->ne[1]);
  if (auto vs = f.get_int("llama.vocab_size"); vs && *vs != c.vocab_size)
    fail(f, "llama.vocab_size " + std::to_string(*vs) + " differs from token_embd rows " + std::to_string(c.vocab_size));
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.has_rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
  return c;
}

std::string llama_config::summary() const {
  std::ostringstream os;
  os << "llama " << n_layer << " layers, hidden " << n_embd << ", heads " << n_head << "/" << n_head_kv
     << ", head dim " << head_dim << ", ffn " << n_ff << ", vocab " << vocab_size << ", rope theta " << rope_theta
     << (tied_output ? ", tied head" : ", untied head");
  return os.str();
}

} // namespace conveyor::model
