"""Argument checks shared by the public functions.

Every check raises before anything is traced into a kernel, and every message
names the argument and what was expected of it.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jax_marlin import _format, _layout

FLOAT_DTYPES = (np.dtype("float16"), np.dtype("float32"))
try:  # bfloat16 is an ml_dtypes type, which jax always brings along
    import ml_dtypes

    FLOAT_DTYPES = FLOAT_DTYPES + (np.dtype(ml_dtypes.bfloat16),)
except ImportError:  # pragma: no cover
    pass
_FLOAT_NAMES = "float16, bfloat16 or float32"


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


# The largest K, N and block_size (ffi/format.h kMaxDim, where the reason is: the
# kernels index within a row of N scales, or along k, in 32-bit ints).
MAX_DIM = 1 << 29
_MAX_DIM_TEXT = f"2**{MAX_DIM.bit_length() - 1}"


def format_attributes(K, N, bits, block_size) -> None:
    for name, value in (("K", K), ("N", N)):
        if not _is_int(value) or not 1 <= value <= MAX_DIM:
            raise ValueError(f"{name} must be an integer from 1 to {_MAX_DIM_TEXT}, got {value!r}")
    if not _is_int(bits) or bits not in _format.SUPPORTED_BITS:
        raise ValueError(f"bits must be one of {_format.SUPPORTED_BITS}, got {bits!r}")
    if (not _is_int(block_size) or not 16 <= block_size <= MAX_DIM
            or block_size & (block_size - 1)):
        raise ValueError(f"block_size must be a power of two from 16 to {_MAX_DIM_TEXT}, got "
                         f"{block_size!r}")


def float_dtype(name: str, dtype) -> np.dtype:
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a dtype among {_FLOAT_NAMES}, got {dtype!r}") from None
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must have dtype {_FLOAT_NAMES}, got {dtype}")
    return dtype


def _shape_is(name, array, expected, alternatives=(), where=""):
    shape = tuple(array.shape)
    if shape != tuple(expected) and shape not in [tuple(s) for s in alternatives]:
        options = " or ".join(str(tuple(s)) for s in (expected, *alternatives))
        raise ValueError(f"{name} must have shape {options}, got {shape}{where}")


def _attributes(K, N, bits, block_size) -> str:
    """Which attributes an expected shape came from, for the messages."""
    return f" (for K={K}, N={N}, bits={bits}, block_size={block_size})"


def onnx_tensors(packed, scales, zero_points, *, K, N, bits, block_size) -> str:
    """Checks the MatMulNBits tensors; returns the zero-point kind.

    The kind is ``"implicit"`` (none given), ``"packed"`` (uint8, ``bits`` per
    value) or ``"float"`` (code units, the scales' dtype).
    """
    format_attributes(K, N, bits, block_size)
    where = _attributes(K, N, bits, block_size)
    num_blocks = _format.k_blocks(K, block_size)
    blob = _format.blob_bytes(block_size, bits)
    if np.dtype(packed.dtype) != np.uint8:
        raise TypeError(f"packed must have dtype uint8, got {np.dtype(packed.dtype)}")
    _shape_is("packed", packed, (N, num_blocks, blob), where=where)
    scale_dtype = float_dtype("scales", scales.dtype)
    _shape_is("scales", scales, (N, num_blocks), [(N * num_blocks,)], where)
    if zero_points is None:
        return "implicit"
    zp_dtype = np.dtype(zero_points.dtype)
    if zp_dtype == np.uint8:
        row = _format.zero_point_row_bytes(num_blocks, bits)
        _shape_is("zero_points", zero_points, (N, row), [(N * row,)], where)
        return "packed"
    if zp_dtype in FLOAT_DTYPES:
        if zp_dtype != scale_dtype:
            raise TypeError(
                f"float zero_points must have the scales' dtype {scale_dtype}, got {zp_dtype}"
            )
        _shape_is("zero_points", zero_points, (N, num_blocks), [(N * num_blocks,)], where)
        return "float"
    raise TypeError(
        f"zero_points must be packed uint8 or have the scales' dtype {scale_dtype}, got {zp_dtype}"
    )


def as_array(name: str, value):
    """``jnp.asarray(value)``, or a TypeError naming the argument (jax's own names none)."""
    try:
        return jnp.asarray(value)
    except (TypeError, ValueError):  # (None: a ValueError)
        raise TypeError(f"{name} must be an array, got {type(value).__name__}") from None


def onnx_arrays(packed, scales, zero_points):
    """The MatMulNBits tensors as arrays (``zero_points`` may be None), each error naming
    its argument; :func:`onnx_tensors` then checks them."""
    zero_points = None if zero_points is None else as_array("zero_points", zero_points)
    return as_array("packed", packed), as_array("scales", scales), zero_points


def activations(a, K: int) -> None:
    dtype = np.dtype(a.dtype)
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"a must have dtype {_FLOAT_NAMES}, got {dtype}")
    if a.ndim < 1 or a.shape[-1] != K:
        raise ValueError(f"a must have shape [..., K] with K = {K}, got {tuple(a.shape)}")


def bias(value, N: int) -> None:
    if value is None:
        return
    float_dtype("bias", value.dtype)
    _shape_is("bias", value, (N,))


def prepared_weights(w) -> None:
    """Checks a MarlinWeights' arrays against its K, N, bits and block_size (as
    :func:`jax_marlin.prepare` makes them), for weights built by hand or edited."""
    format_attributes(w.K, w.N, w.bits, w.block_size)
    num_blocks = _format.k_blocks(w.K, w.block_size)
    if w.bits == 4:  # the tile layout
        tiles = _layout.shapes(w.N, num_blocks, w.block_size)
        codes = (tiles["codes"], np.uint32)
        per_column = tiles["per_column"]
        packed_zero_points = (tiles["packed_zero_points"], np.uint32)
    else:  # the ONNX row layout
        codes = ((w.N, num_blocks * _format.blob_bytes(w.block_size, w.bits)), np.uint8)
        per_column = (w.N, num_blocks)
        packed_zero_points = ((w.N, _format.zero_point_row_bytes(num_blocks, w.bits)), np.uint8)
    scale_dtype = float_dtype("weights.scales", w.scales.dtype)
    expected = [("weights.codes", w.codes, *codes), ("weights.scales", w.scales, per_column,
                                                     scale_dtype)]
    if w.zero_points is not None:
        packed = np.issubdtype(np.dtype(w.zero_points.dtype), np.integer)
        expected.append(("weights.zero_points", w.zero_points,
                         *(packed_zero_points if packed else (per_column, scale_dtype))))
    # Arrays of another layout (the ONNX tensors themselves, or weights edited after
    # prepare) are the usual cause: say where the expectation came from.
    where = (_attributes(w.K, w.N, w.bits, w.block_size)[:-1]
             + "; MarlinWeights come from jax_marlin.prepare)")
    for name, array, shape, dtype in expected:
        if np.dtype(array.dtype) != np.dtype(dtype):
            raise TypeError(f"{name} must have dtype {np.dtype(dtype)}, got "
                            f"{np.dtype(array.dtype)}{where}")
        _shape_is(name, array, shape, where=where)
