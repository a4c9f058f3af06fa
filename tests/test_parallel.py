"""jm.split_weights: one MatMulNBits weight cut into equal parts for several devices.

The oracle is the format itself, decoded with numpy (conftest's Case.weight64): a
part's logical weight must be the matching slice of the whole's, exactly, for every
bit width and zero-point kind, cuts inside a packed zero-point byte included; and the
parts' products must give the whole product (column slices side by side, row slices
summed). Running the parts on several devices in shard_map: tests/test_example_scripts.py.
"""

import numpy as np
import pytest

import jax_marlin as jm
from conftest import Case, activations, assert_close, make_case, oracle64


def _quantized(case):
    return jm.QuantizedWeights(case.packed, case.scales, case.zero_points, K=case.K, N=case.N,
                               bits=case.bits, block_size=case.block_size)


def _as_case(q):
    zero_points = None if q.zero_points is None else np.asarray(q.zero_points)
    return Case(np.asarray(q.packed), np.asarray(q.scales), zero_points, q.K, q.N, q.bits,
                q.block_size)


# K = 6 blocks of 32 cut in 2 (3 blocks a part: a 4-bit cut inside a zero-point byte) or 3;
# 2 bits pack 4 zero points a byte.
@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zp", ["packed", "none", "float"])
@pytest.mark.parametrize("parts", [2, 3])
def test_parts_are_slices_of_the_weight_and_their_products_add_up(rng, bits, zp, parts):
    K, N, block = 192, 48, 32
    case = make_case(rng, N=N, K=K, bits=bits, block_size=block, zp=zp, scale_dtype=np.float32)
    whole = case.weight64()  # [N, K]
    a = activations(rng, (3, K), np.float32)

    columns = jm.split_weights(_quantized(case), parts, axis="N")
    n = N // parts
    assert [(q.K, q.N) for q in columns] == [(K, n)] * parts
    for p, q in enumerate(columns):
        np.testing.assert_array_equal(_as_case(q).weight64(), whole[p * n:(p + 1) * n])
    y = np.concatenate([np.asarray(jm.matmul_nbits(a, _as_case(q).prepare()))
                        for q in columns], axis=-1)
    assert_close(y, oracle64(a, case), np.float32)

    rows = jm.split_weights(_quantized(case), parts, axis="K")
    k = K // parts
    assert [(q.K, q.N) for q in rows] == [(k, N)] * parts
    for p, q in enumerate(rows):
        np.testing.assert_array_equal(_as_case(q).weight64(), whole[:, p * k:(p + 1) * k])
    y = sum(np.asarray(jm.matmul_nbits(a[:, p * k:(p + 1) * k], _as_case(q).prepare()),
                       np.float64) for p, q in enumerate(rows))
    assert_close(y, oracle64(a, case), np.float32)


def test_one_part_is_the_weight_and_a_part_a_block_is_allowed(rng):
    case = make_case(rng, N=40, K=200, block_size=64)  # K not a multiple of the block
    for axis in ("N", "K"):
        (q,) = jm.split_weights(_quantized(case), 1, axis=axis)
        np.testing.assert_array_equal(_as_case(q).weight64(), case.weight64())
    case = make_case(rng, N=64, K=256, block_size=64)
    parts = jm.split_weights(_quantized(case), 4, axis="K")
    for p, q in enumerate(parts):
        np.testing.assert_array_equal(_as_case(q).weight64(),
                                      case.weight64()[:, 64 * p:64 * (p + 1)])


@pytest.mark.parametrize("parts, axis, message", [
    (3, "N", r"N = 64 must be a multiple of parts = 3"),
    (3, "K", r"K = 256 must be a multiple of parts x block_size = 192"),
    (0, "N", r"parts must be a positive integer, got 0"),
    (2.0, "N", r"parts must be a positive integer, got 2.0"),
    (2, "M", r"axis must be one of \('N', 'K'\), got 'M'"),
])
def test_cuts_that_do_not_divide_evenly_are_refused(rng, parts, axis, message):
    case = make_case(rng, N=64, K=256, block_size=64)
    with pytest.raises(ValueError, match=message):
        jm.split_weights(_quantized(case), parts, axis=axis)


def test_only_quantized_weights_are_split(rng):
    w = make_case(rng, N=64, K=256).prepare()
    with pytest.raises(TypeError,
                       match="q must be a jax_marlin.QuantizedWeights, got MarlinWeights"):
        jm.split_weights(w, 2, axis="N")
