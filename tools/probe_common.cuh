// What the GPU probes (tools/wgmma_rate.cu, tools/wgmma_loop.cu) share: their
// operand data, their first line, and their timer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

// MMAs on zeros draw less power and may hold higher clocks than the kernel on
// real weights, so the probes feed them pseudo-random finite values instead.
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

// Prints the GPU's name and SM count (the probe's first line); returns the SMs.
inline int probe_banner() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  return prop.multiProcessorCount;
}

// The fastest of `repeats` timed calls of `launch` (kernel launches on the
// default stream), in us, after one untimed call.
template <typename Launch>
float best_launch_us(Launch launch, int repeats) {
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  launch();
  float best = 1e30f;
  for (int r = 0; r < repeats; ++r) {
    cudaEventRecord(t0);
    launch();
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float ms = 0.f;
    cudaEventElapsedTime(&ms, t0, t1);
    best = ms < best ? ms : best;
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return best * 1e3f;
}
