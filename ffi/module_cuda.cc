// Binding module for the CUDA handler: it only hands out registrations and
// says how it was built.
#include <nanobind/nanobind.h>

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
}
