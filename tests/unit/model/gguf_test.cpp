// GGUF round trips: gguf_writer -> gguf_file for every metadata type, tensors and layout, the
// tiny Llama fixture, and the real SmolLM2 file (which must be present: run ./setup.sh).
// Bad-input cases live in gguf_bad_input_test.cpp.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/gguf_writer.hpp"
#include "tiny_model.hpp"

namespace fs = std::filesystem;
using namespace conveyor::model;

namespace {

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("conveyor_gguf_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::vector<uint8_t> bytes_of(std::span<const float> v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return {p, p + v.size_bytes()};
}

} // namespace

BOOST_AUTO_TEST_SUITE(gguf_roundtrip)

BOOST_AUTO_TEST_CASE(every_metadata_type_round_trips) {
  gguf_writer w;
  w.add_kv("t.u8", uint8_t{200});
  w.add_kv("t.i8", int8_t{-100});
  w.add_kv("t.u16", uint16_t{60000});
  w.add_kv("t.i16", int16_t{-30000});
  w.add_kv("t.u32", uint32_t{4000000000u});
  w.add_kv("t.i32", int32_t{-2000000000});
  w.add_kv("t.u64", uint64_t{1} << 40);
  w.add_kv("t.i64", -(int64_t{1} << 50));
  w.add_kv("t.f32", 1.5f);
  w.add_kv("t.f64", 2.25);
  w.add_kv("t.bool", true);
  w.add_kv("t.str", "héllo");
  w.add_kv("t.empty_str", "");
  w.add_kv("t.arr_str", std::vector<std::string>{"a", "", "c c"});
  w.add_kv("t.arr_i32", std::vector<int32_t>{-1, 2, 3});
  w.add_kv("t.arr_u32", std::vector<uint32_t>{7});
  w.add_kv("t.arr_i64", std::vector<int64_t>{-5});
  w.add_kv("t.arr_f32", std::vector<float>{0.5f, -1.0f});
  w.add_kv("t.arr_f64", std::vector<double>{3.0});
  w.add_kv("t.arr_empty", std::vector<int32_t>{});
  gguf_array inner{gguf_value_type::u8, {gguf_value{uint8_t{1}}, gguf_value{uint8_t{2}}}};
  gguf_array outer{gguf_value_type::array, {gguf_value{inner}, gguf_value{gguf_array{gguf_value_type::u8, {}}}}};
  w.add_kv("t.nested", gguf_value{outer});
  const std::string path = temp_path("meta.gguf");
  w.write(path);

  const gguf_file f = gguf_file::open(path);
  BOOST_TEST(f.version() == 3u);
  BOOST_TEST(f.alignment() == 32u);
  BOOST_TEST(f.keys().size() == 21u);
  BOOST_TEST(f.keys().front() == "t.u8");
  BOOST_TEST(*f.get_int("t.u8") == 200);
  BOOST_TEST(*f.get_int("t.i8") == -100);
  BOOST_TEST(*f.get_int("t.u16") == 60000);
  BOOST_TEST(*f.get_int("t.i16") == -30000);
  BOOST_TEST(*f.get_int("t.u32") == 4000000000LL);
  BOOST_TEST(*f.get_int("t.i32") == -2000000000);
  BOOST_TEST(*f.get_int("t.u64") == (int64_t{1} << 40));
  BOOST_TEST(*f.get_int("t.i64") == -(int64_t{1} << 50));
  BOOST_TEST(*f.get_float("t.f32") == 1.5);
  BOOST_TEST(*f.get_float("t.f64") == 2.25);
  BOOST_TEST(*f.get_bool("t.bool") == true);
  BOOST_TEST(*f.get_string("t.str") == "héllo");
  BOOST_TEST(f.get_string("t.empty_str")->empty());
  BOOST_TEST((f.get_string_array("t.arr_str") == std::vector<std::string>{"a", "", "c c"}));
  BOOST_TEST((f.get_int_array("t.arr_i32") == std::vector<int64_t>{-1, 2, 3}));
  BOOST_TEST((f.get_int_array("t.arr_u32") == std::vector<int64_t>{7}));
  BOOST_TEST((f.get_int_array("t.arr_i64") == std::vector<int64_t>{-5}));
  BOOST_TEST((f.get_float_array("t.arr_f32") == std::vector<float>{0.5f, -1.0f}));
  BOOST_TEST((f.get_float_array("t.arr_f64") == std::vector<float>{3.0f}));
  BOOST_TEST(f.get_int_array("t.arr_empty").empty());
  BOOST_TEST((f.find("t.u8")->type() == gguf_value_type::u8));
  BOOST_TEST((f.find("t.bool")->type() == gguf_value_type::boolean));
  const gguf_value* nested = f.find("t.nested");
  BOOST_REQUIRE(nested != nullptr);
  const auto& arr = std::get<gguf_array>(nested->v);
  BOOST_TEST((arr.elem_type == gguf_value_type::array));
  BOOST_REQUIRE(arr.items.size() == 2u);
  const auto& first = std::get<gguf_array>(arr.items[0].v);
  BOOST_TEST(first.items.size() == 2u);
  BOOST_TEST(std::get<uint8_t>(first.items[1].v) == 2);
  BOOST_TEST(std::get<gguf_array>(arr.items[1].v).items.empty());
  BOOST_TEST(f.tensors().empty());
}

BOOST_AUTO_TEST_CASE(getters_report_absent_and_mismatched_types) {
  gguf_writer w;
  w.add_kv("s", "text");
  w.add_kv("big", uint64_t{1} << 63);
  const std::string path = temp_path("getters.gguf");
  w.write(path);
  const gguf_file f = gguf_file::open(path);
  BOOST_TEST(!f.get_int("missing").has_value());
  BOOST_TEST(f.get_string_array("missing").empty());
  BOOST_TEST(f.find("missing") == nullptr);
  BOOST_CHECK_EXCEPTION(f.get_int("s"), gguf_error, [&](const gguf_error& e) {
    return std::string(e.what()) == path + ": metadata 's' has type string, expected an integer";
  });
  BOOST_CHECK_THROW(f.get_float("s"), gguf_error);
  BOOST_CHECK_THROW(f.get_bool("s"), gguf_error);
  BOOST_CHECK_THROW(f.get_string_array("s"), gguf_error);
  BOOST_CHECK_THROW(f.get_int("big"), gguf_error);
  BOOST_CHECK_THROW(f.get_string("big"), gguf_error);
}

BOOST_AUTO_TEST_CASE(tensors_are_packed_aligned_and_readable) {
  for (const uint32_t alignment : {32u, 64u, 1u}) {
    BOOST_TEST_CONTEXT("alignment " << alignment) {
      gguf_writer w;
      if (alignment != 32) {
        w.set_alignment(alignment);
      }
      w.add_kv("general.architecture", "test");
      const std::vector<float> a{1.0f, 2.0f, 3.0f};  // 12 bytes: forces padding
      const std::vector<float> b(64, -0.5f);
      const std::vector<float> c = {42.0f};
      w.add_tensor_f32("a", std::vector<int64_t>{3}, a);
      w.add_tensor("b", ggml_type::q8_0, std::vector<int64_t>{32, 2}, quantize_row_ref(ggml_type::q8_0, b));
      w.add_tensor_f32("c.with.a.long.name", std::vector<int64_t>{1, 1, 1, 1}, c);
      const std::string path = temp_path("tensors.gguf");
      w.set_version(alignment == 64 ? 2 : 3);
      w.write(path);

      const gguf_file f = gguf_file::open(path);
      BOOST_TEST(f.alignment() == alignment);
      BOOST_TEST(f.version() == (alignment == 64 ? 2u : 3u));
      BOOST_REQUIRE(f.tensors().size() == 3u);
      const gguf_tensor_info* ta = f.find_tensor("a");
      const gguf_tensor_info* tb = f.find_tensor("b");
      const gguf_tensor_info* tc = f.find_tensor("c.with.a.long.name");
      BOOST_REQUIRE((ta && tb && tc));
      BOOST_TEST(f.find_tensor("nope") == nullptr);
      BOOST_TEST(ta->offset == 0u);
      BOOST_TEST(ta->nbytes == 12u);
      BOOST_TEST(tb->offset == (12 + alignment - 1) / alignment * alignment);
      BOOST_TEST(tb->nbytes == 68u);
      BOOST_TEST(tb->n_dims == 2u);
      BOOST_TEST(tb->ne[1] == 2);
      BOOST_TEST(tb->ne[2] == 1);
      BOOST_TEST(tb->num_elements() == 64);
      BOOST_TEST(type_name(tb->type) == "Q8_0");
      BOOST_TEST(tc->n_dims == 4u);
      BOOST_TEST((reinterpret_cast<uintptr_t>(f.tensor_data(*tb)) - reinterpret_cast<uintptr_t>(f.tensor_data(*ta))) ==
                 tb->offset);
      BOOST_TEST(std::memcmp(f.tensor_data(*ta), bytes_of(a).data(), 12) == 0);
      std::vector<float> back(64);
      dequantize_row(ggml_type::q8_0, f.tensor_data(*tb), back.data(), 64);
      BOOST_TEST(std::fabs(back[63] + 0.5f) < 1e-3f);  // Q8_0: d = 0.5/127 rounded to fp16
      float cval = 0;
      std::memcpy(&cval, f.tensor_data(*tc), 4);
      BOOST_TEST(cval == 42.0f);
      BOOST_TEST(fs::file_size(path) % alignment == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(writer_rejects_misuse) {
  gguf_writer w;
  w.add_kv("k", 1);
  BOOST_CHECK_THROW(w.add_kv("k", 2), std::invalid_argument);
  const std::vector<uint8_t> five(5);
  BOOST_CHECK_THROW(w.add_tensor("t", ggml_type::q4_1, std::vector<int64_t>{32}, five), std::invalid_argument);
  BOOST_CHECK_THROW(w.add_tensor("t", ggml_type::q4_1, std::vector<int64_t>{16}, five), std::invalid_argument);
  BOOST_CHECK_THROW(w.set_alignment(48), std::invalid_argument);
  BOOST_CHECK_THROW(w.set_version(1), std::invalid_argument);
  BOOST_CHECK_THROW(w.write("/nonexistent-dir/x.gguf"), gguf_error);
}

BOOST_AUTO_TEST_SUITE_END()
