// nvcuda::wmma on fibers (include/conveyor_emu/wmma.hpp says what is checked and why). A lane's
// fragment is its own x[8]; logical element (row, col) of a kind-k fragment sits at slot
// perm[k][row * 16 + col] = lane * 8 + i, a fixed permutation per kind, so that no layout a
// kernel might assume (sm_80's, or "the accumulator of D is the matrix_a of the next product")
// holds here. Loads read at arrival, stores write on departure, mma_sync computes at the
// rendezvous, when every lane's fragments are parked on its stack.
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "conveyor_emu/device_api.hpp"
#include "conveyor_emu/wmma.hpp"
#include "internal.hpp"

namespace conveyor_emu::wmma_detail {
namespace {

using detail::wmma_call;

struct perms {
  std::array<std::array<uint8_t, 256>, n_kinds> slot{}, element{};  // element: the inverse, slot -> row * 16 + col
  perms() {
    uint64_t z = 0x9E3779B97F4A7C15ull;  // splitmix64: a fixed seed, the same mapping every run
    auto next = [&z] {
      uint64_t r = (z += 0x9E3779B97F4A7C15ull);
      r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
      r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
      return r ^ (r >> 31);
    };
    for (auto& p : slot) {
      for (int i = 0; i < 256; ++i) p[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
      for (int i = 255; i > 0; --i) std::swap(p[static_cast<size_t>(i)], p[next() % static_cast<uint64_t>(i + 1)]);
    }
    for (size_t k = 0; k < slot.size(); ++k)
      for (size_t e = 0; e < 256; ++e) element[k][slot[k][e]] = static_cast<uint8_t>(e);
  }
};
const perms& the_perms() {
  static const perms p;
  return p;
}

int this_lane() {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return static_cast<int>(t % 32);
}

// The per-lane rules CUDA states for load/store: ldm a multiple of 16 bytes, the pointer 256-bit
// aligned; and the tile within the block's shared memory when it is there.
void check_tile(const void* p, unsigned ldm, size_t elem, const std::source_location& loc) {
  if ((ldm * elem) % 16 != 0)
    detail::device_fault(
        ("wmma: ldm " + std::to_string(ldm) + " is not a multiple of " + std::to_string(16 / elem) + " elements (16 bytes)").c_str(),
        loc);
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0) detail::device_fault("wmma: the tile pointer is not 256-bit aligned", loc);
  detail::check_shared_range(p, (15 * size_t{ldm} + 16) * elem, loc);
}

size_t offset(int row, int col, unsigned ldm, bool col_major) {
  return col_major ? static_cast<size_t>(col) * ldm + static_cast<size_t>(row) : static_cast<size_t>(row) * ldm + static_cast<size_t>(col);
}

void rendezvous(warp_op op, wmma_call& call, const std::source_location& loc) {
  call.site = loc;
  detail::warp_exchange(op, 0xffffffffu, reinterpret_cast<uint64_t>(&call), 0, 32, loc);
}

} // namespace

int slot(kind k, int row, int col) { return the_perms().slot[static_cast<size_t>(k)][static_cast<size_t>(row * 16 + col)]; }

void load(kind k, bool f32, void* x, const void* p, unsigned ldm, bool col_major, const std::source_location& loc) {
  check_tile(p, ldm, f32 ? 4 : 2, loc);
  const int lane = this_lane();
  for (int i = 0; i < 8; ++i) {
    const int e = the_perms().element[static_cast<size_t>(k)][static_cast<size_t>(lane * 8 + i)];
    const size_t o = offset(e / 16, e % 16, ldm, col_major);
    if (f32) static_cast<float*>(x)[i] = static_cast<const float*>(p)[o];
    else static_cast<__nv_bfloat16*>(x)[i] = static_cast<const __nv_bfloat16*>(p)[o];
  }
  wmma_call call;
  call.kind = k;
  call.ptr = p;
  call.ldm = ldm;
  call.col_major = col_major;
  rendezvous(warp_op::wmma_load, call, loc);
}

void store(const float* x, float* p, unsigned ldm, bool col_major, const std::source_location& loc) {
  check_tile(p, ldm, 4, loc);
  wmma_call call;
  call.kind = acc;
  call.ptr = p;
  call.ldm = ldm;
  call.col_major = col_major;
  rendezvous(warp_op::wmma_store, call, loc);
  const int lane = this_lane();
  for (int i = 0; i < 8; ++i) {
    const int e = the_perms().element[acc][static_cast<size_t>(lane * 8 + i)];
    p[offset(e / 16, e % 16, ldm, col_major)] = x[i];
  }
}

void mma(kind ka, kind kb, float* d, const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c,
         const std::source_location& loc) {
  wmma_call call;
  call.kind = ka;
  call.kind_b = kb;
  call.d = d;
  call.a = a;
  call.b = b;
  call.c = c;
  rendezvous(warp_op::wmma_mma, call, loc);  // D is written by wmma_complete
}

} // namespace conveyor_emu::wmma_detail

namespace conveyor_emu::detail {

std::string wmma_complete(warp_op op, const wmma_call* const calls[32]) {
  using namespace wmma_detail;
  const wmma_call& c0 = *calls[0];
  for (int lane = 1; lane < 32; ++lane) {
    const wmma_call& c = *calls[lane];
    if (c.site.line() != c0.site.line() || std::strcmp(c.site.file_name(), c0.site.file_name()) != 0)
      return "divergent warp: lane " + std::to_string(lane) + " waits at the same operation on line " +
             std::to_string(c.site.line()) + ", lane 0 on line " + std::to_string(c0.site.line());
    if (c.kind != c0.kind || c.kind_b != c0.kind_b)
      return "lane " + std::to_string(lane) + " passes another fragment type than lane 0";
    if (op != warp_op::wmma_mma && (c.ptr != c0.ptr || c.ldm != c0.ldm || c.col_major != c0.col_major))
      return "lane " + std::to_string(lane) + " passes another pointer, ldm or layout than lane 0 (they must be warp-uniform)";
  }
  if (op != warp_op::wmma_mma) return "";
  // Gather every operand before writing any D: a lane's d may be its c (or alias nothing else).
  float A[16][16], B[16][16], C[16][16];
  auto at = [&](const void* const* frags, kind k, int row, int col) {
    const int s = slot(k, row, col);
    return __bfloat162float(static_cast<const __nv_bfloat16*>(frags[s / 8])[s % 8]);
  };
  const void* as[32];
  const void* bs[32];
  for (int lane = 0; lane < 32; ++lane) as[lane] = calls[lane]->a, bs[lane] = calls[lane]->b;
  const kind ka = static_cast<kind>(c0.kind), kb = static_cast<kind>(c0.kind_b);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      A[i][j] = at(as, ka, i, j);
      B[i][j] = at(bs, kb, i, j);
      const int s = slot(acc, i, j);
      C[i][j] = calls[s / 8]->c[s % 8];
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float sum = C[i][j];
      for (int k = 0; k < 16; ++k) sum += A[i][k] * B[k][j];  // bf16 x bf16 is exact in f32
      const int s = slot(acc, i, j);
      calls[s / 8]->d[s % 8] = sum;
    }
  return "";
}

} // namespace conveyor_emu::detail
