"""One MatMulNBits weight cut into equal parts, a part a device (tensor parallelism).

:func:`jax_marlin.matmul_nbits` has no partitioning rule of its own: under ``jit``,
XLA gathers a sharded operand onto every device and computes the whole product
there (right, but no faster). To share the work, prepare a weight per device from
these parts and call ``matmul_nbits`` inside ``jax.shard_map`` (README, "Several
devices").
"""

from __future__ import annotations

from jax_marlin import _checks, _format
from jax_marlin.quantize import QuantizedWeights

AXES = ("N", "K")


def split_weights(q: QuantizedWeights, parts: int, *, axis: str) -> list[QuantizedWeights]:
    """Cuts ``q`` into ``parts`` weights of equal shape, in order.

    ``axis="N"`` (column-parallel): part ``p`` holds the outputs ``n`` in
    ``[p N / parts, (p + 1) N / parts)``; each device computes its slice of
    ``y``. ``N`` must be a multiple of ``parts``.

    ``axis="K"`` (row-parallel): part ``p`` holds the inputs ``k`` in ``[p K /
    parts, (p + 1) K / parts)``; each device multiplies its slice of ``a``, and
    the parts' products add up to ``a @ W`` (``jax.lax.psum``; add a bias once,
    after the sum). ``K`` must be a multiple of ``parts * block_size`` (for two
    parts or more), so that every part holds whole blocks and the same ``K``.
    """
    if not isinstance(q, QuantizedWeights):
        raise TypeError(f"q must be a jax_marlin.QuantizedWeights, got {type(q).__name__}")
    if not _checks._is_int(parts) or parts < 1:
        raise ValueError(f"parts must be a positive integer, got {parts!r}")
    if axis not in AXES:
        raise ValueError(f"axis must be one of {AXES}, got {axis!r}")
    K, N, bits, block_size = q.K, q.N, q.bits, q.block_size
    packed, scales, zero_points = _checks.onnx_arrays(q.packed, q.scales, q.zero_points)
    kind = _checks.onnx_tensors(packed, scales, zero_points, K=K, N=N, bits=bits,
                                block_size=block_size)
    num_blocks = _format.k_blocks(K, block_size)
    scales = scales.reshape(N, num_blocks)
    if kind == "packed":  # one value a block, so that a cut may fall inside a byte
        zero_points = _format.unpack_zero_points(zero_points.reshape(N, -1), bits, num_blocks)
    elif kind == "float":
        zero_points = zero_points.reshape(N, num_blocks)

    if axis == "N":
        if N % parts:
            raise ValueError(f"N = {N} must be a multiple of parts = {parts} for axis='N'")
        size, part_K, part_N = N // parts, K, N // parts

        def cut(x, p):
            return x[p * size:(p + 1) * size]
    else:
        if parts > 1 and K % (parts * block_size):
            raise ValueError(f"K = {K} must be a multiple of parts x block_size = "
                             f"{parts * block_size} for axis='K'")
        size, part_K, part_N = num_blocks // parts, K // parts, N

        def cut(x, p):
            return x[:, p * size:(p + 1) * size]

    result = []
    for p in range(parts):
        part_zero_points = None if zero_points is None else cut(zero_points, p)
        if kind == "packed":
            part_zero_points = _format.pack_zero_points(part_zero_points, bits)
        result.append(QuantizedWeights(packed=cut(packed, p), scales=cut(scales, p),
                                       zero_points=part_zero_points, K=part_K, N=part_N,
                                       bits=bits, block_size=block_size))
    return result
