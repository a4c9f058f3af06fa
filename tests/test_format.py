"""The byte format (_format), the tile layout (_layout), and quantize vs onnxruntime."""

import numpy as np
import pytest

import jax_marlin as jm
from jax_marlin import _format, _layout
from conftest import k_blocks, np_pack, np_unpack

ps = pytest.importorskip("onnxruntime.capi._pybind_state")


# --- _format ----------------------------------------------------------------------

@pytest.mark.parametrize("bits", [2, 4, 8])
def test_pack_unpack_round_trip(rng, bits):
    values = rng.integers(0, 1 << bits, size=(5, 3, 48), dtype=np.uint8)
    packed = np.asarray(_format.pack_bytes(values, bits))
    assert packed.dtype == np.uint8 and packed.shape == (5, 3, 48 * bits // 8)
    np.testing.assert_array_equal(packed, np_pack(values, bits))  # independent packer
    np.testing.assert_array_equal(np.asarray(_format.unpack_bytes(packed, bits)), values)


def test_unpack_lowest_bits_first():
    # 0xB4 = 0b1011_0100: 4-bit -> [4, 11]; 2-bit -> [0, 1, 3, 2].
    byte = np.array([[0xB4]], np.uint8)
    assert np.asarray(_format.unpack_bytes(byte, 4)).tolist() == [[0x4, 0xB]]
    assert np.asarray(_format.unpack_bytes(byte, 2)).tolist() == [[0, 1, 3, 2]]
    assert np.asarray(_format.unpack_bytes(byte, 8)).tolist() == [[0xB4]]


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("num_blocks", [1, 3, 4, 7])
def test_zero_points_round_trip_and_padding(rng, bits, num_blocks):
    zp = rng.integers(0, 1 << bits, size=(6, num_blocks), dtype=np.uint8)
    packed = np.asarray(_format.pack_zero_points(zp, bits))
    row = _format.zero_point_row_bytes(num_blocks, bits)
    assert packed.shape == (6, row) == (6, -(-num_blocks * bits // 8))
    np.testing.assert_array_equal(
        np.asarray(_format.unpack_zero_points(packed, bits, num_blocks)), zp)
    # Padding values of the last byte hold the mid value, as onnxruntime writes it.
    padding = np_unpack(packed, bits)[:, num_blocks:]
    assert np.all(padding == 1 << (bits - 1))


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_unpack_codes_follows_k_order(rng, bits):
    N, kb, block = 3, 2, 16
    codes = rng.integers(0, 1 << bits, size=(N, kb * block), dtype=np.uint8)
    packed = np_pack(codes, bits).reshape(N, kb, block * bits // 8)
    np.testing.assert_array_equal(np.asarray(_format.unpack_codes(packed, bits)), codes)


def test_sizes():
    assert _format.k_blocks(200, 64) == 4 and _format.k_blocks(256, 64) == 4
    assert _format.blob_bytes(128, 4) == 64 and _format.blob_bytes(32, 2) == 8
    assert _format.zero_point_row_bytes(5, 4) == 3 and _format.zero_point_row_bytes(5, 2) == 2
    assert _format.default_zero_point(4) == 8 and _format.default_zero_point(8) == 128


# --- _layout: checked element by element against the docstring's formulas ----------

def test_repack_codes_matches_docstring_formula(rng):
    n_pad, k_pad = 128, 48  # 2 x 3 tiles
    codes = rng.integers(0, 16, size=(n_pad, k_pad), dtype=np.uint8)
    tiles = np.asarray(_layout.repack_codes(codes))
    assert tiles.dtype == np.uint32 and tiles.shape == (2, 3, 128)
    for nt in range(2):
        for kt in range(3):
            for lane in range(32):
                g, t = lane // 4, lane % 4
                for j in range(4):
                    word = int(tiles[nt, kt, 4 * lane + j])
                    for p in range(8):
                        h, khi, klo = (p & 3) >> 1, p & 1, p >> 2
                        n = 64 * nt + 16 * j + 8 * h + g
                        k = 16 * kt + 2 * t + 8 * khi + klo
                        assert (word >> (4 * p)) & 0xF == codes[n, k], (nt, kt, lane, j, p)
    np.testing.assert_array_equal(np.asarray(_layout.unpack_tile_codes(tiles)), codes)


def test_permute_columns_matches_docstring_formula(rng):
    data = rng.standard_normal((128, 3)).astype(np.float32)  # [n_pad, k_blocks]
    permuted = np.asarray(_layout.permute_columns(data))
    assert permuted.shape == (3, 128)
    for nt in range(2):
        for j in range(4):
            for h in range(2):
                for g in range(8):
                    position = 64 * nt + 8 * g + 2 * j + h
                    column = 64 * nt + 16 * j + 8 * h + g
                    np.testing.assert_array_equal(permuted[:, position], data[column])
    np.testing.assert_array_equal(np.asarray(_layout.unpermute_columns(permuted)), data)


def test_zero_point_words_match_docstring_formula(rng):
    zp = rng.integers(0, 16, size=(128, 5), dtype=np.uint8)
    words = np.asarray(_layout.pack_zero_point_words(zp))
    assert words.dtype == np.uint32 and words.shape == (5, 16)
    for b in range(5):
        for nt in range(2):
            for g in range(8):
                word = int(words[b, 8 * nt + g])
                for j in range(4):
                    for h in range(2):
                        nibble = (word >> (4 * (2 * j + h))) & 0xF
                        assert nibble == zp[64 * nt + 16 * j + 8 * h + g, b]
    np.testing.assert_array_equal(np.asarray(_layout.unpack_zero_point_words(words)), zp)


def test_n_pad():
    assert [_layout.n_pad(n) for n in (1, 64, 65, 130)] == [64, 64, 128, 192]


# --- quantize vs onnxruntime's own quantizer -----------------------------------------

def _ort_quantize(w, bits, block, symmetric):
    K, N = w.shape
    kb = k_blocks(K, block)
    packed = np.zeros((N, kb, block * bits // 8), np.uint8)
    scales = np.zeros((N, kb), np.float32)
    zp = np.zeros((N, -(-kb * bits // 8)), np.uint8)
    getattr(ps, f"quantize_matmul_{bits}bits")(packed, w, scales, zp, block, N, K, symmetric)
    return packed, scales, zp


@pytest.mark.parametrize("symmetric", [False, True], ids=["asym", "sym"])
@pytest.mark.parametrize("bits,K,N,block", [
    (4, 256, 64, 32), (4, 200, 37, 64), (4, 1000, 130, 128), (4, 96, 16, 16),
    (8, 256, 64, 32), (8, 200, 37, 128), (8, 96, 70, 16),
])
def test_quantize_matches_onnxruntime(rng, bits, K, N, block, symmetric):
    if not hasattr(ps, f"quantize_matmul_{bits}bits"):
        pytest.skip(f"this onnxruntime has no quantize_matmul_{bits}bits")
    w = rng.standard_normal((K, N)).astype(np.float32) * rng.uniform(0.1, 3)
    packed, scales, zp = _ort_quantize(w, bits, block, symmetric)
    q = jm.quantize(w, bits=bits, block_size=block, symmetric=symmetric)
    assert (q.K, q.N, q.bits, q.block_size) == (K, N, bits, block)
    assert np.asarray(q.packed).shape == packed.shape and np.asarray(q.packed).dtype == np.uint8
    np.testing.assert_allclose(np.asarray(q.scales), scales, rtol=1e-6, atol=0)

    ours = np_unpack(np.asarray(q.packed).reshape(N, -1), bits).astype(int)
    theirs = np_unpack(packed.reshape(N, -1), bits).astype(int)
    # Disagreement is allowed only at rounding ties (scales may differ by an ulp).
    equal = np.mean(ours == theirs)
    assert equal >= 0.999, f"only {equal:.4%} of codes agree"
    assert np.abs(ours - theirs).max() <= 1
    # Padded slots (K % block != 0) hold code 0, as producers write them.
    assert np.all(ours[:, K:] == 0)
    if symmetric:
        assert q.zero_points is None
    else:
        kb = k_blocks(K, block)
        ours_zp = np_unpack(np.asarray(q.zero_points), bits)[:, :kb].astype(int)
        theirs_zp = np_unpack(zp, bits)[:, :kb].astype(int)
        assert np.mean(ours_zp == theirs_zp) >= 0.999
        assert np.abs(ours_zp - theirs_zp).max() <= 1


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("symmetric", [False, True], ids=["asym", "sym"])
def test_quantize_error_is_bounded(rng, bits, symmetric):
    """Dequantized weights sit within half a step of the originals."""
    K, N, block = 200, 24, 32
    w = rng.standard_normal((K, N)).astype(np.float32)
    q = jm.quantize(w, bits=bits, block_size=block, symmetric=symmetric)
    deq = np.asarray(jm.reference.dequantize(q.packed, q.scales, q.zero_points, K=K, N=N,
                                             bits=bits, block_size=block))
    step = np.repeat(np.abs(np.asarray(q.scales)), block, axis=1)[:, :K]
    # Symmetric clamps the far end of the range by up to one step.
    slack = 1.0 if symmetric else 0.5
    assert np.all(np.abs(deq - w.T) <= slack * step * (1 + 1e-5) + 1e-7)


def test_quantize_keeps_dtype_and_shape(rng):
    w = rng.standard_normal((64, 8)).astype(np.float16)
    q = jm.quantize(w, block_size=16)
    assert np.asarray(q.scales).dtype == np.float16
    assert np.asarray(q.packed).shape == (8, 4, 8)
    assert np.asarray(q.zero_points).shape == (8, 2)


@pytest.mark.parametrize("symmetric", [False, True], ids=["asym", "sym"])
def test_quantize_near_the_float32_limit(rng, symmetric):
    """Weights near float32's largest value quantize to finite scales (max - min would
    overflow) and dequantize within half a step, as ordinary weights do."""
    K, N, block = 64, 4, 32
    w = rng.uniform(-1, 1, (K, N)).astype(np.float32) * np.float32(3e38)
    w[0, 0], w[1, 0] = np.float32(3.4e38), np.float32(-3.4e38)
    q = jm.quantize(w, bits=4, block_size=block, symmetric=symmetric)
    assert np.all(np.isfinite(np.asarray(q.scales)))
    deq = np.asarray(jm.reference.dequantize(q.packed, q.scales, q.zero_points, K=K, N=N,
                                             bits=4, block_size=block))
    step = np.repeat(np.abs(np.asarray(q.scales)), block, axis=1)[:, :K]
    slack = 1.0 if symmetric else 0.5
    assert np.all(np.abs(deq.astype(np.float64) - w.T) <= slack * step * (1 + 1e-5))
