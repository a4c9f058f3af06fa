// XLA FFI handler for CUDA: checks the buffers, reads the device's limits once,
// and launches the fused kernel on XLA's stream. It allocates nothing (the
// split-K workspace is an output buffer XLA owns) and never synchronises, so
// it is declared command-buffer (CUDA graph) compatible.
#include <array>
#include <mutex>
#include <string>
#include <string_view>

#include <cuda_runtime.h>

#include "handler_checks.h"
#include "dequant_kernel.h"
#include "handlers.h"
#include "marlin_kernel.h"
#include "stream_kernel.h"
#include "wgmma_kernel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace jax_marlin {
namespace {

ffi::Error CudaError(const char* what, cudaError_t error) {
  return ffi::Error::Internal(std::string("jax_marlin: ") + what + ": " +
                             cudaGetErrorString(error));
}

// The launch arguments a weight shape, M and the dtype determine (no buffers).
// The split-K floats first, the last stream_k_floats for stream-K (none: 0).
void SplitWorkspace(float* base, int64_t floats, int64_t stream_k_floats, MarlinGemmArgs* args) {
  args->workspace = base;
  args->workspace_elems = floats - stream_k_floats;
  args->stream_k_workspace = stream_k_floats > 0 ? base + args->workspace_elems : nullptr;
  args->stream_k_workspace_elems = stream_k_floats;
}

MarlinGemmArgs ShapeArgs(const WeightShape& shape, int64_t M, bool bfloat16) {
  MarlinGemmArgs args{};
  args.M = M;
  args.N = shape.N;
  args.K = shape.K;
  args.n_pad = shape.n_pad();
  args.k_pad = shape.k_pad();
  args.k_blocks = shape.k_blocks();
  args.group_size = shape.block_size;
  args.dtype = bfloat16 ? ActDType::kBFloat16 : ActDType::kFloat16;
  args.zero_point_kind = static_cast<ZeroPointKind>(shape.zero_point_kind);
  return args;
}

// Device attributes are fixed for the life of the process: query each device
// once rather than on every call.
cudaError_t GetDeviceLimits(DeviceLimits* limits) {
  constexpr int kMaxDevices = 64;
  static std::array<DeviceLimits, kMaxDevices> cache{};
  static std::array<bool, kMaxDevices> cached{};
  static std::mutex mutex;
  int device = 0;
  if (cudaError_t error = cudaGetDevice(&device); error != cudaSuccess) return error;
  std::lock_guard<std::mutex> lock(mutex);
  if (device < kMaxDevices && cached[device]) {
    *limits = cache[device];
    return cudaSuccess;
  }
  int major = 0, minor = 0, l2_bytes = 0;
  for (auto [value, attribute] :
       {std::pair{&limits->sm_count, cudaDevAttrMultiProcessorCount},
        std::pair{&limits->max_shared_bytes_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin},
        std::pair{&major, cudaDevAttrComputeCapabilityMajor},
        std::pair{&minor, cudaDevAttrComputeCapabilityMinor},
        std::pair{&l2_bytes, cudaDevAttrL2CacheSize}}) {
    if (cudaError_t error = cudaDeviceGetAttribute(value, attribute, device);
        error != cudaSuccess) {
      return error;
    }
  }
  limits->compute_capability = 10 * major + minor;
  limits->l2_bytes = l2_bytes;
  limits->ordinal = device;
  // Only a hint for the planner: a failed query leaves the counts unknown (0),
  // and they are cached like the rest, so every call of the process plans the
  // same grid (and sums in the same order) whatever the query did.
  (void)QueryClusterBlocks(limits);
  if (device < kMaxDevices) {
    cache[device] = *limits;
    cached[device] = true;
  }
  return cudaSuccess;
}

ffi::Error MatMulNBitsCuda(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer codes,
                           ffi::AnyBuffer scales, ffi::AnyBuffer zero_points,
                           ffi::AnyBuffer bias, ffi::Result<ffi::AnyBuffer> out,
                           ffi::Result<ffi::Buffer<ffi::F32>> workspace, int64_t K, int64_t N,
                           int64_t bits, int64_t block_size, int64_t zero_point_kind,
                           int64_t split_k, int64_t stream_k_floats) {
  const WeightShape shape{K, N, bits, block_size, zero_point_kind};
  int64_t M = 0;
  if (auto error = CheckBuffers(shape, a, codes, scales, zero_points, bias,
                                out->element_count(), &M);
      error.failure()) {
    return error;
  }
  const auto dtype = a.element_type();
  if (bits != 4 || (dtype != ffi::DataType::F16 && dtype != ffi::DataType::BF16)) {
    return ffi::Error::InvalidArgument(
        "jax_marlin: the CUDA kernel takes 4-bit weights and float16 or bfloat16 activations");
  }
  if (K % 8 != 0) {
    return ffi::Error::InvalidArgument("jax_marlin: the CUDA kernel needs K % 8 == 0");
  }
  for (auto buffer : {scales, bias}) {
    if (buffer.element_count() && buffer.element_type() != dtype) {
      return ffi::Error::InvalidArgument(
          "jax_marlin: scales and bias must have the activations' dtype");
    }
  }
  if (out->element_type() != dtype) {
    return ffi::Error::InvalidArgument("jax_marlin: out must have the activations' dtype");
  }
  if (M == 0) return ffi::Error::Success();

  DeviceLimits device;
  if (cudaError_t error = GetDeviceLimits(&device); error != cudaSuccess) {
    return CudaError("reading device attributes", error);
  }
  MarlinGemmArgs args = ShapeArgs(shape, M, dtype == ffi::DataType::BF16);
  args.a = a.untyped_data();
  args.codes = codes.typed_data<uint32_t>();
  args.scales = scales.untyped_data();
  args.zero_points = zero_point_kind ? zero_points.untyped_data() : nullptr;
  args.bias = bias.element_count() ? bias.untyped_data() : nullptr;
  args.out = out->untyped_data();
  // The workspace: the split-K floats, then stream_k_floats for stream-K
  // (ops.py sizes both; the split-K part is never empty, at least one float).
  const int64_t workspace_floats = static_cast<int64_t>(workspace->element_count());
  if (stream_k_floats < 0 || stream_k_floats >= workspace_floats) {
    return ffi::Error::InvalidArgument(
        "jax_marlin: stream_k_floats must be in [0, the workspace's floats)");
  }
  SplitWorkspace(workspace->typed_data(), workspace_floats, stream_k_floats, &args);
  if (cudaError_t error = LaunchMarlinGemm(args, device, static_cast<int>(split_k), stream);
      error != cudaSuccess) {
    if (error == cudaErrorInvalidConfiguration) {
      return ffi::Error::InvalidArgument(
          "jax_marlin: the fused kernel's pipeline does not fit this GPU's shared memory for "
          "this group size (or M is beyond its grid); use matmul_nbits(..., impl=\"dense\")");
    }
    return CudaError("launching the W4A16 kernel", error);
  }
  return ffi::Error::Success();
}

// The dense path's first half: the weights as a dense [N, K] matrix in the
// activation dtype (out's), for XLA's own dot at large M.
ffi::Error DequantizeCuda(cudaStream_t stream, ffi::AnyBuffer codes, ffi::AnyBuffer scales,
                          ffi::AnyBuffer zero_points, ffi::Result<ffi::AnyBuffer> out, int64_t K,
                          int64_t N, int64_t bits, int64_t block_size, int64_t zero_point_kind) {
  const WeightShape shape{K, N, bits, block_size, zero_point_kind};
  if (auto error = CheckWeights(shape, codes, scales, zero_points); error.failure()) return error;
  const auto dtype = out->element_type();
  if (bits != 4 || (dtype != ffi::DataType::F16 && dtype != ffi::DataType::BF16) || K % 8 != 0) {
    return ffi::Error::InvalidArgument(
        "jax_marlin: the CUDA dequantization takes 4-bit weights, K % 8 == 0, and float16 or "
        "bfloat16 output");
  }
  if (scales.element_type() != dtype) {
    return ffi::Error::InvalidArgument("jax_marlin: scales must have the output's dtype");
  }
  if (int64_t(out->element_count()) != N * K) return SizeError("out", N * K, out->element_count());
  DequantArgs args{};
  args.codes = codes.typed_data<uint32_t>();
  args.scales = scales.untyped_data();
  args.zero_points = zero_point_kind ? zero_points.untyped_data() : nullptr;
  args.out = out->untyped_data();
  args.N = N;
  args.K = K;
  args.n_pad = shape.n_pad();
  args.k_pad = shape.k_pad();
  args.k_blocks = shape.k_blocks();
  args.group_size = block_size;
  args.dtype = dtype == ffi::DataType::BF16 ? ActDType::kBFloat16 : ActDType::kFloat16;
  args.zero_point_kind = static_cast<ZeroPointKind>(zero_point_kind);
  if (cudaError_t error = LaunchDequantize(args, stream); error != cudaSuccess) {
    return CudaError("launching the dequantization", error);
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(DequantizeCudaHandler, DequantizeCuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // codes, tile layout
                                  .Arg<ffi::AnyBuffer>()  // scales, output dtype
                                  .Arg<ffi::AnyBuffer>()  // zero points (maybe empty)
                                  .Ret<ffi::AnyBuffer>()  // out [N, K]
                                  .Attr<int64_t>("K")
                                  .Attr<int64_t>("N")
                                  .Attr<int64_t>("bits")
                                  .Attr<int64_t>("block_size")
                                  .Attr<int64_t>("zero_point_kind"),
                              {ffi::Traits::kCmdBufferCompatible});

// Runs `plan(args, device)` on what a plan query needs: the shape's launch
// arguments with a workspace of that size (the planners read only whether
// there is one and its size; nothing is dereferenced) and this device's limits.
template <typename Plan>
static cudaError_t WithPlanningArgs(int64_t M, int64_t K, int64_t N, int64_t block_size,
                                    int64_t zero_point_kind, bool bfloat16,
                                    int64_t workspace_floats, int64_t stream_k_floats,
                                    Plan plan) {
  DeviceLimits device;
  if (cudaError_t error = GetDeviceLimits(&device); error != cudaSuccess) return error;
  MarlinGemmArgs args = ShapeArgs(WeightShape{K, N, 4, block_size, zero_point_kind}, M, bfloat16);
  if (stream_k_floats < 0 || stream_k_floats >= std::max<int64_t>(workspace_floats, 1))
    return cudaErrorInvalidValue;
  // (A base aligned as XLA's buffers are: the planners read the stream-K part's alignment.)
  SplitWorkspace(workspace_floats > 0 ? reinterpret_cast<float*>(256) : nullptr,
                 workspace_floats, stream_k_floats, &args);
  plan(args, device);
  return cudaSuccess;
}

cudaError_t PlanKernel(int64_t M, int64_t K, int64_t N, int64_t block_size,
                       int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                       int64_t stream_k_floats,
                       int64_t split_k, const char** kernel) {
  return WithPlanningArgs(M, K, N, block_size, zero_point_kind, bfloat16, workspace_floats,
                          stream_k_floats,
                          [&](const MarlinGemmArgs& args, const DeviceLimits& device) {
                            *kernel = PlannedKernel(args, device, static_cast<int>(split_k));
                          });
}

cudaError_t PlanStreamGrid(int64_t M, int64_t K, int64_t N, int64_t block_size,
                           int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                           int64_t stream_k_floats,
                           int64_t split_k, bool* streams, StreamGridInfo* info) {
  return WithPlanningArgs(
      M, K, N, block_size, zero_point_kind, bfloat16, workspace_floats, stream_k_floats,
      [&](const MarlinGemmArgs& args, const DeviceLimits& device) {
        *streams = PlanStreamGemm(args, device, static_cast<int>(split_k), info);
      });
}

cudaError_t PlanWgmmaGrid(int64_t M, int64_t K, int64_t N, int64_t block_size,
                          int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                          int64_t stream_k_floats,
                          int64_t split_k, bool* wgmma, WgmmaGridInfo* info) {
  *wgmma = false;
#ifdef JAX_MARLIN_WGMMA  // a build without sm_90a code never runs the kernel
  return WithPlanningArgs(
      M, K, N, block_size, zero_point_kind, bfloat16, workspace_floats, stream_k_floats,
      [&](const MarlinGemmArgs& args, const DeviceLimits& device) {
        // Only where LaunchMarlinGemm would choose it: the streaming kernel and
        // a test's split_k override come first (PlannedKernel holds the order).
        if (std::string_view(PlannedKernel(args, device, static_cast<int>(split_k))) == "wgmma")
          *wgmma = PlanWgmmaGemm(args, device, info,
                                 WgmmaOverridesFor(static_cast<int>(split_k)));
      });
#else
  (void)M, (void)K, (void)N, (void)block_size, (void)zero_point_kind, (void)bfloat16;
  (void)workspace_floats, (void)stream_k_floats, (void)split_k, (void)info;
  return cudaSuccess;
#endif
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(MatMulNBitsCudaHandler, MatMulNBitsCuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // a [..., K], K % 8 == 0
                                  .Arg<ffi::AnyBuffer>()  // codes, tile layout
                                  .Arg<ffi::AnyBuffer>()  // scales, activation dtype
                                  .Arg<ffi::AnyBuffer>()  // zero points (maybe empty)
                                  .Arg<ffi::AnyBuffer>()  // bias (maybe empty)
                                  .Ret<ffi::AnyBuffer>()  // out [..., N]
                                  .Ret<ffi::Buffer<ffi::F32>>()  // split-K workspace
                                  .Attr<int64_t>("K")
                                  .Attr<int64_t>("N")
                                  .Attr<int64_t>("bits")
                                  .Attr<int64_t>("block_size")
                                  .Attr<int64_t>("zero_point_kind")
                                  .Attr<int64_t>("split_k")
                                  .Attr<int64_t>("stream_k_floats"),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jax_marlin
