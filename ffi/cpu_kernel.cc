#include "cpu_kernel.h"

#include <algorithm>
#include <vector>

#include "format.h"

namespace jax_marlin {
namespace {

constexpr int64_t kStrip = format::kTileN;  // weight rows dequantized together

// Codes of rows [n0, n0 + kStrip) into w[r * k_pad + k], as floats. For the
// tile layout a strip is exactly one 64-column strip of tiles, decoded word by
// word (format::TileCode spells out the same mapping one code at a time).
void DecodeStrip(const CpuMatMulArgs& args, int64_t n0, int64_t rows, int64_t k_pad, float* w) {
  if (args.bits == 4) {
    const int64_t k_tiles = k_pad / format::kTileK;
    const auto* tiles = static_cast<const uint32_t*>(args.codes) +
                        (n0 / format::kTileN) * k_tiles * format::kWordsPerTile;
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      for (int64_t word = 0; word < format::kWordsPerTile; ++word) {
        const uint32_t bits = tiles[kt * format::kWordsPerTile + word];
        const int64_t lane = word / 4, j = word % 4, g = lane / 4, t = lane % 4;
        for (int p = 0; p < 8; ++p) {
          const int64_t h = (p & 3) >> 1, khi = p & 1, klo = p >> 2;
          const int64_t r = 16 * j + 8 * h + g;
          if (r < rows) w[r * k_pad + 16 * kt + 2 * t + 8 * khi + klo] = float((bits >> (4 * p)) & 0xF);
        }
      }
    }
    return;
  }
  const auto* bytes = static_cast<const uint8_t*>(args.codes);
  const int64_t row_bytes = k_pad * args.bits / 8;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < k_pad; ++k) {
      w[r * k_pad + k] = float(format::UnpackValue(bytes + (n0 + r) * row_bytes, args.bits, k));
    }
  }
}

// Scale and shift of column n, block b: w = code * scale + shift.
void BlockAffine(const CpuMatMulArgs& args, int64_t n, int64_t b, float* scale, float* shift) {
  const int64_t k_blocks = format::KBlocks(args.K, args.block_size);
  const bool tiles = args.bits == 4;
  const int64_t n_pad = format::PadN(args.N);
  const int64_t at = tiles ? b * n_pad + format::PermutedColumn(n) : n * k_blocks + b;
  *scale = args.scales[at];
  float zero_point = float(format::DefaultZeroPoint(args.bits));
  if (args.zero_point_kind == ZeroPoints::kFloat) {
    zero_point = static_cast<const float*>(args.zero_points)[at];
  } else if (args.zero_point_kind == ZeroPoints::kPacked) {
    if (tiles) {
      zero_point = float(format::TileZeroPoint(static_cast<const uint32_t*>(args.zero_points),
                                               n_pad, n, b));
    } else {
      const int64_t row_bytes = (k_blocks * args.bits + 7) / 8;
      const auto* rows = static_cast<const uint8_t*>(args.zero_points);
      zero_point = float(format::UnpackValue(rows + n * row_bytes, args.bits, b));
    }
  }
  *shift = -zero_point * *scale;
}

float Dot(const float* a, const float* w, int64_t K) {
  // Eight independent partial sums let the compiler vectorise the loop.
  float partial[8] = {};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    for (int i = 0; i < 8; ++i) partial[i] += a[k + i] * w[k + i];
  }
  float sum = 0.f;
  for (; k < K; ++k) sum += a[k] * w[k];
  for (float p : partial) sum += p;
  return sum;
}

}  // namespace

void CpuMatMulNBits(const CpuMatMulArgs& args) {
  const int64_t k_blocks = format::KBlocks(args.K, args.block_size);
  const int64_t k_pad = k_blocks * args.block_size;
  std::vector<float> strip(kStrip * k_pad);
  for (int64_t n0 = 0; n0 < args.N; n0 += kStrip) {
    const int64_t rows = std::min(kStrip, args.N - n0);
    DecodeStrip(args, n0, rows, k_pad, strip.data());
    for (int64_t r = 0; r < rows; ++r) {
      float* w = &strip[r * k_pad];
      for (int64_t b = 0; b < k_blocks; ++b) {
        float scale, shift;
        BlockAffine(args, n0 + r, b, &scale, &shift);
        for (int64_t k = b * args.block_size; k < (b + 1) * args.block_size; ++k) {
          w[k] = w[k] * scale + shift;
        }
      }
    }
    // Only k < K is read: the padded codes of the last block never meet A.
    for (int64_t m = 0; m < args.M; ++m) {
      const float* a = args.a + m * args.K;
      for (int64_t r = 0; r < rows; ++r) {
        float sum = Dot(a, &strip[r * k_pad], args.K);
        if (args.bias) sum += args.bias[n0 + r];
        args.out[m * args.N + n0 + r] = sum;
      }
    }
  }
}

}  // namespace jax_marlin
