// Operand data for the GPU probes (tools/wgmma_rate.cu, tools/wgmma_loop.cu):
// MMAs on zeros draw less power and may hold higher clocks than the kernel on
// real weights, so the probes feed them pseudo-random finite values instead.
#pragma once

#include <cstdint>

// Word i as two fp16 values of random sign and mantissa with the exponent
// field kept below 15 (|x| < 2: finite, and fp32 sums of a few thousand
// products stay far from overflow). As 4-bit codes, any nibbles.
__host__ __device__ inline uint32_t probe_word(uint32_t i) {
  uint32_t x = i * 0x9E3779B9u + 0x7F4A7C15u;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  return x & 0xBBFFBBFFu;
}
