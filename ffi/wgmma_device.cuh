// The wgmma building blocks (sm_90a) that the Hopper kernel
// (wgmma_kernel.cu) and its GPU probes (tools/wgmma_rate.cu,
// tools/wgmma_loop.cu) share: the fences, the commit/wait pair, the
// activations' descriptor and the m64nNk16 MMA with A from registers. Each
// wrapper compiles to nothing where the sm_90a features are absent, so the
// file is safe to include from code built for every architecture.
// Like the kernels, it includes no XLA or nanobind header.
#pragma once

#include <cstdint>

#include "marlin_device.cuh"

namespace jax_marlin {
namespace {

// ---------------------------------------------------------------------------
// wgmma wrappers (sm_90a). The accumulators are "+f" operands: the asm both
// reads and writes them, so the compiler keeps them in place across the
// asynchronous window, and `memory` clobbers order the fences.
// ---------------------------------------------------------------------------

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define JAX_MARLIN_HAS_WGMMA 1
#endif

__device__ __forceinline__ void wgmma_fence() {
#ifdef JAX_MARLIN_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#ifdef JAX_MARLIN_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#ifdef JAX_MARLIN_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Shared memory written by cp.async / st.shared (the generic proxy) is read by
// wgmma through the async proxy: each writer fences before the barrier.
__device__ __forceinline__ void fence_proxy_async_shared() {
#ifdef JAX_MARLIN_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Four 8 x 8 tiles of 16-bit values from an mma accumulator fragment into
// shared memory, transposed (stmatrix .trans): register j holds tile j's
// (row lane / 4, columns 2 (lane % 4) + {0, 1}), and lanes 8 j .. 8 j + 7 give
// the addresses (16-byte aligned) of tile j's stored rows 0-7, stored row c
// being the fragment's column c. One instruction for what would be eight
// 2-byte stores a lane.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4]) {
#ifdef JAX_MARLIN_HAS_WGMMA
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

// Descriptor of a K-major B operand (rows of 64 k = 128 B, 128-byte swizzle,
// 1024-aligned atoms of 8 rows): start >> 4 in bits 0-13, leading byte offset
// 16 B (unused with a swizzle) in 16-29, stride 1024 B (8 rows) in 32-45,
// layout 1 (128B swizzle) in 62-63. A k16 step within the rows is +32 B.
__device__ __forceinline__ uint64_t act_descriptor(uint32_t start) {
  return static_cast<uint64_t>((start >> 4) & 0x3FFF) | (uint64_t{16 >> 4} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

#define JM_D8(i)                                                                       \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),          \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
// The instruction for N (activation rows) and the element type TY (f16, bf16):
// accumulators %0 .. %(N/2 - 1) (ACC), then the four A registers and the
// descriptor (TAIL: the next five operand numbers).
#define JM_WGMMA(N, TY, ACC, TAIL)                                                   \
  "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #TY "." #TY " {" ACC "}, {" TAIL \
  ", 1, 1, 1, 0;\n"
#define JM_TAIL4 "%4, %5, %6, %7}, %8"
#define JM_TAIL8 "%8, %9, %10, %11}, %12"
#define JM_TAIL16 "%16, %17, %18, %19}, %20"
#define JM_TAIL32 "%32, %33, %34, %35}, %36"
#define JM_TAIL64 "%64, %65, %66, %67}, %68"
#define JM_TAIL128 "%128, %129, %130, %131}, %132"
#define JM_ACC4 "%0,%1,%2,%3"
#define JM_ACC8 JM_ACC4 ",%4,%5,%6,%7"
#define JM_ACC16                                                                     \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
#define JM_ACC32                                                                     \
  JM_ACC16 ",%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define JM_ACC64                                                                     \
  JM_ACC32 ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"         \
           "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define JM_ACC128                                                                    \
  JM_ACC64 ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"         \
           "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"          \
           "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,"   \
           "%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,"    \
           "%125,%126,%127"
#define JM_D64(i) JM_D8(i), JM_D8(i + 8), JM_D8(i + 16), JM_D8(i + 24), JM_D8(i + 32), \
      JM_D8(i + 40), JM_D8(i + 48), JM_D8(i + 56)

// D (64 x kRows, fp32) += A (64 x 16, registers) x B (16 x kRows, descriptor).
template <typename T, int kRows>
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[kRows / 2], const uint32_t (&a)[4],
                                              uint64_t b) {
#ifdef JAX_MARLIN_HAS_WGMMA
  constexpr bool kBF16 = DTypeTraits<T>::kIsBF16;
#define JM_OPERANDS "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b)
  // N = 8 and 16: no kernel instance; tools/wgmma_rate.cu times them.
  if constexpr (kRows == 8) {
    if constexpr (kBF16)
      asm volatile(JM_WGMMA(8, bf16, JM_ACC4, JM_TAIL4)
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : JM_OPERANDS);
    else
      asm volatile(JM_WGMMA(8, f16, JM_ACC4, JM_TAIL4)
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : JM_OPERANDS);
  } else if constexpr (kRows == 16) {
    if constexpr (kBF16)
      asm volatile(JM_WGMMA(16, bf16, JM_ACC8, JM_TAIL8) : JM_D8(0) : JM_OPERANDS);
    else
      asm volatile(JM_WGMMA(16, f16, JM_ACC8, JM_TAIL8) : JM_D8(0) : JM_OPERANDS);
  } else if constexpr (kRows == 32) {
    if constexpr (kBF16)
      asm volatile(JM_WGMMA(32, bf16, JM_ACC16, JM_TAIL16) : JM_D8(0), JM_D8(8) : JM_OPERANDS);
    else
      asm volatile(JM_WGMMA(32, f16, JM_ACC16, JM_TAIL16) : JM_D8(0), JM_D8(8) : JM_OPERANDS);
  } else if constexpr (kRows == 64) {
    if constexpr (kBF16)
      asm volatile(JM_WGMMA(64, bf16, JM_ACC32, JM_TAIL32)
                   : JM_D8(0), JM_D8(8), JM_D8(16), JM_D8(24) : JM_OPERANDS);
    else
      asm volatile(JM_WGMMA(64, f16, JM_ACC32, JM_TAIL32)
                   : JM_D8(0), JM_D8(8), JM_D8(16), JM_D8(24) : JM_OPERANDS);
  } else if constexpr (kRows == 128) {
    if constexpr (kBF16)
      asm volatile(JM_WGMMA(128, bf16, JM_ACC64, JM_TAIL64) : JM_D64(0) : JM_OPERANDS);
    else
      asm volatile(JM_WGMMA(128, f16, JM_ACC64, JM_TAIL64) : JM_D64(0) : JM_OPERANDS);
  } else {
    if constexpr (kBF16)
      asm volatile(JM_WGMMA(256, bf16, JM_ACC128, JM_TAIL128)
                   : JM_D64(0), JM_D64(64) : JM_OPERANDS);
    else
      asm volatile(JM_WGMMA(256, f16, JM_ACC128, JM_TAIL128)
                   : JM_D64(0), JM_D64(64) : JM_OPERANDS);
  }
#undef JM_OPERANDS
#endif
}
#undef JM_D8
#undef JM_D64
#undef JM_WGMMA
#undef JM_ACC4
#undef JM_ACC8
#undef JM_ACC16
#undef JM_ACC32
#undef JM_ACC64
#undef JM_ACC128
#undef JM_TAIL4
#undef JM_TAIL8
#undef JM_TAIL16
#undef JM_TAIL32
#undef JM_TAIL64
#undef JM_TAIL128

// One stage's MMAs: a k16 MMA per unit on fresh A registers (+32 B of k, +2
// in the descriptor's start field, a unit; shared addresses are below 2^18,
// so the 14-bit field never carries), committed as one group, then a wait
// until only this group is in flight: the previous stage's A registers and
// shared slot are free when it returns.
template <typename T, int kRows, int kUnits>
__device__ __forceinline__ void wgmma_stage(float (&d)[kRows / 2],
                                            const uint32_t (&frag)[kUnits][4], uint64_t desc) {
  wgmma_fence();
#pragma unroll
  for (int u = 0; u < kUnits; ++u) wgmma_64xNx16<T, kRows>(d, frag[u], desc + 2 * u);
  wgmma_commit();
  wgmma_wait<1>();
}

}  // namespace
}  // namespace jax_marlin
