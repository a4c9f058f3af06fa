// The XLA FFI handler symbols the binding modules hand out.
#pragma once

#include "xla/ffi/api/api.h"

#ifdef JAX_MARLIN_CUDA_ARCHITECTURES
#include "stream_kernel.h"
#include "wgmma_kernel.h"
#endif

namespace jax_marlin {

XLA_FFI_DECLARE_HANDLER_SYMBOL(MatMulNBitsCpuHandler);
XLA_FFI_DECLARE_HANDLER_SYMBOL(MatMulNBitsCudaHandler);
XLA_FFI_DECLARE_HANDLER_SYMBOL(DequantizeCudaHandler);

#ifdef JAX_MARLIN_CUDA_ARCHITECTURES  // the CUDA module's sources only
// The streaming kernel's grid for a 4-bit GEMM on the current device, as the
// handler would plan it (`streams` false: the tiled kernel would take it);
// for tests that must know which path they reach.
cudaError_t PlanStreamGrid(int64_t M, int64_t K, int64_t N, int64_t block_size,
                           int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                           int64_t stream_k_floats,
                           int64_t split_k, bool* streams, StreamGridInfo* info);
// The wgmma kernel's grid, as the handler would launch it (`wgmma` false
// where another kernel would run the GEMM, always in a build without sm_90a).
cudaError_t PlanWgmmaGrid(int64_t M, int64_t K, int64_t N, int64_t block_size,
                          int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                          int64_t stream_k_floats,
                          int64_t split_k, bool* wgmma, WgmmaGridInfo* info);
// Which kernel the handler would launch: "stream", "wgmma" or "tiled".
cudaError_t PlanKernel(int64_t M, int64_t K, int64_t N, int64_t block_size,
                       int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                       int64_t stream_k_floats,
                       int64_t split_k, const char** kernel);
#endif

}  // namespace jax_marlin
