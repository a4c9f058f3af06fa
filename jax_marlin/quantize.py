"""Float weights -> MatMulNBits tensors, with onnxruntime's default scheme."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from jax_marlin import _checks, _format


@dataclasses.dataclass(frozen=True)
class QuantizedWeights:
    """The tensors and attributes of one ``MatMulNBits`` node."""

    packed: jax.Array  # uint8 [N, k_blocks, blob]
    scales: jax.Array  # [N, k_blocks], the kernel's float dtype
    zero_points: jax.Array | None  # uint8 [N, ceil(k_blocks * bits / 8)], or None
    K: int
    N: int
    bits: int
    block_size: int


def quantize(kernel, *, bits: int = 4, block_size: int = 128, symmetric: bool = False):
    """Quantizes a float ``[K, N]`` weight (Flax's ``kernel`` layout) block-wise along K.

    Asymmetric (default), per block of ``block_size`` consecutive k:
    ``scale = (max(w, 0) - min(w, 0)) / (2**bits - 1)``,
    ``zp = clamp(round(-min / scale))``, ``code = clamp(round(w / scale + zp))``.
    Symmetric: ``scale = -m / 2**(bits - 1)`` with ``m`` the signed element of
    largest magnitude, zero point ``2**(bits - 1)`` implied (not stored). Padded
    slots (when ``block_size`` does not divide K) hold code 0, as producers write.
    """
    kernel = jnp.asarray(kernel)
    dtype = _checks.float_dtype("kernel", kernel.dtype)
    if kernel.ndim != 2:
        raise ValueError(f"kernel must have shape [K, N], got {tuple(kernel.shape)}")
    K, N = kernel.shape
    _checks.format_attributes(K, N, bits, block_size)
    packed, scales, zero_points = _quantize(kernel, bits, block_size, symmetric)
    return QuantizedWeights(
        packed=packed,
        scales=scales.astype(dtype),
        zero_points=zero_points,
        K=K,
        N=N,
        bits=bits,
        block_size=block_size,
    )


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _quantize(kernel, bits, block_size, symmetric):
    K, N = kernel.shape
    num_blocks = _format.k_blocks(K, block_size)
    k_pad = num_blocks * block_size
    # Zero padding leaves every block statistic unchanged: both schemes already
    # include 0 in the range they cover.
    w = jnp.pad(kernel.astype(jnp.float32).T, ((0, 0), (0, k_pad - K)))
    w = w.reshape(N, num_blocks, block_size)
    max_code = (1 << bits) - 1
    if symmetric:
        lo, hi = w.min(axis=-1), w.max(axis=-1)
        signed_max = jnp.where(-lo > hi, lo, hi)
        scale = -signed_max / (1 << (bits - 1))
        zero_point = jnp.full(scale.shape, _format.default_zero_point(bits), jnp.float32)
    else:
        lo = jnp.minimum(w.min(axis=-1), 0.0)
        hi = jnp.maximum(w.max(axis=-1), 0.0)
        # hi - lo overflows float32 for weights past ~1.7e38; the difference of the
        # quotients does not, and elsewhere the plain form keeps onnxruntime's rounding.
        span = hi - lo
        scale = jnp.where(jnp.isfinite(span), span / max_code, hi / max_code - lo / max_code)
        zero_point = jnp.clip(jnp.round(jnp.where(scale != 0, -lo / scale, 0.0)), 0, max_code)
    reciprocal = jnp.where(scale != 0, 1.0 / jnp.where(scale != 0, scale, 1.0), 0.0)
    codes = jnp.clip(jnp.round(w * reciprocal[..., None] + zero_point[..., None]), 0, max_code)
    in_range = (jnp.arange(k_pad) < K).reshape(num_blocks, block_size)
    codes = jnp.where(in_range, codes, 0).astype(jnp.uint8).reshape(N, k_pad)
    packed = _format.pack_bytes(codes, bits).reshape(N, num_blocks, -1)
    zero_points = None
    if not symmetric:
        zero_points = _format.pack_zero_points(zero_point.astype(jnp.uint8), bits)
    return packed, scale, zero_points


def as_numpy(q: QuantizedWeights) -> QuantizedWeights:
    """The same tensors as host numpy arrays (for writing an ONNX initializer)."""
    convert = lambda x: None if x is None else np.asarray(x)  # noqa: E731
    return dataclasses.replace(
        q, packed=convert(q.packed), scales=convert(q.scales), zero_points=convert(q.zero_points)
    )
