// What a Hugging Face folder conveyor cannot run gives: one line naming the file and the problem
// (and the fix where there is one), never a crash. Each case edits a copy of a tiny folder from
// scripts/make_arch_models.py; malformed safetensors files are written by the test itself.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "hf_test_files.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/hf_folder.hpp"
#include "model/formats/llama_config.hpp"
#include "model/formats/safetensors.hpp"
#include "model/model_path.hpp"
#include "model/text/tokenizer.hpp"
#include "model_files.hpp"

namespace conveyor::model {
namespace {

namespace t = testing;

/// Opens `dir` expecting E whose message holds every one of `parts` and is one line.
template <class E>
void expect_error(const std::string& dir, std::initializer_list<std::string> parts) {
  try {
    (void)open_model(dir);
    BOOST_FAIL("expected an error for " << dir);
  } catch (const E& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find('\n') == std::string::npos, msg);
    for (const std::string& p : parts) BOOST_TEST(msg.find(p) != std::string::npos, "'" << p << "' not in: " << msg);
  }
}

std::string fresh(const std::string& name, const char* from = "qwen2.hf-f32") { return t::copy_arch_folder(from, name); }

void edit_json(const std::string& path, const std::function<void(nlohmann::json&)>& f) {
  nlohmann::json c = t::read_json(path);
  f(c);
  t::write_json(path, c);
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& f) { edit_json(dir + "/config.json", f); }

/// Replaces `path` with a symlink to itself: stat() fails with ELOOP, even for root.
void make_symlink_loop(const std::string& path) {
  std::filesystem::remove(path);
  std::filesystem::create_symlink(std::filesystem::path(path).filename(), path);
}

/// Rewrites the folder's model.safetensors with `f` applied to its tensors.
void edit_tensors(const std::string& dir, const std::function<void(std::vector<t::st_tensor>&)>& f) {
  auto tensors = t::read_st(dir + "/model.safetensors");
  f(tensors);
  t::write_st(dir + "/model.safetensors", tensors);
}

t::st_tensor& tensor(std::vector<t::st_tensor>& ts, const std::string& name) {
  for (auto& x : ts)
    if (x.name == name) return x;
  throw std::runtime_error("no tensor " + name);
}

} // namespace

BOOST_AUTO_TEST_SUITE(hf_folder_errors)

BOOST_AUTO_TEST_CASE(unknown_architecture) {
  const std::string dir = fresh("arch");
  edit_config(dir, [](auto& c) { c["architectures"] = {"GemmaForCausalLM"}; });
  expect_error<model_error>(dir, {"config.json", "GemmaForCausalLM", "not supported", "Qwen2ForCausalLM"});
}

BOOST_AUTO_TEST_CASE(unsupported_dtypes) {
  for (const std::string dtype : {"I8", "F8_E4M3"}) {
    const std::string dir = fresh("dtype_" + dtype);
    edit_tensors(dir, [&](auto& ts) {
      auto& e = tensor(ts, "model.layers.0.mlp.up_proj.weight");
      e.dtype = dtype;
      e.bytes.resize(e.bytes.size() / 4);  // one byte per element
    });
    expect_error<model_error>(dir, {"model.layers.0.mlp.up_proj.weight", "dtype " + dtype, "F32, F16 and BF16"});
  }
}

BOOST_AUTO_TEST_CASE(missing_files) {
  const std::string no_config = fresh("no_config");
  std::filesystem::remove(no_config + "/config.json");
  expect_error<model_error>(no_config, {"config.json", "missing"});
  const std::string no_weights = fresh("no_weights");
  std::filesystem::remove(no_weights + "/model.safetensors");
  expect_error<model_error>(no_weights, {"no model.safetensors"});
  const std::string no_tok = fresh("no_tokenizer");
  std::filesystem::remove(no_tok + "/tokenizer.json");
  expect_error<tokenizer_error>(no_tok, {"tokenizer.json", "missing"});
  BOOST_CHECK_THROW(resolve_model(no_tok + "/nothing-here"), model_error);
}

BOOST_AUTO_TEST_CASE(malformed_config_json) {
  const std::string dir = fresh("bad_json");
  t::write_bytes(dir + "/config.json", "{\"architectures\": [\"Qwen2ForCausalLM\"], ");
  expect_error<model_error>(dir, {"config.json", "malformed JSON"});
  t::write_bytes(dir + "/config.json", std::string(100000, '[') + std::string(100000, ']'));
  expect_error<model_error>(dir, {"config.json", "nested deeper"});
  const std::string typed = fresh("bad_field");
  edit_config(typed, [](auto& c) { c["hidden_size"] = "64"; });
  expect_error<model_error>(typed, {"config.json", "'hidden_size'", "expected an integer"});
  edit_config(typed, [](auto& c) { c["hidden_size"] = -64; });
  expect_error<model_error>(typed, {"'hidden_size'", "out of range"});
}

BOOST_AUTO_TEST_CASE(unsupported_rope_scaling) {
  for (const std::string type : {"yarn", "dynamic", "longrope"}) {
    const std::string dir = fresh("rope_" + type);
    edit_config(dir, [&](auto& c) { c["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}}; });
    expect_error<model_error>(dir, {"config.json", "rope_scaling type '" + type + "'", "not supported"});
  }
  const std::string llama3_on_qwen = fresh("rope_llama3_qwen");
  edit_config(llama3_on_qwen, [](auto& c) { c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; });
  expect_error<model_error>(llama3_on_qwen, {"rope_scaling type 'llama3'"});
  const std::string linear = fresh("rope_linear");
  edit_config(linear, [](auto& c) { c["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}}; });
  const gguf_file f = open_model(linear);
  BOOST_TEST(f.get_string("qwen2.rope.scaling.type").value() == "linear");
  BOOST_TEST(f.get_float("qwen2.rope.scaling.factor").value() == 4.0);
  BOOST_TEST(llama_config::from_gguf(f).rope_freq_scale == 0.25f);
}

BOOST_AUTO_TEST_CASE(missing_tensor_and_wrong_shape) {
  const std::string missing = fresh("missing_tensor");
  edit_tensors(missing, [](auto& ts) { std::erase_if(ts, [](auto& x) { return x.name == "model.layers.1.mlp.up_proj.weight"; }); });
  expect_error<model_error>(missing, {"missing tensor 'model.layers.1.mlp.up_proj.weight'"});
  const std::string shape = fresh("wrong_shape");
  edit_config(shape, [](auto& c) { c["intermediate_size"] = 128; });
  expect_error<model_error>(shape, {"has shape [160, 64]", "config.json implies [128, 64]"});
  const std::string extra = fresh("extra_tensor");
  edit_tensors(extra, [](auto& ts) { ts.push_back({"model.layers.0.mlp.up_proj.bias", "F32", {160}, std::string(640, '\0')}); });
  expect_error<model_error>(extra, {"unexpected tensor 'model.layers.0.mlp.up_proj.bias'"});
}

BOOST_AUTO_TEST_CASE(malformed_safetensors) {
  const std::string dir = fresh("bad_st");
  const std::string st = dir + "/model.safetensors";
  const std::string good = t::read_bytes(st);
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  // Truncated inside the header, and a header length beyond the file.
  t::write_bytes(st, good.substr(0, 8 + n / 2));
  expect_error<model_error>(dir, {"model.safetensors", "header length", "runs past the end"});
  std::string huge = good;
  const uint64_t big = uint64_t{1} << 62;
  std::memcpy(huge.data(), &big, 8);
  t::write_bytes(st, huge);
  expect_error<model_error>(dir, {"runs past the end"});
  // A header length that cuts the JSON short, and files too short to hold a length.
  std::string cut = good;
  const uint64_t shorter = n - 16;
  std::memcpy(cut.data(), &shorter, 8);
  t::write_bytes(st, cut);
  expect_error<model_error>(dir, {"model.safetensors", "malformed JSON"});
  t::write_bytes(st, "1234");
  expect_error<model_error>(dir, {"not a safetensors file"});
  t::write_bytes(st, "");
  expect_error<model_error>(dir, {"empty file"});
  // Data offsets past the data section, inverted, or disagreeing with dtype x shape.
  const nlohmann::json entry_of = {{"dtype", "F32"}, {"shape", {2, 2}}};
  for (const auto& [offsets, want] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{0, 1 << 20}, "outside the data section"}, {{12, 8}, "outside the data section"},
           {{0, 12}, "holds 12 bytes but its dtype and shape need 16"}}) {
    nlohmann::json h = {{"model.norm.weight", entry_of}};
    h["model.norm.weight"]["data_offsets"] = offsets;
    t::write_st_raw(st, h, std::string(16, '\0'));
    expect_error<model_error>(dir, {"tensor 'model.norm.weight'", want});
  }
  nlohmann::json h = {{"x", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 0}}}}};
  t::write_st_raw(st, h, "");
  expect_error<model_error>(dir, {"tensor 'x'", "non-negative integer"});
  h = {{"x", {{"dtype", "F32"}, {"shape", {uint64_t{1} << 39, uint64_t{1} << 39}}, {"data_offsets", {0, 0}}}}};
  t::write_st_raw(st, h, "");
  expect_error<model_error>(dir, {"tensor 'x'", "overflows"});
  h = {{"x", {{"dtype", "Q4"}, {"shape", {1}}, {"data_offsets", {0, 1}}}}};
  t::write_st_raw(st, h, "1");
  expect_error<model_error>(dir, {"unknown dtype 'Q4'"});
}

BOOST_AUTO_TEST_CASE(mutated_safetensors_never_crash) {
  // Random byte flips and truncations of a real file: each parse succeeds with in-range tensors
  // or fails with one model_error, never reading outside the buffer (run under ASan to see it).
  const std::string good = t::read_bytes(t::arch_models_dir() + "/qwen2.hf-f32/model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto next = [&] { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; };
  int failures = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string b = good.substr(0, i % 3 == 0 ? next() % good.size() : good.size());
    const size_t span = std::min<size_t>(b.size(), 8 + n);
    for (int k = 0; k < 1 + i % 4 && span > 0; ++k) b[next() % span] = static_cast<char>(next());
    try {
      const auto ts = parse_safetensors(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "mutated");
      for (const auto& x : ts) {
        const auto* base = reinterpret_cast<const uint8_t*>(b.data());
        BOOST_REQUIRE(x.data >= base && x.data + x.nbytes <= base + b.size());
      }
    } catch (const model_error& e) {
      ++failures;
      BOOST_REQUIRE(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
  BOOST_TEST(failures > 500);
}

BOOST_AUTO_TEST_CASE(sharded_index_problems) {
  const std::string dir = fresh("bad_index");
  std::filesystem::rename(dir + "/model.safetensors", dir + "/part.safetensors");
  t::write_json(dir + "/model.safetensors.index.json", {{"weight_map", {{"model.norm.weight", "../../etc/passwd"}}}});
  expect_error<model_error>(dir, {"model.safetensors.index.json", "not a file in the folder"});
  t::write_json(dir + "/model.safetensors.index.json", {{"weight_map", {{"model.norm.weight", "gone.safetensors"}}}});
  expect_error<model_error>(dir, {"gone.safetensors", "missing"});
  t::write_json(dir + "/model.safetensors.index.json", {{"weight_map", {{"model.nope", "part.safetensors"}}}});
  expect_error<model_error>(dir, {"missing tensor 'model.nope'"});
}

BOOST_AUTO_TEST_CASE(sentencepiece_tokenizer_json_without_tokenizer_model_is_refused_clearly) {
  const std::string dir = fresh("spm");
  nlohmann::json tok = t::read_json(dir + "/tokenizer.json");
  tok["model"]["byte_fallback"] = true;
  t::write_json(dir + "/tokenizer.json", tok);
  expect_error<tokenizer_error>(dir, {"tokenizer.json", "SentencePiece", "no tokenizer.model", "convert_hf_to_gguf.py"});
  tok["model"]["byte_fallback"] = false;
  tok["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}};
  t::write_json(dir + "/tokenizer.json", tok);
  expect_error<tokenizer_error>(dir, {"pre_tokenizer [Metaspace]", "not one conveyor recognizes"});
}

BOOST_AUTO_TEST_CASE(corrupt_tokenizer_model) {
  // libsentencepiece refuses each; the CLI prints the line and exits 2 (tests/integration/cli_test.cpp).
  const std::string dir = fresh("bad_spm", "mistral.hf-f32");
  const std::string good = t::read_bytes(dir + "/tokenizer.model");
  for (const std::string& bad : {std::string("not a protobuf at all \xFF\xFF\xFF"), good.substr(0, good.size() / 2), std::string()}) {
    BOOST_TEST_CONTEXT(bad.size() << " bytes") {
      t::write_bytes(dir + "/tokenizer.model", bad);
      expect_error<tokenizer_error>(dir, {"tokenizer.model", "is not a SentencePiece model"});
    }
  }
  std::filesystem::remove(dir + "/tokenizer.model");
  expect_error<tokenizer_error>(dir, {"tokenizer.json", "missing", "tokenizer.model"});
}

BOOST_AUTO_TEST_CASE(json_fields_of_the_wrong_type_are_one_line) {
  // nlohmann's value()/get<>() threw type_error for these, which the CLI reported as an internal
  // error (exit 1). A null reads as absent, as the converter's dict.get() does.
  struct edit_case {
    const char* folder;
    const char* file;
    std::function<void(nlohmann::json&)> edit;
    std::string want;  ///< "" when the folder opens
  };
  const auto pretok = [](nlohmann::json& j) -> nlohmann::json& { return j["pre_tokenizer"]["pretokenizers"][1]; };
  const std::vector<edit_case> cases{
      {"qwen2.hf-f32", "tokenizer.json", [](auto& j) { j["pre_tokenizer"]["type"] = 5; }, "'type' is a number, expected a string"},
      {"qwen2.hf-f32", "tokenizer.json", [&](auto& j) { pretok(j)["add_prefix_space"] = nullptr; }, ""},
      {"qwen2.hf-f32", "tokenizer.json", [&](auto& j) { pretok(j)["use_regex"] = "no"; }, "'use_regex' is a string, expected true or false"},
      {"qwen2.hf-f32", "tokenizer.json", [](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = 1; }, "'behavior' is a number"},
      {"qwen2.hf-f32", "tokenizer.json", [](auto& j) { j["model"]["byte_fallback"] = nullptr; }, ""},
      {"qwen2.hf-f32", "tokenizer.json", [](auto& j) { j["model"]["byte_fallback"] = 0; }, "'byte_fallback' is a number"},
      {"qwen2.hf-f32", "tokenizer.json", [](auto& j) { j["added_tokens"][0]["special"] = nullptr; }, ""},
      {"qwen2.hf-f32", "tokenizer.json", [](auto& j) { j["added_tokens"][0]["special"] = "yes"; }, "'special' is a string"},
      {"qwen2.hf-f32", "tokenizer.json", [](auto& j) { j["post_processor"] = {{"type", nullptr}}; }, ""},
      {"qwen2.hf-f32", "tokenizer_config.json", [](auto& j) { j["chat_template"] = {{{"name", 5}, {"template", "x"}}}; }, ""},
      {"mistral.hf-f32", "tokenizer_config.json",
       [](auto& j) { j["added_tokens_decoder"] = {{"300", {{"content", "<x>"}, {"special", nullptr}}}}; }, ""},
      {"mistral.hf-f32", "tokenizer_config.json",
       [](auto& j) { j["added_tokens_decoder"] = {{"300", {{"content", "<x>"}, {"special", 1}}}}; }, "'special' is a number"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const edit_case& c = cases[i];
    BOOST_TEST_CONTEXT("case " << i << ": " << c.file << " -> " << c.want) {
      const std::string dir = fresh("wrong_type_" + std::to_string(i), c.folder);
      edit_json(dir + "/" + c.file, c.edit);
      if (c.want.empty()) BOOST_CHECK_NO_THROW((void)open_model(dir));
      else expect_error<model_error>(dir, {c.file, c.want});
    }
  }
}

BOOST_AUTO_TEST_CASE(files_that_cannot_be_looked_at_are_one_line) {
  // std::filesystem's throwing calls escaped as filesystem_error (exit 1). A symlink loop makes
  // stat() fail (ELOOP) for root too; permissions are checked below only when they bite.
  const std::vector<std::pair<const char*, const char*>> cases{
      {"qwen2.hf-f32", "config.json"},          {"qwen2.hf-f32", "tokenizer.json"},
      {"qwen2.hf-f32", "model.safetensors"},    {"qwen2.hf-f32", "model.safetensors.index.json"},
      {"qwen2.hf-f32", "chat_template.jinja"},  {"qwen2.hf-f32", "tokenizer_config.json"},
      {"mistral.hf-f32", "tokenizer.model"},    {"mistral.hf-f32", "added_tokens.json"},
      {"mistral.hf-f32", "tokenizer.json"},
  };
  for (const auto& [folder, file] : cases) {
    BOOST_TEST_CONTEXT(folder << "/" << file) {
      const std::string dir = fresh(std::string("loop_") + folder + "_" + file, folder);
      if (std::string(file) == "chat_template.jinja") edit_json(dir + "/tokenizer_config.json", [](auto& j) { j.erase("chat_template"); });
      make_symlink_loop(dir + "/" + file);
      expect_error<model_error>(dir, {file, "cannot access"});
    }
  }
  if (::geteuid() == 0) return;  // root reads a mode-000 file or folder anyway: nothing to refuse
  const std::string unreadable = fresh("unreadable_file");
  std::filesystem::permissions(unreadable + "/tokenizer.json", std::filesystem::perms::none);
  expect_error<model_error>(unreadable, {"tokenizer.json", "cannot open"});
  const std::string closed = fresh("unsearchable_folder");
  std::filesystem::permissions(closed, std::filesystem::perms::owner_read);
  expect_error<model_error>(closed, {"config.json", "cannot access"});
  std::filesystem::permissions(closed, std::filesystem::perms::owner_all);
}

BOOST_AUTO_TEST_CASE(vocab_size_is_checked_against_the_embedding_before_the_tokenizer) {
  // A typo used to build 1e9 token strings (~32 GiB, bad_alloc or the OOM killer) before the
  // shape check; now the embedding's shape is checked first.
  const std::string dir = fresh("vocab_typo");
  edit_config(dir, [](auto& c) { c["vocab_size"] = 1000000000; });
  expect_error<model_error>(dir, {"model.embed_tokens.weight", "config.json implies [1000000000, 64]"});
}

BOOST_AUTO_TEST_CASE(misaligned_tensor_data_is_refused) {
  // The safetensors library pads the header to 8 bytes; a header of 8k+2 bytes leaves every F32
  // tensor on a 2-byte boundary, which would be read through float pointers.
  const std::string dir = fresh("misaligned");
  const std::string st = dir + "/model.safetensors";
  const std::string good = t::read_bytes(st);
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  const uint64_t odd = n + 2;
  std::string bad(8, '\0');
  std::memcpy(bad.data(), &odd, 8);
  t::write_bytes(st, bad + good.substr(8, n) + "  " + good.substr(8 + n));
  expect_error<model_error>(dir, {"model.safetensors", "not aligned to its 4-byte F32 elements"});
  // An aligned header, and an F16 tensor at an odd offset.
  const nlohmann::json h = {{"a", {{"dtype", "U8"}, {"shape", {1}}, {"data_offsets", {0, 1}}}},
                            {"b", {{"dtype", "F16"}, {"shape", {1}}, {"data_offsets", {1, 3}}}}};
  t::write_st_raw(st, h, std::string(3, '\0'));
  expect_error<model_error>(dir, {"tensor 'b'", "not aligned to its 2-byte F16 elements"});
}

BOOST_AUTO_TEST_CASE(special_id_outside_the_vocabulary_falls_back_to_config_json) {
  // gguf-py's SpecialVocab skips tokenizer_config.json's out-of-range id, then takes config.json's.
  const std::string dir = fresh("special_fallback", "mistral.hf-f32");
  t::write_json(dir + "/tokenizer.json", {{"added_tokens", {{{"id", 99999}, {"content", "<big>"}}}}});
  edit_json(dir + "/tokenizer_config.json", [](auto& j) { j["eos_token"] = "<big>"; });
  edit_config(dir, [](auto& c) { c["eos_token_id"] = 5; });
  BOOST_TEST(open_model(dir).get_int("tokenizer.ggml.eos_token_id").value() == 5);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
