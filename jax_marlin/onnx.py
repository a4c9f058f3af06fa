"""Loading the ``com.microsoft::MatMulNBits`` weights of an ONNX model.

:func:`load_weights` reads every MatMulNBits node of a model's main graph and
prepares its weights for :func:`jax_marlin.matmul_nbits`. Needs ``onnx``
(``pip install 'jax_marlin[onnx]'``); onnxruntime is not needed.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import jax.numpy as jnp
import numpy as np

try:
    import onnx
    from onnx import external_data_helper, numpy_helper
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "jax_marlin.onnx needs the onnx package: pip install 'jax_marlin[onnx]' or pip install onnx"
    ) from e

import jax_marlin
from jax_marlin import _checks, _format
from jax_marlin.weights import MarlinWeights

__all__ = ["MatMulNBitsLayer", "UnsupportedNodeError", "load_weights"]

DOMAIN = "com.microsoft"
OP_TYPE = "MatMulNBits"
# Input slots of MatMulNBits, by position (an empty name means absent).
_A, _B, _SCALES, _ZERO_POINTS, _G_IDX, _BIAS = range(6)


class UnsupportedNodeError(ValueError):
    """A MatMulNBits node that :func:`load_weights` cannot prepare; names the node and why."""


@dataclasses.dataclass(frozen=True)
class MatMulNBitsLayer:
    """One MatMulNBits node: its prepared weights, its bias, and its tensor names.

    Also readable as a mapping: ``layer["weights"]`` is ``layer.weights``.
    """

    weights: MarlinWeights
    bias: jnp.ndarray | None
    input: list[str]
    output: list[str]

    def __getitem__(self, key: str):
        if key not in ("weights", "bias", "input", "output"):
            raise KeyError(key)
        return getattr(self, key)

    def keys(self):
        return ("weights", "bias", "input", "output")


def load_weights(model, *, base_dir: str | None = None, progress: bool | None = None,
                 scale_dtype=None) -> dict[str, MatMulNBitsLayer]:
    """The prepared weights of every ``MatMulNBits`` node of an ONNX model.

    Args:
      model: a path to an ``.onnx`` file (external-data files next to it are
        loaded) or an ``onnx.ModelProto``.
      base_dir: for a ``ModelProto`` whose initializers live in external-data
        files, the folder they are relative to (loaded into ``model`` in place).
      progress: show a progress bar on stderr; by default only when stderr is
        a terminal.
      scale_dtype: optionally cast the scales once (see :func:`jax_marlin.prepare`).

    Returns:
      ``{node name: MatMulNBitsLayer(weights, bias, input, output)}`` in graph
      order (a node without a name is keyed by its first output's name).
      ``input`` / ``output`` are the node's tensor-name lists.

    Raises:
      UnsupportedNodeError: for a node that cannot be loaded exactly (a weight
        that is a runtime input, unsupported ``bits``, a non-trivial ``g_idx``,
        malformed tensors, a node inside a subgraph or a model-local function),
        naming the node and the reason.
    """
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model), load_external_data=True)
    elif not isinstance(model, onnx.ModelProto):
        raise TypeError(f"model must be a path or an onnx.ModelProto, got {type(model).__name__}")
    elif base_dir is not None:
        external_data_helper.load_external_data_for_model(model, os.fspath(base_dir))
    graph = model.graph
    # Only the main graph's nodes are loaded: one inside a control-flow body or a
    # function runs with that scope's tensors, which a flat dict cannot place.
    for node, where in _nested_nodes(model):
        if node.op_type == OP_TYPE and node.domain == DOMAIN:
            raise UnsupportedNodeError(f"{OP_TYPE} node {node.name or node.output[0]!r}: inside "
                                       f"{where}; only the main graph's nodes are loaded")
    constants = {t.name: t for t in graph.initializer}
    for node in graph.node:  # weights may also come as Constant nodes
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attr in node.attribute:
                if attr.name == "value":
                    constants[node.output[0]] = attr.t
    nodes = [n for n in graph.node if n.op_type == OP_TYPE and n.domain == DOMAIN]
    layers: dict[str, MatMulNBitsLayer] = {}
    bar = _Progress(len(nodes), sys.stderr.isatty() if progress is None else progress)
    for node in nodes:
        name = node.name or node.output[0]
        if name in layers:
            raise UnsupportedNodeError(f"{OP_TYPE} node {name!r}: the name is not unique")
        layers[name] = _load_node(node, name, constants, scale_dtype)
        bar.update(name)
    bar.close()
    return layers


def _nested_nodes(model):
    """(node, where) of every node below the main graph: in the bodies of its control-flow
    nodes (If, Loop, Scan: graph attributes, at any depth) and in model-local functions."""
    def below(nodes, outer):
        for node in nodes:
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    where = f"the {attr.name!r} body of node {node.name or node.op_type!r}"
                    where += f" in {outer}" if outer else ""
                    yield from ((n, where) for n in sub.node)
                    yield from below(sub.node, where)

    yield from below(model.graph.node, "")
    for function in model.functions:
        where = f"the function {function.name!r}"
        yield from ((n, where) for n in function.node)
        yield from below(function.node, where)


def _load_node(node, name, constants, scale_dtype) -> MatMulNBitsLayer:
    def fail(reason):
        return UnsupportedNodeError(f"{OP_TYPE} node {name!r}: {reason}")

    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    missing = [key for key in ("K", "N", "block_size") if key not in attrs]
    if missing:
        raise fail(f"missing attribute(s) {', '.join(missing)}")
    K, N, block_size = int(attrs["K"]), int(attrs["N"]), int(attrs["block_size"])
    bits = int(attrs.get("bits", 4))
    if bits not in _format.SUPPORTED_BITS:
        raise fail(f"bits={bits} is not supported (only {_format.SUPPORTED_BITS})")

    def tensor(slot, what):
        names = node.input
        if slot >= len(names) or not names[slot]:
            return None
        if names[slot] not in constants:
            raise fail(f"input {what} ({names[slot]!r}) is not an initializer or Constant (a "
                       f"runtime input?); only constant weights can be prepared")
        proto = constants[names[slot]]
        if external_data_helper.uses_external_data(proto):
            raise fail(f"input {what} ({names[slot]!r}) is stored in an external-data file that "
                       f"is not loaded: pass the model's path, or base_dir=")
        return numpy_helper.to_array(proto)

    packed = tensor(_B, "B")
    if packed is None:
        raise fail("input B (the packed weight) is missing")
    scales = tensor(_SCALES, "scales")
    if scales is None:
        raise fail("input scales is missing")
    zero_points = tensor(_ZERO_POINTS, "zero_points")
    g_idx = tensor(_G_IDX, "g_idx")
    bias = tensor(_BIAS, "bias")
    if g_idx is not None:
        trivial = np.arange(K) // block_size
        if g_idx.shape != (K,) or not np.array_equal(g_idx.astype(np.int64), trivial):
            raise fail("g_idx with a non-trivial (act-order) block order is not supported")
        if zero_points is not None and zero_points.dtype == np.uint8:
            # onnxruntime's kernel reads packed zero points differently when g_idx is
            # given (even k // block_size), so no answer here would match it.
            raise fail("g_idx together with packed uint8 zero_points is not supported")
    num_blocks = _format.k_blocks(K, block_size)
    blob = _format.blob_bytes(block_size, bits)
    if packed.dtype == np.uint8 and packed.size == N * num_blocks * blob:
        packed = packed.reshape(N, num_blocks, blob)  # some producers flatten B
    try:
        weights = jax_marlin.prepare(packed, scales, zero_points, K=K, N=N, bits=bits,
                                     block_size=block_size, scale_dtype=scale_dtype)
        if bias is not None:
            bias = jnp.asarray(bias)
            _checks.bias(bias, N)  # float [N]: the format's bias has A's type
    except (TypeError, ValueError) as e:
        raise fail(str(e)) from e
    return MatMulNBitsLayer(weights, bias, list(node.input), list(node.output))


class _Progress:
    """A one-line progress bar on stderr (only when enabled)."""

    def __init__(self, total: int, enabled: bool, width: int = 30):
        self.total, self.enabled, self.width, self.done = total, enabled and total > 0, width, 0

    def update(self, name: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        line = f"\rloading {OP_TYPE} [{bar}] {self.done}/{self.total} {name[:40]}"
        sys.stderr.write(line.ljust(100))
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()
