// Checks the XLA FFI handlers share: the buffers a call receives must have the
// sizes that K, N, bits and block_size imply. The Python layer checks the same
// before tracing; this is the last line of defence before a kernel indexes
// memory, so it turns a mismatch into an error instead of a stray access.
#pragma once

#include <cstdint>
#include <string>

#include "format.h"
#include "xla/ffi/api/ffi.h"

namespace jax_marlin {

struct WeightShape {
  int64_t K, N, bits, block_size, zero_point_kind;  // kind: 0 implicit, 1 packed, 2 float

  int64_t k_blocks() const { return format::KBlocks(K, block_size); }
  int64_t k_pad() const { return k_blocks() * block_size; }
  int64_t n_pad() const { return format::PadN(N); }
  bool tiles() const { return bits == 4; }
};

// x * y * z, false where it overflows int64: the sizes below are products of K,
// N and block_size (bounded by format::ValidShape, k_pad < 2^32), checked so that
// none can wrap around to a size that a small buffer matches (a block_size of
// 2^62 once let an empty codes buffer through).
inline bool CheckedProduct(int64_t x, int64_t y, int64_t z, int64_t* product) {
  int64_t xy = 0;
  return !__builtin_mul_overflow(x, y, &xy) && !__builtin_mul_overflow(xy, z, product);
}

inline xla::ffi::Error SizeError(const char* name, int64_t expected, int64_t got) {
  return xla::ffi::Error::InvalidArgument(std::string("jax_marlin: ") + name + " must have " +
                                          std::to_string(expected) + " elements, got " +
                                          std::to_string(got));
}

// Checks the shape attributes and the weight tensors (codes, scales, zero
// points) against each other.
inline xla::ffi::Error CheckWeights(const WeightShape& s, xla::ffi::AnyBuffer codes,
                                    xla::ffi::AnyBuffer scales, xla::ffi::AnyBuffer zero_points) {
  using xla::ffi::Error;
  if (!format::ValidShape(s.K, s.N, s.bits, s.block_size) || s.zero_point_kind < 0 ||
      s.zero_point_kind > 2) {
    return Error::InvalidArgument(
        "jax_marlin: invalid K, N, bits, block_size or zero-point kind (K and N in [1, " +
        format::MaxDimText() + "], block_size a power of two in [16, " + format::MaxDimText() +
        "], bits 2, 4 or 8)");
  }
  const int64_t kb = s.k_blocks();
  int64_t code_bits = 0, per_column = 0, zp_row_bytes = (kb * s.bits + 7) / 8, zp_bytes = 0;
  if (!CheckedProduct(s.tiles() ? s.n_pad() : s.N, s.k_pad(), s.bits, &code_bits) ||
      !CheckedProduct(kb, s.tiles() ? s.n_pad() : s.N, 1, &per_column) ||
      !CheckedProduct(s.N, zp_row_bytes, 1, &zp_bytes)) {
    return Error::InvalidArgument("jax_marlin: K, N and block_size give sizes past int64");
  }
  // 4 bits: uint32 words of 8 codes; 2 and 8 bits: bytes.
  const int64_t code_words = s.tiles() ? code_bits / 32 : code_bits / 8;
  const auto code_type = s.tiles() ? xla::ffi::DataType::U32 : xla::ffi::DataType::U8;
  if (codes.element_type() != code_type) {
    return Error::InvalidArgument("jax_marlin: codes have the wrong dtype for bits");
  }
  if (int64_t(codes.element_count()) != code_words) {
    return SizeError("codes", code_words, codes.element_count());
  }
  if (int64_t(scales.element_count()) != per_column) {
    return SizeError("scales", per_column, scales.element_count());
  }
  int64_t zp_expected = 0;
  if (s.zero_point_kind == 1) {
    zp_expected = s.tiles() ? per_column / 8 : zp_bytes;
    const auto zp_type = s.tiles() ? xla::ffi::DataType::U32 : xla::ffi::DataType::U8;
    if (zero_points.element_type() != zp_type) {
      return Error::InvalidArgument("jax_marlin: packed zero_points have the wrong dtype");
    }
  } else if (s.zero_point_kind == 2) {
    zp_expected = per_column;
    if (zero_points.element_type() != scales.element_type()) {
      return Error::InvalidArgument("jax_marlin: float zero_points must have the scales' dtype");
    }
  }
  if (int64_t(zero_points.element_count()) != zp_expected) {
    return SizeError("zero_points", zp_expected, zero_points.element_count());
  }
  return Error::Success();
}

// Checks everything but the activations' dtype, which each platform
// constrains differently. Returns the number of rows M of `a`.
inline xla::ffi::Error CheckBuffers(const WeightShape& s, xla::ffi::AnyBuffer a,
                                    xla::ffi::AnyBuffer codes, xla::ffi::AnyBuffer scales,
                                    xla::ffi::AnyBuffer zero_points, xla::ffi::AnyBuffer bias,
                                    int64_t out_elements, int64_t* M) {
  using xla::ffi::Error;
  if (auto error = CheckWeights(s, codes, scales, zero_points); error.failure()) return error;
  auto a_dims = a.dimensions();
  if (a_dims.size() < 1 || a_dims.back() != s.K) {
    return Error::InvalidArgument("jax_marlin: a must have shape [..., K]");
  }
  *M = static_cast<int64_t>(a.element_count()) / s.K;
  int64_t out_expected = 0;
  if (__builtin_mul_overflow(*M, s.N, &out_expected)) {
    return Error::InvalidArgument("jax_marlin: M x N overflows int64");
  }
  if (out_elements != out_expected) return SizeError("out", out_expected, out_elements);
  if (bias.element_count() != 0 && int64_t(bias.element_count()) != s.N) {
    return SizeError("bias", s.N, bias.element_count());
  }
  return Error::Success();
}

}  // namespace jax_marlin
