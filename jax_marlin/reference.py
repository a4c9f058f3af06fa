"""A plain ``jax.numpy`` oracle on the original ONNX tensors.

Written to be read, not to be fast: unpack, dequantize in float32, multiply in
float32 at the highest precision. The tests hold the kernels to it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jax_marlin import _checks, _format


def dequantize(packed, scales, zero_points, *, K, N, bits, block_size):
    """The logical weight ``float32 [N, K]`` of a MatMulNBits node."""
    packed, scales, zero_points = _checks.onnx_arrays(packed, scales, zero_points)
    kind = _checks.onnx_tensors(packed, scales, zero_points, K=K, N=N, bits=bits,
                                block_size=block_size)
    num_blocks = _format.k_blocks(K, block_size)
    codes = _format.unpack_codes(packed, bits).astype(jnp.float32)
    codes = codes.reshape(N, num_blocks, block_size)
    scales = jnp.asarray(scales, jnp.float32).reshape(N, num_blocks)
    if kind == "implicit":
        zp = jnp.full((N, num_blocks), _format.default_zero_point(bits), jnp.float32)
    elif kind == "packed":
        zp_bytes = jnp.asarray(zero_points).reshape(N, -1)
        zp = _format.unpack_zero_points(zp_bytes, bits, num_blocks).astype(jnp.float32)
    else:
        zp = jnp.asarray(zero_points, jnp.float32).reshape(N, num_blocks)
    weight = (codes - zp[..., None]) * scales[..., None]
    # Padded slots of the last block are never trusted: cut them off.
    return weight.reshape(N, num_blocks * block_size)[:, :K]


def matmul_nbits(a, packed, scales, zero_points, *, K, N, bits, block_size, bias=None):
    """``a @ dequantize(...)^T (+ bias)`` in float32, returned in ``a``'s dtype."""
    a = _checks.as_array("a", a)
    _checks.activations(a, K)
    weight = dequantize(packed, scales, zero_points, K=K, N=N, bits=bits, block_size=block_size)
    y = jnp.einsum("...k,nk->...n", a.astype(jnp.float32), weight,
                   precision=jax.lax.Precision.HIGHEST)
    if bias is not None:
        bias = _checks.as_array("bias", bias)  # as matmul_nbits takes it (numpy float64 too)
        _checks.bias(bias, N)
        y = y + bias.astype(jnp.float32)
    return y.astype(a.dtype)
