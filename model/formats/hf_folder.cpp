// A Hugging Face folder as a GGUF view: config.json becomes the <arch>.* keys, the safetensors
// tensors get llama.cpp's names (model-format.md §1.7), the tokenizer its tokenizer.* keys
// (model/text/hf_tokenizer.cpp, model/text/hf_spm.cpp, through the caller's add_tokenizer),
// exactly as convert_hf_to_gguf.py (LlamaModel, Qwen2Model, Qwen3Model) writes them. safetensors'
// row-major [out, in] is GGUF's ne = [in, out], so a matrix is a view with no copy; what the
// converter changes (Q/K row order for llama, 1-D tensors to F32, Llama 3's rope_freqs) is
// computed into buffers the view owns.
#include "model/formats/hf_folder.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "model/formats/dequant.hpp"
#include "model/formats/hf_json.hpp"
#include "model/formats/llama_config.hpp"
#include "model/formats/safetensors.hpp"
#include "model/formats/tensor_table.hpp"

namespace conveyor::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct hf_arch {
  const char* hf;
  const char* gguf;
};
constexpr hf_arch kArchs[] = {
    {"LlamaForCausalLM", "llama"}, {"MistralForCausalLM", "llama"}, {"Qwen2ForCausalLM", "qwen2"}, {"Qwen3ForCausalLM", "qwen3"}};

[[noreturn]] void fail(const std::string& where, const std::string& problem) { throw model_error(where + ": " + problem); }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// Every tensor of the folder's safetensors files by name, and the mappings that keep them.
struct weight_files {
  std::vector<safetensors_file> files;
  std::unordered_map<std::string, const safetensors_tensor*> by_name;
};

weight_files open_weights(const fs::path& dir) {
  weight_files w;
  std::vector<std::string> names;
  const fs::path index = dir / "model.safetensors.index.json";
  json map;  // sharded: tensor name -> shard file name
  if (hf_is_file(index)) {
    const json j = read_json_file(index.string());
    map = j.is_object() ? j.value("weight_map", json()) : json();
    if (!map.is_object() || map.empty()) fail(index.string(), "has no weight_map object");
    std::set<std::string> seen;
    for (const auto& [tensor, file] : map.items()) {
      if (!file.is_string()) fail(index.string(), "weight_map['" + tensor + "'] is not a file name");
      const std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        fail(index.string(), "weight_map names '" + f + "', which is not a file in the folder");
      if (seen.insert(f).second) names.push_back(f);
    }
  } else if (hf_is_file(dir / "model.safetensors")) {
    names.push_back("model.safetensors");
  } else {
    const bool bin = hf_is_file(dir / "pytorch_model.bin") || hf_is_file(dir / "pytorch_model.bin.index.json");
    fail(dir.string(), std::string("no model.safetensors or model.safetensors.index.json") +
                           (bin ? " (PyTorch .bin checkpoints are not read; save the model with safetensors)" : ""));
  }
  w.files.reserve(names.size());
  for (const std::string& n : names) {
    if (!hf_is_file(dir / n)) fail(index.string(), "names shard '" + n + "', which is missing");
    w.files.push_back(safetensors_file::open((dir / n).string()));
  }
  for (const safetensors_file& f : w.files)
    for (const safetensors_tensor& t : f.tensors())
      if (!w.by_name.emplace(t.name, &t).second) fail(f.path(), "tensor '" + t.name + "' also appears in another shard");
  for (const auto& [tensor, file] : map.items())  // every tensor the index names must be in its shard
    if (!w.by_name.contains(tensor)) fail((dir / file.get<std::string>()).string(), "missing tensor '" + tensor + "' (named in the index)");
  return w;
}

/// What the GGUF view is being built from, and what it ends up holding.
struct builder {
  std::string dir;
  std::string arch_hf;
  weight_files w;
  std::set<std::string> used;
  std::vector<gguf_tensor_view> tensors;
  std::vector<std::shared_ptr<const void>> owners;

  uint8_t* own(size_t bytes) {
    auto buf = std::make_shared<std::vector<uint8_t>>(bytes);
    owners.push_back(buf);
    return buf->data();
  }
  void add(const std::string& name, ggml_type type, const std::vector<int64_t>& shape, const uint8_t* data) {
    gguf_tensor_view v;
    v.info.name = name;
    v.info.type = type;
    v.info.n_dims = static_cast<uint32_t>(shape.size());
    for (size_t j = 0; j < shape.size(); ++j) v.info.ne[j] = shape[shape.size() - 1 - j];  // reversed: ne[0] contiguous
    v.data = data;
    tensors.push_back(std::move(v));
  }

  /// Maps HF tensor `hf` (shape `shape`) to GGUF `name`. permute_heads > 0: Q/K rows reordered
  /// as LlamaModel.permute does, with that many heads.
  void map(const std::string& hf, const std::string& name, const std::vector<int64_t>& shape, int64_t permute_heads = 0) {
    const auto it = w.by_name.find(hf);
    if (it == w.by_name.end()) fail(dir, "missing tensor '" + hf + "' (" + arch_hf + " needs it)");
    const safetensors_tensor& t = *it->second;
    used.insert(hf);
    if (t.shape != shape)
      fail(dir, "tensor '" + hf + "' has shape " + shape_str(t.shape) + ", config.json implies " + shape_str(shape));
    ggml_type type;
    if (t.dtype == "F32") type = ggml_type::f32;
    else if (t.dtype == "F16") type = ggml_type::f16;
    else if (t.dtype == "BF16") type = ggml_type::bf16;
    else fail(dir, "tensor '" + hf + "' has dtype " + t.dtype + "; conveyor reads F32, F16 and BF16 safetensors (for a quantized model, pass a GGUF)");
    if (shape.size() == 1 && type != ggml_type::f32) {  // norms and biases: F32, as the converter stores them
      auto* out = reinterpret_cast<float*>(own(static_cast<size_t>(shape[0]) * sizeof(float)));
      dequantize_row(type, t.data, out, shape[0]);
      return add(name, ggml_type::f32, shape, reinterpret_cast<const uint8_t*>(out));
    }
    if (permute_heads <= 0) return add(name, type, shape, t.data);
    // gguf_row[h*hd + 2i + j] = hf_row[h*hd + j*hd/2 + i]: RoPE's rotate-half partners become adjacent.
    const int64_t rows = shape[0], hd = rows / permute_heads, half = hd / 2;
    const size_t row_bytes = t.nbytes / static_cast<size_t>(rows);
    if (rows % permute_heads != 0 || hd % 2 != 0) fail(dir, "tensor '" + hf + "' rows do not split into " + std::to_string(permute_heads) + " heads of even size");
    uint8_t* out = own(t.nbytes);
    for (int64_t h = 0; h < permute_heads; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < 2; ++j)
          std::memcpy(out + static_cast<size_t>(h * hd + 2 * i + j) * row_bytes,
                      t.data + static_cast<size_t>(h * hd + j * half + i) * row_bytes, row_bytes);
    add(name, type, shape, out);
  }
};

/// convert_hf_to_gguf.py LlamaModel.generate_extra_tensors for rope_type "llama3": each pair's
/// angle divisor, in float32 step by step as the converter's torch code computes it.
std::vector<float> llama3_rope_factors(const json& rope, float theta, int64_t dim, const std::string& where) {
  const auto num = [&](const char* k, double d) { return static_cast<float>(json_number(rope, k, where).value_or(d)); };
  const float factor = num("factor", 8.0), low = num("low_freq_factor", 1.0), high = num("high_freq_factor", 4.0);
  const float old_ctx = num("original_max_position_embeddings", 8192.0);
  const float low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(theta, static_cast<float>(i) / static_cast<float>(dim));
    const float wavelen = static_cast<float>(2.0 * M_PI) / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (old_ctx / wavelen - low) / (high - low);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

} // namespace

std::string supported_hf_architectures() {
  std::string s;
  for (const hf_arch& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.hf);
  return s;
}

namespace {

gguf_file open_folder(const fs::path& dir, hf_tokenizer_reader add_tokenizer) {
  const std::string cfg_path = (dir / "config.json").string();
  if (!hf_is_file(cfg_path))
    fail(cfg_path, "missing; pass a GGUF file or a Hugging Face model folder (config.json, tokenizer.json, *.safetensors)");
  const json cfg = read_json_file(cfg_path);
  if (!cfg.is_object()) fail(cfg_path, "is not a JSON object");
  const json archs = cfg.value("architectures", json());
  const std::string hf = archs.is_array() && !archs.empty() && archs[0].is_string() ? archs[0].get<std::string>() : "";
  const hf_arch* arch = nullptr;
  for (const hf_arch& a : kArchs)
    if (hf == a.hf) arch = &a;
  if (!arch) fail(cfg_path, "architecture '" + (hf.empty() ? archs.dump() : hf) + "' is not supported (conveyor runs " + supported_hf_architectures() + ")");
  const std::string A = arch->gguf;
  const bool is_llama = A == "llama";

  const auto req = [&](const char* k) {
    auto v = json_int(cfg, k, cfg_path);
    if (!v) fail(cfg_path, std::string("missing '") + k + "'");
    return *v;
  };
  const int64_t d = req("hidden_size"), n_layer = req("num_hidden_layers"), n_ff = req("intermediate_size");
  const int64_t n_head = req("num_attention_heads"), n_ctx = req("max_position_embeddings");
  const int64_t n_kv = json_int(cfg, "num_key_value_heads", cfg_path).value_or(n_head);
  const auto head_dim_key = json_int(cfg, "head_dim", cfg_path);
  const int64_t hd = head_dim_key.value_or(d / n_head);
  const auto eps = json_number(cfg, "rms_norm_eps", cfg_path);
  if (!eps) fail(cfg_path, "missing 'rms_norm_eps'");
  const bool tied = json_bool(cfg, "tie_word_embeddings", cfg_path).value_or(false);
  // transformers 5 writes rope_parameters (theta inside); older configs rope_scaling + rope_theta.
  json rope = cfg.contains("rope_parameters") && !cfg["rope_parameters"].is_null() ? cfg["rope_parameters"] : cfg.value("rope_scaling", json());
  if (rope.is_null()) rope = json::object();
  if (!rope.is_object()) fail(cfg_path, "rope_scaling is not an object");
  const auto theta = json_number(rope, "rope_theta", cfg_path) ? json_number(rope, "rope_theta", cfg_path) : json_number(cfg, "rope_theta", cfg_path);
  const auto rope_type = json_string(rope, "rope_type", cfg_path) ? json_string(rope, "rope_type", cfg_path) : json_string(rope, "type", cfg_path);

  builder b{dir.string(), hf, open_weights(dir), {}, {}, {}};
  const std::string embd_name = hf_name(tensor_spec(tensor_id::token_embd));
  const auto embd = b.w.by_name.find(embd_name);
  const int64_t n_vocab = json_int(cfg, "vocab_size", cfg_path)
                              .value_or(embd != b.w.by_name.end() && embd->second->shape.size() == 2 ? embd->second->shape[0] : 0);
  if (n_vocab <= 0) fail(cfg_path, "missing 'vocab_size' and no " + embd_name + " to take it from");
  // The tensor table's sizes and switches: Q/K/V biases in qwen2, Q/K norms in qwen3 (a llama
  // folder with attention_bias is refused as an unexpected tensor).
  const tensor_params tp{.embd = d, .q = n_head * hd, .kv = n_kv * hd, .ff = n_ff, .head = hd, .vocab = n_vocab,
                         .rope_half = hd / 2, .tied_output = tied, .qkv_bias = A == "qwen2", .qk_norm = A == "qwen3"};
  // Row r of layer l; Q and K rows permuted for llama's adjacent-pair RoPE.
  const auto map_row = [&](const tensor_row& r, int32_t l) {
    const int64_t heads = !is_llama ? 0 : r.permute == hf_permute::q_heads ? n_head : r.permute == hf_permute::kv_heads ? n_kv : 0;
    b.map(hf_name(r, l), gguf_name(r, l), tp.hf_shape(r), heads);
  };
  // The embedding (a view, nothing copied) first: vocab_size is checked against its rows before
  // the tokenizer allocates a token per id, so a typo there fails fast instead of filling memory.
  map_row(tensor_spec(tensor_id::token_embd), 0);

  gguf_kvs tokenizer_kvs;  // before any weight is copied: an unsupported tokenizer fails fast
  add_tokenizer(dir.string(), cfg, n_vocab, tokenizer_kvs);

  gguf_kvs kvs;
  kvs.emplace_back("general.architecture", gguf_str(A));
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(dir, ec);
  kvs.emplace_back("general.name", gguf_str((ec ? dir : canonical).filename().string()));
  kvs.emplace_back(A + ".block_count", gguf_u32(uint32_t(n_layer)));
  kvs.emplace_back(A + ".context_length", gguf_u32(uint32_t(n_ctx)));
  kvs.emplace_back(A + ".embedding_length", gguf_u32(uint32_t(d)));
  kvs.emplace_back(A + ".feed_forward_length", gguf_u32(uint32_t(n_ff)));
  kvs.emplace_back(A + ".attention.head_count", gguf_u32(uint32_t(n_head)));
  kvs.emplace_back(A + ".attention.head_count_kv", gguf_u32(uint32_t(n_kv)));
  if (rope_type && *rope_type == "linear") {
    const auto factor = json_number(rope, "factor", cfg_path);
    if (!factor) fail(cfg_path, "rope_scaling 'linear' has no factor");
    kvs.emplace_back(A + ".rope.scaling.type", gguf_str("linear"));
    kvs.emplace_back(A + ".rope.scaling.factor", gguf_f32(float(*factor)));
  } else if (rope_type && *rope_type != "default" && !(*rope_type == "llama3" && is_llama)) {
    fail(cfg_path, "rope_scaling type '" + *rope_type + "' is not supported (conveyor runs linear" +
                       std::string(is_llama ? " and llama3" : "") + " scaling; yarn, dynamic and longrope are not implemented)");
  }
  if (theta) kvs.emplace_back(A + ".rope.freq_base", gguf_f32(float(*theta)));
  kvs.emplace_back(A + ".attention.layer_norm_rms_epsilon", gguf_f32(float(*eps)));
  if (head_dim_key) {
    kvs.emplace_back(A + ".attention.key_length", gguf_u32(uint32_t(hd)));
    kvs.emplace_back(A + ".attention.value_length", gguf_u32(uint32_t(hd)));
  }
  if (is_llama) {
    kvs.emplace_back(A + ".vocab_size", gguf_u32(uint32_t(n_vocab)));
    kvs.emplace_back(A + ".rope.dimension_count", gguf_u32(uint32_t(hd)));
  }

  const ggml_type et = b.tensors.front().info.type;  // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32
  kvs.emplace_back("general.file_type", gguf_u32(et == ggml_type::f32 ? 0 : et == ggml_type::f16 ? 1 : 32));
  if (rope_type && *rope_type == "llama3") {
    auto factors = llama3_rope_factors(rope, float(theta.value_or(10000.0)), hd, cfg_path);
    auto* out = reinterpret_cast<float*>(b.own(factors.size() * sizeof(float)));
    std::memcpy(out, factors.data(), factors.size() * sizeof(float));
    b.add(gguf_name(tensor_id::rope_freqs), ggml_type::f32, {int64_t(factors.size())}, reinterpret_cast<const uint8_t*>(out));
  }
  for (int32_t l = 0; l < n_layer; ++l)
    for (const tensor_row& r : tensor_table())
      if (r.per_layer && tp.reads(r)) map_row(r, l);
  map_row(tensor_spec(tensor_id::output_norm), 0);
  if (!tied) map_row(tensor_spec(tensor_id::output), 0);
  for (const auto& [name, t] : b.w.by_name) {
    const bool ignored = name.ends_with(".rotary_emb.inv_freq") || (tied && name == hf_name(tensor_spec(tensor_id::output)));
    if (!b.used.contains(name) && !ignored)
      fail(dir.string(), "unexpected tensor '" + name + "': " + hf + " as conveyor runs it has no such weight (biases, MoE and other variants are not supported)");
  }

  for (auto& kv : tokenizer_kvs) kvs.push_back(std::move(kv));
  for (safetensors_file& f : b.w.files) b.owners.push_back(f.mapping());
  try {
    return gguf_file::assemble(dir.string(), std::move(kvs), std::move(b.tensors), std::move(b.owners));
  } catch (const gguf_error& e) {
    throw model_error(e.what());
  }
}

} // namespace

gguf_file open_hf_folder(const std::string& dir_arg, hf_tokenizer_reader add_tokenizer) {
  fs::path dir = fs::path(dir_arg).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "folder/" -> "folder"
  // Backstop: every read above checks types and file access itself; anything that still escapes
  // from nlohmann::json or std::filesystem becomes the same one-line model_error (exit 2).
  const auto backstop = [&](std::string what) -> model_error {
    for (char& c : what)
      if (c == '\n' || c == '\r') c = ' ';
    return model_error(dir.string() + ": " + what +
                       "; HINT: check that the folder and its files are readable and hold what Hugging Face writes there");
  };
  try {
    return open_folder(dir, add_tokenizer);
  } catch (const nlohmann::json::exception& e) {
    throw backstop(e.what());
  } catch (const fs::filesystem_error& e) {
    throw backstop(e.what());
  }
}

} // namespace conveyor::model
