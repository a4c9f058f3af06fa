"""Argument checks shared by the public functions.

Every check raises before anything is traced into a kernel, and every message
names the argument and what was expected of it.
"""

from __future__ import annotations

import numpy as np

from jax_marlin import _format

FLOAT_DTYPES = (np.dtype("float16"), np.dtype("float32"))
try:  # bfloat16 is an ml_dtypes type, which jax always brings along
    import ml_dtypes

    FLOAT_DTYPES = FLOAT_DTYPES + (np.dtype(ml_dtypes.bfloat16),)
except ImportError:  # pragma: no cover
    pass
_FLOAT_NAMES = "float16, bfloat16 or float32"


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def format_attributes(K, N, bits, block_size) -> None:
    for name, value in (("K", K), ("N", N)):
        if not _is_int(value) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if bits not in _format.SUPPORTED_BITS:
        raise ValueError(f"bits must be one of {_format.SUPPORTED_BITS}, got {bits!r}")
    if not _is_int(block_size) or block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two >= 16, got {block_size!r}")


def float_dtype(name: str, dtype) -> np.dtype:
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a dtype among {_FLOAT_NAMES}, got {dtype!r}") from None
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must have dtype {_FLOAT_NAMES}, got {dtype}")
    return dtype


def _shape_is(name, array, expected, alternatives=()):
    shape = tuple(array.shape)
    if shape != tuple(expected) and shape not in [tuple(s) for s in alternatives]:
        options = " or ".join(str(tuple(s)) for s in (expected, *alternatives))
        raise ValueError(f"{name} must have shape {options}, got {shape}")


def onnx_tensors(packed, scales, zero_points, *, K, N, bits, block_size) -> str:
    """Checks the MatMulNBits tensors; returns the zero-point kind.

    The kind is ``"implicit"`` (none given), ``"packed"`` (uint8, ``bits`` per
    value) or ``"float"`` (code units, the scales' dtype).
    """
    format_attributes(K, N, bits, block_size)
    num_blocks = _format.k_blocks(K, block_size)
    blob = _format.blob_bytes(block_size, bits)
    if np.dtype(packed.dtype) != np.uint8:
        raise TypeError(f"packed must have dtype uint8, got {np.dtype(packed.dtype)}")
    _shape_is("packed", packed, (N, num_blocks, blob))
    scale_dtype = float_dtype("scales", scales.dtype)
    _shape_is("scales", scales, (N, num_blocks), [(N * num_blocks,)])
    if zero_points is None:
        return "implicit"
    zp_dtype = np.dtype(zero_points.dtype)
    if zp_dtype == np.uint8:
        row = _format.zero_point_row_bytes(num_blocks, bits)
        _shape_is("zero_points", zero_points, (N, row), [(N * row,)])
        return "packed"
    if zp_dtype in FLOAT_DTYPES:
        if zp_dtype != scale_dtype:
            raise TypeError(
                f"float zero_points must have the scales' dtype {scale_dtype}, got {zp_dtype}"
            )
        _shape_is("zero_points", zero_points, (N, num_blocks), [(N * num_blocks,)])
        return "float"
    raise TypeError(
        f"zero_points must be packed uint8 or have the scales' dtype {scale_dtype}, got {zp_dtype}"
    )


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
