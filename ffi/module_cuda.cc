// Binding module for the CUDA handler: it hands out registrations, says how it
// was built, and shows the kernels' plans to tests.
#include <stdexcept>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cuda_runtime_api.h>

#include "format.h"
#include "handlers.h"
#include "xla/ffi/api/c_api.h"

namespace nb = nanobind;

// The plan queries' shape, checked as the handlers check it (handler_checks.h):
// a block_size of 0 or an N of 0 would divide by zero in the planners.
static void RaiseIfInvalid(int64_t M, int64_t K, int64_t N, int64_t block_size,
                           int64_t zero_point_kind) {
  if (M < 1 || !jax_marlin::format::ValidShape(K, N, 4, block_size) || zero_point_kind < 0 ||
      zero_point_kind > 2) {
    throw std::invalid_argument(
        "jax_marlin: a plan needs M >= 1, K and N in [1, " + jax_marlin::format::MaxDimText() +
        "], block_size a power of two in [16, " + jax_marlin::format::MaxDimText() +
        "] and a zero-point kind 0-2, got M=" + std::to_string(M) + ", K=" +
        std::to_string(K) + ", N=" + std::to_string(N) + ", block_size=" +
        std::to_string(block_size) + ", kind=" + std::to_string(zero_point_kind));
  }
}

// A planner that could not ask the device (no GPU, a driver error) raises.
static void RaiseIfFailed(cudaError_t error) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string("jax_marlin: ") + cudaGetErrorString(error));
  }
}

NB_MODULE(_cuda, m) {
  m.def("registrations", []() {
    nb::dict targets;
    targets["jax_marlin_matmul_nbits_cuda"] =
        nb::capsule(reinterpret_cast<void*>(jax_marlin::MatMulNBitsCudaHandler));
    targets["jax_marlin_dequantize_cuda"] =
        nb::capsule(reinterpret_cast<void*>(jax_marlin::DequantizeCudaHandler));
    return targets;
  });
  m.def("xla_ffi_api_version",
        []() { return nb::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR); });
  m.def("cuda_architectures", []() { return nb::str(JAX_MARLIN_CUDA_ARCHITECTURES); });
  m.def("cuda_runtime_version", []() { return CUDART_VERSION; });
  // The wgmma kernel's JAX_MARLIN_WGMMA_PRODUCER (1 by default; 0: no producer
  // warpgroup, or no wgmma kernel in this build).
  m.def("wgmma_producer", []() {
#ifdef JAX_MARLIN_WGMMA
    return jax_marlin::WgmmaProducerBuild();
#else
    return 0;
#endif
  });
  // Which kernel ("stream", "wgmma" or "tiled") the handler would run a 4-bit
  // GEMM with on the current device: tests use it to know which path a shape
  // reaches, since every path gives the same answer.
  m.def("planned_kernel", [](int64_t M, int64_t K, int64_t N, int64_t block_size,
                             int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                             int64_t stream_k_floats,
                             int64_t split_k) {
    const char* kernel = nullptr;
    RaiseIfInvalid(M, K, N, block_size, zero_point_kind);
    RaiseIfFailed(jax_marlin::PlanKernel(M, K, N, block_size, zero_point_kind, bfloat16,
                                         workspace_floats, stream_k_floats, split_k, &kernel));
    return std::string(kernel);
  });
  // The streaming kernel's grid (None where another kernel would run it).
  m.def("stream_plan", [](int64_t M, int64_t K, int64_t N, int64_t block_size,
                          int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                          int64_t stream_k_floats,
                          int64_t split_k) -> nb::object {
    bool streams = false;
    jax_marlin::StreamGridInfo info{};
    RaiseIfInvalid(M, K, N, block_size, zero_point_kind);
    RaiseIfFailed(jax_marlin::PlanStreamGrid(M, K, N, block_size, zero_point_kind, bfloat16,
                                             workspace_floats, stream_k_floats, split_k, &streams,
                                             &info));
    if (!streams) return nb::none();
    nb::dict plan;
    plan["blocks"] = info.blocks;
    plan["k_steps"] = info.k_steps;
    plan["total_steps"] = info.total_steps;
    plan["smem_bytes"] = info.smem_bytes;
    plan["max_parts"] = info.max_parts;
    plan["tile_split"] = info.tile_split;
    plan["group_cluster"] = info.group_cluster;
    plan["group_rows"] = info.group_rows != 0;
    plan["a_phase_steps"] = info.a_phase_steps;
    return plan;
  });
  // The wgmma kernel's grid (None where another kernel would run the GEMM, or
  // the module has no sm_90a code), for tests of its row blocks and k-split,
  // and for the lowering, which adds stream-K's area only where this plan runs
  // stream-K (jax_marlin/ops.py _workspace_floats).
  m.def("wgmma_plan", [](int64_t M, int64_t K, int64_t N, int64_t block_size,
                         int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                         int64_t stream_k_floats,
                         int64_t split_k) -> nb::object {
    bool wgmma = false;
    jax_marlin::WgmmaGridInfo info{};
    RaiseIfInvalid(M, K, N, block_size, zero_point_kind);
    RaiseIfFailed(jax_marlin::PlanWgmmaGrid(M, K, N, block_size, zero_point_kind, bfloat16,
                                            workspace_floats, stream_k_floats, split_k, &wgmma,
                                            &info));
    if (!wgmma) return nb::none();
    nb::dict plan;
    plan["rows"] = info.rows;
    plan["n_blocks"] = info.n_blocks;
    plan["m_blocks"] = info.m_blocks;
    plan["splits"] = info.splits;
    plan["stages_per_split"] = info.stages_per_split;
    plan["smem_bytes"] = info.smem_bytes;
    plan["cluster_k"] = info.cluster_k != 0;
    plan["producer"] = info.producer != 0;
    plan["stream_k_blocks"] = info.stream_k_blocks;
    return plan;
  });
}
