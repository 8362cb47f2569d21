// The CUDA executor in situations only the emulator can stage: two devices of different compute
// capability or shared-memory limits (the executor must check and configure the device it runs
// on, not device 0), a construction that fails after the stream exists (nothing may leak), and
// the KV pool sized from a device of known memory.
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include "gpu/cuda_executor.hpp"
#include "lockstep.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {
namespace {

model::gguf_file tiny_b() {
  const std::string path = model::testing::temp_path("emu_exec_b.gguf");
  model::write_tiny_llama(path, model::tiny_config_b());
  return model::gguf_file::open(path);
}

// Restores the default single device when a test ends, even a failing one.
struct devices_guard {
  explicit devices_guard(const std::vector<conveyor_emu::device_config>& d) { conveyor_emu::configure(d); }
  ~devices_guard() {
    cudaSetDevice(0);
    conveyor_emu::configure({conveyor_emu::device_config{}});
  }
};

// A 40-token prompt: one 32-token query tile of tiny config B needs 50048 B of shared memory,
// past the 48 KiB a kernel gets without the opt-in attribute.
step_plan long_tile_plan() {
  step_plan p;
  scheduled_seq q;
  q.id = 1;
  q.tokens = prompt_of(40, 512, 3);
  q.block_table = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  q.sample = true;
  p.seqs.push_back(q);
  return p;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cuda_executor_emulated)

BOOST_AUTO_TEST_CASE(capability_is_checked_on_the_executors_device) {
  conveyor_emu::device_config old_gpu, new_gpu;
  old_gpu.name = "Tesla T4 (emulated)";
  old_gpu.major = 7;
  old_gpu.minor = 5;
  devices_guard g({old_gpu, new_gpu});
  auto f = tiny_b();
  cuda_executor_options o = gpu_opts(4, 64, true);
  o.device = 1;
  BOOST_CHECK_NO_THROW(cuda_executor(f, o));  // device 1 is sm_90; device 0 must not matter
  o.device = 0;
  BOOST_CHECK_EXCEPTION(cuda_executor(f, o), std::runtime_error,
                        [](const std::runtime_error& e) { return std::string(e.what()).find("8.0") != std::string::npos; });
  o.device = 2;
  BOOST_CHECK_THROW(cuda_executor(f, o), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(shared_memory_opt_in_on_every_device) {
  conveyor_emu::device_config small;
  small.smem_optin = 101376;  // sm_86
  devices_guard g({conveyor_emu::device_config{}, small});
  auto f = tiny_b();
  for (int32_t dev : {0, 1}) {
    cuda_executor_options o = gpu_opts(4, 64, false);
    o.device = dev;
    cuda_executor gpu(f, o);
    BOOST_CHECK_NO_THROW(gpu.step(long_tile_plan()));
  }
}

BOOST_AUTO_TEST_CASE(failed_construction_releases_everything) {
  auto f = tiny_b();
  const conveyor_emu::counters before = conveyor_emu::stats();
  cuda_executor_options o = gpu_opts(4, 0, true);  // KV pool from gpu_memory_utilization
  o.gpu_memory_utilization = 0.001;                // 16 MiB of a 16 GiB device: no room for KV blocks
  BOOST_CHECK_EXCEPTION(cuda_executor(f, o), std::runtime_error,
                        [](const std::runtime_error& e) { return std::string(e.what()).find("no room for KV blocks") != std::string::npos; });
  const conveyor_emu::counters after = conveyor_emu::stats();
  BOOST_TEST(after.live_streams == before.live_streams);
  BOOST_TEST(after.live_device_allocs == before.live_device_allocs);
  BOOST_TEST(after.device_bytes == before.device_bytes);
  BOOST_TEST(after.live_host_allocs == before.live_host_allocs);
}

BOOST_AUTO_TEST_CASE(kv_pool_sized_from_device_memory) {
  conveyor_emu::device_config d;
  d.total_bytes = size_t{2} << 30;
  devices_guard g({d});
  auto f = tiny_b();
  cuda_executor_options o = gpu_opts(16, 0, true);
  o.gpu_memory_utilization = 0.5;
  const size_t before = conveyor_emu::stats().device_bytes;
  {
    cuda_executor gpu(f, o);
    const model::llama_config& c = gpu.config();
    const int64_t block_bytes = 2 * int64_t{c.n_layer} * 16 * c.n_head_kv * c.head_dim * 2;
    const int64_t used = static_cast<int64_t>(conveyor_emu::stats().device_bytes - before);
    const int64_t budget = static_cast<int64_t>(0.5 * static_cast<double>(d.total_bytes)) - (int64_t{256} << 20);
    BOOST_TEST(used <= budget);                        // the 256 MiB reserve is kept
    BOOST_TEST(used + 2 * block_bytes + 4096 > budget);  // and nothing more is wasted
    BOOST_TEST(gpu.info().num_kv_blocks > 40000);
    BOOST_TEST(gpu.memory_summary().find("KV") != std::string::npos);
    step_plan p = long_tile_plan();
    p.seqs[0].block_table = {gpu.info().num_kv_blocks - 1, 7, 39999};  // the pool's last block works
    BOOST_TEST(gpu.step(p).sampled.size() == 1u);
  }
  BOOST_TEST(conveyor_emu::stats().device_bytes == before);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
