"""The ONNX ``com.microsoft::MatMulNBits`` weight format, in one place.

Everything here is a pure function of the format (``shared/design/FORMAT.md``):
how codes and zero points are packed into bytes, and the sizes that follow from
``K``, ``bits`` and ``block_size``. It runs on numpy or jax arrays alike (through
``jax.numpy``) and knows nothing about kernels or tile layouts.
"""

from __future__ import annotations

import jax.numpy as jnp

SUPPORTED_BITS = (2, 4, 8)


def k_blocks(K: int, block_size: int) -> int:
    """Number of quantization blocks along k: ``ceil(K / block_size)``."""
    return -(-K // block_size)


def blob_bytes(block_size: int, bits: int) -> int:
    """Bytes of packed codes per block: ``block_size * bits / 8``."""
    return block_size * bits // 8


def zero_point_row_bytes(num_blocks: int, bits: int) -> int:
    """Bytes of packed zero points per output row: ``ceil(k_blocks * bits / 8)``."""
    return -(-num_blocks * bits // 8)


def default_zero_point(bits: int) -> int:
    """The zero point a producer implies when it omits them: ``2 ** (bits - 1)``."""
    return 1 << (bits - 1)


def unpack_bytes(packed, bits: int):
    """``uint8 [..., nbytes]`` -> ``uint8 [..., nbytes * 8 / bits]``, lowest bits first.

    This is the single packing rule of the format: codes (along k within a row)
    and zero points (along the block index within a row) both pack ``8 / bits``
    values per byte, the first value in the lowest bits.
    """
    packed = jnp.asarray(packed, dtype=jnp.uint8)
    if bits == 8:
        return packed
    per_byte = 8 // bits
    shifts = jnp.arange(per_byte, dtype=jnp.uint8) * bits
    values = (packed[..., None] >> shifts) & jnp.uint8((1 << bits) - 1)
    return values.reshape(*packed.shape[:-1], packed.shape[-1] * per_byte)


def pack_bytes(values, bits: int):
    """Inverse of :func:`unpack_bytes`; the last dim must be a multiple of ``8 / bits``."""
    values = jnp.asarray(values, dtype=jnp.uint8)
    if bits == 8:
        return values
    per_byte = 8 // bits
    grouped = values.reshape(*values.shape[:-1], values.shape[-1] // per_byte, per_byte)
    shifts = jnp.arange(per_byte, dtype=jnp.uint8) * bits
    return jnp.bitwise_or.reduce(grouped << shifts, axis=-1).astype(jnp.uint8)


def unpack_codes(packed, bits: int):
    """``uint8 [N, k_blocks, blob]`` -> codes ``uint8 [N, k_blocks * block_size]``."""
    packed = jnp.asarray(packed, dtype=jnp.uint8)
    n = packed.shape[0]
    return unpack_bytes(packed.reshape(n, -1), bits)


def unpack_zero_points(packed, bits: int, num_blocks: int):
    """``uint8 [N, zero_point_row_bytes]`` -> zero points ``uint8 [N, k_blocks]``.

    The unused high values of a row's last byte are padding and are dropped.
    """
    return unpack_bytes(packed, bits)[:, :num_blocks]


def pack_zero_points(zero_points, bits: int):
    """``uint8 [N, k_blocks]`` -> ``uint8 [N, zero_point_row_bytes]``.

    Padding values in the last byte get the mid value, as onnxruntime writes it.
    """
    zero_points = jnp.asarray(zero_points, dtype=jnp.uint8)
    n, num_blocks = zero_points.shape
    per_byte = 8 // bits
    pad = (-num_blocks) % per_byte
    if pad:
        fill = jnp.full((n, pad), default_zero_point(bits), dtype=jnp.uint8)
        zero_points = jnp.concatenate([zero_points, fill], axis=1)
    return pack_bytes(zero_points, bits)
