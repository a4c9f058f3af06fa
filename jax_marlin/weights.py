"""Prepared weights: ONNX MatMulNBits tensors repacked once, at load time."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from jax_marlin import _checks, _format, _layout


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["codes", "scales", "zero_points"],
    meta_fields=["K", "N", "bits", "block_size"],
)
@dataclasses.dataclass(frozen=True)
class MarlinWeights:
    """A quantized ``[N, K]`` weight, ready for :func:`jax_marlin.matmul_nbits`.

    A pytree: the arrays are leaves (they live on the device, donate and
    checkpoint like any parameter; placed sharded, they are gathered by
    :func:`matmul_nbits` under ``jit``, which has no partitioning rule: for
    tensor parallelism see :func:`jax_marlin.split_weights`), ``K``, ``N``,
    ``bits`` and ``block_size`` are static metadata. Build it with
    :func:`prepare`. For ``bits == 4`` the arrays are in the tile layout of
    ``jax_marlin._layout``; for 2 and 8 bits they keep the ONNX row layout.
    """

    codes: jax.Array
    scales: jax.Array
    zero_points: jax.Array | None
    K: int
    N: int
    bits: int
    block_size: int

    @property
    def k_blocks(self) -> int:
        return _format.k_blocks(self.K, self.block_size)

    @property
    def zero_point_kind(self) -> str:
        """``"implicit"`` (symmetric), ``"packed"`` (integer) or ``"float"``."""
        if self.zero_points is None:
            return "implicit"
        if jnp.issubdtype(self.zero_points.dtype, jnp.integer):
            return "packed"
        return "float"

    @property
    def nbytes(self) -> int:
        leaves = jax.tree_util.tree_leaves(self)
        return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in leaves)


def prepare(packed, scales, zero_points=None, *, K, N, bits=4, block_size, scale_dtype=None):
    """Repacks the tensors of one MatMulNBits node for :func:`matmul_nbits`.

    Accepts numpy or jax arrays: ``packed`` uint8 ``[N, k_blocks, blob]``;
    ``scales`` ``[N, k_blocks]`` or flat; ``zero_points`` packed uint8 (``[N,
    ceil(k_blocks * bits / 8)]`` or flat), float in the scales' dtype (code
    units, ``[N, k_blocks]`` or flat), or ``None`` (symmetric). The repack runs
    on the default device, once: :func:`matmul_nbits` never repacks.

    ``scale_dtype`` optionally casts the scales (and float zero points) once,
    here; pass the activation dtype to spare the GPU kernel a per-call cast.
    (Float zero points are kept as given: the GPU lowering folds them into
    ``-zp * scale`` offsets per call, a small elementwise op.)
    """
    packed, scales, zero_points = _checks.onnx_arrays(packed, scales, zero_points)
    kind = _checks.onnx_tensors(packed, scales, zero_points, K=K, N=N, bits=bits,
                                block_size=block_size)
    if scale_dtype is not None:
        scale_dtype = _checks.float_dtype("scale_dtype", scale_dtype)
    codes, scales, zero_points = _repack(packed, scales, zero_points, K=K, N=N, bits=bits,
                                         block_size=block_size, kind=kind,
                                         scale_dtype=scale_dtype)
    return MarlinWeights(codes, scales, zero_points, K=K, N=N, bits=bits,
                         block_size=block_size)


@functools.partial(jax.jit, static_argnames=("K", "N", "bits", "block_size", "kind",
                                               "scale_dtype"))
def _repack(packed, scales, zero_points, *, K, N, bits, block_size, kind, scale_dtype):
    num_blocks = _format.k_blocks(K, block_size)
    scales = scales.reshape(N, num_blocks)
    out_dtype = scale_dtype or scales.dtype
    scales = scales.astype(out_dtype)
    if kind == "float":
        zero_points = zero_points.reshape(N, num_blocks).astype(out_dtype)
    if bits != 4:  # no fused kernel: keep the ONNX row layout
        codes = packed.reshape(N, -1)
        if kind == "packed":
            return codes, scales, zero_points.reshape(N, -1)
        return codes, scales, zero_points

    pad_n = _layout.n_pad(N) - N
    codes = jnp.pad(_format.unpack_codes(packed, bits), ((0, pad_n), (0, 0)))
    tiles = _layout.repack_codes(codes)
    # Padded columns get scale 0: they contribute nothing and are never stored.
    scales = _layout.permute_columns(jnp.pad(scales, ((0, pad_n), (0, 0))))
    if kind == "packed":
        zp = _format.unpack_zero_points(zero_points.reshape(N, -1), bits, num_blocks)
        zp = jnp.pad(zp, ((0, pad_n), (0, 0)), constant_values=_format.default_zero_point(4))
        return tiles, scales, _layout.pack_zero_point_words(zp)
    if kind == "float":
        return tiles, scales, _layout.permute_columns(jnp.pad(zero_points, ((0, pad_n), (0, 0))))
    return tiles, scales, None


def check(weights) -> None:
    """The ``weights`` argument of the public functions: a :class:`MarlinWeights` whose
    arrays fit its K, N, bits and block_size (built by hand or edited, they may not)."""
    if not isinstance(weights, MarlinWeights):
        raise TypeError(f"weights must be jax_marlin.MarlinWeights (from jax_marlin.prepare), "
                        f"got {type(weights).__name__}")
    _checks.prepared_weights(weights)


def dequantize(weights: MarlinWeights, dtype=jnp.float32):
    """The logical weight ``[N, K]`` of prepared weights, in ``dtype``.

    Used by the dense paths (large M, 2/8 bits on the GPU, platforms without a
    kernel); exact in float32. In fp16/bf16 it is what the fused kernel
    computes for integer zero points (``(code - zp)`` is exact, then one
    rounding for the scale); for float zero points the kernel computes
    ``code * scale + (-zp * scale)`` instead, one rounding more.
    """
    check(weights)
    dtype = _checks.float_dtype("dtype", dtype)
    w = weights
    num_blocks, block = w.k_blocks, w.block_size
    if w.bits == 4:
        codes = _layout.unpack_tile_codes(w.codes)[: w.N]
        scales = _layout.unpermute_columns(w.scales)[: w.N]
        zp = w.zero_points
        if w.zero_point_kind == "packed":
            zp = _layout.unpack_zero_point_words(zp)[: w.N]
        elif w.zero_point_kind == "float":
            zp = _layout.unpermute_columns(zp)[: w.N]
    else:
        codes = _format.unpack_bytes(w.codes, w.bits)
        scales, zp = w.scales, w.zero_points
        if w.zero_point_kind == "packed":
            zp = _format.unpack_zero_points(zp, w.bits, num_blocks)
    codes = codes.reshape(w.N, num_blocks, block).astype(dtype)
    scales = scales.astype(dtype)[..., None]
    if zp is None:
        zp = jnp.full((w.N, num_blocks), _format.default_zero_point(w.bits), jnp.uint8)
    weight = (codes - zp.astype(dtype)[..., None]) * scales
    return weight.reshape(w.N, num_blocks * block)[:, : w.K]
