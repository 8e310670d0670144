// nvcuda::wmma's 16x16x16 bf16 tiles with fp32 accumulators for the CUDA emulator. A fragment
// is opaque in CUDA (its element-to-lane mapping unspecified); here lane L holds the
// accumulator elements (r, c) with c = L % 16 and r % 2 = L / 16 (8 of the 256), loads only the
// A rows and B column those need, and stores only its own elements, so a tile written by
// store_matrix_sync is spread over the warp's lanes, as on the hardware: a read of it by another
// lane without __syncwarp races. Every load and store checks what the hardware requires (a
// 32-byte aligned pointer, a leading dimension of a multiple of 16 bytes) and what these kernels
// promise (the whole 16x16 tile inside the block's dynamic shared memory). The product adds the
// 16 exact bf16 products and the accumulator in double and rounds to fp32 once: tensor cores
// also multiply exactly but add in fp32 in their own order, so sums can differ in the last bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tests/cuda_emu/emu_device.h"
#include "tests/cuda_emu/emu_launch.h"

namespace nvcuda::wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "only 16x16x16 tiles are emulated");
  float emu[16][16];  // A(r, k), B(k, c) or C(r, c); only this lane's part is meaningful
};

namespace emu {

inline int Lane() { return static_cast<int>(threadIdx.x % 32); }
inline int OwnCol() { return Lane() % 16; }
inline int OwnRowParity() { return Lane() / 16; }

// A 16x16 tile at p with leading dimension ldm elements: aligned, and inside shared memory.
template <typename T>
void CheckTile(const T* p, unsigned ldm) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  const unsigned char* lo = cuda_emu::DynamicSharedMemory();
  const unsigned char* hi = lo + cuda_emu::DynamicSharedBytes();
  CUDA_EMU_CHECK(reinterpret_cast<uintptr_t>(p) % 32 == 0,
                 "wmma tile at shared offset %td: not 32-byte aligned", bytes - lo);
  CUDA_EMU_CHECK(ldm * sizeof(T) % 16 == 0, "wmma leading dimension %u: not a multiple of 16 bytes",
                 ldm);
  const size_t span = (size_t{15} * ldm + 16) * sizeof(T);  // first to last element, either layout
  CUDA_EMU_CHECK(bytes >= lo && bytes + span <= hi,
                 "wmma tile [%td, %td) of shared memory outside the block's %zu bytes",
                 bytes - lo, bytes + span - lo, cuda_emu::DynamicSharedBytes());
}

}  // namespace emu

template <typename Use, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout>& f,
                      const __nv_bfloat16* p, unsigned ldm) {
  static_assert(std::is_same_v<Use, matrix_a> || std::is_same_v<Use, matrix_b>);
  emu::CheckTile(p, ldm);
  constexpr bool kRowMajor = std::is_same_v<Layout, row_major>;
  auto at = [&](int r, int c) {
    return __bfloat162float(kRowMajor ? p[r * ldm + c] : p[r + c * ldm]);
  };
  if constexpr (std::is_same_v<Use, matrix_a>) {  // the rows of this lane's C elements
    for (int r = emu::OwnRowParity(); r < 16; r += 2) {
      for (int k = 0; k < 16; ++k) f.emu[r][k] = at(r, k);
    }
  } else {  // the column of this lane's C elements
    for (int k = 0; k < 16; ++k) f.emu[k][emu::OwnCol()] = at(k, emu::OwnCol());
  }
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t layout) {
  emu::CheckTile(p, ldm);
  CUDA_EMU_CHECK(layout == mem_row_major, "only row-major accumulators are emulated");
  for (int r = emu::OwnRowParity(); r < 16; r += 2) f.emu[r][emu::OwnCol()] = p[r * ldm + emu::OwnCol()];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  emu::CheckTile(p, ldm);
  CUDA_EMU_CHECK(layout == mem_row_major, "only row-major accumulators are emulated");
  for (int r = emu::OwnRowParity(); r < 16; r += 2) p[r * ldm + emu::OwnCol()] = f.emu[r][emu::OwnCol()];
}

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float v) {
  for (auto& row : f.emu) {
    for (float& e : row) e = v;
  }
}

// d = a b + c (d may be c).
template <typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  const int n = emu::OwnCol();
  for (int r = emu::OwnRowParity(); r < 16; r += 2) {
    double sum = c.emu[r][n];
    for (int k = 0; k < 16; ++k) sum += double{a.emu[r][k]} * b.emu[k][n];
    d.emu[r][n] = static_cast<float>(sum);
  }
}

}  // namespace nvcuda::wmma
