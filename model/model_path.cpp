// Model arguments: known names, GGUF paths and Hugging Face folders, and the dispatch between them.
#include "model/model_path.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>

#include "model/formats/hf_folder.hpp"
#include "model/formats/llama_config.hpp"
#include "model/text/hf_tokenizer.hpp"

namespace conveyor::model {
namespace {

// Known model names -> file name in the cache. scripts/fetch_model.py downloads them and checks
// their SHA-256 (the values are recorded there).
const std::map<std::string, std::string>& known_models() {
  static const std::map<std::string, std::string> m{{"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"}};
  return m;
}

} // namespace

std::string models_dir() {
  if (const char* c = std::getenv("CONVEYOR_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/conveyor/models";
}

std::string resolve_model(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  if (auto it = known_models().find(name_or_path); it != known_models().end()) {
    const std::string path = models_dir() + "/" + it->second;
    if (!fs::is_regular_file(path))
      throw model_error("model '" + name_or_path + "' is not fetched yet (looked for " + path +
                        "); run: scripts/fetch_model.py " + name_or_path + "  (./setup.sh does it too)");
    return path;
  }
  std::error_code ec;
  if (!fs::exists(name_or_path, ec))
    throw model_error(name_or_path +
                      ": no such file; pass a GGUF file, a Hugging Face model folder or a known model name (smollm2)");
  return name_or_path;
}

gguf_file open_model(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return open_hf_folder(path, add_hf_tokenizer);
  return gguf_file::open(path);
}

} // namespace conveyor::model
