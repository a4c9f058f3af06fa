"""jax_marlin.onnx.load_weights, checked against onnxruntime's CPU kernel.

Each case builds MatMulNBits tensors with onnxruntime's own quantizer (the
producer) and runs the node or model in onnxruntime (the oracle).
"""

import copy
import re

import jax
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnxruntime.capi import _pybind_state as ort_c  # noqa: E402

import jax_marlin  # noqa: E402
import jax_marlin.onnx as jmo  # noqa: E402
from conftest import ONNX_IR_VERSION  # noqa: E402

ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16}
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _ort_quantize(w, bits, block_size, symmetric):
    """onnxruntime's quantizer on a float [K, N] weight: (packed, scales, zero_points)."""
    K, N = w.shape
    num_blocks = -(-K // block_size)
    packed = np.zeros((N, num_blocks, block_size * bits // 8), np.uint8)
    scales = np.zeros((N, num_blocks), w.dtype)
    zero_points = np.zeros((N, -(-num_blocks * bits // 8)), np.uint8)
    fn = {2: "quantize_matmul_2bits", 4: "quantize_matmul_4bits", 8: "quantize_matmul_8bits"}[bits]
    getattr(ort_c, fn)(packed, w, scales, zero_points, block_size, N, K, symmetric)
    return packed, scales, zero_points


def _node_model(K, N, *, bits=4, block_size=32, zero_points="packed", flat_scales=False,
                bias=False, dtype=np.float32, g_idx=None, weight_as_input=False, seed=0):
    """A model of one MatMulNBits node 'mm' (A -> Y); returns it and its float weight."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((K, N)) * 0.1).astype(dtype)
    packed, scales, zp = _ort_quantize(w, bits, block_size, zero_points == "none")
    inits = [numpy_helper.from_array(scales.reshape(-1) if flat_scales else scales, "scales")]
    inputs = ["A", "B", "scales", "", "", ""]
    if not weight_as_input:
        inits.append(numpy_helper.from_array(packed, "B"))
    if zero_points == "packed":
        inits.append(numpy_helper.from_array(zp, "zp"))
        inputs[3] = "zp"
    elif zero_points == "float":  # HQQ-style zero points in code units
        zp_float = rng.uniform(0, 2**bits - 1, scales.shape).astype(dtype)
        inits.append(numpy_helper.from_array(zp_float, "zp"))
        inputs[3] = "zp"
    if g_idx is not None:
        inits.append(numpy_helper.from_array(np.asarray(g_idx, np.int32), "g_idx"))
        inputs[4] = "g_idx"
    if bias:
        inits.append(numpy_helper.from_array((rng.standard_normal(N)).astype(dtype), "bias"))
        inputs[5] = "bias"
    while not inputs[-1]:
        inputs.pop()
    node = helper.make_node("MatMulNBits", inputs, ["Y"], name="mm", domain="com.microsoft",
                            K=K, N=N, bits=bits, block_size=block_size)
    graph_inputs = [helper.make_tensor_value_info("A", ONNX_TYPE[dtype], ["M", K])]
    if weight_as_input:
        graph_inputs.append(helper.make_tensor_value_info("B", TensorProto.UINT8, packed.shape))
    graph = helper.make_graph([node], "one_node", graph_inputs,
                              [helper.make_tensor_value_info("Y", ONNX_TYPE[dtype], ["M", N])],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=ONNX_IR_VERSION), w


def _ort_run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


VARIANTS = [
    dict(K=200, N=64, bits=4, block_size=32),  # K % block != 0, odd k_blocks
    dict(K=256, N=130, bits=4, block_size=128, zero_points="none"),  # symmetric, odd N
    dict(K=200, N=37, bits=8, block_size=64),
    dict(K=200, N=64, bits=2, block_size=16),
    dict(K=96, N=48, bits=2, block_size=32, zero_points="none"),
    dict(K=200, N=64, bits=4, block_size=32, zero_points="float"),
    dict(K=160, N=64, bits=4, block_size=16, flat_scales=True, bias=True),
    dict(K=200, N=64, bits=4, block_size=32, zero_points="none",
         g_idx=np.arange(200) // 32),  # the trivial order
    dict(K=200, N=64, bits=4, block_size=32, bias=True, dtype=np.float16),
    dict(K=130, N=72, bits=8, block_size=16, zero_points="none", dtype=np.float16),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(
    f"{k}{getattr(x, '__name__', '') or ('' if isinstance(x, np.ndarray) else x)}"
    for k, x in v.items()))
def test_single_node_matches_onnxruntime(variant):
    model, _ = _node_model(**variant)
    dtype = variant.get("dtype", np.float32)
    a = np.random.default_rng(1).standard_normal((5, variant["K"])).astype(dtype)
    expected = _ort_run(model, {"A": a})
    layers = jmo.load_weights(model, progress=False)
    assert list(layers) == ["mm"]
    layer = layers["mm"]
    assert layer["input"] == list(model.graph.node[0].input) and layer.output == ["Y"]
    assert isinstance(layer.weights, jax_marlin.MarlinWeights)
    assert (layer.bias is not None) == variant.get("bias", False)
    got = jax_marlin.matmul_nbits(a, layer.weights, layer.bias)
    assert got.dtype == dtype and got.shape == expected.shape
    assert _rel(got, expected) <= (1e-5 if dtype == np.float32 else 2e-3)


@pytest.mark.parametrize("case, message", [
    (dict(g_idx=(np.arange(200) // 32)[::-1].copy()), "g_idx"),
    (dict(weight_as_input=True), "runtime input"),
    # onnxruntime reads packed zero points differently when g_idx is given
    (dict(g_idx=np.arange(200) // 32), "g_idx together with packed"),
])
def test_unsupported_nodes_are_named(case, message):
    model, _ = _node_model(200, 64, **case)
    with pytest.raises(jmo.UnsupportedNodeError, match=f"'mm'.*{message}"):
        jmo.load_weights(model, progress=False)


@pytest.mark.parametrize("attribute, value, message", [
    ("bits", 3, "bits=3"),  # a width the format does not define
    ("N", 65, "shape"),  # tensors that disagree with the attributes
])
def test_bad_attributes_are_named(attribute, value, message):
    model, _ = _node_model(200, 64, bits=4)
    for attr in model.graph.node[0].attribute:
        if attr.name == attribute:
            attr.i = value
    with pytest.raises(jmo.UnsupportedNodeError, match=f"'mm'.*{message}"):
        jmo.load_weights(model, progress=False)


def test_constant_node_weights_and_a_flat_b_load_as_initializers_do():
    """Weights held by Constant nodes (as some exporters write them) and a B flattened to
    one dimension load to the same op, which matches onnxruntime on the model as built."""
    model, _ = _node_model(200, 64, bias=True)
    a = np.random.default_rng(1).standard_normal((5, 200)).astype(np.float32)
    expected = _ort_run(model, {"A": a})

    as_constants = copy.deepcopy(model)
    constants = [helper.make_node("Constant", [], [t.name], value=t)
                 for t in as_constants.graph.initializer]
    del as_constants.graph.initializer[:]
    nodes = constants + list(as_constants.graph.node)
    del as_constants.graph.node[:]
    as_constants.graph.node.extend(nodes)
    np.testing.assert_allclose(_ort_run(as_constants, {"A": a}), expected, rtol=1e-6)

    flat_b = copy.deepcopy(model)
    (b,) = [t for t in flat_b.graph.initializer if t.name == "B"]
    b.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(b).reshape(-1), "B"))

    for variant in (as_constants, flat_b):
        layer = jmo.load_weights(variant, progress=False)["mm"]
        got = jax_marlin.matmul_nbits(a, layer.weights, layer.bias)
        assert _rel(got, expected) <= 1e-5


def _edited_node(edit):
    model, _ = _node_model(200, 64)
    edit(model.graph)
    return model


@pytest.mark.parametrize("edit, message", [
    (lambda g: g.node.extend([copy.deepcopy(g.node[0])]), "the name is not unique"),
    (lambda g: g.node[0].attribute.remove(
        next(a for a in g.node[0].attribute if a.name == "K")), r"missing attribute\(s\) K"),
    (lambda g: g.node[0].input.__setitem__(1, ""), "input B .* is missing"),
    (lambda g: g.node[0].input.__setitem__(2, ""), "input scales is missing"),
], ids=["duplicate_name", "no_K", "no_B", "no_scales"])
def test_malformed_nodes_are_named(edit, message):
    with pytest.raises(jmo.UnsupportedNodeError, match=f"'mm': {message}"):
        jmo.load_weights(_edited_node(edit), progress=False)


def test_a_model_argument_that_is_no_model_is_named():
    with pytest.raises(TypeError, match="model must be a path or an onnx.ModelProto, got int"):
        jmo.load_weights(3, progress=False)


def test_a_bias_that_is_not_float_is_named():
    """The format's bias has A's (float) type: an int32 initializer is refused at load, as
    the node's, not later by matmul_nbits."""
    model, _ = _node_model(200, 64, bias=True)
    for init in model.graph.initializer:
        if init.name == "bias":
            init.CopyFrom(numpy_helper.from_array(np.arange(64, dtype=np.int32), "bias"))
    with pytest.raises(jmo.UnsupportedNodeError, match=r"'mm'.*bias must have dtype float16, "
                                                       r"bfloat16 or float32, got int32"):
        jmo.load_weights(model, progress=False)


def _nested(model, where):
    """`model`'s MatMulNBits node 'mm' moved into both branches of an If node (where =
    "if"), one level deeper (an If inside that If's body: "if-in-if"), or into a
    model-local function (where = "function")."""
    node, inits = model.graph.node[0], list(model.graph.initializer)

    def output(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["M", 64])

    if where == "function":
        fn = helper.make_function("custom", "wrapped", list(node.input), ["Y"], [node],
                                  opset_imports=OPSETS)
        call = helper.make_node("wrapped", list(node.input), ["out"], name="call", domain="custom")
        graph = helper.make_graph([call], "g", list(model.graph.input), [output("out")],
                                  initializer=inits)
        return helper.make_model(graph, functions=[fn], ir_version=ONNX_IR_VERSION,
                                 opset_imports=[*OPSETS, helper.make_opsetid("custom", 1)])
    body, result = helper.make_graph([node], "then", [], [output("Y")]), "Y"
    for depth in range(2 if where == "if-in-if" else 1):
        cond = helper.make_node("Constant", [], [f"c{depth}"],
                                value=numpy_helper.from_array(np.array(True)))
        result = f"out{depth}"
        branch = helper.make_node("If", [f"c{depth}"], [result], name=f"if{depth}",
                                  then_branch=body, else_branch=body)
        body = helper.make_graph([cond, branch], f"level{depth}", [], [output(result)])
    graph = helper.make_graph(list(body.node), "g", list(model.graph.input), [output(result)],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=ONNX_IR_VERSION)


@pytest.mark.parametrize("where, message", [
    ("if", "the 'else_branch' body of node 'if0'"),  # both branches hold it; else comes first
    ("if-in-if", "the 'else_branch' body of node 'if0' in the 'else_branch' body of node 'if1'"),
    ("function", "the function 'wrapped'"),
])
def test_nodes_below_the_main_graph_are_named_not_skipped(where, message):
    model, _ = _node_model(200, 64)
    nested = _nested(model, where)
    onnx.checker.check_model(nested)
    with pytest.raises(jmo.UnsupportedNodeError, match=f"'mm': inside {re.escape(message)}"):
        jmo.load_weights(nested, progress=False)


def test_external_data_path_and_base_dir(tmp_path):
    model, _ = _node_model(200, 64, bits=4, bias=True)
    a = np.random.default_rng(1).standard_normal((3, 200)).astype(np.float32)
    expected = _ort_run(model, {"A": a})
    path = tmp_path / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").exists()

    from_path = jmo.load_weights(path, progress=False)["mm"]
    assert _rel(jax_marlin.matmul_nbits(a, from_path.weights, from_path.bias), expected) < 1e-5

    proto = onnx.load(str(path), load_external_data=False)
    with pytest.raises(jmo.UnsupportedNodeError, match="external-data"):
        jmo.load_weights(proto, progress=False)
    layer = jmo.load_weights(proto, base_dir=tmp_path, progress=False)["mm"]
    assert _rel(jax_marlin.matmul_nbits(a, layer.weights, layer.bias), expected) < 1e-5


def test_progress_bar(capsys):
    model, _ = _node_model(64, 32, bits=4)
    jmo.load_weights(model)  # stderr is not a terminal under pytest: quiet
    assert capsys.readouterr().err == ""
    jmo.load_weights(model, progress=True)
    err = capsys.readouterr().err
    assert "1/1" in err and "mm" in err and err.endswith("\n")


# --- end to end: a float model, onnxruntime's MatMulNBitsQuantizer, Flax -----------------

DIMS = (96, 200, 160, 64)  # the second and third layers have K % 32 != 0 (200, 160 % 64)
BLOCK = 32


def _float_mlp(seed=0):
    """x -> MatMul -> Add -> Relu -> MatMul -> Add -> Gelu (erf) -> MatMul -> y."""
    rng = np.random.default_rng(seed)
    inits, nodes, h = [], [], "x"
    for i, (k, n) in enumerate(zip(DIMS[:-1], DIMS[1:])):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [h, f"w{i}"], [f"mm{i}"], name=f"fc{i}"))
        h = f"mm{i}"
        if i == len(DIMS) - 2:
            break
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) * 0.1,
                                             f"b{i}"))
        nodes.append(helper.make_node("Add", [h, f"b{i}"], [f"add{i}"]))
        if i == 0:
            nodes.append(helper.make_node("Relu", [f"add{i}"], [f"act{i}"]))
        else:  # gelu(x) = 0.5 x (1 + erf(x / sqrt 2))
            for name, value in (("inv_sqrt2", 2 ** -0.5), ("one", 1.0), ("half", 0.5)):
                inits.append(numpy_helper.from_array(np.array(value, np.float32), name))
            nodes += [helper.make_node("Mul", [f"add{i}", "inv_sqrt2"], ["g0"]),
                      helper.make_node("Erf", ["g0"], ["g1"]),
                      helper.make_node("Add", ["g1", "one"], ["g2"]),
                      helper.make_node("Mul", [f"add{i}", "g2"], ["g3"]),
                      helper.make_node("Mul", ["g3", "half"], [f"act{i}"])]
        h = f"act{i}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", DIMS[0]])],
        [helper.make_tensor_value_info(h, TensorProto.FLOAT, ["batch", DIMS[-1]])],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=ONNX_IR_VERSION)


def _quantize_with_onnxruntime(model, bits, block_size, nodes_to_exclude=None):
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer)
    config = DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=False, bits=bits)
    # (its nodes_to_include adds nodes to the MatMuls it quantizes anyway; exclude filters)
    quantizer = MatMulNBitsQuantizer(copy.deepcopy(model), algo_config=config,
                                     nodes_to_exclude=nodes_to_exclude)
    quantizer.process()
    return quantizer.model.model


def _flax_mlp(layers, float_model):
    """The same network in Flax nnx, on the loaded MatMulNBits weights."""
    from flax import nnx

    import jax_marlin.flax as jmf

    by_output = {layer.output[0]: layer for layer in layers.values()}
    biases = {t.name: numpy_helper.to_array(t) for t in float_model.graph.initializer}

    class MLP(nnx.Module):
        def __init__(self):
            self.layers = nnx.List([
                jmf.Linear.from_weights(by_output[f"mm{i}"].weights, biases.get(f"b{i}"))
                for i in range(len(DIMS) - 1)])

        def __call__(self, x):
            x = jax.nn.relu(self.layers[0](x))
            x = jax.nn.gelu(self.layers[1](x), approximate=False)
            return self.layers[2](x)

    return MLP()


@pytest.mark.parametrize("eight_bit_layer", [False, True], ids=["4bit", "4bit+8bit"])
def test_onnxruntime_quantized_model_end_to_end(eight_bit_layer):
    pytest.importorskip("flax")
    pytest.importorskip("onnx_ir")  # onnxruntime's MatMulNBitsQuantizer needs it
    from flax import nnx

    float_model = _float_mlp()
    model = float_model
    if eight_bit_layer:  # the middle layer (K = 200, not a multiple of the block) in 8 bits
        model = _quantize_with_onnxruntime(model, 8, BLOCK, nodes_to_exclude=["fc0", "fc2"])
    model = _quantize_with_onnxruntime(model, 4, BLOCK)
    nbits = [n for n in model.graph.node if n.op_type == "MatMulNBits"]
    assert len(nbits) == 3 and not any(n.op_type == "MatMul" for n in model.graph.node)
    attrs = {n.output[0]: {a.name: a.i for a in n.attribute} for n in nbits}
    assert attrs["mm1"]["K"] % BLOCK != 0  # really quantized although K % block != 0
    assert attrs["mm1"]["bits"] == (8 if eight_bit_layer else 4)
    assert attrs["mm0"]["bits"] == attrs["mm2"]["bits"] == 4

    x = np.random.default_rng(1).standard_normal((7, DIMS[0])).astype(np.float32)
    expected = _ort_run(model, {"x": x})
    layers = jmo.load_weights(model, progress=False)
    assert len(layers) == 3
    flax_model = _flax_mlp(layers, float_model)
    got = nnx.jit(lambda m, x: m(x))(flax_model, x)
    # Issue 4 asks 1e-3 for float32; both compute in float32 and read ~5e-7 here, so a
    # bound near that catches what 1e-3 would let through.
    assert _rel(got, expected) <= 1e-5
    # and the quantized network is close to the float one (a sanity bound, not the oracle)
    assert _rel(got, _ort_run(float_model, {"x": x})) < 0.15
