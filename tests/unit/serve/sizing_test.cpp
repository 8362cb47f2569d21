// check_sizing(): what the executor's pool means for serving, as a table; and the device names.
#include <boost/test/unit_test.hpp>

#include "serve/server.hpp"

namespace conveyor::testing {

BOOST_AUTO_TEST_SUITE(serve_sizing)

BOOST_AUTO_TEST_CASE(a_pool_against_the_model_context) {
  struct row {
    const char* name;
    const char* device;
    int32_t blocks;
    int32_t max_model_len;  // given (0: derived)
    bool error;
    size_t warnings;
  };
  const std::vector<row> rows = {
      {"room for the whole context", "cpu", 4096, 0, false, 0},
      {"derived below the context: warned", "cpu", 256, 0, false, 1},
      {"derived below the context on null: no model, no warning", "null", 256, 0, false, 0},
      {"too small to serve", "cpu", 8, 0, true, 0},
      {"given more than a quarter of the pool", "cpu", 256, 2048, false, 1},
      {"given more than the model's context", "cpu", 4096, 8192, true, 0},
  };
  for (const auto& r : rows) {
    serve::serve_options o;
    o.device = r.device;
    o.max_model_len = r.max_model_len;
    executor_info info;
    info.num_kv_blocks = r.blocks;
    info.block_size = 16;
    info.max_model_len = 4096;
    const serve::runtime_options ro = o.runtime(info, "m.gguf");
    const serve::sizing_verdict v = serve::check_sizing(o, ro, info);
    BOOST_TEST(!v.error.empty() == r.error, r.name << ": " << v.error);
    BOOST_TEST(v.warnings.size() == r.warnings, r.name);
  }
}

BOOST_AUTO_TEST_CASE(device_names) {
  for (auto d : {serve::device_kind::cpu, serve::device_kind::cuda, serve::device_kind::null, serve::device_kind::sim})
    BOOST_TEST((serve::parse_device(serve::to_string(d)) == d));
  BOOST_TEST(!serve::parse_device("tpu").has_value());
  BOOST_TEST(serve::runs_weights(serve::device_kind::cuda));
  BOOST_TEST(!serve::runs_weights(serve::device_kind::sim));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
