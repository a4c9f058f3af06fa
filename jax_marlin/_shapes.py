"""Shape rules of the op, kept apart from the primitive's machinery."""

from __future__ import annotations

import math

# The tiled kernel may split K over up to this many thread blocks, each writing
# fp32 partial sums that a second pass adds in fixed order.
MAX_SPLIT_K = 16
# The streaming kernel (M <= STREAM_MAX_M) balances its grid by cutting column
# groups between blocks; each cut adds one partial. Small shapes on many SMs
# cut a column group's k-range finely (4096 x 4096: 32 partials), so it gets
# room for more. Where no grid fits the room (M = 16 on a 128k-column LM head)
# the launcher uses the tiled kernel instead.
STREAM_MAX_M = 16
MAX_STREAM_PARTS = 64
# Caps on the workspace (floats), whatever the shape: 16 MiB for the tiled
# kernel, 32 MiB for the streaming one.
MAX_WORKSPACE_FLOATS = 1 << 22
MAX_STREAM_WORKSPACE_FLOATS = 1 << 23


def rows(shape) -> int:
    """M: the product of the leading dims of ``a``."""
    return math.prod(shape[:-1])


def split_k_workspace_floats(M: int, n_pad: int) -> int:
    """fp32 workspace of the CUDA kernel: room for the most splits it may use.

    A function of the shape alone, since XLA must size it when the program is
    compiled; the kernel picks the actual split count, at most this allows.
    """
    if M <= STREAM_MAX_M:
        parts = min(MAX_STREAM_PARTS, MAX_STREAM_WORKSPACE_FLOATS // max(1, M * n_pad))
        # No part fits (M x n_pad > 2^23): the tiled kernel, which needs none; the
        # handler still takes one float (a workspace is never empty).
        return parts * M * n_pad if parts else 1
    splits = min(MAX_SPLIT_K, MAX_WORKSPACE_FLOATS // max(1, M * n_pad))
    return splits * M * n_pad if splits > 1 else 1


# The wgmma kernel's stream-K (Hopper, 256-row blocks at M = 129..1024) adds its flags and
# partials after the split-K floats: ffi/wgmma_stream_k.h kStreamKWorkspaceFloats, 256
# flags and a 256 x 128 fp32 partial for each of up to 160 persistent blocks (21 MB).
# Past 1024 rows the kernel's 256-row blocks get no area, and the planner then declines
# stream-K (measured only up to 1024 rows, session 27).
STREAM_K_MIN_M, STREAM_K_MAX_M = 129, 1024
STREAM_K_WORKSPACE_FLOATS = 256 + 160 * 256 * 128


def stream_k_workspace_floats(M: int, wgmma: bool) -> int:
    """fp32 workspace of the wgmma kernel's stream-K, after the split-K floats: only where
    ``wgmma`` (the device runs it) and M is STREAM_K_MIN_M..STREAM_K_MAX_M (256-row blocks,
    up to 1024 rows)."""
    return STREAM_K_WORKSPACE_FLOATS if wgmma and STREAM_K_MIN_M <= M <= STREAM_K_MAX_M else 0


def round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple
