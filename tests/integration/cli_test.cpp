// The `conveyor` command on bad input: a one-line error naming the file (or setting) and the
// problem, exit code 2, no crash.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.hpp>

#include "model/formats/gguf_writer.hpp"
#include "tiny_model.hpp"

namespace conveyor::testing {
namespace {

struct run_result {
  int code = -1;
  std::string output;
};

run_result run_conveyor(const std::string& args) {
  const std::string out = std::filesystem::temp_directory_path() / ("conveyor-cli-" + std::to_string(::getpid()) + ".txt");
  const std::string cmd = std::string(CONVEYOR_BINARY_DIR) + "/conveyor " + args + " >" + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(out);
  run_result r{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), std::string(std::istreambuf_iterator<char>(in), {})};
  std::filesystem::remove(out);
  return r;
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("conveyor-cli-" + std::to_string(::getpid()) + "-" + name)).string();
}

void expect_error(const std::string& args, const std::string& needle) {
  BOOST_TEST_CONTEXT("conveyor " << args) {
    const run_result r = run_conveyor(args);
    BOOST_TEST(r.code == 2, "exit code " << r.code << ", output: " << r.output);
    BOOST_TEST(r.output.find(needle) != std::string::npos, "expected '" << needle << "' in: " << r.output);
    BOOST_TEST(std::count(r.output.begin(), r.output.end(), '\n') <= 2, "not a short error: " << r.output);
  }
}

// Rewrites the ggml type id of tensor `name` in a GGUF file (same-size types only).
void patch_tensor_type(const std::string& path, const std::string& name, uint32_t type) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  const size_t at = bytes.find(name);
  BOOST_REQUIRE(at != std::string::npos);
  size_t p = at + name.size();
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, bytes.data() + p, 4);
  p += 4 + 8 * n_dims;
  f.seekp(static_cast<std::streamoff>(p));
  f.write(reinterpret_cast<const char*>(&type), 4);
}

} // namespace

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(generate_refuses_bad_model_files_with_exit_code_2) {
  expect_error("generate --model /nonexistent/model.gguf --prompt hi", "no such file");
  expect_error("generate --model smollm3 --prompt hi", "known model name");
  // A directory is read as a Hugging Face folder.
  expect_error("generate --model " + std::filesystem::temp_directory_path().string() + " --prompt hi", "config.json: missing");

  const std::string text = temp_file("notes.txt");
  std::ofstream(text) << "this is not a model\n";
  expect_error("generate --model " + text + " --prompt hi", "not a GGUF file");

  const std::string tiny = temp_file("tiny.gguf");
  model::write_tiny_llama(tiny, model::tiny_config_a());
  const std::string truncated = temp_file("truncated.gguf");
  std::filesystem::copy_file(tiny, truncated, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(tiny) - 100);
  expect_error("generate --model " + truncated + " --prompt hi", "truncated");

  const std::string other_arch = temp_file("gpt2.gguf");
  model::gguf_writer w;
  w.add_kv("general.architecture", "gpt2");
  w.write(other_arch);
  expect_error("generate --model " + other_arch + " --prompt hi", "unsupported architecture 'gpt2'");

  auto spec = model::tiny_config_a();
  spec.attn_q = model::ggml_type::f16;
  const std::string odd_type = temp_file("i16.gguf");
  model::write_tiny_llama(odd_type, spec);
  patch_tensor_type(odd_type, "blk.0.attn_q.weight", 25);  // F16 -> I16: same size, not loadable
  expect_error("generate --model " + odd_type + " --prompt hi", "has type I16");
  patch_tensor_type(odd_type, "blk.0.attn_q.weight", 77);  // an id no ggml version has
  expect_error("generate --model " + odd_type + " --prompt hi", "unknown ggml type id 77");

  const std::string moe = temp_file("qwen2moe.gguf");
  model::gguf_writer m;
  m.add_kv("general.architecture", "qwen2moe");
  m.write(moe);
  expect_error("generate --model " + moe + " --prompt hi", "unsupported architecture 'qwen2moe' (conveyor runs llama, qwen2, qwen3");
  std::filesystem::remove(moe);

  expect_error("generate --model " + tiny + " --prompt hi --temperature -1", "temperature");
  expect_error("generate --model " + tiny + " --prompt hi --repetition-penalty 0", "repetition_penalty must be");
  for (const auto& p : {text, tiny, truncated, other_arch, odd_type}) std::filesystem::remove(p);
}

BOOST_AUTO_TEST_CASE(hf_folder_problems_exit_with_code_2) {
  // A Mistral-style Hugging Face folder whose tokenizer.model is no SentencePiece model. The
  // tokenizer is read before any weight is copied, so one embedding tensor gets the folder there.
  const std::filesystem::path dir = temp_file("spm-folder");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["MistralForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "vocab_size": 4})";
  std::string header = R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[4,8],"data_offsets":[0,128]}})";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string st(8, '\0');
  for (size_t i = 0; i < 8; ++i) st[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);  // little-endian length
  std::ofstream(dir / "model.safetensors", std::ios::binary) << st << header << std::string(128, '\0');
  std::ofstream(dir / "tokenizer.model", std::ios::binary) << "not a SentencePiece model \xFF\xFF";
  expect_error("generate --model " + dir.string() + " --prompt hi", "tokenizer.model: is not a SentencePiece model");
  // A field of the wrong type and a file stat() cannot look at (a symlink loop, which bites root
  // too) were uncaught nlohmann/std::filesystem exceptions: "internal error", exit 1.
  std::filesystem::remove(dir / "tokenizer.model");
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {}}, "pre_tokenizer": {"type": 5}})";
  for (const char* cmd : {"generate --prompt hi", "serve"})
    expect_error(std::string(cmd) + " --model " + dir.string(), "'type' is a number, expected a string");
  std::filesystem::remove(dir / "tokenizer.json");
  std::filesystem::create_symlink("tokenizer.json", dir / "tokenizer.json");
  expect_error("generate --prompt hi --model " + dir.string(), "tokenizer.json: cannot access");
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(serve_refuses_bad_settings_with_exit_code_2) {
  const std::string tiny = temp_file("tiny-serve.gguf");
  model::write_tiny_llama(tiny, model::tiny_config_a());
  expect_error("serve --model " + tiny + " --batching sometimes", "batching");
  expect_error("serve --model " + tiny + " --config /nonexistent/conveyor.toml", "conveyor.toml");
  const std::string cfg = temp_file("bad.toml");
  std::ofstream(cfg) << "scheduling_policy = \"lottery\"\n";
  expect_error("serve --model " + tiny + " --config " + cfg, "scheduling_policy");
  expect_error("serve --model " + tiny + " --max-num-seqs 0 --router tcp://127.0.0.1:* --pub tcp://127.0.0.1:* --pull tcp://127.0.0.1:*",
               "max_num_seqs");
  // Issue 26: two endpoints on one port name both flags (not "port in use, stop what holds it").
  expect_error("serve --model " + tiny + " --router tcp://127.0.0.1:45123 --pub tcp://127.0.0.1:45123 --pull tcp://127.0.0.1:*",
               "--router and --pub both name port 45123");
  expect_error("serve --model " + tiny + " --http-port 45124 --metrics-port 45124 --router tcp://127.0.0.1:* --pub tcp://127.0.0.1:* "
               "--pull tcp://127.0.0.1:* --no-journal", "--http-port and --metrics-port both name port 45124");
  // A repeatable setting in TOML is a list of strings (api_key = ["k1", "k2"]).
  std::ofstream(cfg) << "api_key = [1, 2]\n";
  expect_error("serve --model " + tiny + " --config " + cfg, "'api_key' must be a list of strings");
  // A pool that cannot hold a useful sequence is refused, not served with max_model_len 4.
  expect_error("serve --model " + tiny + " --device null --num-kv-blocks 1 --no-journal --router tcp://127.0.0.1:* --pub tcp://127.0.0.1:* "
               "--pull tcp://127.0.0.1:*", "too small to serve");
  std::filesystem::remove(tiny);
  std::filesystem::remove(cfg);
}

// An output file that cannot be written is an error naming the flag and the path (step-bench and
// gpu-bench dropped their --json results without a word).
BOOST_AUTO_TEST_CASE(an_unwritable_output_file_exits_with_code_2) {
  const std::string tiny = temp_file("tiny-out.gguf");
  model::write_tiny_llama(tiny, model::tiny_config_a());
  const std::string args = "step-bench --model " + tiny + " --batches 1 --steps 1 --prompt-len 4 --context 4 --json ";
  const run_result bad = run_conveyor(args + "/nonexistent/dir/r.json");  // after the results table
  BOOST_TEST(bad.code == 2, bad.output);
  BOOST_TEST(bad.output.find("conveyor step-bench: cannot write --json /nonexistent/dir/r.json") != std::string::npos, bad.output);
  const std::string written = temp_file("step-bench.json");
  const run_result r = run_conveyor(args + written);
  BOOST_TEST(r.code == 0, r.output);
  std::ifstream in(written);
  BOOST_TEST(std::string(std::istreambuf_iterator<char>(in), {}).find("\"decode\"") != std::string::npos);
  std::filesystem::remove(written);
  std::filesystem::remove(tiny);
}

// step-bench's paired comparison and verification table: the rows come out (JSON included) for
// every setting it takes, and a setting it does not take is refused at the start, naming them.
BOOST_AUTO_TEST_CASE(step_bench_against_and_draft_sequences) {
  const std::string tiny = temp_file("tiny-against.gguf");
  model::write_tiny_llama(tiny, model::tiny_config_a());
  const std::string json = temp_file("against.json");
  const std::string args = "step-bench --model " + tiny + " --batches 1,3 --steps 2 --prompt-len 4 --context 20 --threads 2 ";
  for (const std::string against : {"same", "kv-head-items", "block-size=8", "split-keys=0"}) {
    const run_result r = run_conveyor(args + "--against " + against + " --against-drafts 2 --drafts 3 --draft-seqs 3 --json " + json);
    BOOST_TEST(r.code == 0, r.output);
    BOOST_TEST(r.output.find("against " + against + ": decode steps (2 drafts each)") != std::string::npos, r.output);
    BOOST_TEST(r.output.find("3 sequence(s) verifying k drafts each") != std::string::npos, r.output);
    std::ifstream in(json);
    const std::string text(std::istreambuf_iterator<char>(in), {});
    BOOST_TEST(text.find("\"against\"") != std::string::npos);
    BOOST_TEST(text.find("\"geo_ratio\"") != std::string::npos);
    BOOST_TEST(text.find("\"seqs\": 3") != std::string::npos, text);
  }
  for (const std::string bad : {"faster", "block-size=0", "block-size=8x", "split-keys=-1"}) {
    const run_result r = run_conveyor(args + "--against " + bad);
    BOOST_TEST(r.code == 2, r.output);
    BOOST_TEST(r.output.find("expected kv-head-items, block-size=N (N in 1..256), split-keys=N (N in 0..1048576) or same") != std::string::npos, r.output);
  }
  std::filesystem::remove(json);
  std::filesystem::remove(tiny);
}

// The sockets are bound before the model loads: with a taken port and a file that is no model,
// the error is the port's (it comes at once, not after loading a model).
BOOST_AUTO_TEST_CASE(a_taken_port_fails_before_the_model_loads) {
  zmq::context_t ctx;
  zmq::socket_t holder(ctx, zmq::socket_type::router);
  holder.bind("tcp://127.0.0.1:*");
  const std::string taken = holder.get(zmq::sockopt::last_endpoint);
  const std::string not_a_model = temp_file("not-a-model.gguf");
  std::ofstream(not_a_model) << "not a GGUF file";
  expect_error("serve --model " + not_a_model + " --no-journal --router " + taken + " --pub tcp://127.0.0.1:* --pull tcp://127.0.0.1:*",
               "--router");
  std::filesystem::remove(not_a_model);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
