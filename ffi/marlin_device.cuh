// Device-side building blocks shared by the W4A16 kernels (the tiled GEMM in
// marlin_kernel.cu, the weight-streaming kernel in stream_kernel.cu and the
// Hopper wgmma kernel in wgmma_kernel.cu): dtype traits, the operands block,
// the PTX wrappers, the magic-number dequantization and the output helpers.
// Like the kernels, it includes no XLA or nanobind header.
//
// Everything sits in an anonymous namespace: each kernel file gets its own
// copy, inlined, and nothing here is an exported symbol.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "marlin_kernel.h"
#if defined(JAX_MARLIN_STREAM_TIMELINE) || defined(JAX_MARLIN_WGMMA_TIMELINE)
#include "stream_timeline.h"
#endif

namespace jax_marlin {
namespace {

// ---------------------------------------------------------------------------
// Dtype traits: the magic numbers and the f16x2 / bf16x2 arithmetic.
// All values travel as uint32_t holding a packed pair, which is what the mma
// and lop3 inline asm consume.
// ---------------------------------------------------------------------------

template <typename T>
struct DTypeTraits;

template <>
struct DTypeTraits<__half> {
  using Pair = __half2;
  static constexpr bool kIsBF16 = false;
};

template <>
struct DTypeTraits<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  static constexpr bool kIsBF16 = true;
};

// The operands and sizes every kernel's parameter block starts with; each
// kernel derives its block from this and adds its own geometry. Kernel
// parameters live in the constant bank, so the blocks stay plain aggregates.
struct GemmOperands {
  const void* a;
  const uint32_t* codes;
  const void* scales;
  const void* zero_points;
  const void* bias;
  void* out;
  float* workspace;
  int64_t M, N, K, n_pad;
};

// ---------------------------------------------------------------------------
// PTX wrappers.
// ---------------------------------------------------------------------------

// %globaltimer: ns, one clock for the whole GPU (it may tick at ~1 us). For
// the timeline build's marks (stream_timeline.h) and the probes.
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

#if defined(JAX_MARLIN_STREAM_TIMELINE) || defined(JAX_MARLIN_WGMMA_TIMELINE)
// A block's stamps in a kernel file's timeline record, by thread 0: the time and
// the SM's cycle counter at `mark` (at the entry mark, 0 in both kernels' marks,
// also its SM), and the time at the end of step `step`.
__device__ __forceinline__ void stamp_mark(StreamTimeline& record, unsigned block, int mark) {
  if (threadIdx.x != 0 || block >= kTimelineBlocks) return;
  record.main_ns[block][mark] = global_ns();
  record.main_clock[block][mark] = clock64();
  if (mark == kMarkEntry) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    record.main_sm[block] = sm;
  }
}
__device__ __forceinline__ void stamp_step(StreamTimeline& record, unsigned block, int step) {
  if (threadIdx.x == 0 && block < kTimelineBlocks && step < kTimelineSteps)
    record.step_ns[block][step] = global_ns();
}
#endif

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy that bypasses L1 (.cg): codes are streamed
// exactly once and A tiles are re-read by other blocks from L2, never from this
// SM's L1, so caching them in L1 would only evict useful lines. `src_bytes` < 16
// zero-fills the rest of the destination (0 = pure zero fill, nothing is read).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
#endif
}

// cp_async_16 made only where `issue` holds, asked for as one predicated
// instruction rather than a branch around the copy (a branch puts the copy in a
// basic block of its own, and ptxas pads a block's first LDGSTS with three
// never-executed LDS, which still take issue slots). ptxas may still turn it
// into a branch: it does in the wgmma ring (wgmma_kernel.cu).
__device__ __forceinline__ void cp_async_16_if(uint32_t dst, const void* src, int src_bytes,
                                               bool issue) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n"
      " @p cp.async.cg.shared.global [%0], [%1], 16, %2;\n}\n" ::"r"(dst),
      "l"(src), "r"(src_bytes), "r"(static_cast<int>(issue))
      : "memory");
#endif
}

// The streaming kernel's codes: 16 bytes read once by exactly one warp. .cg
// skips L1 (no reuse, and it would evict the scales other warps share);
// L2::256B lets L2 fetch the warp's 512-byte unit in 256-byte pieces rather
// than 32-byte sectors.
// src_bytes = 0 zero-fills the 16 bytes and reads nothing: the predicate
// travels in the instruction instead of a branch around it.
__device__ __forceinline__ void cp_async_stream_16(uint32_t dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
#endif
}

// Hopper's bulk copy (TMA, 1-D) and the shared-memory barrier it completes
// (sm_90). One instruction from one lane moves a whole contiguous run of
// bytes global -> shared; the barrier's phase completes when the expected
// byte count has landed and its one arrival (the producer's) is in, so the
// consumers wait once per run instead of once per 16 bytes. The streaming
// kernel's code ring uses them (stream_kernel.cu, kBulkRing).
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
#endif
}

// Makes initialized barriers visible to the async proxy (the copy engine)
// before any copy may complete on them.
__device__ __forceinline__ void fence_mbarrier_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// The producer's arrival, announcing `bytes` more to land in this phase
// (0: the phase completes at once).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}

// A consumer's plain arrival (release at CTA scope): "this slot is free". Its
// loads of the slot are ordered before the arrival; the producer's next copy
// into the slot comes after its wait on the barrier, so no proxy fence is
// needed (the usual consumer release of a bulk-copy pipeline).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// `bytes` (a multiple of 16, both addresses 16-byte aligned) global -> shared,
// counted against barrier `bar`. The evict-first policy: codes are read once.
__device__ __forceinline__ void bulk_copy_to_shared(uint32_t dst, const void* src, uint32_t bytes,
                                                    uint32_t bar, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
#endif
}

// The same without a cache hint, for data that other blocks read again (the
// wgmma kernel's codes and group words at M > 256: each row block re-reads them).
__device__ __forceinline__ void bulk_copy_to_shared(uint32_t dst, const void* src, uint32_t bytes,
                                                    uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#endif
}

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  return policy;
}

// Blocks until the phase of `bar` with this parity has completed; the data
// it counted is then visible to the calling thread.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_again:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_again;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

// Thread-block clusters (sm_90): a peer block's shared memory, written by
// st.async and counted on the peer's own mbarrier. The tile split's blocks
// push their sums to the block that stores each slice (stream_kernel.cu).
// `addr` in this block's shared memory -> the same offset in block `rank` of
// the cluster (a shared::cluster address).
__device__ __forceinline__ uint32_t peer_shared_address(uint32_t addr, uint32_t rank) {
  uint32_t peer = addr;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(peer) : "r"(addr), "r"(rank));
#endif
  return peer;
}

// 16 bytes into a peer's shared memory (16-byte aligned), completing 16
// bytes of the current phase of the peer's barrier `peer_bar`. The data
// comes from registers: nothing of this block's is read after the issue.
// The values are f32 operands, not their bits: as .b32 integer operands they
// turned the wgmma kernel's accumulators into integer registers inside the
// asynchronous window, and ptxas serialized every wgmma (C7511; a review).
__device__ __forceinline__ void st_async_16(uint32_t peer_addr, float4 v, uint32_t peer_bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(peer_addr),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(peer_bar)
      : "memory");
#endif
}

// One arrival on a peer's barrier (a shared::cluster address), releasing at
// cluster scope what this thread did before it: the peer's acquiring wait
// then orders it before what the peer does next.
__device__ __forceinline__ void mbarrier_arrive_peer(uint32_t peer_bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(peer_bar)
               : "memory");
#endif
}

// mbarrier_wait with cluster scope: what the cluster's peers wrote with
// st.async on this phase is visible to the calling thread afterwards.
__device__ __forceinline__ void mbarrier_wait_cluster(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_again:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_again;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

// Closes the group of cp.async issued since the last commit, so that "wait
// until at most N groups are pending" means "all but the N newest groups have
// landed" (the tiled kernel commits one group per k-tile, the streaming kernel
// one per 512-byte unit).
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Four 8x8 b16 matrices from shared memory: with lane l pointing at row
// (l & 15), 16-byte column chunk (l >> 4) of a 16x16 A sub-tile, the four
// matrices come out in exactly the order of the m16n8k16 A fragment
// {rows 0-7 k 0-7, rows 8-15 k 0-7, rows 0-7 k 8-15, rows 8-15 k 8-15}.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&frag)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(frag[0]), "=r"(frag[1]), "=r"(frag[2]), "=r"(frag[3])
               : "r"(addr));
#endif
}

__device__ __forceinline__ uint4 lds_128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}

// 16 zero bytes at a shared address (the "memory" clobber keeps it before a
// later release, e.g. an mbarrier arrive, in program order).
__device__ __forceinline__ void sts_zero_128(uint32_t addr) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%1,%1,%1};\n" ::"r"(addr), "r"(0) : "memory");
}

__device__ __forceinline__ uint2 lds_64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}

__device__ __forceinline__ uint32_t lds_32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// (a & b) | c in ONE instruction: lop3's 8-bit immediate is the truth table of
// the function over the canonical inputs a = 0xF0, b = 0xCC, c = 0xAA, and
// (0xF0 & 0xCC) | 0xAA = 0xEA. Used to drop a nibble into the mantissa of a
// magic-number float pair.
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Byte `b` of `x` as a float (exact). Spelled as a bit-field extract, ptxas
// makes it ONE instruction, an I2F.U8 that reads the byte in place (sm_80 and
// sm_90); the shift-and-mask spelling compiled to SHF + LOP3 + I2FP.
__device__ __forceinline__ float byte_to_float(uint32_t x, int b) {
  uint32_t y;
  asm("bfe.u32 %0, %1, %2, 8;\n" : "=r"(y) : "r"(x), "r"(8 * b));
  return __uint2float_rn(y);
}

// f16x2 arithmetic with explicit .rn so ptxas never contracts a mul and a sub
// into an fma (the dequant numerics below are specified operation by operation).
__device__ __forceinline__ uint32_t f16x2_sub(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t f16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t f16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// bf16x2: sm_80 has only the fma form (add/sub/mul.bf16x2 are sm_90), so sub
// and mul are written as fmas, which are exact stand-ins: a - b = fma(b, -1, a)
// and a * b = fma(a, b, -0) (the -0 addend keeps +0 * x = +0).
constexpr uint32_t kBF16x2MinusOne = 0xBF80BF80u;
constexpr uint32_t kBF16x2MinusZero = 0x80008000u;
__device__ __forceinline__ uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
#else
  d = 0;
#endif
  return d;
}

// D += A * B on the tensor cores, fp32 accumulation. Fragment layouts (g =
// lane >> 2, t = lane & 3): A regs {row g k 2t..2t+1, row g+8 k 2t..,
// row g k 2t+8.., row g+8 k 2t+8..}; B regs {k 2t..2t+1, k 2t+8..2t+9} of
// column g; C/D {row g cols 2t, 2t+1, row g+8 cols 2t, 2t+1}.
template <bool kIsBF16>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4],
                                            uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kIsBF16) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// Duplicates the low (which = 0) or high (which = 1) 16-bit half of `w` into
// both halves: one PRMT. Scales are stored one per column; the B fragment
// register holds two k of the SAME column, so it needs (s, s).
__device__ __forceinline__ uint32_t broadcast_half(uint32_t w, int which) {
  return __byte_perm(w, 0u, which ? 0x3232u : 0x1010u);
}

// ---------------------------------------------------------------------------
// Dequantization.
//
// A lane's code word j holds the 8 codes of columns (j, h = 0) and (j, h = 1)
// at k = 2t, 2t+1, 2t+8, 2t+9 (see the header). Nibble p sits at bit 4p with
// (h, khi, klo) = ((p & 3) >> 1, p & 1, p >> 2), so
//   bits  0- 3 | 16-19  (mask 0x000F000F): h0, k 2t   | 2t+1  -> B reg 0 of n8-tile (j,0)
//   bits  4- 7 | 20-23  (mask 0x00F000F0): h0, k 2t+8 | 2t+9  -> B reg 1 of n8-tile (j,0)
//   the same after >> 8                  : the two B regs of n8-tile (j,1)
// and a single lop3 turns either pair into a packed pair of floats:
//   fp16: 0x6400 = 1024.0 has a unit ULP, so (0x6400 | c) = 1024 + c and
//         (0x6400 | c << 4) = 1024 + 16 c; fma(x, 1/16, -64) = c exactly.
//   bf16: 0x4300 = 128.0 has a unit ULP but only 7 mantissa bits, so 16 c would
//         reach the exponent: every nibble is shifted down to bits 0-3 and
//         16-19 instead (shifts 0, 4, 8, 12), giving 128 + c.
// Subtracting (magic + zp) is exact (all values are small integers), so the
// fragment holds (c - zp) exactly and, in the tiled kernel, the single
// rounding happens in the multiply by the scale, as in the reference. (The
// streaming kernel keeps the magic and removes it after the MMA in fp32.)
// ---------------------------------------------------------------------------

constexpr uint32_t kLowNibbles = 0x000F000Fu;
constexpr uint32_t kHighNibbles = 0x00F000F0u;
constexpr uint32_t kFP16Magic = 0x64006400u;      // (1024, 1024)
constexpr uint32_t kFP16HighMagic = 0x54005400u;  // (64, 64): ULP 1/16, so bits 4-7 read c
constexpr uint32_t kFP16OneSixteenth = 0x2C002C00u;  // (1/16, 1/16)
constexpr uint32_t kFP16Minus64 = 0xD400D400u;    // (-64, -64)
constexpr uint32_t kFP16_960 = 0x63806380u;       // (960, 960)
constexpr uint32_t kBF16Magic = 0x43004300u;      // (128, 128)

// Per-group, per-lane constants for the 8 columns r = 2 j + h a lane owns.
struct GroupConstants {
  uint32_t scale[8];    // (s_r, s_r)
  uint32_t sub_lo[8];   // fp16: 1024 + zp; bf16: 128 + zp       (subtracted)
  uint32_t add_hi[8];   // fp16 only: -(64 + zp)                   (fma addend)
  uint32_t offset[8];   // kOffset only: (o_r, o_r)
};

// Builds a group's constants from its raw words: `s` holds the lane's eight
// scales (position r = 2 j + h), `zw` its eight packed zero points (nibble r),
// `o` its eight kOffset offsets. Shared by both kernels; only where the words
// come from differs (shared memory in the tiled kernel, registers prefetched
// from global memory in the streaming kernel).
template <typename T, ZeroPointKind kZP>
__device__ __forceinline__ void make_group_constants(GroupConstants& gc, uint4 s, uint32_t zw,
                                                     uint4 o) {
  constexpr bool kBF16 = DTypeTraits<T>::kIsBF16;
  const uint32_t sw[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
  for (int r = 0; r < 8; ++r) gc.scale[r] = broadcast_half(sw[r >> 1], r & 1);

  if constexpr (kZP == ZeroPointKind::kPacked4) {
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const uint32_t z = (zw >> (4 * r)) & 0xFu;
      // Put z into both halves' mantissas on top of the magic number.
      gc.sub_lo[r] = (z * 0x00010001u) | (kBF16 ? kBF16Magic : kFP16Magic);
      // 960 - (1024 + z) = -(64 + z), exact.
      if constexpr (!kBF16) gc.add_hi[r] = f16x2_sub(kFP16_960, gc.sub_lo[r]);
    }
  } else {
    // Implicit zero point 8, or kOffset (codes taken as is: zp 0).
    constexpr uint32_t z = kZP == ZeroPointKind::kImplicit ? 8u : 0u;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      gc.sub_lo[r] = (z * 0x00010001u) | (kBF16 ? kBF16Magic : kFP16Magic);
      // -(64 + 8) = -72 = 0xD480, or -64.
      gc.add_hi[r] = z ? 0xD480D480u : kFP16Minus64;
    }
  }
  if constexpr (kZP == ZeroPointKind::kOffset) {
    const uint32_t ow[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
    for (int r = 0; r < 8; ++r) gc.offset[r] = broadcast_half(ow[r >> 1], r & 1);
  }
}

template <typename T, ZeroPointKind kZP>
__device__ __forceinline__ void load_group_constants(GroupConstants& gc, uint32_t scale_addr,
                                                     uint32_t zp_addr) {
  const uint4 s = lds_128(scale_addr);
  uint32_t zw = 0;
  uint4 o = make_uint4(0, 0, 0, 0);
  if constexpr (kZP == ZeroPointKind::kPacked4) zw = lds_32(zp_addr);
  if constexpr (kZP == ZeroPointKind::kOffset) o = lds_128(zp_addr);
  make_group_constants<T, kZP>(gc, s, zw, o);
}

// (c - zp) -> weight, the rounding step: w = v * s, or fma(c, s, offset).
template <typename T, ZeroPointKind kZP>
__device__ __forceinline__ uint32_t apply_scale(uint32_t v, const GroupConstants& gc, int r) {
  if constexpr (DTypeTraits<T>::kIsBF16) {
    return bf16x2_fma(v, gc.scale[r],
                      kZP == ZeroPointKind::kOffset ? gc.offset[r] : kBF16x2MinusZero);
  } else {
    if constexpr (kZP == ZeroPointKind::kOffset) return f16x2_fma(v, gc.scale[r], gc.offset[r]);
    return f16x2_mul(v, gc.scale[r]);
  }
}

// One code word -> exact (c - zp) pairs for columns (j, h = 0) and (j, h = 1):
// {k 2t..2t+1, k 2t+8..2t+9} each. Exact because every value is a small
// integer (for kOffset the zero point is applied later: this is c itself).
template <typename T, ZeroPointKind kZP>
__device__ __forceinline__ void centered_codes_word(uint32_t q, const GroupConstants& gc, int j,
                                                    uint32_t (&h0)[2], uint32_t (&h1)[2]) {
  const int r0 = 2 * j, r1 = 2 * j + 1;
  if constexpr (DTypeTraits<T>::kIsBF16) {
    const uint32_t x0 = and_or(q, kLowNibbles, kBF16Magic);
    const uint32_t x1 = and_or(q >> 4, kLowNibbles, kBF16Magic);
    const uint32_t x2 = and_or(q >> 8, kLowNibbles, kBF16Magic);
    const uint32_t x3 = and_or(q >> 12, kLowNibbles, kBF16Magic);
    h0[0] = bf16x2_fma(gc.sub_lo[r0], kBF16x2MinusOne, x0);
    h0[1] = bf16x2_fma(gc.sub_lo[r0], kBF16x2MinusOne, x1);
    h1[0] = bf16x2_fma(gc.sub_lo[r1], kBF16x2MinusOne, x2);
    h1[1] = bf16x2_fma(gc.sub_lo[r1], kBF16x2MinusOne, x3);
  } else {
    const uint32_t q8 = q >> 8;
    const uint32_t lo0 = and_or(q, kLowNibbles, kFP16Magic);    // 1024 + c
    const uint32_t hi0 = and_or(q, kHighNibbles, kFP16Magic);   // 1024 + 16 c
    const uint32_t lo1 = and_or(q8, kLowNibbles, kFP16Magic);
    const uint32_t hi1 = and_or(q8, kHighNibbles, kFP16Magic);
    h0[0] = f16x2_sub(lo0, gc.sub_lo[r0]);
    h0[1] = f16x2_fma(hi0, kFP16OneSixteenth, gc.add_hi[r0]);
    h1[0] = f16x2_sub(lo1, gc.sub_lo[r1]);
    h1[1] = f16x2_fma(hi1, kFP16OneSixteenth, gc.add_hi[r1]);
  }
}

// One code word -> the streaming kernel's A fragments, as magic-number pairs
// the MMA takes unconverted (the offsets and the zero point are removed after
// the MMA, from the group's sums of activations; stream_kernel.cu).
// bf16 (a 7-bit mantissa): every nibble is shifted down to bits 0-3 / 16-19
// and dropped into the mantissa of 128, 4 LOP3 + 3 SHF a word, all four
// registers at 128 + c.
// fp16 (a 10-bit mantissa): the k 2t..2t+1 nibbles of q and q >> 8 sit at
// bits 0-3 / 16-19 and go into the mantissa of 1024 (ULP 1): 1024 + c. The
// k 2t+8..2t+9 nibbles (khi = 1 in format.h's nibble order) sit at bits 4-7 /
// 20-23 and are dropped in where they are, into the mantissa of 64, whose
// ULP is 1/16: 64 + 16 c / 16 = 64 + c, exact. 4 LOP3 + 1 SHF a word: two
// shifts fewer, 8 fewer instructions per 512-byte unit (of the GEMV's ~68),
// at the price of two offsets (1024 and 64) for the fold instead of one.
template <typename T>
__device__ __forceinline__ void magic_codes_word(uint32_t q, uint32_t (&h0)[2],
                                                 uint32_t (&h1)[2]) {
  if constexpr (DTypeTraits<T>::kIsBF16) {
    h0[0] = and_or(q, kLowNibbles, kBF16Magic);        // column (j, 0), k 2t..2t+1
    h0[1] = and_or(q >> 4, kLowNibbles, kBF16Magic);   // column (j, 0), k 2t+8..2t+9
    h1[0] = and_or(q >> 8, kLowNibbles, kBF16Magic);   // column (j, 1), k 2t..2t+1
    h1[1] = and_or(q >> 12, kLowNibbles, kBF16Magic);  // column (j, 1), k 2t+8..2t+9
  } else {
    const uint32_t q8 = q >> 8;
    h0[0] = and_or(q, kLowNibbles, kFP16Magic);          // column (j, 0), k 2t..: 1024 + c
    h0[1] = and_or(q, kHighNibbles, kFP16HighMagic);     // column (j, 0), k 2t+8..: 64 + c
    h1[0] = and_or(q8, kLowNibbles, kFP16Magic);         // column (j, 1), k 2t..
    h1[1] = and_or(q8, kHighNibbles, kFP16HighMagic);    // column (j, 1), k 2t+8..
  }
}

// The offsets magic_codes_word adds to a code at k = 0..7 and 8..15 of
// every 16 (the same for bf16).
template <typename T>
constexpr float kMagicLowK = DTypeTraits<T>::kIsBF16 ? 128.f : 1024.f;
template <typename T>
constexpr float kMagicHighK = DTypeTraits<T>::kIsBF16 ? 128.f : 64.f;

// One code word -> the weights of columns (j, 0) and (j, 1), rounded once, at
// the scale: the tiled kernel's B fragments of n8-tiles (j, 0) and (j, 1).
template <typename T, ZeroPointKind kZP>
__device__ __forceinline__ void dequant_word(uint32_t q, const GroupConstants& gc, int j,
                                             uint32_t (&b_h0)[2], uint32_t (&b_h1)[2]) {
  centered_codes_word<T, kZP>(q, gc, j, b_h0, b_h1);
  b_h0[0] = apply_scale<T, kZP>(b_h0[0], gc, 2 * j);
  b_h0[1] = apply_scale<T, kZP>(b_h0[1], gc, 2 * j);
  b_h1[0] = apply_scale<T, kZP>(b_h1[0], gc, 2 * j + 1);
  b_h1[1] = apply_scale<T, kZP>(b_h1[1], gc, 2 * j + 1);
}

// ---------------------------------------------------------------------------
// Launch helpers (host).
// ---------------------------------------------------------------------------

// A cudaLaunchKernelEx configuration with one launch attribute, which the
// kinds below set. Not copyable: the config points at the attribute.
struct AttributeLaunch {
  cudaLaunchAttribute attribute{};
  cudaLaunchConfig_t config{};
  AttributeLaunch(dim3 grid, unsigned threads, int smem_bytes, cudaStream_t stream) {
    config.gridDim = grid;
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  AttributeLaunch(const AttributeLaunch&) = delete;
  AttributeLaunch& operator=(const AttributeLaunch&) = delete;
};

// A launch of `grid` blocks of `threads` in clusters of `cluster` (sm_90):
// a cluster's blocks are co-scheduled on one GPC and share their shared
// memory. The streaming kernel's (clusters along x), the wgmma kernel's k-split
// (along z) and the residency query's (QueryClusterBlocks).
struct ClusterLaunch : AttributeLaunch {
  ClusterLaunch(dim3 grid, dim3 cluster, unsigned threads, int smem_bytes, cudaStream_t stream)
      : AttributeLaunch(grid, threads, smem_bytes, stream) {
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = cluster.x;
    attribute.val.clusterDim.y = cluster.y;
    attribute.val.clusterDim.z = cluster.z;
  }
};

// A programmatic dependent launch (sm_90): the blocks may start before the
// kernel ahead of them in the stream has ended, once it allows it
// (griddepcontrol.launch_dependents), and must griddepcontrol.wait before they
// read what it wrote. The streaming kernel's reduce (stream_kernel.cu).
struct DependentLaunch : AttributeLaunch {
  DependentLaunch(dim3 grid, unsigned threads, int smem_bytes, cudaStream_t stream)
      : AttributeLaunch(grid, threads, smem_bytes, stream) {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
  }
};

// From the launch arguments into the operands every kernel's parameter block
// starts with (GemmOperands, above).
inline void copy_operands(const MarlinGemmArgs& args, GemmOperands* p) {
  p->a = args.a;
  p->codes = args.codes;
  p->scales = args.scales;
  p->zero_points = args.zero_points;
  p->bias = args.bias;
  p->out = args.out;
  p->workspace = args.workspace;
  p->M = args.M;
  p->N = args.N;
  p->K = args.K;
  p->n_pad = args.n_pad;
}

// The launchers' runtime-to-template switches, written once: `launch(tag)` is
// called with a value of the activation type T (`decltype(tag)` names it) or
// a std::integral_constant holding the zero-point kind, and its cudaError_t
// returned; an unknown value is cudaErrorInvalidValue.
template <typename Launch>
cudaError_t with_activation_type(ActDType dtype, Launch launch) {
  switch (dtype) {
    case ActDType::kFloat16:
      return launch(__half{});
    case ActDType::kBFloat16:
      return launch(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}
template <ZeroPointKind kZP>
using ZeroPointTag = std::integral_constant<ZeroPointKind, kZP>;
template <typename Launch>
cudaError_t with_zero_point_kind(ZeroPointKind kind, Launch launch) {
  switch (kind) {
    case ZeroPointKind::kImplicit:
      return launch(ZeroPointTag<ZeroPointKind::kImplicit>{});
    case ZeroPointKind::kPacked4:
      return launch(ZeroPointTag<ZeroPointKind::kPacked4>{});
    case ZeroPointKind::kOffset:
      return launch(ZeroPointTag<ZeroPointKind::kOffset>{});
  }
  return cudaErrorInvalidValue;
}

// `probe()`'s answer for this device, asked once per device and kept in the
// caller's `known` (0: not asked, 1: no, 2: yes); ordinals past
// kMaxCachedDevices ask every time. For "does this code load here" checks,
// which a launch must not pay for on the decode path.
constexpr int kMaxCachedDevices = 64;
template <typename Probe>
bool cached_per_device(std::atomic<int> (&known)[kMaxCachedDevices], int ordinal, Probe probe) {
  const bool cacheable = ordinal >= 0 && ordinal < kMaxCachedDevices;
  if (cacheable) {
    if (const int k = known[ordinal].load(std::memory_order_acquire); k != 0) return k == 2;
  }
  const bool yes = probe();
  if (cacheable) known[ordinal].store(yes ? 2 : 1, std::memory_order_release);
  return yes;
}

// Raises kKernel's dynamic shared-memory limit to what the device allows and
// asks for the largest carveout, once per device: every launch then stays
// under the limit, whatever its size. Doing
// it per launch with the launch's own size would cost a driver call on the
// decode path and race with another thread launching a different size. The
// limit covers static plus dynamic bytes, so the kernel's static bytes are
// left out (asking for the whole opt-in limit is then an error). A template
// of the kernel itself, so that every kernel has its own flags.
template <auto kKernel>
cudaError_t configure_shared_memory(const DeviceLimits& device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> raised[kMaxDevices];
  const bool cacheable = device.ordinal >= 0 && device.ordinal < kMaxDevices;
  if (cacheable && raised[device.ordinal].load(std::memory_order_acquire)) return cudaSuccess;
  cudaFuncAttributes attributes{};
  cudaError_t err = cudaFuncGetAttributes(&attributes, kKernel);
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(
      kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      device.max_shared_bytes_per_block - static_cast<int>(attributes.sharedSizeBytes));
  // Every kernel of the package asks for the whole shared-memory carveout, so
  // that consecutive launches (main and reduce kernels, layer after layer)
  // never make an SM drain to change its L1/shared split.
  if (err == cudaSuccess)
    err = cudaFuncSetAttribute(kKernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared);
  if (err == cudaSuccess && cacheable) raised[device.ordinal].store(true, std::memory_order_release);
  return err;
}

// ---------------------------------------------------------------------------
// Output helpers.
// ---------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Two floats rounded to T (each to nearest on its own, as from_float), low
// half first.
template <typename T>
__device__ __forceinline__ uint32_t pair_bits(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pair_bits<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pair_bits<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The two elements of a 32-bit word of T (low half first), added in fp32.
template <typename T>
__device__ __forceinline__ float pair_sum(uint32_t word) {
  T lo, hi;
  const uint16_t lo_bits = static_cast<uint16_t>(word), hi_bits = static_cast<uint16_t>(word >> 16);
  memcpy(&lo, &lo_bits, 2);
  memcpy(&hi, &hi_bits, 2);
  return to_float<T>(lo) + to_float<T>(hi);
}

// out[m, n] = T(v + bias[n]), bias optional: the one rounding of every
// output that is not written in pairs. The caller checks n < N.
template <typename T>
__device__ __forceinline__ void store_with_bias(T* out, const T* bias, int64_t m, int64_t n,
                                                int64_t N, float v) {
  if (bias != nullptr) v += to_float<T>(bias[n]);
  out[m * N + n] = from_float<T>(v);
}

// Writes columns n, n+1 of row `row` (both may be >= N: guarded). When N is
// even, n is even and every row starts 4-byte aligned, so the pair is one store.
template <typename T>
__device__ __forceinline__ void store_pair(T* out, int64_t row, int64_t n, int64_t N, float v0,
                                           float v1) {
  T* p = out + row * N + n;
  if ((N & 1) == 0) {
    if (n < N) {
      typename DTypeTraits<T>::Pair pair;
      pair.x = from_float<T>(v0);
      pair.y = from_float<T>(v1);
      *reinterpret_cast<typename DTypeTraits<T>::Pair*>(p) = pair;
    }
  } else {
    if (n < N) p[0] = from_float<T>(v0);
    if (n + 1 < N) p[1] = from_float<T>(v1);
  }
}
}  // namespace
}  // namespace jax_marlin
