"""Bad inputs raise ValueError / TypeError naming the argument, before any kernel."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_marlin as jm
from jax_marlin import ops
from conftest import make_case

K, N, BLOCK = 200, 37, 64  # k_blocks = 4, blob = 32 (4-bit)


@pytest.fixture
def case(rng):
    return make_case(rng, N=N, K=K, block_size=BLOCK, scale_dtype=np.float16)


@pytest.fixture
def weights(case):
    return case.prepare()


@pytest.fixture
def no_kernel(monkeypatch):
    """Any attempt to reach the primitive fails loudly: checks must come first."""
    def boom(*args, **kwargs):
        raise AssertionError("reached the kernel")

    monkeypatch.setattr(ops, "_bind", boom)


def _prepare_kwargs(**overrides):
    return dict(dict(K=K, N=N, bits=4, block_size=BLOCK), **overrides)


# --- prepare / reference: the ONNX tensors -----------------------------------------

PREPARE_ERRORS = [
    # name, mutate(packed, scales, zp, kwargs), exception, message pattern
    ("packed_dtype", lambda p, s, z, kw: (p.astype(np.int8), s, z, kw), TypeError,
     r"packed must have dtype uint8, got int8"),
    ("packed_shape_blob", lambda p, s, z, kw: (p[:, :, :16], s, z, kw), ValueError,
     r"packed must have shape \(37, 4, 32\), got \(37, 4, 16\) "
     r"\(for K=200, N=37, bits=4, block_size=64\)"),
    ("packed_shape_n", lambda p, s, z, kw: (p[:30], s, z, kw), ValueError,
     r"packed must have shape \(37, 4, 32\)"),
    ("packed_for_other_K", lambda p, s, z, kw: (p, s, z, dict(kw, K=300)), ValueError,
     r"packed must have shape \(37, 5, 32\)"),
    ("scales_shape_n", lambda p, s, z, kw: (p, s[:36], z, kw), ValueError,
     r"scales must have shape \(37, 4\) or \(148,\), got \(36, 4\)"),
    ("scales_shape_kblocks", lambda p, s, z, kw: (p, s[:, :3], z, kw), ValueError,
     r"scales must have shape \(37, 4\)"),
    ("scales_flat_wrong", lambda p, s, z, kw: (p, s.reshape(-1)[:100], z, kw), ValueError,
     r"scales must have shape .*got \(100,\)"),
    ("scales_int", lambda p, s, z, kw: (p, s.astype(np.int32), z, kw), TypeError,
     r"scales must have dtype float16, bfloat16 or float32, got int32"),
    ("zp_shape", lambda p, s, z, kw: (p, s, z[:, :1], kw), ValueError,
     r"zero_points must have shape \(37, 2\) or \(74,\), got \(37, 1\)"),
    ("zp_int16", lambda p, s, z, kw: (p, s, z.astype(np.int16), kw), TypeError,
     r"zero_points must be packed uint8 or have the scales' dtype float16, got int16"),
    ("zp_float_other_dtype", lambda p, s, z, kw: (p, s, np.ones((N, 4), np.float32), kw),
     TypeError, r"float zero_points must have the scales' dtype float16, got float32"),
    ("zp_float_shape", lambda p, s, z, kw: (p, s, np.ones((N, 2), np.float16), kw),
     ValueError, r"zero_points must have shape \(37, 4\) or \(148,\), got \(37, 2\)"),
    ("bits_3", lambda p, s, z, kw: (p, s, z, dict(kw, bits=3)), ValueError,
     r"bits must be one of \(2, 4, 8\), got 3"),
    ("bits_16", lambda p, s, z, kw: (p, s, z, dict(kw, bits=16)), ValueError,
     r"bits must be one of \(2, 4, 8\), got 16"),
    ("block_not_pow2", lambda p, s, z, kw: (p, s, z, dict(kw, block_size=48)), ValueError,
     r"block_size must be a power of two from 16 to 2\*\*29, got 48"),
    ("block_8", lambda p, s, z, kw: (p, s, z, dict(kw, block_size=8)), ValueError,
     r"block_size must be a power of two from 16 to 2\*\*29, got 8"),
    ("block_float", lambda p, s, z, kw: (p, s, z, dict(kw, block_size=64.0)), ValueError,
     r"block_size must be a power of two from 16 to 2\*\*29, got 64.0"),
    ("K_zero", lambda p, s, z, kw: (p, s, z, dict(kw, K=0)), ValueError,
     r"K must be an integer from 1 to 2\*\*29, got 0"),
    ("packed_none", lambda p, s, z, kw: (None, s, z, kw), TypeError,
     r"packed must be an array, got NoneType"),
    ("N_negative", lambda p, s, z, kw: (p, s, z, dict(kw, N=-1)), ValueError,
     r"N must be an integer from 1 to 2\*\*29, got -1"),
    # past 2^29 the kernels' 32-bit row and k indices could overflow (ffi/format.h kMaxDim)
    ("N_past_max", lambda p, s, z, kw: (p, s, z, dict(kw, N=2 ** 29 + 1)), ValueError,
     r"N must be an integer from 1 to 2\*\*29, got 536870913"),
    ("K_2_30", lambda p, s, z, kw: (p, s, z, dict(kw, K=2 ** 30)), ValueError,
     r"K must be an integer from 1 to 2\*\*29, got 1073741824"),
    ("block_2_62", lambda p, s, z, kw: (p, s, z, dict(kw, block_size=2 ** 62)), ValueError,
     r"block_size must be a power of two from 16 to 2\*\*29, got 4611686018427387904"),
    ("bits_float", lambda p, s, z, kw: (p, s, z, dict(kw, bits=4.0)), ValueError,
     r"bits must be one of \(2, 4, 8\), got 4.0"),
]


@pytest.mark.parametrize("name,mutate,error,pattern", PREPARE_ERRORS,
                         ids=[e[0] for e in PREPARE_ERRORS])
def test_prepare_and_reference_reject(case, name, mutate, error, pattern):
    packed, scales, zp, kw = mutate(case.packed, case.scales, case.zero_points,
                                    _prepare_kwargs())
    with pytest.raises(error, match=pattern):
        jm.prepare(packed, scales, zp, **kw)
    with pytest.raises(error, match=pattern):
        jm.reference.dequantize(packed, scales, zp, **kw)
    # (with K = 0 the activations' shape is reported first; past 2^20 they take gigabytes)
    if 0 < kw["K"] <= 1 << 20:
        a = np.ones((2, kw["K"]), np.float32)
        with pytest.raises(error, match=pattern):
            jm.reference.matmul_nbits(a, packed, scales, zp, **kw)


@pytest.mark.parametrize("bad", ["int8", np.int32, "float64"])
def test_prepare_rejects_scale_dtype(case, bad):
    with pytest.raises(TypeError, match=r"scale_dtype must have dtype float16, bfloat16 or "
                                        r"float32, got"):
        case.prepare(scale_dtype=bad)


def test_prepare_rejects_unknown_scale_dtype_name(case):
    with pytest.raises(TypeError, match="scale_dtype"):
        case.prepare(scale_dtype="half-ish")


def test_prepare_checks_run_at_trace_time(case):
    @jax.jit
    def f(packed, scales):
        return jm.prepare(packed, scales, K=K, N=N, block_size=BLOCK).scales

    with pytest.raises(ValueError, match=r"scales must have shape \(37, 4\)"):
        f(jnp.asarray(case.packed), jnp.asarray(case.scales[:, :2]))


# --- matmul_nbits -------------------------------------------------------------------

MATMUL_ERRORS = [
    ("a_int", lambda w: (jnp.ones((3, K), jnp.int32), w, None, {}), TypeError,
     r"a must have dtype float16, bfloat16 or float32, got int32"),
    ("a_bool", lambda w: (jnp.ones((3, K), bool), w, None, {}), TypeError,
     r"a must have dtype .*got bool"),
    ("a_wrong_K", lambda w: (jnp.ones((3, K + 1), jnp.float16), w, None, {}), ValueError,
     r"a must have shape \[\.\.\., K\] with K = 200, got \(3, 201\)"),
    ("a_scalar", lambda w: (jnp.float16(1.0), w, None, {}), ValueError,
     r"a must have shape \[\.\.\., K\] with K = 200, got \(\)"),
    ("bias_shape", lambda w: (jnp.ones((3, K), jnp.float16), w, jnp.ones((N + 1,), jnp.float16),
                              {}), ValueError, r"bias must have shape \(37,\), got \(38,\)"),
    ("bias_2d", lambda w: (jnp.ones((3, K), jnp.float16), w, jnp.ones((1, N), jnp.float16), {}),
     ValueError, r"bias must have shape \(37,\), got \(1, 37\)"),
    ("bias_int", lambda w: (jnp.ones((3, K), jnp.float16), w, jnp.ones((N,), jnp.int32), {}),
     TypeError, r"bias must have dtype float16, bfloat16 or float32, got int32"),
    ("weights_tuple", lambda w: (jnp.ones((3, K), jnp.float16), (w.codes, w.scales), None, {}),
     TypeError, r"weights must be jax_marlin.MarlinWeights .*got tuple"),
    ("weights_quantized", lambda w: (jnp.ones((3, K), jnp.float16),
                                     jm.quantize(jnp.ones((K, N)), block_size=BLOCK), None, {}),
     TypeError, r"weights must be jax_marlin.MarlinWeights .*got QuantizedWeights"),
    ("a_none", lambda w: (None, w, None, {}), TypeError, r"a must be an array, got NoneType"),
    ("bias_string", lambda w: (jnp.ones((3, K), jnp.float16), w, "0.5", {}), TypeError,
     r"bias must be an array, got str"),
    ("impl", lambda w: (jnp.ones((3, K), jnp.float16), w, None, {"impl": "marlin"}),
     ValueError, r"impl must be one of \('auto', 'fused', 'dense'\), got 'marlin'"),
    # MarlinWeights built or edited by hand: the arrays against K, N, bits, block_size
    ("weights_cast", lambda w: (jnp.ones((3, K), jnp.float16),
                                jax.tree.map(lambda x: x.astype(jnp.bfloat16), w), None, {}),
     TypeError, r"weights.codes must have dtype uint32, got bfloat16"),
    ("weights_other_block", lambda w: (jnp.ones((3, K), jnp.float16),
                                       dataclasses.replace(w, block_size=32), None, {}),
     ValueError, r"weights.codes must have shape \(1, 14, 128\), got \(1, 16, 128\) \(for "
                 r"K=200, N=37, bits=4, block_size=32; MarlinWeights come from "
                 r"jax_marlin.prepare\)"),
    ("weights_scales_cut", lambda w: (jnp.ones((3, K), jnp.float16),
                                      dataclasses.replace(w, scales=w.scales[:1]), None, {}),
     ValueError, r"weights.scales must have shape \(4, 64\), got \(1, 64\)"),
    ("weights_zero_points_cut", lambda w: (jnp.ones((3, K), jnp.float16),
                                           dataclasses.replace(w, zero_points=w.zero_points[:, :2]),
                                           None, {}),
     ValueError, r"weights.zero_points must have shape \(4, 8\), got \(4, 2\)"),
    # a block of 2^62 once got an empty codes buffer past the kernels' size checks
    ("weights_huge_block", lambda w: (jnp.ones((3, K), jnp.float16), dataclasses.replace(
        w, codes=jnp.zeros((0,), jnp.uint32), block_size=2 ** 62), None, {}),
     ValueError, r"block_size must be a power of two from 16 to 2\*\*29"),
]


@pytest.mark.parametrize("name,make,error,pattern", MATMUL_ERRORS,
                         ids=[e[0] for e in MATMUL_ERRORS])
def test_matmul_rejects(weights, no_kernel, name, make, error, pattern):
    a, w, bias, kw = make(weights)
    with pytest.raises(error, match=pattern):
        jm.matmul_nbits(a, w, bias, **kw)


# impl is static; QuantizedWeights is not a pytree, so jit itself refuses it first.
UNJITTABLE = ("impl", "weights_quantized", "bias_string")


@pytest.mark.parametrize("name,make,error,pattern",
                         [e for e in MATMUL_ERRORS if e[0] not in UNJITTABLE],
                         ids=[e[0] for e in MATMUL_ERRORS if e[0] not in UNJITTABLE])
def test_matmul_rejects_at_trace_time_under_jit(weights, no_kernel, name, make, error, pattern):
    a, w, bias, kw = make(weights)
    with pytest.raises(error, match=pattern):
        jax.jit(lambda a, w, b: jm.matmul_nbits(a, w, b))(a, w, bias)


@pytest.mark.parametrize("bits, block_size, codes", [
    (4, 2 ** 62, jnp.zeros((0,), jnp.uint32)),  # n_pad x k_pad / 8 wrapped to 0
    (8, 2 ** 62, jnp.zeros((0,), jnp.uint8)),   # N x k_pad wrapped to 0
    (4, 2 ** 32, jnp.zeros((0,), jnp.uint32)),  # past 2^29
    (4, 2 ** 30, jnp.zeros((0,), jnp.uint32)),  # past 2^29
])
def test_cpu_handler_refuses_attributes_whose_sizes_overflow(bits, block_size, codes):
    """The FFI handler's own checks (ffi/handler_checks.h), reached through jax.ffi with no
    Python check in between: an attribute whose buffer sizes would leave int64 is an error,
    not an empty buffer taken as the right size (it was, and the kernel then read and wrote
    past the buffers)."""
    from jax_marlin import _ffi
    if not _ffi.has_cpu_kernel():
        pytest.skip("a build without the CPU module")
    N_ = 64 if bits == 4 else 4
    call = jax.ffi.ffi_call(_ffi.CPU_TARGET, jax.ShapeDtypeStruct((1, N_), jnp.float32))
    i64 = np.int64
    with pytest.raises(Exception, match=r"invalid K, N, bits, block_size"):
        jax.block_until_ready(call(
            jnp.ones((1, 8), jnp.float32), codes, jnp.ones((N_,), jnp.float32),
            jnp.zeros((0,), jnp.uint8), jnp.zeros((0,), jnp.float32), K=i64(8), N=i64(N_),
            bits=i64(bits), block_size=i64(block_size), zero_point_kind=i64(0)))


def test_matmul_rejects_impl_under_jit(weights, no_kernel):
    fn = jax.jit(jm.matmul_nbits, static_argnames="impl")
    with pytest.raises(ValueError, match=r"impl must be one of"):
        fn(jnp.ones((2, K), jnp.float16), weights, impl="fast")


def test_float64_numpy_is_canonicalized_like_jax(case):
    """With x64 off, numpy float64 becomes float32, as everywhere in JAX."""
    w = jm.prepare(case.packed, case.scales.astype(np.float64), case.zero_points,
                   **_prepare_kwargs())
    assert w.scales.dtype == jnp.float32
    out = jm.matmul_nbits(np.ones((2, K), np.float64), w)
    assert out.dtype == jnp.float32


def test_float64_rejected_with_x64_enabled(case, weights, no_kernel):
    with jax.enable_x64(True):
        with pytest.raises(TypeError, match=r"a must have dtype float16, bfloat16 or "
                                            r"float32, got float64"):
            jm.matmul_nbits(jnp.ones((3, K), jnp.float64), weights)
        with pytest.raises(TypeError, match=r"scales must have dtype .*got float64"):
            jm.prepare(case.packed, case.scales.astype(np.float64), case.zero_points,
                       **_prepare_kwargs())


def test_no_kernel_fixture_is_effective(weights, no_kernel):
    with pytest.raises(AssertionError, match="reached the kernel"):
        jm.matmul_nbits(jnp.ones((2, K), jnp.float16), weights)


def test_vmapped_weights_with_wrong_k(rng, no_kernel):
    other = make_case(rng, N=N, K=96, block_size=32).prepare()
    with pytest.raises(ValueError, match=r"K = 96"):
        jax.vmap(jm.matmul_nbits, in_axes=(0, None))(jnp.ones((2, 3, K), jnp.float32), other)


# --- quantize ---------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,kw,error,pattern", [
    (np.ones((4, 5, 6), np.float32), {}, ValueError, r"kernel must have shape \[K, N\]"),
    (np.ones((64, 8), np.int32), {}, TypeError, r"kernel must have dtype .*got int32"),
    (np.ones((64, 8), np.float32), {"bits": 5}, ValueError, r"bits must be one of"),
    (np.ones((64, 8), np.float32), {"block_size": 100}, ValueError,
     r"block_size must be a power of two from 16 to 2\*\*29, got 100"),
], ids=["rank3", "int", "bits", "block"])
def test_quantize_rejects(kernel, kw, error, pattern):
    with pytest.raises(error, match=pattern):
        jm.quantize(kernel, **kw)


@pytest.mark.parametrize("make, dtype, error, pattern", [
    (lambda w: jm.quantize(jnp.ones((K, N)), block_size=BLOCK), jnp.float32, TypeError,
     r"weights must be jax_marlin.MarlinWeights .*got QuantizedWeights"),
    (lambda w: w, jnp.int32, TypeError, r"dtype must have dtype float16, bfloat16 or float32, "
                                        r"got int32"),
    (lambda w: dataclasses.replace(w, block_size=32), jnp.float32, ValueError,
     r"weights.codes must have shape .*MarlinWeights come from jax_marlin.prepare"),
], ids=["quantized_weights", "int_dtype", "edited_block_size"])
def test_dequantize_rejects(weights, make, dtype, error, pattern):
    with pytest.raises(error, match=pattern):
        jm.dequantize(make(weights), dtype)
