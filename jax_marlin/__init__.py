"""jax_marlin: fused 4-bit-weight matrix multiply for JAX.

Weights in the ONNX ``com.microsoft::MatMulNBits`` format are repacked once by
:func:`prepare` and multiplied by :func:`matmul_nbits` under ``jit``.
"""

from jax_marlin import reference
from jax_marlin._ffi import build_info
from jax_marlin.ops import matmul_nbits
from jax_marlin.parallel import split_weights
from jax_marlin.quantize import QuantizedWeights, quantize
from jax_marlin.weights import MarlinWeights, dequantize, prepare

__all__ = [
    "MarlinWeights",
    "QuantizedWeights",
    "build_info",
    "dequantize",
    "matmul_nbits",
    "prepare",
    "quantize",
    "reference",
    "split_weights",
]
__version__ = "0.1.0"
