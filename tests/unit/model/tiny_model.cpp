// Writes tiny random-weight Llama GGUFs with the metadata keys llama.cpp's converter emits
// (model-format.md §1.6, §6.1). Weights are normal(0, weight_std) quantized with quantize_row_ref;
// the file goes through gguf_writer, so it is also an end-to-end fixture for the reader.
#include "tiny_model.hpp"

#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include "model/formats/dequant.hpp"
#include "model/formats/gguf_writer.hpp"

namespace conveyor::model {

const char* const tiny_chatml_template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}";

namespace {

// GPT-2 bytes_to_unicode as UTF-8 (model-format.md §5.3).
std::string byte_token(int b) {
  const bool direct = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  uint32_t cp = static_cast<uint32_t>(b);
  if (!direct) {
    int n = 0;
    for (int c = 0; c < b; ++c) {
      const bool d = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
      n += d ? 0 : 1;
    }
    cp = 0x100u + static_cast<uint32_t>(n);
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

void require(bool ok, const std::string& what) {
  if (!ok) {
    throw std::invalid_argument("tiny_llama_spec: " + what);
  }
}

int32_t general_file_type(ggml_type t) {
  switch (t) {
  case ggml_type::f32: return 0;
  case ggml_type::f16: return 1;
  case ggml_type::q4_0: return 2;
  case ggml_type::q4_1: return 3;
  case ggml_type::q8_0: return 7;
  case ggml_type::q5_0: return 8;
  case ggml_type::q5_1: return 9;
  case ggml_type::q4_k: return 15;
  case ggml_type::q5_k: return 17;
  case ggml_type::q6_k: return 18;
  case ggml_type::bf16: return 32;
  default: return 0;
  }
}

class tensor_maker {
public:
  tensor_maker(gguf_writer& w, const tiny_llama_spec& s) : w_(w), s_(s), rng_(s.seed) {}

  void weight(const std::string& name, ggml_type t, int64_t n_in, int64_t n_out) {
    require(n_in % static_cast<int64_t>(block_elems(t)) == 0,
            name + ": ne[0] = " + std::to_string(n_in) + " is not a multiple of the " + type_name(t) +
                " block size " + std::to_string(block_elems(t)));
    std::vector<float> x(static_cast<size_t>(n_in * n_out));
    for (float& v : x) {
      v = s_.weight_std * rng_.normal();
    }
    const std::vector<int64_t> ne{n_in, n_out};
    w_.add_tensor(name, t, ne, quantize_row_ref(t, x));
  }

  void norm(const std::string& name, int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) {
      v = 1.0f + s_.norm_noise * rng_.normal();
    }
    const std::vector<int64_t> ne{n};
    w_.add_tensor(name, s_.norm, ne, quantize_row_ref(s_.norm, x));
  }

  void bias(const std::string& name, int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) {
      v = 0.5f * rng_.normal();
    }
    const std::vector<int64_t> ne{n};
    w_.add_tensor_f32(name, ne, x);
  }

private:
  gguf_writer& w_;
  const tiny_llama_spec& s_;
  tiny_rng rng_;
};

} // namespace

void tiny_llama_spec::set_attn_types(ggml_type t) { attn_q = attn_k = attn_v = attn_output = t; }
void tiny_llama_spec::set_ffn_types(ggml_type t) { ffn_gate = ffn_up = ffn_down = t; }

tiny_llama_spec tiny_config_a() { return {}; }

tiny_llama_spec tiny_config_b() {
  tiny_llama_spec s;
  s.n_embd = 256;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 512;
  s.n_vocab = 512;
  s.rope_theta = 500000.0f;
  s.tied = false;
  s.rope_freqs = true;
  s.attn_q = ggml_type::q4_k;
  s.attn_k = ggml_type::q5_k;
  s.attn_v = ggml_type::q6_k;
  s.attn_output = ggml_type::q4_0;
  s.ffn_gate = ggml_type::f16;
  s.ffn_up = ggml_type::bf16;
  s.ffn_down = ggml_type::q5_0;
  s.token_embd = ggml_type::q5_1;
  s.output = ggml_type::q6_k;
  return s;
}

std::vector<std::string> tiny_vocab(const tiny_llama_spec& spec) {
  std::vector<std::string> toks{"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int b = 0; b < 256; ++b) {
    toks.push_back(byte_token(b));
  }
  std::unordered_set<std::string> known(toks.begin(), toks.end());
  for (const std::string& m : spec.merges) {
    const size_t sp = m.find(' ', 1);
    require(sp != std::string::npos && sp + 1 < m.size(), "merge '" + m + "' is not \"left right\"");
    const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
    require(known.contains(left) && known.contains(right), "merge '" + m + "' has a side that is not a token");
    if (known.insert(left + right).second) {
      toks.push_back(left + right);
    }
  }
  require(spec.n_vocab == 0 || spec.n_vocab >= static_cast<int32_t>(toks.size()),
          "n_vocab " + std::to_string(spec.n_vocab) + " is smaller than the " + std::to_string(toks.size()) +
              " tokens the tokenizer needs");
  for (int32_t i = static_cast<int32_t>(toks.size()); i < spec.n_vocab; ++i) {
    toks.push_back("<|unused_" + std::to_string(i) + "|>");
  }
  return toks;
}

void write_tiny_llama(const std::string& path, const tiny_llama_spec& s) {
  require(s.n_embd > 0 && s.n_head > 0 && s.n_head_kv > 0 && s.n_ff > 0 && s.n_layer > 0 && s.n_ctx > 0,
          "sizes must be positive");
  require((s.key_length > 0 || s.n_embd % s.n_head == 0) && s.head_dim() % 2 == 0, "the head dim must be an even integer");
  require(s.arch == "llama" || s.arch == "qwen2" || s.arch == "qwen3", "arch must be llama, qwen2 or qwen3");
  require(s.n_head % s.n_head_kv == 0, "n_head must be a multiple of n_head_kv");
  const std::vector<std::string> vocab = tiny_vocab(s);
  const auto n_vocab = static_cast<int64_t>(vocab.size());
  std::vector<int32_t> token_type(vocab.size(), 1);  // NORMAL
  token_type[0] = token_type[1] = token_type[2] = 3;  // CONTROL
  const size_t n_used = 3 + 256 + s.merges.size();
  for (size_t i = n_used; i < vocab.size(); ++i) {
    token_type[i] = vocab[i].starts_with("<|unused_") ? 5 : 1;  // UNUSED padding
  }

  gguf_writer w;
  w.add_kv("general.architecture", s.arch);
  w.add_kv("general.name", "tiny-llama");
  if (s.alignment != 0) {
    w.set_alignment(s.alignment);
  }
  w.add_kv("general.file_type", static_cast<uint32_t>(general_file_type(s.ffn_gate)));
  w.add_kv("general.quantization_version", uint32_t{2});
  const std::string a = s.arch + ".";
  w.add_kv(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  w.add_kv(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.add_kv(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.add_kv(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.add_kv(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.add_kv(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.add_kv(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.add_kv(a + "rope.freq_base", s.rope_theta);
  w.add_kv(a + "rope.dimension_count", static_cast<uint32_t>(s.head_dim()));
  if (s.key_length > 0) {
    w.add_kv(a + "attention.key_length", static_cast<uint32_t>(s.key_length));
    w.add_kv(a + "attention.value_length", static_cast<uint32_t>(s.key_length));
  }
  if (s.rope_linear_factor > 0.0f) {
    w.add_kv(a + "rope.scaling.type", "linear");
    w.add_kv(a + "rope.scaling.factor", s.rope_linear_factor);
  }
  w.add_kv(a + "vocab_size", static_cast<uint32_t>(n_vocab));
  for (const auto& [key, value] : s.extra_f32_kv) w.add_kv(a + key, value);
  w.add_kv("tokenizer.ggml.model", "gpt2");
  w.add_kv("tokenizer.ggml.pre", "smollm");
  w.add_kv("tokenizer.ggml.tokens", vocab);
  w.add_kv("tokenizer.ggml.token_type", token_type);
  w.add_kv("tokenizer.ggml.merges", s.merges);
  w.add_kv("tokenizer.ggml.bos_token_id", uint32_t{1});
  w.add_kv("tokenizer.ggml.eos_token_id", uint32_t{2});
  w.add_kv("tokenizer.ggml.unknown_token_id", uint32_t{0});
  w.add_kv("tokenizer.ggml.padding_token_id", uint32_t{2});
  w.add_kv("tokenizer.ggml.add_bos_token", false);
  w.add_kv("tokenizer.chat_template", s.chat_template);

  const int64_t e = s.n_embd, hd = s.head_dim(), q = int64_t{s.n_head} * hd, kv = int64_t{s.n_head_kv} * hd, ff = s.n_ff;
  tensor_maker make(w, s);
  make.weight("token_embd.weight", s.token_embd, e, n_vocab);
  if (s.rope_freqs) {
    std::vector<float> f(static_cast<size_t>(hd / 2));
    for (size_t i = 0; i < f.size(); ++i) {  // 1 for high frequencies, ramping up to 8 (llama3 shape)
      const double t = static_cast<double>(i) / static_cast<double>(f.size() - 1);
      f[i] = t < 0.5 ? 1.0f : static_cast<float>(1.0 + 7.0 * (t - 0.5) * 2.0);
    }
    const std::vector<int64_t> ne{hd / 2};
    w.add_tensor_f32("rope_freqs.weight", ne, f);
  }
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    make.norm(p + "attn_norm.weight", e);
    make.weight(p + "attn_q.weight", s.attn_q, e, q);
    make.weight(p + "attn_k.weight", s.attn_k, e, kv);
    make.weight(p + "attn_v.weight", s.attn_v, e, kv);
    if (s.arch == "qwen2" || s.attn_bias) {  // biases are large next to the weights, so a wrong add shows
      make.bias(p + "attn_q.bias", q);
      make.bias(p + "attn_k.bias", kv);
      make.bias(p + "attn_v.bias", kv);
    }
    if (s.arch == "qwen3") {
      make.norm(p + "attn_q_norm.weight", hd);
      make.norm(p + "attn_k_norm.weight", hd);
    }
    make.weight(p + "attn_output.weight", s.attn_output, q, e);
    make.norm(p + "ffn_norm.weight", e);
    make.weight(p + "ffn_gate.weight", s.ffn_gate, e, ff);
    make.weight(p + "ffn_up.weight", s.ffn_up, e, ff);
    make.weight(p + "ffn_down.weight", s.ffn_down, ff, e);
  }
  make.norm("output_norm.weight", e);
  for (const std::string& name : s.extra_tensors) make.bias(name, e);
  if (!s.tied) {
    make.weight("output.weight", s.output, e, n_vocab);
  }
  w.write(path);
}

uint64_t tiny_rng::next_u64() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double tiny_rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

float tiny_rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return static_cast<float>(spare_);
  }
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * M_PI * u2);
  has_spare_ = true;
  return static_cast<float>(r * std::cos(2.0 * M_PI * u2));
}

} // namespace conveyor::model
