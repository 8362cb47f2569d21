// nvcuda::wmma for host C++ (src/wmma.cpp): the 16x16x16 bf16 -> f32 subset gpu/ uses, with
// CUDA's rules enforced rather than assumed. load/store/mma are warp-collective: all 32 lanes
// meet at the same call (the warp rendezvous of src/fiber.cpp) with the same pointer, ldm and
// layout, or the kernel faults; ldm must be a multiple of 16 bytes and the pointer 32-byte
// aligned; a tile may not run past the block's shared memory. A load reads each lane's elements
// when that lane arrives and a store writes them when it leaves, as separate lanes do on a GPU:
// reading what other lanes stored (or storing what they load) without a __syncwarp between
// shows in some thread order. CUDA leaves the element-to-lane mapping of a fragment unspecified,
// so the emulator scatters elements over (lane, x[i]) by a fixed pseudo-random permutation per
// fragment kind: a kernel that indexes x[i] as a particular row or column computes garbage here,
// while uniform elementwise work on x[] stays valid. Products are exact in f32 (bf16 inputs),
// summed in f32 in k order; a tensor core's own summation order and rounding are not modelled.
#pragma once

#include <source_location>
#include <type_traits>

#include "conveyor_emu/types.hpp"

namespace conveyor_emu::wmma_detail {
/// Fragment kinds, each with its own element permutation.
enum kind : int { a_row, a_col, b_row, b_col, acc, n_kinds };
void load(kind k, bool f32, void* x, const void* p, unsigned ldm, bool col_major, const std::source_location& loc);
void store(const float* x, float* p, unsigned ldm, bool col_major, const std::source_location& loc);
void mma(kind ka, kind kb, float* d, const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c,
         const std::source_location& loc);
/// Where logical element (row, col) of a fragment of kind k lives: lane * 8 + index into x[].
int slot(kind k, int row, int col);
} // namespace conveyor_emu::wmma_detail

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator's wmma has the 16x16x16 shape only");
  static_assert(std::is_same_v<Use, accumulator>
                    ? std::is_same_v<T, float> && std::is_void_v<Layout>
                    : std::is_same_v<T, __nv_bfloat16> && (std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>),
                "the emulator's wmma: bf16 matrix_a/matrix_b with a row_major/col_major layout, float accumulators");

public:
  using element_type = T;
  using storage_element_type = T;
  static constexpr int num_elements = 8;  // 256 elements over 32 lanes, as on sm_80/sm_90
  T x[num_elements];

  static constexpr conveyor_emu::wmma_detail::kind kind() {
    using namespace conveyor_emu::wmma_detail;
    if constexpr (std::is_same_v<Use, accumulator>) return acc;
    else if constexpr (std::is_same_v<Use, matrix_a>) return std::is_same_v<Layout, row_major> ? a_row : a_col;
    else return std::is_same_v<Layout, row_major> ? b_row : b_col;
  }
};

// Not collective in CUDA either (a per-lane loop over x[]); a value that differs between lanes
// gives a fragment whose meaning depends on the unspecified mapping.
template <class U, int M, int N, int K, class T, class L>
void fill_fragment(fragment<U, M, N, K, T, L>& f, const std::type_identity_t<T>& v) {
  for (auto& e : f.x) e = v;
}

template <class U, class L>
void load_matrix_sync(fragment<U, 16, 16, 16, __nv_bfloat16, L>& f, const __nv_bfloat16* p, unsigned ldm,
                      const std::source_location& loc = std::source_location::current()) {
  conveyor_emu::wmma_detail::load(f.kind(), false, f.x, p, ldm, std::is_same_v<L, col_major>, loc);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t layout,
                             const std::source_location& loc = std::source_location::current()) {
  conveyor_emu::wmma_detail::load(f.kind(), true, f.x, p, ldm, layout == mem_col_major, loc);
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t layout,
                              const std::source_location& loc = std::source_location::current()) {
  conveyor_emu::wmma_detail::store(f.x, p, ldm, layout == mem_col_major, loc);
}
template <class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA>& a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c,
              const std::source_location& loc = std::source_location::current()) {
  conveyor_emu::wmma_detail::mma(a.kind(), b.kind(), d.x, a.x, b.x, c.x, loc);
}

} // namespace nvcuda::wmma
