"""onnxruntime's own MatMulNBits CPU kernel as a second, independent oracle."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_marlin as jm
from conftest import ONNX_IR_VERSION, Case, activations, make_case, oracle64, rel_err

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ORT_TOLERANCE = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2e-3}


def run_onnxruntime(case, a, bias=None):
    """One MatMulNBits node: inputs A, B, scales, [zero_points], [g_idx], [bias]."""
    elem = TensorProto.FLOAT if a.dtype == np.float32 else TensorProto.FLOAT16
    initializers = [numpy_helper.from_array(case.packed, "B"),
                    numpy_helper.from_array(case.scales, "scales")]
    inputs = ["A", "B", "scales"]
    if case.zero_points is not None:
        initializers.append(numpy_helper.from_array(case.zero_points, "zero_points"))
        inputs.append("zero_points")
    else:
        inputs.append("")
    inputs.append("")  # g_idx
    if bias is not None:
        initializers.append(numpy_helper.from_array(bias, "bias"))
        inputs.append("bias")
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("MatMulNBits", inputs, ["Y"], domain="com.microsoft", **case.attrs)
    graph = helper.make_graph(
        [node], "matmul_nbits", [helper.make_tensor_value_info("A", elem, list(a.shape))],
        [helper.make_tensor_value_info("Y", elem, None)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              ir_version=ONNX_IR_VERSION)
    try:
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
    except Exception as error:
        # Only a variant onnxruntime's kernel itself refuses is skipped; anything
        # else (a model this onnxruntime cannot load) must fail loudly.
        if "floating-point zero points" not in str(error):
            raise
        pytest.skip(f"onnxruntime rejects this variant: {str(error).splitlines()[0][:200]}")
    return session.run(None, {"A": a})[0]


CASES = [
    # bits, zp, K, N, block, lead shape, bias
    (4, "packed", 256, 64, 32, (5,), False),
    (4, "packed", 200, 37, 64, (2, 3), True),
    (4, "none", 1000, 130, 128, (7,), True),
    (4, "none", 96, 70, 16, (1,), False),
    (4, "float", 200, 37, 32, (3, 4), True),
    (4, "float", 330, 64, 128, (16,), False),
    (8, "packed", 200, 37, 32, (2, 5), False),
    (8, "packed", 1000, 64, 256, (3,), True),
    (8, "none", 96, 130, 16, (4,), True),
    (8, "float", 200, 37, 64, (2,), False),  # onnxruntime takes no float zero points at 8 bits
    (2, "packed", 200, 37, 32, (3,), True),
    (2, "none", 256, 64, 64, (2, 2), False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("bits,zp,K,N,block,lead,bias", CASES,
                         ids=[f"{c[0]}bit-{c[1]}-K{c[2]}-N{c[3]}-b{c[4]}-{'x'.join(map(str, c[5]))}"
                              f"{'-bias' if c[6] else ''}" for c in CASES])
def test_matches_onnxruntime(rng, dtype, bits, zp, K, N, block, lead, bias):
    dtype = np.dtype(dtype)
    # Producers write zeros in padding; onnxruntime may read them, so no junk here.
    case = make_case(rng, N=N, K=K, bits=bits, block_size=block, zp=zp, scale_dtype=dtype,
                     junk_padding=False)
    a = activations(rng, (*lead, K), dtype)
    b = activations(rng, (N,), dtype) if bias else None
    theirs = run_onnxruntime(case, a, b)
    assert theirs.shape == (*lead, N)
    # onnxruntime itself agrees with the float64 oracle (checks the harness).
    assert rel_err(theirs, oracle64(a, case, b)) <= ORT_TOLERANCE[dtype]

    w = case.prepare()
    for fn in (jm.matmul_nbits, jax.jit(jm.matmul_nbits)):
        ours = np.asarray(fn(jnp.asarray(a), w, None if b is None else jnp.asarray(b)))
        assert ours.dtype == dtype and ours.shape == theirs.shape
        assert np.all(np.isfinite(ours))
        err = rel_err(ours, theirs)
        assert err <= ORT_TOLERANCE[dtype], f"relative error vs onnxruntime {err:.3g}"


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("symmetric", [False, True], ids=["asym", "sym"])
def test_quantize_prepare_matmul_vs_onnxruntime(rng, bits, symmetric):
    """Our quantizer's tensors, run by onnxruntime and by us."""
    K, N, block = 300, 48, 64
    q = jm.quantize(rng.standard_normal((K, N)).astype(np.float32), bits=bits,
                    block_size=block, symmetric=symmetric)
    case = Case(np.asarray(q.packed), np.asarray(q.scales),
                None if q.zero_points is None else np.asarray(q.zero_points), K, N, bits, block)
    a = activations(rng, (6, K), np.float32)
    theirs = run_onnxruntime(case, a)
    ours = jm.matmul_nbits(jnp.asarray(a), case.prepare())
    assert rel_err(ours, theirs) <= 1e-5
