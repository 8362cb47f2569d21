// tokenizer.model (SentencePiece, as Llama 2 and Mistral 7B folders ship it) -> the tokenizer.*
// GGUF keys, as convert_hf_to_gguf.py writes them (_create_vocab_sentencepiece, then gguf-py's
// SpecialVocab): each piece's text, score and type by id, ids up to config.json's vocab_size the
// file lacks as "[PAD<id>]" (unused, score -10000), added_tokens.json and tokenizer_config.json's
// added_tokens_decoder on top (score -1000), tokenizer.ggml.model "llama", so model/text/spm.cpp
// tokenizes it as llama.cpp does.
//
// The file is read with libsentencepiece (Debian's libsentencepiece-dev), the reference
// implementation that the converter itself calls through its Python binding: tokenizer.model is a
// serialized protobuf ModelProto whose format belongs to that library, not a format to hand-parse.
#include <sentencepiece_processor.h>

#include <filesystem>

#include "model/formats/hf_json.hpp"
#include "model/text/hf_tokenizer.hpp"
#include "model/text/tokenizer.hpp"
#include "model/text/unicode_bytes.hpp"

namespace conveyor::model {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& where, const std::string& problem) { throw tokenizer_error(where + ": " + problem); }

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

/// The model's NormalizerSpec.add_dummy_prefix. Debian's package ships no sentencepiece_model.pb.h,
/// so ModelProto (model_proto()) is an incomplete type here; the flag is read from what the
/// library's own normalizer does instead: with a dummy prefix "a" is encoded as "▁a" (one piece,
/// "▁" then "a", or ▁'s bytes when the vocabulary lacks it), without one as "a".
bool adds_dummy_prefix(const sentencepiece::SentencePieceProcessor& sp) {
  std::vector<std::string> pieces;
  if (!sp.Encode("a", &pieces).ok() || pieces.empty()) return true;
  return pieces[0].starts_with(kSpace) || pieces[0] == "<0xE2>";
}

} // namespace

void add_hf_spm_tokenizer(const std::string& dir, const json& config, int64_t n_vocab, gguf_kvs& kvs) {
  const fs::path root(dir);
  const std::string where = (root / "tokenizer.model").string();
  sentencepiece::SentencePieceProcessor sp;
  if (const auto st = sp.LoadFromSerializedProto(read_text_file(where)); !st.ok()) {
    const std::string why = st.error_message();  // the library's; a protobuf that does not parse names its source line
    fail(where, "is not a SentencePiece model (" + (why.find("ParseFromArray") != std::string::npos ? "not a ModelProto protobuf" : why) +
                    "); the folder needs the model's own tokenizer.model");
  }
  if (sp.GetPieceSize() <= 0) fail(where, "is a SentencePiece model with no pieces");

  const auto n = static_cast<size_t>(n_vocab);
  std::vector<std::string> tokens(n);
  std::vector<float> scores(n, -10000.0f);
  std::vector<int32_t> types(n, int32_t(token_kind::unused));
  for (size_t i = 0; i < n; ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
  // Pieces past config.json's vocab_size have no embedding row; the converter drops them too.
  for (int id = 0; id < sp.GetPieceSize() && id < n_vocab; ++id) {
    token_kind kind = token_kind::normal;  // the converter's order of checks; user-defined pieces stay normal
    if (sp.IsUnknown(id)) kind = token_kind::unknown;
    else if (sp.IsControl(id)) kind = token_kind::control;
    else if (sp.IsUnused(id)) kind = token_kind::unused;
    else if (sp.IsByte(id)) kind = token_kind::byte;
    tokens[size_t(id)] = sp.IdToPiece(id);
    scores[size_t(id)] = sp.GetScore(id);
    types[size_t(id)] = int32_t(kind);
  }

  auto place = [&](const std::string& file, const std::string& text, int64_t id, token_kind kind) {
    if (id < 0) fail(file, "token '" + text.substr(0, 40) + "' has the negative id " + std::to_string(id));
    if (id >= n_vocab) return;  // the converter warns and skips it
    tokens[size_t(id)] = text;
    scores[size_t(id)] = -1000.0f;
    types[size_t(id)] = int32_t(kind);
  };
  if (const fs::path added = root / "added_tokens.json"; hf_is_file(added)) {
    const json j = read_json_file(added.string());
    if (!j.is_object()) fail(added.string(), "is not a JSON object of token -> id");
    for (const auto& [text, id] : j.items()) {
      if (!id.is_number_integer()) fail(added.string(), "token '" + text.substr(0, 40) + "' has id " + id.dump() + ", not an integer");
      place(added.string(), text, id.get<int64_t>(), token_kind::user_defined);
    }
  }
  const json tcfg = read_hf_tokenizer_config(dir);
  const std::string tcfg_where = (root / "tokenizer_config.json").string();
  if (const json decoder = tcfg.value("added_tokens_decoder", json::object()); decoder.is_object()) {
    for (const auto& [key, entry] : decoder.items()) {
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(key, &used);
        if (used != key.size()) id = -1;
      } catch (const std::exception&) {
        id = -1;
      }
      if (id < 0 || !entry.is_object() || !entry.value("content", json()).is_string())
        fail(tcfg_where, "added_tokens_decoder['" + key.substr(0, 20) + "'] is not an id with a content string");
      const std::string text = entry["content"].get<std::string>();
      const bool control = json_bool(entry, "special", tcfg_where).value_or(false) || hf_looks_special(text);
      // The converter pre-normalizes a user-defined token's ▁ to spaces.
      place(tcfg_where, control ? text : spm_unescape_spaces(text), id, control ? token_kind::control : token_kind::user_defined);
    }
  }

  // tokenizer.json, when the folder has one too (real Mistral folders do), only names the special
  // tokens' ids and the post-processor that adds BOS, as in gguf-py's SpecialVocab.
  const fs::path tok_path = root / "tokenizer.json";
  const json tok = hf_is_file(tok_path) ? read_json_file(tok_path.string()) : json();
  hf_special_vocab special = read_hf_special_vocab(dir, tok, tcfg, config, n_vocab);
  // What the converter leaves unset llama.cpp defaults to (bos 1, eos 2, unk 0, add_bos true);
  // the model's own ids are those for Llama 2 and Mistral, and the right ones for any other.
  for (const auto& [out, id] : {std::pair{&special.bos, sp.bos_id()}, {&special.eos, sp.eos_id()}, {&special.unk, sp.unk_id()},
                                {&special.pad, sp.pad_id()}})
    if (!*out && id >= 0 && id < n_vocab) *out = id;
  if (!special.add_bos) special.add_bos = true;
  // The converter writes tokenizer_config.json's add_prefix_space when set; llama.cpp's default
  // (true) otherwise, which is the model's add_dummy_prefix for every SentencePiece model llama.cpp
  // runs. Reading the model's flag keeps one that turns it off right.
  const bool space_prefix = json_bool(tcfg, "add_prefix_space", tcfg_where).value_or(adds_dummy_prefix(sp));

  kvs.emplace_back("tokenizer.ggml.model", gguf_str("llama"));
  kvs.emplace_back("tokenizer.ggml.pre", gguf_str("default"));
  kvs.emplace_back("tokenizer.ggml.tokens", gguf_strs(std::move(tokens)));
  kvs.emplace_back("tokenizer.ggml.scores", gguf_f32s(scores));
  kvs.emplace_back("tokenizer.ggml.token_type", gguf_i32s(types));
  kvs.emplace_back("tokenizer.ggml.add_space_prefix", gguf_bool(space_prefix));
  add_hf_special_vocab(special, kvs);
}

} // namespace conveyor::model
