// The weight formats, in C++: the ONNX MatMulNBits packing rules and the
// jax_marlin tile layout (jax_marlin/_format.py and jax_marlin/_layout.py are
// the Python halves of the same rules). Header-only, no dependencies.
#pragma once

#include <cstdint>
#include <string>

namespace jax_marlin::format {

// The attributes a weight may have: K and N in [1, 2^29], block_size a power of
// two in [16, 2^29], bits 2, 4 or 8 (_checks.format_attributes in Python). The
// bound is the kernels': they address within a row of N 2-byte scales, and a k
// or a k-step, in 32-bit ints (2 x n_pad and k_pad stay below 2^31 with room).
// No layer comes near it (the largest vocabularies are ~2^18).
constexpr int kMaxDimLog2 = 29;
constexpr int64_t kMaxDim = int64_t{1} << kMaxDimLog2;
// The bound as the errors print it: "2^29".
inline std::string MaxDimText() { return "2^" + std::to_string(kMaxDimLog2); }
inline bool ValidShape(int64_t K, int64_t N, int64_t bits, int64_t block_size) {
  return K >= 1 && N >= 1 && K <= kMaxDim && N <= kMaxDim && block_size >= 16 &&
         block_size <= kMaxDim && (block_size & (block_size - 1)) == 0 &&
         (bits == 2 || bits == 4 || bits == 8);
}

inline int64_t KBlocks(int64_t K, int64_t block_size) {
  return (K + block_size - 1) / block_size;
}

// ONNX rule: 8 / bits values per byte, the first in the lowest bits. It packs
// the codes of a row along k (so row n's codes are K/2 bytes for 4 bits, the
// block structure only pads the end), and zero points along the block index.
inline uint32_t UnpackValue(const uint8_t* row, int bits, int64_t index) {
  const int per_byte = 8 / bits;
  const uint32_t byte = row[index / per_byte];
  return (byte >> (bits * (index % per_byte))) & ((1u << bits) - 1u);
}

inline int DefaultZeroPoint(int bits) { return 1 << (bits - 1); }

// Tile layout (4 bits): 16 (k) x 64 (n) tiles of 128 uint32 words, tiles of one
// 64-column strip contiguous along k; inside a tile, word 4 * lane + j with
// lane = 4 g + t, and nibble p = 4 klo + 2 h + khi holds the code at
// n = 64 nt + 16 j + 8 h + g, k = 16 kt + 2 t + 8 khi + klo.
constexpr int64_t kTileN = 64;
constexpr int64_t kTileK = 16;
constexpr int64_t kWordsPerTile = 128;

inline int64_t PadN(int64_t N) { return (N + kTileN - 1) / kTileN * kTileN; }

inline uint32_t TileCode(const uint32_t* tiles, int64_t k_tiles, int64_t n, int64_t k) {
  const int64_t nt = n / kTileN, c = n % kTileN;
  const int64_t j = c / 16, h = (c % 16) / 8, g = c % 8;
  const int64_t kt = k / kTileK, r = k % kTileK;
  const int64_t khi = r / 8, t = (r % 8) / 2, klo = r % 2;
  const uint32_t word = tiles[(nt * k_tiles + kt) * kWordsPerTile + (4 * g + t) * 4 + j];
  return (word >> (4 * (4 * klo + 2 * h + khi))) & 0xFu;
}

// Position of column n in the permuted per-column arrays (scales, offsets):
// inside each 64-column group, column 16 j + 8 h + g sits at 8 g + 2 j + h.
inline int64_t PermutedColumn(int64_t n) {
  const int64_t c = n % kTileN;
  const int64_t j = c / 16, h = (c % 16) / 8, g = c % 8;
  return n - c + 8 * g + 2 * j + h;
}

// Packed 4-bit zero points of the tile layout: eight per word, in the scales'
// permuted column order.
inline uint32_t TileZeroPoint(const uint32_t* words, int64_t n_pad, int64_t n, int64_t block) {
  const int64_t position = PermutedColumn(n);
  const uint32_t word = words[block * (n_pad / 8) + position / 8];
  return (word >> (4 * (position % 8))) & 0xFu;
}

}  // namespace jax_marlin::format
