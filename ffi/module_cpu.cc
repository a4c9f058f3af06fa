// Binding module for the CPU handler: it only hands out registrations and
// says how it was built.
#include <nanobind/nanobind.h>

#include "handlers.h"
#include "xla/ffi/api/c_api.h"

namespace nb = nanobind;

NB_MODULE(_cpu, m) {
  m.def("registrations", []() {
    nb::dict targets;
    targets["jax_marlin_matmul_nbits_cpu"] =
        nb::capsule(reinterpret_cast<void*>(jax_marlin::MatMulNBitsCpuHandler));
    return targets;
  });
  m.def("xla_ffi_api_version",
        []() { return nb::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR); });
}
