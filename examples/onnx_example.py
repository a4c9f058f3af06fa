"""An ONNX model quantized by onnxruntime, run in Flax with jax_marlin, checked against onnxruntime.

    pip install onnx onnxruntime onnx-ir flax
    python examples/onnx_example.py

1. Build a small float ONNX MLP (96 -> 200 -> 160 -> 64, Relu and erf-Gelu).
2. Turn its MatMuls into MatMulNBits with onnxruntime's MatMulNBitsQuantizer
   (the middle layer in 8 bits, the others in 4 bits, asymmetric, block 32;
   the middle layer's K = 200 is not a multiple of the block).
3. Load the weights with jax_marlin.onnx.load_weights, rebuild the network with
   jax_marlin.flax.Linear and compare with onnxruntime's output.
"""

import copy
import pathlib
import tempfile

import jax
import numpy as np
import onnx
import onnxruntime as ort
from flax import nnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization.matmul_nbits_quantizer import (
    DefaultWeightOnlyQuantConfig,
    MatMulNBitsQuantizer,
)

import jax_marlin.flax as jmf
import jax_marlin.onnx as jmo

DIMS = (96, 200, 160, 64)
BLOCK = 32


def float_model(seed=0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    w = [(rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
         for k, n in zip(DIMS[:-1], DIMS[1:])]
    b = [(rng.standard_normal(n) * 0.1).astype(np.float32) for n in DIMS[1:-1]]
    const = lambda name, value: numpy_helper.from_array(np.asarray(value, np.float32), name)  # noqa: E731
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["mm0"], name="fc0"),
        helper.make_node("Add", ["mm0", "b0"], ["add0"]),
        helper.make_node("Relu", ["add0"], ["act0"]),
        helper.make_node("MatMul", ["act0", "w1"], ["mm1"], name="fc1"),
        helper.make_node("Add", ["mm1", "b1"], ["add1"]),
        # gelu(x) = 0.5 x (1 + erf(x / sqrt(2)))
        helper.make_node("Mul", ["add1", "inv_sqrt2"], ["g0"]),
        helper.make_node("Erf", ["g0"], ["g1"]),
        helper.make_node("Add", ["g1", "one"], ["g2"]),
        helper.make_node("Mul", ["add1", "g2"], ["g3"]),
        helper.make_node("Mul", ["g3", "half"], ["act1"]),
        helper.make_node("MatMul", ["act1", "w2"], ["y"], name="fc2"),
    ]
    inits = [const(f"w{i}", x) for i, x in enumerate(w)] + [const(f"b{i}", x) for i, x in enumerate(b)]
    inits += [const("inv_sqrt2", 2 ** -0.5), const("one", 1.0), const("half", 0.5)]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", DIMS[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", DIMS[-1]])],
        initializer=inits)
    # IR 10: loads on every onnxruntime release that has MatMulNBits' current schema.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def quantize(model, bits, nodes_to_exclude=None) -> onnx.ModelProto:
    config = DefaultWeightOnlyQuantConfig(block_size=BLOCK, is_symmetric=False, bits=bits)
    quantizer = MatMulNBitsQuantizer(copy.deepcopy(model), algo_config=config,  # it mutates
                                     nodes_to_exclude=nodes_to_exclude)
    quantizer.process()
    return quantizer.model.model


class MLP(nnx.Module):
    """The same network in Flax, on the MatMulNBits weights of the ONNX model."""

    def __init__(self, layers, biases):
        by_output = {layer.output[0]: layer for layer in layers.values()}
        self.fc = nnx.List([jmf.Linear.from_weights(by_output[out].weights, biases.get(b))
                            for out, b in (("mm0", "b0"), ("mm1", "b1"), ("y", None))])

    def __call__(self, x):
        x = jax.nn.relu(self.fc[0](x))
        x = jax.nn.gelu(self.fc[1](x), approximate=False)
        return self.fc[2](x)


def main():
    model = float_model()
    quantized = quantize(quantize(model, 8, nodes_to_exclude=["fc0", "fc2"]), 4)
    for node in quantized.graph.node:
        if node.op_type == "MatMulNBits":
            attrs = {a.name: a.i for a in node.attribute}
            print(f"{node.name}: K={attrs['K']} N={attrs['N']} bits={attrs['bits']} "
                  f"block_size={attrs['block_size']}")

    with tempfile.TemporaryDirectory() as tmp:  # load from a file, as one would in practice
        path = pathlib.Path(tmp) / "mlp_q.onnx"
        onnx.save_model(quantized, str(path))
        layers = jmo.load_weights(path)
    biases = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    flax_model = MLP(layers, biases)

    x = np.random.default_rng(1).standard_normal((8, DIMS[0])).astype(np.float32)
    session = ort.InferenceSession(quantized.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]
    got = np.asarray(nnx.jit(lambda m, x: m(x))(flax_model, x))
    rel = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    print(f"relative error, jax_marlin (Flax) vs onnxruntime MatMulNBits: {rel:.2e}")
    float_out = ort.InferenceSession(model.SerializeToString(),
                                     providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    print(f"relative error, quantized vs float model (quantization error): "
          f"{np.linalg.norm(got - float_out) / np.linalg.norm(float_out):.2e}")
    assert rel <= 1e-3


if __name__ == "__main__":
    main()
