// XLA FFI handler for the CPU: checks the buffers, then calls the plain C++
// kernel. The lowering hands it float32 activations, scales and bias (it casts
// fp16 / bf16 around the call), so the kernel has one precision to care about.
#include "cpu_kernel.h"
#include "handler_checks.h"
#include "handlers.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace jax_marlin {
namespace {

ffi::Error MatMulNBitsCpu(ffi::AnyBuffer a, ffi::AnyBuffer codes, ffi::AnyBuffer scales,
                          ffi::AnyBuffer zero_points, ffi::AnyBuffer bias,
                          ffi::Result<ffi::AnyBuffer> out, int64_t K, int64_t N, int64_t bits,
                          int64_t block_size, int64_t zero_point_kind) {
  const WeightShape shape{K, N, bits, block_size, zero_point_kind};
  int64_t M = 0;
  if (auto error = CheckBuffers(shape, a, codes, scales, zero_points, bias,
                                out->element_count(), &M);
      error.failure()) {
    return error;
  }
  for (auto buffer : {a, scales, bias}) {
    if (buffer.element_type() != ffi::DataType::F32) {
      return ffi::Error::InvalidArgument("jax_marlin: the CPU kernel takes float32 a, scales, bias");
    }
  }
  if (out->element_type() != ffi::DataType::F32) {
    return ffi::Error::InvalidArgument("jax_marlin: the CPU kernel writes float32");
  }
  CpuMatMulArgs args;
  args.a = a.typed_data<float>();
  args.codes = codes.untyped_data();
  args.scales = scales.typed_data<float>();
  args.zero_points = zero_points.untyped_data();
  args.bias = bias.element_count() ? bias.typed_data<float>() : nullptr;
  args.out = out->typed_data<float>();
  args.M = M;
  args.N = N;
  args.K = K;
  args.bits = bits;
  args.block_size = block_size;
  args.zero_point_kind = static_cast<ZeroPoints>(zero_point_kind);
  if (M > 0) CpuMatMulNBits(args);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(MatMulNBitsCpuHandler, MatMulNBitsCpu,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()  // a [..., K]
                                  .Arg<ffi::AnyBuffer>()  // codes
                                  .Arg<ffi::AnyBuffer>()  // scales
                                  .Arg<ffi::AnyBuffer>()  // zero points (maybe empty)
                                  .Arg<ffi::AnyBuffer>()  // bias (maybe empty)
                                  .Ret<ffi::AnyBuffer>()  // out [..., N]
                                  .Attr<int64_t>("K")
                                  .Attr<int64_t>("N")
                                  .Attr<int64_t>("bits")
                                  .Attr<int64_t>("block_size")
                                  .Attr<int64_t>("zero_point_kind"));

}  // namespace jax_marlin
