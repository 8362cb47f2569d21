// llama-detokenize: llama.cpp's own detokenization of id sequences, for scripts/make_vocab_goldens.py
// (llama-tokenize gives ids but cannot turn ids back into text). Loads a vocabulary-only GGUF.
//
//   llama-detokenize <vocab.gguf>  < ids.txt
//   llama-detokenize <vocab.gguf> --info     # one JSON line: n_tokens, bos, eos, add_bos, add_eos, eog
//
// Input: one line per sequence, token ids separated by spaces (an empty line is an empty sequence).
// Output: one line per input line, three fields separated by one space, each the hex of bytes:
//   llama_detokenize(remove_special=false, unparse_special=false)
//   llama_detokenize(remove_special=false, unparse_special=true)
//   the pieces llama_token_to_piece(lstrip=0, special=false) of each id, joined by ','  ("-" if none)
// Built by scripts/llama_ref/build.sh llama_detokenize against the static libraries of scripts/build_llama_cpp.sh.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string detokenize(const llama_vocab* vocab, const std::vector<llama_token>& ids, bool unparse_special) {
  std::string text(64 + 16 * ids.size(), '\0');
  int32_t n = llama_detokenize(vocab, ids.data(), int32_t(ids.size()), text.data(), int32_t(text.size()), false,
                               unparse_special);
  if (n < 0) {
    text.resize(size_t(-n));
    n = llama_detokenize(vocab, ids.data(), int32_t(ids.size()), text.data(), int32_t(text.size()), false,
                         unparse_special);
  }
  text.resize(size_t(n));
  return text;
}

std::string piece(const llama_vocab* vocab, llama_token id) {
  std::string text(64, '\0');
  int32_t n = llama_token_to_piece(vocab, id, text.data(), int32_t(text.size()), 0, false);
  if (n < 0) {
    text.resize(size_t(-n));
    n = llama_token_to_piece(vocab, id, text.data(), int32_t(text.size()), 0, false);
  }
  text.resize(size_t(n));
  return text;
}

void quiet(ggml_log_level, const char*, void*) {}

} // namespace

void print_info(const llama_vocab* vocab) {
  const int32_t n = llama_vocab_n_tokens(vocab);
  std::cout << "{\"n_tokens\": " << n << ", \"bos\": " << llama_vocab_bos(vocab) << ", \"eos\": "
            << llama_vocab_eos(vocab) << ", \"add_bos\": " << (llama_vocab_get_add_bos(vocab) ? "true" : "false")
            << ", \"add_eos\": " << (llama_vocab_get_add_eos(vocab) ? "true" : "false") << ", \"eog\": [";
  const char* sep = "";
  for (llama_token id = 0; id < n; ++id) {
    if (llama_vocab_is_eog(vocab, id)) {
      std::cout << sep << id;
      sep = ", ";
    }
  }
  std::cout << "]}\n";
}

int main(int argc, char** argv) {
  const bool info = argc == 3 && std::string(argv[2]) == "--info";
  if (argc != 2 && !info) {
    std::fprintf(stderr, "usage: %s <vocab.gguf> [--info] < ids.txt\n", argv[0]);
    return 2;
  }
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) {
    std::fprintf(stderr, "could not load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  if (info) print_info(vocab);
  for (std::string line; !info && std::getline(std::cin, line);) {
    std::vector<llama_token> ids;
    std::istringstream in(line);
    for (llama_token id; in >> id;) ids.push_back(id);
    std::string pieces;
    for (size_t i = 0; i < ids.size(); ++i) pieces += (i ? "," : "") + hex(piece(vocab, ids[i]));
    std::cout << hex(detokenize(vocab, ids, false)) << ' ' << hex(detokenize(vocab, ids, true)) << ' '
              << (ids.empty() ? "-" : pieces) << '\n';
  }
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
