// Corrupt, truncated and hostile GGUF inputs: each case must be a one-line gguf_error
// "<path>: <problem>" naming the problem, never a crash or a huge allocation (run under ASan).
// Files are built byte by byte with raw_gguf so every field can be made wrong on purpose.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "model/formats/gguf.hpp"
#include "model/formats/gguf_writer.hpp"
#include "tiny_model.hpp"

namespace fs = std::filesystem;
using namespace conveyor::model;

namespace {

/// Little-endian GGUF byte builder with no validation at all.
struct raw_gguf {
  std::vector<uint8_t> b;
  template <class T> raw_gguf& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  raw_gguf& str(std::string_view s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  raw_gguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return put<uint32_t>(0x46554747u).put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  raw_gguf& kv_u32(std::string_view key, uint32_t v) { return str(key).put<uint32_t>(4).put<uint32_t>(v); }
  raw_gguf& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) {
      put<uint64_t>(n);
    }
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  raw_gguf& pad(size_t alignment = 32) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  raw_gguf& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("conveyor_gguf_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string write_bytes(const std::vector<uint8_t>& bytes, const std::string& name = "bad.gguf") {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  return path;
}

/// Opens `bytes` as a file and returns the gguf_error message ("" if it opened).
std::string open_error(const std::vector<uint8_t>& bytes) {
  const std::string path = write_bytes(bytes);
  try {
    gguf_file::open(path);
  } catch (const gguf_error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.starts_with(path + ": "));
    BOOST_TEST(msg.find('\n') == std::string::npos);
    return msg.substr(path.size() + 2);
  }
  return "";
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

/// A valid file: kvs "s" (a 200-byte string) and "a.b" (u32), tensors "w" (Q4_1 [64, 2]) at
/// data offset 0 and "n" (F32 [8]) at 160, which ends exactly at the end of the file.
raw_gguf valid_file() {
  raw_gguf r;
  r.header(2, 2).str("s").put<uint32_t>(8).str(std::string(200, 'x')).kv_u32("a.b", 7);
  r.tensor("w", {64, 2}, 3, 0).tensor("n", {8}, 0, 160).pad().zeros(160 + 32);
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(gguf_bad_input)

BOOST_AUTO_TEST_CASE(valid_baseline_opens) { BOOST_TEST(open_error(valid_file().b) == ""); }

BOOST_AUTO_TEST_CASE(not_a_gguf_file) {
  const std::vector<uint8_t> elf{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  BOOST_TEST(open_error(elf) == "not a GGUF file (magic is 0x7f454c46, expected 'GGUF')");
}

BOOST_AUTO_TEST_CASE(empty_and_tiny_files) {
  BOOST_TEST(open_error({}) == "empty file (0 bytes), not a GGUF file");
  BOOST_TEST(open_error({'G', 'G'}) == "not a GGUF file (only 2 bytes)");
}

BOOST_AUTO_TEST_CASE(truncated_header_kv_info_and_data) {
  const std::vector<uint8_t> full = valid_file().b;
  const auto cut = [&](size_t n) { return open_error({full.begin(), full.begin() + static_cast<long>(n)}); };
  BOOST_TEST(cut(6) == "truncated: header version at byte 4 needs 4 bytes but the file has 6 bytes");
  BOOST_TEST(contains(cut(20), "truncated: header metadata count at byte 16"));
  // Byte map: header 0..24, "s" 24..245 (string bytes from 45), "a.b" 245..264, "w" 264..305.
  BOOST_TEST(cut(30) == "header declares 2 metadata entries but the remaining 6 bytes hold at most 0");
  BOOST_TEST(cut(145) == "truncated: metadata 's' at byte 45 needs 200 bytes but the file has 145 bytes");
  BOOST_TEST(contains(cut(250), "truncated: key of metadata entry 1 at byte 245"));
  BOOST_TEST(contains(cut(258), "truncated: metadata 'a.b' value type at byte 256"));
  BOOST_TEST(contains(cut(290), "truncated: tensor 'w' ne[1] at byte 285"));
  BOOST_TEST(contains(cut(full.size() - 40), "truncated: tensor 'n' data ends at byte"));
  BOOST_TEST(contains(cut(full.size() - 1), "but the file has " + std::to_string(full.size() - 1) + " bytes"));
}

BOOST_AUTO_TEST_CASE(every_truncation_is_an_error) {
  const std::vector<uint8_t> full = valid_file().b;
  for (size_t n = 0; n < full.size(); ++n) {  // tensor 'n' ends exactly at the end of the file
    BOOST_TEST_CONTEXT("length " << n) { BOOST_TEST(open_error({full.begin(), full.begin() + static_cast<long>(n)}) != ""); }
  }
}

BOOST_AUTO_TEST_CASE(bad_versions) {
  BOOST_TEST(contains(open_error(raw_gguf().header(0, 0, 0).b), "unsupported GGUF version 0"));
  BOOST_TEST(contains(open_error(raw_gguf().header(0, 0, 1).b), "GGUF version 1 is no longer supported"));
  BOOST_TEST(contains(open_error(raw_gguf().header(0, 0, 4).b), "unsupported GGUF version 4"));
  BOOST_TEST(contains(open_error(raw_gguf().header(0, 0, 0x03000000u).b), "byte-swapped"));
  BOOST_TEST(open_error(raw_gguf().header(0, 0, 2).b) == "");
}

BOOST_AUTO_TEST_CASE(absurd_counts_fail_fast) {
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST(contains(open_error(raw_gguf().header(0, uint64_t{1} << 62).b), "declares 4611686018427387904 metadata entries"));
  BOOST_TEST(contains(open_error(raw_gguf().header(uint64_t{1} << 62, 0).b), "declares 4611686018427387904 tensors"));
  BOOST_TEST(contains(open_error(raw_gguf().header(~uint64_t{0}, ~uint64_t{0}).b), "metadata entries"));
  // Key length 2^63.
  BOOST_TEST(contains(open_error(raw_gguf().header(0, 1).put<uint64_t>(uint64_t{1} << 63).zeros(16).b),
                      "key of metadata entry 0 has length 9223372036854775808"));
  // String value length 2^63 and just past the end.
  BOOST_TEST(contains(open_error(raw_gguf().header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 63).b),
                      "metadata 'k' has length 9223372036854775808"));
  BOOST_TEST(contains(open_error(raw_gguf().header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(100).zeros(99).b),
                      "truncated: metadata 'k'"));
  // Array of 2^40 u32, and of 2^40 strings.
  for (uint32_t elem : {4u, 8u}) {
    const auto msg = open_error(raw_gguf().header(0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(elem).put<uint64_t>(uint64_t{1} << 40).zeros(64).b);
    BOOST_TEST(contains(msg, "metadata 'arr' declares 1099511627776 array elements"));
  }
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() < 1000);
}

BOOST_AUTO_TEST_CASE(unknown_value_types_and_deep_nesting) {
  BOOST_TEST(open_error(raw_gguf().header(0, 1).str("k").put<uint32_t>(13).zeros(8).b) ==
             "metadata 'k' has unknown value type 13");
  BOOST_TEST(open_error(raw_gguf().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(99).put<uint64_t>(0).b) ==
             "metadata 'k' is an array of unknown value type 99");
  raw_gguf deep;
  deep.header(0, 1).str("k").put<uint32_t>(9);
  for (int i = 0; i < 100; ++i) {
    deep.put<uint32_t>(9).put<uint64_t>(1);
  }
  BOOST_TEST(contains(open_error(deep.b), "nested deeper than 8"));
}

BOOST_AUTO_TEST_CASE(unknown_tensor_types) {
  for (uint32_t type : {4u, 31u, 33u, 36u, 38u, 40u, 1000u}) {
    BOOST_TEST_CONTEXT("type " << type) {
      const raw_gguf r = raw_gguf().header(1, 0).tensor("t", {256}, type, 0).pad().zeros(1024);
      BOOST_TEST(open_error(r.b) == "tensor 't' has unknown ggml type id " + std::to_string(type));
    }
  }
  // Known but not dequantizable (IQ4_NL, MXFP4): readable, the loader decides.
  const std::string path = write_bytes(raw_gguf().header(2, 0).tensor("iq", {32}, 20, 0).tensor("mx", {32}, 39, 32).pad().zeros(64).b);
  const gguf_file f = gguf_file::open(path);
  BOOST_TEST(type_name(f.find_tensor("iq")->type) == "IQ4_NL");
  BOOST_TEST(f.find_tensor("mx")->nbytes == 17u);
  BOOST_TEST(!is_dequantizable(f.find_tensor("iq")->type));
}

BOOST_AUTO_TEST_CASE(bad_tensor_geometry) {
  const auto one = [](std::vector<uint64_t> ne, uint32_t type, uint64_t offset = 0) {
    return open_error(raw_gguf().header(1, 0).tensor("t", std::move(ne), type, offset).pad().zeros(4096).b);
  };
  BOOST_TEST(one({33}, 3) == "tensor 't' has ne[0] = 33, not a multiple of the Q4_1 block size 32");
  BOOST_TEST(one({1, 1, 1, 1, 1}, 0) == "tensor 't' has 5 dimensions (at most 4 are allowed)");
  BOOST_TEST(one({4, ~uint64_t{0}}, 0) == "tensor 't' has negative dimension ne[1] = -1");
  BOOST_TEST(contains(one({uint64_t{1} << 40, uint64_t{1} << 40}, 0), "product of its dimensions overflows"));
  BOOST_TEST(contains(one({uint64_t{1} << 62}, 0), "byte size overflows"));
  BOOST_TEST(one({8}, 0, 4) == "tensor 't' has offset 4, not a multiple of the alignment 32");
  BOOST_TEST(contains(one({8}, 0, 4096), "truncated: tensor 't' data ends at byte 4192 but the file has"));
  BOOST_TEST(contains(one({1 << 20}, 0), "truncated: tensor 't' data ends at byte 4194368"));
  BOOST_TEST(contains(one({8}, 0, ~uint64_t{0} - 31), "truncated: tensor 't' data ends at byte > 2^64"));
  const std::string long_name(64, 'x');
  BOOST_TEST(contains(open_error(raw_gguf().header(1, 0).tensor(long_name, {8}, 0, 0).pad().zeros(32).b),
                      "name of tensor 0 has length 64 (limit 63)"));
}

BOOST_AUTO_TEST_CASE(duplicates) {
  BOOST_TEST(open_error(raw_gguf().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).b) == "duplicate metadata key 'k'");
  BOOST_TEST(open_error(raw_gguf().header(2, 0).tensor("t", {8}, 0, 0).tensor("t", {8}, 0, 32).pad().zeros(64).b) ==
             "duplicate tensor name 't'");
}

BOOST_AUTO_TEST_CASE(bad_alignment_values) {
  BOOST_TEST(open_error(raw_gguf().header(0, 1).kv_u32("general.alignment", 0).b) ==
             "general.alignment is 0, expected a nonzero power of two");
  BOOST_TEST(open_error(raw_gguf().header(0, 1).kv_u32("general.alignment", 48).b) ==
             "general.alignment is 48, expected a nonzero power of two");
  BOOST_TEST(open_error(raw_gguf().header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(32).b) ==
             "general.alignment has type u64, expected u32");
  // A valid non-default alignment moves the data section and the offset rule.
  raw_gguf r;
  r.header(1, 1).kv_u32("general.alignment", 64).tensor("t", {8}, 0, 0).pad(64).zeros(32);
  BOOST_TEST(open_error(r.b) == "");
}

BOOST_AUTO_TEST_CASE(missing_paths_and_directories) {
  const std::string missing = temp_path("does-not-exist.gguf");
  BOOST_CHECK_EXCEPTION(gguf_file::open(missing), gguf_error, [&](const gguf_error& e) {
    return std::string(e.what()) == missing + ": cannot open: No such file or directory";
  });
  const std::string dir = temp_path("");
  BOOST_CHECK_EXCEPTION(gguf_file::open(dir), gguf_error, [&](const gguf_error& e) {
    return std::string(e.what()) == dir + ": is a directory, not a GGUF file";
  });
  BOOST_CHECK_EXCEPTION(gguf_file::open("/dev/null"), gguf_error, [&](const gguf_error& e) {
    return std::string(e.what()) == "/dev/null: not a regular file";
  });
}

BOOST_AUTO_TEST_CASE(random_corruption_never_crashes) {
  const std::string good = temp_path("fuzz_src.gguf");
  tiny_llama_spec spec;
  spec.n_layer = 1;
  write_tiny_llama(good, spec);
  std::ifstream in(good, std::ios::binary);
  const std::vector<uint8_t> base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  tiny_rng rng(7);
  int errors = 0;
  for (int it = 0; it < 300; ++it) {
    std::vector<uint8_t> bytes = base;
    // Corrupt 1-4 bytes, mostly in the header/metadata/infos where structure lives.
    const int n = 1 + static_cast<int>(rng.next_u64() % 4);
    for (int k = 0; k < n; ++k) {
      const size_t limit = rng.next_u64() % 2 == 0 ? std::min<size_t>(bytes.size(), 4096) : bytes.size();
      bytes[rng.next_u64() % limit] = static_cast<uint8_t>(rng.next_u64());
    }
    errors += open_error(bytes).empty() ? 0 : 1;
  }
  BOOST_TEST(errors > 0);
}

BOOST_AUTO_TEST_SUITE_END()
