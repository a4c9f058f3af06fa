"""The tile layout the fused CUDA kernel reads, and its inverse.

The ONNX layout stores each output row's codes contiguously along k. A tensor
core wants something else: for ``mma.m16n8k16`` every lane of a warp needs the
codes of one column ``n = g`` (``g = lane // 4``) at ``k = 2t, 2t+1, 2t+8, 2t+9``
(``t = lane % 4``). The repack below reorders the codes once, at load time, so
that a warp fetches the B fragments of a whole 16 (k) x 64 (n) tile with one
16-byte load per lane. It is a permutation: the same number of bytes.

Exact rules (``ffi/marlin_kernel.h`` and ``ffi/format.h`` decode the same):

codes, ``uint32 [n_pad / 64, k_pad / 16, 128]``
    Unit ``(nt, kt)`` is a 16 x 64 tile. Its word ``4 * lane + j`` (``lane =
    4 g + t``) covers columns ``64 nt + 16 j + 8 h + g`` for ``h`` in {0, 1}.
    Nibble ``p`` of that word holds the code at
    ``n = 64 nt + 16 j + 8 h + g`` and ``k = 16 kt + 2 t + 8 khi + klo``, where
    ``h = (p & 3) >> 1``, ``khi = p & 1``, ``klo = p >> 2``. The order puts the
    two codes that form one ``half2`` of the fragment 16 bits apart, which is
    what the kernel's mask-and-magic-number dequantization needs.
scales, ``[k_blocks, n_pad]``
    Transposed, and inside each group of 64 columns permuted so that position
    ``8 g + 2 j + h`` holds column ``16 j + 8 h + g``: a lane finds the eight
    scales of its columns in one 16-byte load.
zero points, ``uint32 [k_blocks, n_pad / 8]`` (packed 4-bit)
    Word ``8 nt + g`` holds, in nibble ``2 j + h``, the zero point of column
    ``64 nt + 16 j + 8 h + g``: the scales' order, eight to a word.
float zero points, ``[k_blocks, n_pad]``
    In the scales' order (the CUDA lowering turns them into ``-zp * scale``
    offsets in the activation dtype, which is what the kernel adds).

Other bit widths keep the ONNX row layout (codes ``uint8 [N, k_blocks * blob]``,
scales ``[N, k_blocks]``); only the 4-bit path has a fused kernel.
"""

from __future__ import annotations

import jax.numpy as jnp

TILE_N = 64
TILE_K = 16
WORDS_PER_TILE = 128  # 32 lanes x 16 bytes


def n_pad(N: int) -> int:
    return -(-N // TILE_N) * TILE_N


def shapes(N: int, k_blocks: int, block_size: int) -> dict:
    """The 4-bit arrays' shapes, by the rules above: ``codes``, ``per_column`` (scales,
    float zero points) and ``packed_zero_points``."""
    n = n_pad(N)
    return dict(codes=(n // TILE_N, k_blocks * block_size // TILE_K, WORDS_PER_TILE),
                per_column=(k_blocks, n), packed_zero_points=(k_blocks, n // 8))


# Axis names of the codes of one tile, in the order they sit in memory. The
# last three axes, (klo, h, khi), are the nibble index p = 4 klo + 2 h + khi.
_TILE_MEMORY_AXES = ("nt", "kt", "g", "t", "j", "klo", "h", "khi")
# The same axes in logical [n, k] order: n = (nt, j, h, g), k = (kt, khi, t, klo).
_LOGICAL_AXES = ("nt", "j", "h", "g", "kt", "khi", "t", "klo")
_LOGICAL_SIZES = {"j": 4, "h": 2, "g": 8, "khi": 2, "t": 4, "klo": 2}


def _permutation(src, dst):
    return tuple(src.index(axis) for axis in dst)


def repack_codes(codes):
    """Codes ``uint8 [n_pad, k_pad]`` (one code per byte) -> tiles ``uint32``."""
    n, k = codes.shape
    nt, kt = n // TILE_N, k // TILE_K
    sizes = dict(_LOGICAL_SIZES, nt=nt, kt=kt)
    split = codes.astype(jnp.uint32).reshape([sizes[a] for a in _LOGICAL_AXES])
    tiled = split.transpose(_permutation(_LOGICAL_AXES, _TILE_MEMORY_AXES))
    nibbles = tiled.reshape(nt, kt, WORDS_PER_TILE, 8)
    shifts = jnp.arange(8, dtype=jnp.uint32) * 4
    return jnp.bitwise_or.reduce(nibbles << shifts, axis=-1)


def unpack_tile_codes(tiles):
    """Inverse of :func:`repack_codes`: tiles -> codes ``uint8 [n_pad, k_pad]``."""
    nt, kt, _ = tiles.shape
    shifts = jnp.arange(8, dtype=jnp.uint32) * 4
    nibbles = (tiles[..., None] >> shifts) & jnp.uint32(0xF)
    sizes = dict(_LOGICAL_SIZES, nt=nt, kt=kt)
    split = nibbles.reshape([sizes[a] for a in _TILE_MEMORY_AXES])
    logical = split.transpose(_permutation(_TILE_MEMORY_AXES, _LOGICAL_AXES))
    return logical.reshape(nt * TILE_N, kt * TILE_K).astype(jnp.uint8)


def permute_columns(per_column):
    """``[n_pad, *rest]`` per-column data -> ``[*rest, n_pad]``, columns permuted.

    Inside each group of 64 columns, logical column ``16 j + 8 h + g`` moves to
    position ``8 g + 2 j + h``.
    """
    n, *rest = per_column.shape
    r = len(rest)
    split = per_column.reshape(n // TILE_N, 4, 2, 8, *rest)  # nt, j, h, g
    moved = split.transpose(*range(4, 4 + r), 0, 3, 1, 2)  # rest, nt, g, j, h
    return moved.reshape(*rest, n)


def unpermute_columns(permuted):
    """Inverse of :func:`permute_columns`: ``[*rest, n_pad]`` -> ``[n_pad, *rest]``."""
    *rest, n = permuted.shape
    r = len(rest)
    split = permuted.reshape(*rest, n // TILE_N, 8, 4, 2)  # rest, nt, g, j, h
    moved = split.transpose(r, r + 2, r + 3, r + 1, *range(r))  # nt, j, h, g, rest
    return moved.reshape(n, *rest)


def pack_zero_point_words(zero_points):
    """Zero points ``uint8 [n_pad, k_blocks]`` -> ``uint32 [k_blocks, n_pad / 8]``."""
    permuted = permute_columns(zero_points.astype(jnp.uint32))  # [kb, n_pad]
    kb, n = permuted.shape
    nibbles = permuted.reshape(kb, n // 8, 8)
    shifts = jnp.arange(8, dtype=jnp.uint32) * 4
    return jnp.bitwise_or.reduce(nibbles << shifts, axis=-1)


def unpack_zero_point_words(words):
    """Inverse of :func:`pack_zero_point_words`."""
    kb, n8 = words.shape
    shifts = jnp.arange(8, dtype=jnp.uint32) * 4
    nibbles = (words[..., None] >> shifts) & jnp.uint32(0xF)
    return unpermute_columns(nibbles.reshape(kb, n8 * 8)).astype(jnp.uint8)
