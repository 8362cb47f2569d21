// tokenizer.json -> the tokenizer.* GGUF keys, as convert_hf_to_gguf.py writes them for a
// byte-level BPE vocabulary (_set_vocab_gpt2, get_vocab_base, gguf-py's SpecialVocab, which the
// SentencePiece path in model/text/hf_spm.cpp shares): ids in order, added tokens typed control (special, or looking like <|...|>) or user-defined, merges
// from "a b" strings or ["a", "b"] pairs, bos/eos from tokenizer_config.json or config.json, the
// chat template. The pre-tokenizer type, which the converter finds by hashing a tokenization,
// is found here by comparing the Split regex with the ones llama.cpp knows.
#include "model/text/hf_tokenizer.hpp"

#include <filesystem>
#include <optional>

#include "model/formats/hf_json.hpp"
#include "model/text/tokenizer.hpp"
#include "model/text/unicode_bytes.hpp"

namespace conveyor::model {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The Split regexes of Llama 3's and Qwen2's tokenizer.json (Qwen2.5 and Qwen3 share Qwen2's).
constexpr std::string_view kLlama3Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

[[noreturn]] void fail(const std::string& where, const std::string& problem) {
  throw tokenizer_error(where + ": " + problem);
}

/// An object's "type" ("?" when it has none), or the JSON type of anything else. Throws
/// model_error when "type" is there but not a string.
std::string type_of(const json& j, const std::string& where) {
  return j.is_object() ? json_string(j, "type", where).value_or("?") : j.type_name();
}

bool byte_level(const json& p, bool use_regex, const std::string& where) {
  return type_of(p, where) == "ByteLevel" && !json_bool(p, "add_prefix_space", where).value_or(false) &&
         json_bool(p, "use_regex", where).value_or(true) == use_regex;
}

/// llama.cpp's tokenizer.ggml.pre name for the folder's pre_tokenizer.
std::string detect_pre(const json& tok, const std::string& file) {
  const std::string where = file + " (pre_tokenizer)";
  const json& pt = tok.contains("pre_tokenizer") ? tok["pre_tokenizer"] : json();
  json steps = json::array();
  if (type_of(pt, where) == "Sequence" && pt.contains("pretokenizers") && pt["pretokenizers"].is_array()) steps = pt["pretokenizers"];
  else if (pt.is_object()) steps.push_back(pt);
  if (steps.size() == 2 && type_of(steps[0], where) == "Split" && byte_level(steps[1], false, where)) {
    const json& s = steps[0];
    const json pattern = s.value("pattern", json::object());
    const std::string regex = pattern.is_object() ? json_string(pattern, "Regex", where).value_or("") : std::string();
    if (json_string(s, "behavior", where).value_or("") == "Isolated" && !json_bool(s, "invert", where).value_or(false)) {
      if (regex == kLlama3Regex) return "llama-bpe";
      if (regex == kQwen2Regex) return "qwen2";
    }
  }
  if (steps.size() == 1 && byte_level(steps[0], true, where)) return "gpt-2";
  if (steps.size() == 2 && type_of(steps[0], where) == "Digits" && json_bool(steps[0], "individual_digits", where).value_or(false) &&
      byte_level(steps[1], true, where))
    return "smollm";
  std::string seen;
  for (const json& s : steps) seen += (seen.empty() ? "" : ", ") + type_of(s, where);
  fail(file, "pre_tokenizer [" + seen + "] is not one conveyor recognizes (Llama 3's, Qwen2's, GPT-2's or SmolLM's byte-level splits)" +
                  kHfConvertHint);
}

std::string replace_all(const std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t f; (f = s.find(from, pos)) != std::string::npos; pos = f + from.size()) out.append(s, pos, f - pos).append(to);
  return out.append(s, pos);
}

std::vector<std::string> read_merges(const json& model, const std::string& where) {
  std::vector<std::string> out;
  const json merges = model.value("merges", json::array());
  if (!merges.is_array()) fail(where, "model.merges is not an array");
  out.reserve(merges.size());
  for (const json& m : merges) {
    if (m.is_string()) {
      out.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      // Spaces inside a pair are written as U+0120, as the converter does for the "a b" form.
      out.push_back(replace_all(m[0].get<std::string>(), " ", "\xC4\xA0") + " " +
                    replace_all(m[1].get<std::string>(), " ", "\xC4\xA0"));
    } else {
      fail(where, "model.merges holds " + m.dump().substr(0, 40) + ", expected \"a b\" or [\"a\", \"b\"]");
    }
  }
  return out;
}

/// The content of a tokenizer_config.json *_token entry: a string or an AddedToken object.
std::optional<std::string> token_content(const json& cfg, const std::string& key) {
  const auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

std::string chat_template_of(const fs::path& dir, const json& tcfg, const std::string& where) {
  const auto it = tcfg.find("chat_template");
  if (it != tcfg.end() && it->is_string()) return it->get<std::string>();
  if (it != tcfg.end() && it->is_array()) {  // named templates: "default" is tokenizer.chat_template
    for (const json& t : *it)
      if (t.is_object() && t.value("name", json()) == "default" && t.contains("template") && t["template"].is_string())
        return t["template"].get<std::string>();
    return "";
  }
  if (it != tcfg.end() && !it->is_null()) fail(where, "chat_template is a " + std::string(it->type_name()) + ", expected a string or a list");
  if (hf_is_file(dir / "chat_template.jinja")) return read_text_file((dir / "chat_template.jinja").string());
  if (hf_is_file(dir / "chat_template.json")) {
    const json j = read_json_file((dir / "chat_template.json").string());
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string()) return j["chat_template"].get<std::string>();
  }
  return "";
}

} // namespace

const char* const kHfConvertHint = "; convert the model with llama.cpp's convert_hf_to_gguf.py and pass the GGUF";

bool hf_looks_special(const std::string& t) {
  auto wrapped = [&](std::string_view a, std::string_view b) {
    return t.size() >= a.size() + b.size() && t.compare(0, a.size(), a) == 0 && t.compare(t.size() - b.size(), b.size(), b) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

json read_hf_tokenizer_config(const std::string& dir) {
  const std::string where = (fs::path(dir) / "tokenizer_config.json").string();
  const json tcfg = hf_is_file(where) ? read_json_file(where) : json::object();
  if (!tcfg.is_object()) fail(where, "is not a JSON object");
  return tcfg;
}

hf_special_vocab read_hf_special_vocab(const std::string& dir, const json& tok, const json& tcfg, const json& config, int64_t n_vocab) {
  const fs::path root(dir);
  const std::string cfg_where = (root / "tokenizer_config.json").string();
  const json added = tok.is_object() ? tok.value("added_tokens", json::array()) : json::array();
  auto added_id = [&](const std::optional<std::string>& content) -> std::optional<int64_t> {
    if (!content || !added.is_array()) return std::nullopt;
    for (const json& a : added)
      if (a.is_object() && a.value("content", json()) == *content && a.value("id", json()).is_number_integer()) return a["id"].get<int64_t>();
    return std::nullopt;
  };
  // SpecialVocab._set_special_token skips an id outside the vocabulary, so config.json's id, read
  // next, still counts when tokenizer_config.json's is out of range.
  auto in_vocab = [&](std::optional<int64_t> id) { return id && *id >= 0 && *id < n_vocab ? id : std::nullopt; };
  hf_special_vocab s;
  for (const auto& [typ, out] : {std::pair{"bos", &s.bos}, {"eos", &s.eos}, {"unk", &s.unk}, {"pad", &s.pad}}) {
    std::optional<int64_t> id = in_vocab(added_id(token_content(tcfg, std::string(typ) + "_token")));
    const auto cfg_id = config.find(std::string(typ) + "_token_id");
    if (!id && cfg_id != config.end() && cfg_id->is_number_integer()) id = in_vocab(cfg_id->get<int64_t>());  // lists are skipped
    *out = id;
  }
  // add_bos/add_eos: the post-processor decides first (a TemplateProcessing that starts with a
  // special token adds BOS; ByteLevel adds nothing), then tokenizer_config.json's flags.
  const json pp = tok.is_object() ? tok.value("post_processor", json()) : json();
  const std::string tok_where = (root / "tokenizer.json").string();
  const json procs = type_of(pp, tok_where) == "Sequence" ? pp.value("processors", json::array()) : json::array({pp});
  const auto eos_text = token_content(tcfg, "eos_token");
  for (const json& p : procs) {
    if (type_of(p, tok_where) == "ByteLevel") {
      if (!s.add_bos) s.add_bos = false;
      if (!s.add_eos) s.add_eos = false;
    } else if (type_of(p, tok_where) == "TemplateProcessing" && p.contains("single") && p["single"].is_array() && p["single"].size() > 1) {
      const json& single = p["single"];
      s.add_bos = single.front().is_object() && single.front().contains("SpecialToken");
      const json last = single.back().is_object() ? single.back().value("SpecialToken", json()) : json();
      if (last.is_object() && last.contains("id")) s.add_eos = eos_text && last["id"] == *eos_text;
    }
  }
  if (!s.add_bos) s.add_bos = json_bool(tcfg, "add_bos_token", cfg_where);
  if (!s.add_eos) s.add_eos = json_bool(tcfg, "add_eos_token", cfg_where);
  s.chat_template = chat_template_of(root, tcfg, cfg_where);
  return s;
}

void add_hf_special_vocab(const hf_special_vocab& s, gguf_kvs& kvs) {
  for (const auto& [id, key] : {std::pair{s.bos, "bos"}, {s.eos, "eos"}, {s.unk, "unknown"}, {s.pad, "padding"}})
    if (id) kvs.emplace_back(std::string("tokenizer.ggml.") + key + "_token_id", gguf_u32(static_cast<uint32_t>(*id)));
  if (s.add_bos) kvs.emplace_back("tokenizer.ggml.add_bos_token", gguf_bool(*s.add_bos));
  if (s.add_eos) kvs.emplace_back("tokenizer.ggml.add_eos_token", gguf_bool(*s.add_eos));
  if (!s.chat_template.empty()) kvs.emplace_back("tokenizer.chat_template", gguf_str(s.chat_template));
}

void add_hf_tokenizer(const std::string& dir, const json& config, int64_t n_vocab, gguf_kvs& kvs) {
  const fs::path root(dir);
  // As convert_hf_to_gguf.py (_set_vocab_sentencepiece first): tokenizer.model wins when present.
  if (hf_is_file(root / "tokenizer.model")) return add_hf_spm_tokenizer(dir, config, n_vocab, kvs);
  const std::string where = (root / "tokenizer.json").string();
  if (!hf_is_file(root / "tokenizer.json"))
    fail(where, "missing; a Hugging Face model folder needs its tokenizer.json (or a SentencePiece tokenizer.model)");
  const json tok = read_json_file(where);
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object()) fail(where, "has no \"model\" object");
  const json& model = tok["model"];
  if (type_of(model, where) != "BPE") fail(where, "model type '" + type_of(model, where) + "' is not supported (conveyor reads byte-level BPE)" + kHfConvertHint);
  // The converter's LlamaHfVocab would take such a file through transformers, scoring every token
  // -1000, which loses the merge order; the SentencePiece vocabulary is in tokenizer.model.
  if (json_bool(model, "byte_fallback", where).value_or(false))
    fail(where, "is a SentencePiece-style BPE (byte_fallback, as Llama 2 and Mistral ship) and the folder has no "
                "tokenizer.model, the file conveyor reads such vocabularies from; add the model's tokenizer.model, or "
                "convert the model with llama.cpp's convert_hf_to_gguf.py and pass the GGUF");
  const json norm = tok.value("normalizer", json());
  if (!norm.is_null() && type_of(norm, where) != "NFC") fail(where, "normalizer '" + type_of(norm, where) + "' is not supported" + kHfConvertHint);
  const std::string pre = detect_pre(tok, where);

  std::vector<std::string> tokens(static_cast<size_t>(n_vocab));
  std::vector<int32_t> types(static_cast<size_t>(n_vocab), 0);
  auto place = [&](const std::string& text, const json& id, int32_t type) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab)
      fail(where, "token '" + text.substr(0, 40) + "' has id " + id.dump() + ", outside the model's vocab_size " + std::to_string(n_vocab));
    tokens[id.get<size_t>()] = text;
    types[id.get<size_t>()] = type;
  };
  const json vocab = model.value("vocab", json::object());
  if (!vocab.is_object()) fail(where, "model.vocab is not an object");
  for (const auto& [text, id] : vocab.items()) place(text, id, 1);
  const json added = tok.value("added_tokens", json::array());
  if (!added.is_array()) fail(where, "added_tokens is not an array");
  for (const json& a : added) {
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string()) fail(where, "an added_tokens entry has no content");
    const std::string text = a["content"].get<std::string>();
    const bool control = json_bool(a, "special", where).value_or(false) || hf_looks_special(text);
    place(control ? text : spm_unescape_spaces(text), a.value("id", json()), control ? 3 : 4);
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == 0) {  // an id nothing names (the config's vocab_size is larger): unused
      tokens[i] = "[PAD" + std::to_string(i) + "]";
      types[i] = 5;
    }
  }

  kvs.emplace_back("tokenizer.ggml.model", gguf_str("gpt2"));
  kvs.emplace_back("tokenizer.ggml.pre", gguf_str(pre));
  kvs.emplace_back("tokenizer.ggml.tokens", gguf_strs(std::move(tokens)));
  kvs.emplace_back("tokenizer.ggml.token_type", gguf_i32s(types));
  kvs.emplace_back("tokenizer.ggml.merges", gguf_strs(read_merges(model, where)));
  add_hf_special_vocab(read_hf_special_vocab(dir, tok, read_hf_tokenizer_config(dir), config, n_vocab), kvs);
}

} // namespace conveyor::model
