// The XLA FFI handler symbols the binding modules hand out.
#pragma once

#include "xla/ffi/api/api.h"

namespace jax_marlin {

XLA_FFI_DECLARE_HANDLER_SYMBOL(MatMulNBitsCpuHandler);
XLA_FFI_DECLARE_HANDLER_SYMBOL(MatMulNBitsCudaHandler);

}  // namespace jax_marlin
