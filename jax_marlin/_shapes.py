"""Shape rules of the op, kept apart from the primitive's machinery."""

from __future__ import annotations

import math

# The fused kernel may split K over up to this many thread blocks when M is
# small, each writing fp32 partial sums that a second pass adds in fixed order.
MAX_SPLIT_K = 16
# Cap on the split-K workspace (floats): 16 MiB, whatever the shape.
MAX_WORKSPACE_FLOATS = 1 << 22


def rows(shape) -> int:
    """M: the product of the leading dims of ``a``."""
    return math.prod(shape[:-1])


def split_k_workspace_floats(M: int, n_pad: int) -> int:
    """fp32 workspace of the CUDA kernel: room for the most splits it may use.

    A function of the shape alone, since XLA must size it when the program is
    compiled; the kernel picks the actual split count, at most this allows.
    """
    splits = min(MAX_SPLIT_K, MAX_WORKSPACE_FLOATS // max(1, M * n_pad))
    return splits * M * n_pad if splits > 1 else 1


def round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple
