"""matmul_nbits against a float64 numpy oracle, and its JAX transformations."""

import dataclasses
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_marlin as jm
from jax_marlin import ops
from conftest import (DTYPES, Case, TOLERANCE, activations, assert_close, make_case, oracle64,
                      rel_err, to_jnp)


def next_pow2(x):
    return 1 << (x - 1).bit_length()


def tolerance(act_dtype, case):
    """The issue's tolerance, whatever the zero points and scales."""
    return TOLERANCE[np.dtype(act_dtype)]


# --- the parity matrix: a covering design over every axis ---------------------------

AXES = {
    "M": [1, 2, 7, 16, 33, 64, 200],
    "N": [37, 64, 130, 256],
    "K": [96, 200, 256, 1000],
    "block": [16, 32, 64, 128, 256, "channel"],
    "bits": [4, 4, 8, 2],  # 4 is the main case: twice as often
    "zp": ["packed", "none", "float"],
    "scale_dtype": ["f16", "bf16", "f32"],
    "act_dtype": ["f16", "bf16", "f32"],
    "bias": [False, True],
}
NUM_CASES = 144


def _covering_cases(num, seed=20240611):
    """Each axis is a shuffled, balanced column: every value appears about
    num / len(values) times, and the independent shuffles mix the pairs."""
    r = random.Random(seed)
    columns = {}
    for name, values in AXES.items():
        column = (values * (num // len(values) + 1))[:num]
        r.shuffle(column)
        columns[name] = column
    cases = []
    for i in range(num):
        c = {name: columns[name][i] for name in AXES}
        if c["block"] == "channel":
            c["block"] = max(16, next_pow2(c["K"]))
        cases.append(c)
    return cases


def _case_id(c):
    return (f"M{c['M']}-N{c['N']}-K{c['K']}-b{c['block']}-{c['bits']}bit-zp_{c['zp']}"
            f"-s_{c['scale_dtype']}-a_{c['act_dtype']}{'-bias' if c['bias'] else ''}")


def test_covering_design_covers_every_value():
    cases = _covering_cases(NUM_CASES)
    for name, values in AXES.items():
        if name == "block":
            continue
        for v in values:
            assert sum(c[name] == v for c in cases) >= 3, (name, v)
    blocks = {c["block"] for c in cases}
    assert {16, 32, 64, 128, 256, 1024}.issubset(blocks)


def run_case(rng, *, M, N, K, block, bits, zp, scale_dtype, act_dtype, bias, lead=None):
    act = DTYPES[act_dtype] if isinstance(act_dtype, str) else np.dtype(act_dtype)
    sd = DTYPES[scale_dtype] if isinstance(scale_dtype, str) else np.dtype(scale_dtype)
    case = make_case(rng, N=N, K=K, bits=bits, block_size=block, zp=zp, scale_dtype=sd)
    shape = (M, K) if lead is None else (*lead, K)
    a = activations(rng, shape, act)
    b = activations(rng, (N,), act) if bias else None
    weights = case.prepare()
    want = oracle64(a, case, b)
    tol = tolerance(act, case)

    eager = jm.matmul_nbits(jnp.asarray(a), weights, to_jnp(b))
    assert eager.dtype == act
    assert_close(eager, want, act, tol)
    jitted = jax.jit(jm.matmul_nbits)(jnp.asarray(a), weights, to_jnp(b))
    assert jitted.dtype == act
    assert_close(jitted, want, act, tol)
    return case, a, b, weights


@pytest.mark.parametrize("c", _covering_cases(NUM_CASES), ids=_case_id)
def test_matrix(rng, c):
    run_case(rng, **c)


@pytest.mark.parametrize("seed", range(20))
def test_random_shapes(seed):
    rng = np.random.default_rng(1000 + seed)
    K = int(rng.integers(1, 1300))
    block = int(rng.choice([16, 32, 64, 128, 256, max(16, next_pow2(K))]))
    run_case(
        rng,
        M=int(rng.integers(1, 150)),
        N=int(rng.integers(1, 300)),
        K=K,
        block=block,
        bits=int(rng.choice([2, 4, 4, 8])),
        zp=str(rng.choice(["packed", "none", "float"])),
        scale_dtype=str(rng.choice(["f16", "bf16", "f32"])),
        act_dtype=str(rng.choice(["f16", "bf16", "f32"])),
        bias=bool(rng.integers(2)),
    )


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("act_dtype", ["f16", "bf16", "f32"])
def test_rank3_activations(rng, bits, act_dtype):
    run_case(rng, M=None, lead=(3, 5), N=70, K=200, block=64, bits=bits, zp="packed",
             scale_dtype="f16", act_dtype=act_dtype, bias=True)


@pytest.mark.parametrize("K,block", [(48, 16), (80, 16), (200, 16), (330, 32), (1100, 256)])
@pytest.mark.parametrize("bits", [2, 4, 8])
def test_odd_k_blocks(rng, K, block, bits):
    assert (-(-K // block)) % 2 == 1
    run_case(rng, M=5, N=37, K=K, block=block, bits=bits, zp="packed", scale_dtype="f32",
             act_dtype="f32", bias=False)


def test_quantize_then_matmul(rng):
    """End to end from float weights: the error is the quantization error only."""
    K, N = 256, 96
    kernel = rng.standard_normal((K, N)).astype(np.float32)
    q = jm.quantize(kernel, block_size=32)
    w = jm.prepare(q.packed, q.scales, q.zero_points, K=K, N=N, block_size=32)
    a = activations(rng, (9, K), np.float32)
    got = np.asarray(jm.matmul_nbits(jnp.asarray(a), w))
    want = np.asarray(jm.reference.matmul_nbits(a, q.packed, q.scales, q.zero_points, K=K, N=N,
                                                bits=4, block_size=32))
    assert rel_err(got, want) < 1e-5
    assert 1e-3 < rel_err(got, a.astype(np.float64) @ kernel) < 0.15


# --- empty batches ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(0, 200), (2, 0, 200)])
@pytest.mark.parametrize("bits", [4, 8])
def test_empty_batch(rng, shape, bits):
    case = make_case(rng, N=37, K=200, bits=bits, block_size=64)
    w = case.prepare()
    a = jnp.zeros(shape, jnp.float16)
    for fn in (jm.matmul_nbits, jax.jit(jm.matmul_nbits)):
        out = fn(a, w, jnp.ones((37,), jnp.float16))
        assert out.shape == shape[:-1] + (37,) and out.dtype == jnp.float16


# --- transformations -----------------------------------------------------------------

def _matmul_eqns(jaxpr):
    return [e for e in jaxpr.jaxpr.eqns if e.primitive is ops.matmul_nbits_p]


@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap_over_activations_folds_into_one_call(rng, in_axes):
    case = make_case(rng, N=64, K=200, block_size=32)
    w = case.prepare()
    a = jnp.asarray(activations(rng, (4, 3, 200), np.float32))  # vmapped axis is in_axes
    fn = lambda x: jm.matmul_nbits(x, w)  # noqa: E731
    got = jax.vmap(fn, in_axes=in_axes)(a)
    moved = jnp.moveaxis(a, in_axes, 0)
    assert got.shape == (moved.shape[0], moved.shape[1], 64)
    for i in range(moved.shape[0]):
        np.testing.assert_allclose(got[i], fn(moved[i]), rtol=1e-6, atol=1e-6)
    assert_close(got, oracle64(np.asarray(moved), case), np.float32)

    jaxpr = jax.make_jaxpr(jax.vmap(fn, in_axes=in_axes))(a)
    eqns = _matmul_eqns(jaxpr)
    assert len(eqns) == 1, jaxpr
    assert eqns[0].invars[0].aval.shape[-1] == 200 and eqns[0].invars[0].aval.size == a.size
    # No loop and no per-element copies of the weights.
    names = {e.primitive.name for e in jaxpr.jaxpr.eqns}
    assert not names & {"while", "scan"}, names
    weight_shapes = [v.aval.shape for v in eqns[0].invars[1:4]]
    assert weight_shapes == [w.codes.shape, w.scales.shape, w.zero_points.shape]


def test_vmap_over_stacked_weights(rng):
    cases = [make_case(rng, N=37, K=96, block_size=32, zp=zp, scale_dtype=np.float32)
             for zp in ("packed", "packed", "packed")]
    weights = [c.prepare() for c in cases]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *weights)
    a = activations(rng, (3, 5, 96), np.float32)
    b = activations(rng, (3, 37), np.float32)
    got = jax.vmap(jm.matmul_nbits)(jnp.asarray(a), stacked, jnp.asarray(b))
    assert got.shape == (3, 5, 37)
    for i, c in enumerate(cases):
        assert_close(got[i], oracle64(a[i], c, b[i]), np.float32)
    # Shared activations, batched weights.
    shared = jax.vmap(jm.matmul_nbits, in_axes=(None, 0))
    got = jax.jit(shared)(jnp.asarray(a[0]), stacked)
    for i, c in enumerate(cases):
        assert_close(got[i], oracle64(a[0], c), np.float32)
    # README: one op per member, in a loop over the batch (not one op on stacked weights).
    outer = jax.make_jaxpr(shared)(jnp.asarray(a[0]), stacked).jaxpr
    names = [e.primitive.name for e in outer.eqns]
    assert names.count("scan") == 1 and ops.matmul_nbits_p.name not in names, names
    loop = next(e for e in outer.eqns if e.primitive.name == "scan")
    assert loop.params["length"] == 3
    body = [e.primitive.name for e in loop.params["jaxpr"].jaxpr.eqns]
    assert body.count(ops.matmul_nbits_p.name) == 1, body


def test_jit_inside_larger_function(rng):
    c1 = make_case(rng, N=130, K=200, block_size=64)
    c2 = make_case(rng, N=37, K=130, block_size=32, zp="none")
    w1, w2 = c1.prepare(), c2.prepare()
    b1 = activations(rng, (130,), np.float16)
    a = activations(rng, (2, 7, 200), np.float16)

    @jax.jit
    def mlp(x, w1, w2, b1):
        h = jax.nn.gelu(jm.matmul_nbits(x, w1, b1))
        return jm.matmul_nbits(h, w2) * 2.0

    got = mlp(jnp.asarray(a), w1, w2, jnp.asarray(b1))
    h = oracle64(a, c1, b1)
    h = np.asarray(jax.nn.gelu(jnp.asarray(h, jnp.float32)))
    want = 2.0 * (h.astype(np.float64) @ c2.weight64().T)
    assert got.dtype == jnp.float16
    assert_close(got, want, np.float16, tol=5e-3)  # two fp16 roundings of h


@pytest.mark.parametrize("zp", ["packed", "none", "float"])
def test_grad_matches_reference(rng, zp):
    case = make_case(rng, N=64, K=200, block_size=32, zp=zp, scale_dtype=np.float32)
    w = case.prepare()
    a = jnp.asarray(activations(rng, (2, 5, 200), np.float32))
    b = jnp.asarray(activations(rng, (64,), np.float32))
    cot = jnp.asarray(activations(rng, (2, 5, 64), np.float32))

    def ours(a, b):
        return jnp.sum(jm.matmul_nbits(a, w, b) * cot)

    def ref(a, b):
        y = jm.reference.matmul_nbits(a, case.packed, case.scales, case.zero_points, bias=b,
                                      **case.attrs)
        return jnp.sum(y * cot)

    ga, gb = jax.grad(ours, argnums=(0, 1))(a, b)
    ra, rb = jax.grad(ref, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, ra, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb, rb, rtol=1e-6, atol=1e-6)
    assert_close(ga, np.asarray(cot, np.float64) @ case.weight64(), np.float32)
    # jit of grad, and a jvp.
    ga2 = jax.jit(jax.grad(ours))(a, b)
    np.testing.assert_allclose(ga2, ga, rtol=1e-6, atol=1e-6)
    t = jnp.asarray(activations(rng, a.shape, np.float32))
    _, tangent = jax.jvp(lambda x: jm.matmul_nbits(x, w), (a,), (t,))
    assert_close(tangent, oracle64(np.asarray(t), case), np.float32)
    # In a alone, with a bias that has no tangent: the bias must not leak into it.
    _, tangent = jax.jvp(lambda x: jm.matmul_nbits(x, w, b), (a,), (t,))
    assert_close(tangent, oracle64(np.asarray(t), case), np.float32)
    # In the bias alone (a constant, as when fine-tuning biases): the cotangent's row sums.
    gb_alone = jax.grad(ours, argnums=1)(a, b)
    np.testing.assert_allclose(gb_alone, np.asarray(cot).reshape(-1, 64).sum(0), rtol=1e-5,
                               atol=1e-5)
    _, tangent = jax.jvp(lambda c: jm.matmul_nbits(a, w, c), (b,), (b,))
    np.testing.assert_allclose(tangent, np.broadcast_to(np.asarray(b), (2, 5, 64)), rtol=1e-6)


def test_reference_takes_a_bias_as_matmul_nbits_does(rng):
    """A numpy float64 bias or a list: both the op and the oracle take it (as float32)."""
    case = make_case(rng, N=16, K=64, block_size=32, scale_dtype=np.float32)
    a = jnp.asarray(activations(rng, (3, 64), np.float32))
    bias = rng.standard_normal(16)  # float64
    want = oracle64(np.asarray(a), case, bias.astype(np.float32))
    for b in (bias, list(bias)):
        got = jm.reference.matmul_nbits(a, case.packed, case.scales, case.zero_points,
                                        bias=b, **case.attrs)
        assert_close(got, want, np.float32)
        assert_close(jm.matmul_nbits(a, case.prepare(), b), want, np.float32)
    with pytest.raises(TypeError, match="bias must be an array, got str"):
        jm.reference.matmul_nbits(a, case.packed, case.scales, case.zero_points, bias="0",
                                  **case.attrs)


@pytest.mark.parametrize("leaf", ["scales", "zero_points"])
def test_grad_in_the_quantized_weights_is_refused(rng, leaf):
    """The weights are constants of this op (README: differentiate in a and bias): a
    tangent in the scales or the float zero points raises instead of silently being
    dropped, under jit too."""
    w = make_case(rng, N=48, K=64, block_size=32, zp="float", scale_dtype=np.float32).prepare()
    a = jnp.asarray(activations(rng, (3, 64), np.float32))

    def loss(x):
        return jnp.sum(jm.matmul_nbits(a, dataclasses.replace(w, **{leaf: x})))

    for transform in (jax.grad, lambda f: jax.jit(jax.grad(f))):
        with pytest.raises(NotImplementedError, match="not differentiable in the quantized"):
            transform(loss)(getattr(w, leaf))


def test_assert_close_catches_an_error_confined_to_one_column(rng):
    """The suite's comparison (conftest.assert_close): a column 14% off, as one wrong zero
    point makes it, passes the Frobenius tolerance over a wide output but not the peak
    bound; the same output rounded to float16 (spread error) passes both."""
    want = rng.standard_normal((256, 8192))
    wrong = want.copy()
    wrong[:, 5] *= 1.14
    assert rel_err(wrong, want) <= TOLERANCE[np.dtype(np.float16)]
    with pytest.raises(AssertionError, match="element .* off by"):
        assert_close(wrong, want, np.float16)
    assert_close(want.astype(np.float16), want, np.float16)


def test_grad_half_precision_runs(rng):
    case = make_case(rng, N=37, K=96, block_size=32)
    w = case.prepare()
    a = jnp.asarray(activations(rng, (3, 96), np.float16))
    g = jax.grad(lambda x: jnp.sum(jm.matmul_nbits(x, w).astype(jnp.float32)))(a)
    assert g.dtype == jnp.float16
    want = np.ones((3, 37)) @ case.weight64()
    assert_close(g, want, np.float16)


@pytest.mark.parametrize("act_dtype", ["f16", "bf16", "f32"])
def test_nan_and_inf_propagate_like_reference(rng, act_dtype):
    act = DTYPES[act_dtype]
    case = make_case(rng, N=37, K=200, block_size=64)
    w = case.prepare()
    a = activations(rng, (6, 200), act)
    a[1, 3] = np.nan
    a[3, 150] = np.inf
    a[4, 0] = -np.inf
    got = np.asarray(jm.matmul_nbits(jnp.asarray(a), w)).astype(np.float64)
    ref = np.asarray(jm.reference.matmul_nbits(a, case.packed, case.scales, case.zero_points,
                                               **case.attrs)).astype(np.float64)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(ref))
    assert not np.isfinite(got[[1, 3, 4]]).any()
    clean = [0, 2, 5]
    assert_close(got[clean], oracle64(a[clean], case), act)


# --- prepare's inputs ---------------------------------------------------------------

@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zp", ["packed", "float", "none"])
def test_prepare_accepts_numpy_jax_and_flat(rng, bits, zp):
    case = make_case(rng, N=37, K=200, bits=bits, block_size=32, zp=zp, scale_dtype=np.float32)
    a = jnp.asarray(activations(rng, (4, 200), np.float32))
    want = jm.matmul_nbits(a, case.prepare())
    assert_close(want, oracle64(np.asarray(a), case), np.float32)
    zps = case.zero_points
    variants = {
        "jax": (jnp.asarray(case.packed), jnp.asarray(case.scales), to_jnp(zps)),
        "flat_scales": (case.packed, case.scales.reshape(-1), zps),
        "flat_all": (case.packed, case.scales.reshape(-1), None if zps is None else zps.reshape(-1)),
    }
    for name, (p, s, z) in variants.items():
        got = jm.matmul_nbits(a, jm.prepare(p, s, z, **case.attrs))
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)


@pytest.mark.parametrize("scale_dtype", ["f16", "bf16", "f32"])
def test_prepare_scale_dtype(rng, scale_dtype):
    case = make_case(rng, N=64, K=96, block_size=32, scale_dtype=np.float32)
    w = case.prepare(scale_dtype=DTYPES[scale_dtype])
    assert np.dtype(w.scales.dtype) == DTYPES[scale_dtype]
    a = activations(rng, (3, 96), np.float32)
    # The scales were rounded once to scale_dtype: compare with that rounding.
    rounded = Case(case.packed, case.scales.astype(DTYPES[scale_dtype]),
                     case.zero_points, **case.attrs)
    assert_close(jm.matmul_nbits(jnp.asarray(a), w), oracle64(a, rounded), np.float32)


def test_marlin_weights_is_a_pytree(rng):
    case = make_case(rng, N=37, K=200, block_size=64)
    w = case.prepare()
    leaves, treedef = jax.tree_util.tree_flatten(w)
    assert len(leaves) == 3
    w2 = jax.tree_util.tree_unflatten(treedef, leaves)
    assert (w2.K, w2.N, w2.bits, w2.block_size) == (200, 37, 4, 64)
    assert w.k_blocks == 4 and w.zero_point_kind == "packed"
    assert w.nbytes == sum(x.nbytes for x in leaves)


# --- impl and dequantize ----------------------------------------------------------------

@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("act_dtype", ["f16", "bf16", "f32"])
def test_impl_dense_and_fused_equal_default_here(rng, bits, act_dtype):
    case = make_case(rng, N=130, K=200, bits=bits, block_size=32, zp="float",
                     scale_dtype=np.float32)
    w = case.prepare()
    a = jnp.asarray(activations(rng, (7, 200), DTYPES[act_dtype]))
    default = jm.matmul_nbits(a, w)
    for impl in ("dense", "fused", "auto"):
        got = jax.jit(jm.matmul_nbits, static_argnames="impl")(a, w, impl=impl)
        # On a GPU the paths round differently (the fused kernel scales fp16/bf16
        # fragments, the dense path dots a dequantized weight): each must meet the
        # oracle's tolerance, and so they agree within twice that.
        assert rel_err(got, default) <= 2 * TOLERANCE[DTYPES[act_dtype]]
        assert_close(got, oracle64(np.asarray(a), case), DTYPES[act_dtype])


def test_dense_lowering_matches_cpu_kernel(rng):
    """The platform-independent lowering (dequantize + dot), run directly."""
    for bits, zp in ((4, "packed"), (4, "float"), (8, "none"), (2, "packed")):
        case = make_case(rng, N=37, K=200, bits=bits, block_size=64, zp=zp,
                         scale_dtype=np.float32)
        w = case.prepare()
        a = jnp.asarray(activations(rng, (3, 200), np.float32))
        b = jnp.asarray(activations(rng, (37,), np.float32))
        zps = w.zero_points if w.zero_points is not None else jnp.zeros((0,), jnp.uint8)
        dense = ops._dense(a, w.codes, w.scales, zps, b, K=w.K, N=w.N, bits=w.bits,
                           block_size=w.block_size, zero_point_kind=w.zero_point_kind)
        assert_close(dense, oracle64(np.asarray(a), case, np.asarray(b)), np.float32)
        np.testing.assert_allclose(dense, jm.matmul_nbits(a, w, b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zp", ["packed", "none"])
@pytest.mark.parametrize("scale_dtype", ["f16", "bf16", "f32"])
def test_dequantize_equals_reference_exactly(rng, bits, zp, scale_dtype):
    case = make_case(rng, N=70, K=200, bits=bits, block_size=32, zp=zp,
                     scale_dtype=DTYPES[scale_dtype])
    got = np.asarray(jm.dequantize(case.prepare(), jnp.float32))
    ref = np.asarray(jm.reference.dequantize(case.packed, case.scales, case.zero_points,
                                             **case.attrs))
    assert got.shape == ref.shape == (70, 200) and got.dtype == np.float32
    np.testing.assert_array_equal(got, ref)
    # (code - zp) is exact; times the scale, one float32 rounding.
    np.testing.assert_allclose(ref, case.weight64(), rtol=2**-24, atol=0)


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_dequantize_float_zero_points(rng, bits):
    case = make_case(rng, N=70, K=200, bits=bits, block_size=32, zp="float",
                     scale_dtype=np.float32)
    got = np.asarray(jm.dequantize(case.prepare(), jnp.float32))
    # (code - zp) * scale in float32 against float64: a few ulps apart.
    np.testing.assert_allclose(got, case.weight64(), rtol=0, atol=1e-6 * np.abs(
        case.weight64()).max())


@pytest.mark.parametrize("scale_dtype", ["f16", "bf16"])
def test_float_zero_points_keep_full_precision(rng, scale_dtype):
    case = make_case(rng, N=64, K=200, block_size=32, zp="float",
                     scale_dtype=DTYPES[scale_dtype])
    a = activations(rng, (7, 200), np.float32)
    assert_close(jm.matmul_nbits(jnp.asarray(a), case.prepare()), oracle64(a, case),
                 np.float32)


def test_vmap_over_bias_only_and_rank1_activations(rng):
    case = make_case(rng, N=37, K=96, block_size=32, scale_dtype=np.float32)
    w = case.prepare()
    a = activations(rng, (96, 5), np.float32)  # vmapped along the last axis
    got = jax.vmap(lambda x: jm.matmul_nbits(x, w), in_axes=1)(jnp.asarray(a))
    assert_close(got, oracle64(a.T, case), np.float32)
    biases = activations(rng, (4, 37), np.float32)
    a2 = activations(rng, (3, 96), np.float32)
    got = jax.vmap(lambda b: jm.matmul_nbits(jnp.asarray(a2), w, b))(jnp.asarray(biases))
    assert got.shape == (4, 3, 37)
    for i in range(4):
        assert_close(got[i], oracle64(a2, case, biases[i]), np.float32)
    # A bias per member: one op each in a loop (README), the shared weights not copied.
    outer = jax.make_jaxpr(jax.vmap(lambda b: jm.matmul_nbits(jnp.asarray(a2), w, b)))(
        jnp.asarray(biases)).jaxpr
    (loop,) = [e for e in outer.eqns if e.primitive.name == "scan"]
    assert loop.params["length"] == 4
    (eqn,) = [e for e in loop.params["jaxpr"].jaxpr.eqns if e.primitive is ops.matmul_nbits_p]
    assert eqn.invars[1].aval.shape == w.codes.shape


@pytest.mark.parametrize("act_dtype", ["f16", "bf16"])
def test_vmap_over_biases_rounds_once_as_each_call_does(rng, act_dtype):
    """vmap with a batched bias gives each member's unbatched result bit for bit: the
    bias is added in fp32 before the one rounding (once added after a batched op, it
    rounded twice, and 132 of 512 bf16 outputs differed)."""
    dtype = DTYPES[act_dtype]
    w = make_case(rng, N=64, K=256, block_size=64, scale_dtype=dtype).prepare()
    a = jnp.asarray(activations(rng, (8, 256), dtype))
    biases = jnp.asarray(activations(rng, (3, 64), dtype) * 37)
    got = jax.vmap(lambda x, b: jm.matmul_nbits(x, w, b), in_axes=(None, 0))(a, biases)
    for i in range(3):
        one = jm.matmul_nbits(a, w, biases[i])
        np.testing.assert_array_equal(np.asarray(got[i]), np.asarray(one))


@pytest.mark.parametrize("act_dtype", ["f16", "bf16", "f32"])
def test_jvp_in_a_and_bias_is_the_op_on_the_tangents(rng, act_dtype):
    """The op is affine in (a, bias): its tangent is the op itself on (a_dot, bias_dot),
    one rounding, bit for bit; and grad in the bias sums the cotangent over the rows."""
    dtype = DTYPES[act_dtype]
    case = make_case(rng, N=64, K=256, block_size=64, scale_dtype=dtype)
    w = case.prepare()
    a, a_dot = (jnp.asarray(activations(rng, (8, 256), dtype)) for _ in range(2))
    b, b_dot = (jnp.asarray(activations(rng, (64,), dtype)) for _ in range(2))
    _, tangent = jax.jvp(lambda x, c: jm.matmul_nbits(x, w, c), (a, b), (a_dot, b_dot))
    np.testing.assert_array_equal(np.asarray(tangent), np.asarray(jm.matmul_nbits(a_dot, w, b_dot)))
    grads = jax.grad(lambda x, c: jnp.sum(jm.matmul_nbits(x, w, c).astype(jnp.float32) *
                                          jnp.arange(64.0)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(np.asarray(grads[1], np.float64), 8 * np.arange(64.0), rtol=1e-2)
    want = np.tile(np.arange(64.0), (8, 1)) @ case.weight64()
    assert_close(np.asarray(grads[0]), want, dtype)


def test_grad_composes_with_vmap(rng):
    case = make_case(rng, N=37, K=96, block_size=32, scale_dtype=np.float32)
    w = case.prepare()
    a = jnp.asarray(activations(rng, (5, 96), np.float32))
    per_example = jax.vmap(jax.grad(lambda x: jnp.sum(jm.matmul_nbits(x, w))))(a)
    assert_close(per_example, np.ones((5, 37)) @ case.weight64(), np.float32)
    stacked = jax.tree.map(lambda *x: jnp.stack(x), w, w)
    g = jax.grad(lambda x: jnp.sum(jax.vmap(jm.matmul_nbits, in_axes=(None, 0))(x, stacked)))(a)
    assert_close(g, 2 * np.ones((5, 37)) @ case.weight64(), np.float32)
