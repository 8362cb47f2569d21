// Reads llama_config from GGUF metadata and checks it against the tensors present.
#include "model/formats/llama_config.hpp"

#include <array>
#include <filesystem>
#include <sstream>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "model/formats/gguf.hpp"
#include "model/formats/tensor_table.hpp"

namespace conveyor::model {
namespace {

struct arch_traits {
  const char* name;
  rope_pairs rope;
  bool qkv_bias, qk_norm;
};

// llama.cpp's rope type per architecture (llama_model_rope_type): LLAMA is NORM, QWEN2/QWEN3 NEOX.
constexpr std::array<arch_traits, 3> kArchs{{
    {"llama", rope_pairs::norm, false, false},
    {"qwen2", rope_pairs::neox, true, false},
    {"qwen3", rope_pairs::neox, false, true},
}};

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

std::string supported_architectures() {
  std::string s;
  for (const arch_traits& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

void llama_config::validate(const std::string& where) const {
  const auto bad = [&](const std::string& what) { throw model_error(where + ": " + what); };
  if (n_head % n_head_kv != 0)
    bad("head_count " + std::to_string(n_head) + " is not a multiple of head_count_kv " + std::to_string(n_head_kv));
  if (head_dim % 2 != 0) bad("head dimension " + std::to_string(head_dim) + " is odd; RoPE needs pairs");
  if (n_rot > head_dim || n_rot % 2 != 0)
    bad("rope.dimension_count " + std::to_string(n_rot) + " must be even and <= head dim " + std::to_string(head_dim));
  if (!(rope_theta > 0.0f) || !(rope_freq_scale > 0.0f)) bad("RoPE base and scale must be positive");
  if (!(rms_eps > 0.0f) || rms_eps > 1.0f) bad("RMSNorm epsilon " + std::to_string(rms_eps) + " is out of range");
}

llama_config llama_config::from_gguf(const gguf_file& f) {
  llama_config c;
  auto arch = f.get_string("general.architecture");
  if (!arch) fail(f, "missing metadata key 'general.architecture'");
  const arch_traits* traits = nullptr;
  for (const arch_traits& a : kArchs)
    if (*arch == a.name) traits = &a;
  if (!traits)
    fail(f, "unsupported architecture '" + *arch + "' (conveyor runs " + supported_architectures() +
                ": Llama 2/3.x, Mistral, SmolLM, Qwen2/2.5, Qwen3)");
  c.arch = *arch;
  c.rope = traits->rope;
  c.qkv_bias = traits->qkv_bias;
  c.qk_norm = traits->qk_norm;
  const std::string k = c.arch + ".";
  c.name = f.get_string("general.name").value_or(std::filesystem::path(f.path()).filename().string());
  c.n_embd = required_int(f, k + "embedding_length");
  c.n_layer = required_int(f, k + "block_count");
  c.n_head = required_int(f, k + "attention.head_count");
  c.n_ff = required_int(f, k + "feed_forward_length");
  c.n_ctx_train = required_int(f, k + "context_length");
  c.n_head_kv = f.get_int(k + "attention.head_count_kv") ? required_int(f, k + "attention.head_count_kv") : c.n_head;
  c.head_dim = f.get_int(k + "attention.key_length") ? required_int(f, k + "attention.key_length") : c.n_embd / c.n_head;
  if (auto vl = f.get_int(k + "attention.value_length"); vl && *vl != c.head_dim)
    fail(f, "attention.value_length differs from key_length; not supported");
  c.n_rot = f.get_int(k + "rope.dimension_count") ? required_int(f, k + "rope.dimension_count") : c.head_dim;
  c.rope_theta = static_cast<float>(f.get_float(k + "rope.freq_base").value_or(10000.0));
  auto eps = f.get_float(k + "attention.layer_norm_rms_epsilon");
  if (!eps) fail(f, "missing metadata key '" + k + "attention.layer_norm_rms_epsilon'");
  c.rms_eps = static_cast<float>(*eps);
  // As llama.cpp: an absent type means linear, and the factor (or the older rope.scale_linear)
  // scales every angle by 1/factor whatever the type says; "none" with no factor is no scaling.
  const std::string scaling = f.get_string(k + "rope.scaling.type").value_or("linear");
  if (scaling != "linear" && scaling != "none")
    fail(f, "rope scaling type '" + scaling + "' is not supported (supported: none, linear, and Llama 3's rope_freqs tensor)");
  const auto factor = f.get_float(k + "rope.scaling.factor") ? f.get_float(k + "rope.scaling.factor")
                                                              : f.get_float(k + "rope.scale_linear");
  if (factor && *factor != 0.0) {
    if (!(*factor >= 1.0)) fail(f, "rope scaling factor " + std::to_string(*factor) + " must be >= 1");
    c.rope_freq_scale = static_cast<float>(1.0 / *factor);
  }
  if (auto af = f.get_float(k + "rope.scaling.attn_factor"); af && *af != 1.0)
    fail(f, "rope.scaling.attn_factor " + std::to_string(*af) + " is not supported (only 1)");
  // llama.cpp's Qwen graphs assert n_rot == head dim.
  if (c.rope == rope_pairs::neox && c.n_rot != c.head_dim)
    fail(f, "rope.dimension_count " + std::to_string(c.n_rot) + " differs from the head dim " + std::to_string(c.head_dim) +
                "; " + c.arch + " rotates whole heads");
  c.validate(f.path());

  const std::string embd_name = gguf_name(tensor_id::token_embd);
  const auto* embd = f.find_tensor(embd_name);
  if (!embd) fail(f, "missing tensor '" + embd_name + "'");
  if (embd->ne[0] != c.n_embd)
    fail(f, embd_name + " has width " + std::to_string(embd->ne[0]) + ", expected embedding_length " + std::to_string(c.n_embd));
  c.vocab_size = static_cast<int32_t>(embd->ne[1]);
  if (auto vs = f.get_int(k + "vocab_size"); vs && *vs != c.vocab_size)
    fail(f, k + "vocab_size " + std::to_string(*vs) + " differs from token_embd rows " + std::to_string(c.vocab_size));
  c.tied_output = f.find_tensor(gguf_name(tensor_id::output)) == nullptr;
  // Optional in llama.cpp's llama and qwen3 graphs (a checkpoint with attention_bias), required in qwen2's.
  c.qkv_bias = c.qkv_bias || f.find_tensor(gguf_name(tensor_id::attn_q_bias, 0)) != nullptr;
  // Only the llama graph reads rope_freqs; in another architecture it is an unknown tensor (refused).
  c.has_rope_freqs = c.arch == "llama" && f.find_tensor(gguf_name(tensor_id::rope_freqs)) != nullptr;
  const std::vector<std::string> used = graph_tensors(c);
  const std::unordered_set<std::string_view> known(used.begin(), used.end());
  for (const gguf_tensor_info& t : f.tensors())
    if (!known.contains(t.name))
      fail(f, "tensor '" + t.name + "' is not part of the " + c.arch +
                  " graph conveyor runs (ignoring it would change the output; llama.cpp refuses such a file too "
                  "or applies it: an unsupported variant of " + c.arch + ")");
  return c;
}

std::string llama_config::summary() const {
  std::ostringstream os;
  os << arch << " " << n_layer << " layers, hidden " << n_embd << ", heads " << n_head << "/" << n_head_kv
     << ", head dim " << head_dim << ", ffn " << n_ff << ", vocab " << vocab_size << ", rope theta " << rope_theta
     << (qkv_bias ? ", qkv bias" : "") << (qk_norm ? ", qk norm" : "") << (tied_output ? ", tied head" : ", untied head");
  return os.str();
}

} // namespace conveyor::model
