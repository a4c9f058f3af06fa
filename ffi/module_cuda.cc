// Binding module for the CUDA handler: it hands out registrations, says how it
// was built, and shows the streaming kernel's plan to tests.
#include <stdexcept>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cuda_runtime_api.h>

#include "handlers.h"
#include "xla/ffi/api/c_api.h"

namespace nb = nanobind;

NB_MODULE(_cuda, m) {
  m.def("registrations", []() {
    nb::dict targets;
    targets["jax_marlin_matmul_nbits_cuda"] =
        nb::capsule(reinterpret_cast<void*>(jax_marlin::MatMulNBitsCudaHandler));
    return targets;
  });
  m.def("xla_ffi_api_version",
        []() { return nb::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR); });
  m.def("cuda_architectures", []() { return nb::str(JAX_MARLIN_CUDA_ARCHITECTURES); });
  m.def("cuda_runtime_version", []() { return CUDART_VERSION; });
  // Which kernel a 4-bit GEMM gets on the current device, and the streaming
  // kernel's grid (None where another kernel runs it): tests use them to know
  // which path a shape reaches, since every path gives the same answer.
  m.def("planned_kernel", [](int64_t M, int64_t K, int64_t N, int64_t block_size,
                             int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                             int64_t split_k) {
    const char* kernel = nullptr;
    if (cudaError_t error = jax_marlin::PlanKernel(M, K, N, block_size, zero_point_kind, bfloat16,
                                                   workspace_floats, split_k, &kernel);
        error != cudaSuccess) {
      throw std::runtime_error(std::string("jax_marlin: ") + cudaGetErrorString(error));
    }
    return std::string(kernel);
  });
  m.def("stream_plan", [](int64_t M, int64_t K, int64_t N, int64_t block_size,
                          int64_t zero_point_kind, bool bfloat16, int64_t workspace_floats,
                          int64_t split_k) -> nb::object {
    bool streams = false;
    jax_marlin::StreamGridInfo info{};
    if (cudaError_t error = jax_marlin::PlanStreamGrid(M, K, N, block_size, zero_point_kind,
                                                       bfloat16, workspace_floats, split_k,
                                                       &streams, &info);
        error != cudaSuccess) {
      throw std::runtime_error(std::string("jax_marlin: ") + cudaGetErrorString(error));
    }
    if (!streams) return nb::none();
    nb::dict plan;
    plan["blocks"] = info.blocks;
    plan["k_steps"] = info.k_steps;
    plan["total_steps"] = info.total_steps;
    plan["smem_bytes"] = info.smem_bytes;
    plan["max_parts"] = info.max_parts;
    plan["tile_split"] = info.tile_split;
    return plan;
  });
}
