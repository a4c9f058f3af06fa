"""Flax NNX layers on quantized weights: :class:`Linear` and :func:`quantize_model`.

``jax_marlin.flax.Linear`` stands in for ``flax.nnx.Linear`` with a prepared
MatMulNBits weight (:class:`jax_marlin.MarlinWeights`);
:func:`quantize_model` swaps every ``nnx.Linear`` of a model for one, in place.
One difference: with ``dtype=None`` it computes in the input's dtype, where
``nnx.Linear`` promotes the input to its parameters' dtype (float32 parameters
and a bfloat16 input give float32 there, bfloat16 here: the tensor-core path),
and it takes float inputs only. Set ``dtype`` to choose.
Linen users: :mod:`jax_marlin.flax.linen`.

How the quantized tensors are stored: the codes, scales and zero points are
:class:`QuantizedWeight` variables, an ``nnx.Variable`` subclass that is *not*
an ``nnx.Param``. They are state (``nnx.state``, ``nnx.split``, ``nnx.update``,
checkpoints and ``nnx.jit`` carry them) but an optimizer over ``nnx.Param``
never sees them, and ``nnx.grad`` does not differentiate them. The bias stays
an ``nnx.Param``: trainable, for bias / LoRA-style fine-tuning on top of a
frozen quantized model. ``K``, ``N``, ``bits`` and ``block_size`` are plain
(static) attributes, so each leaf is a plain array and the state serializes
like any other (``nnx.to_pure_dict`` then ``flax.serialization.to_bytes``).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import re

try:
    from flax import nnx
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "jax_marlin.flax needs Flax (>= 0.12, with flax.nnx): pip install 'jax_marlin[flax]' "
        "or pip install flax"
    ) from e

import jax.numpy as jnp

import jax_marlin
from jax_marlin.weights import MarlinWeights

__all__ = ["Linear", "QuantizationSummary", "QuantizedWeight", "quantize_model"]


class QuantizedWeight(nnx.Variable):
    """A frozen tensor of a quantized weight (codes, scales or zero points).

    An ``nnx.Variable`` but not an ``nnx.Param``: ``nnx.Optimizer(model, tx,
    wrt=nnx.Param)`` and ``nnx.grad`` leave it alone; ``nnx.state(model,
    QuantizedWeight)`` selects it.
    """


class Linear(nnx.Module):
    """A linear layer ``y = x @ W + b`` with a quantized ``W``, computed by
    :func:`jax_marlin.matmul_nbits`.

    Build it from prepared weights or from a float layer::

        layer = Linear.from_weights(jax_marlin.prepare(...), bias)
        layer = Linear.from_linear(nnx.Linear(...), bits=4, block_size=128)

    Args:
      weights: the prepared ``[N, K]`` weight (``K = in_features``,
        ``N = out_features``), as :func:`jax_marlin.prepare` returns it.
      bias: optional ``[out_features]`` bias, kept as a trainable ``nnx.Param``.
      dtype: if set, inputs are cast to it first (as ``nnx.Linear``'s ``dtype``).
        The output has the dtype of the (cast) input: float16, bfloat16 or float32.
    """

    def __init__(self, weights: MarlinWeights, bias=None, *, dtype=None):
        if not isinstance(weights, MarlinWeights):
            raise TypeError(f"weights must be jax_marlin.MarlinWeights, got {type(weights).__name__}")
        self.codes = QuantizedWeight(weights.codes)
        self.scales = QuantizedWeight(weights.scales)
        self.zero_points = (nnx.data(None) if weights.zero_points is None
                            else QuantizedWeight(weights.zero_points))
        self.bias = nnx.data(None) if bias is None else nnx.Param(jnp.asarray(bias))
        self.in_features = weights.K
        self.out_features = weights.N
        self.bits = weights.bits
        self.block_size = weights.block_size
        self.dtype = dtype

    @classmethod
    def from_weights(cls, weights: MarlinWeights, bias=None, *, dtype=None) -> Linear:
        """The layer for prepared weights (e.g. one node of :func:`jax_marlin.onnx.load_weights`)."""
        return cls(weights, bias, dtype=dtype)

    @classmethod
    def from_linear(cls, linear: nnx.Linear, *, bits: int = 4, block_size: int = 128,
                    symmetric: bool = False) -> Linear:
        """Quantizes a float ``nnx.Linear`` (its ``[in, out]`` kernel, block-wise along ``in``)."""
        q = jax_marlin.quantize(linear.kernel[...], bits=bits, block_size=block_size,
                                symmetric=symmetric)
        weights = jax_marlin.prepare(q.packed, q.scales, q.zero_points, K=q.K, N=q.N, bits=bits,
                                     block_size=block_size)
        bias = None if linear.bias is None else linear.bias[...]
        return cls(weights, bias, dtype=linear.dtype)

    @property
    def weights(self) -> MarlinWeights:
        """The quantized weight as one :class:`jax_marlin.MarlinWeights` pytree."""
        zero_points = None if self.zero_points is None else self.zero_points[...]
        return MarlinWeights(self.codes[...], self.scales[...], zero_points, K=self.in_features,
                             N=self.out_features, bits=self.bits, block_size=self.block_size)

    def __call__(self, inputs):
        """``inputs [..., in_features]`` -> ``[..., out_features]``."""
        if self.dtype is not None:
            inputs = jnp.asarray(inputs).astype(self.dtype)
        bias = None if self.bias is None else self.bias[...]
        return jax_marlin.matmul_nbits(inputs, self.weights, bias)


@dataclasses.dataclass(frozen=True)
class QuantizationSummary:
    """What :func:`quantize_model` did.

    ``replaced``: the '/'-joined paths of the layers it replaced, in graph
    order. ``bytes_before`` / ``bytes_after``: the bytes of those layers'
    weights and biases, float and quantized.
    """

    replaced: tuple[str, ...]
    bytes_before: int
    bytes_after: int

    def __str__(self) -> str:
        ratio = self.bytes_before / self.bytes_after if self.bytes_after else float("nan")
        return (f"quantized {len(self.replaced)} Linear layers: {self.bytes_before:,} -> "
                f"{self.bytes_after:,} bytes ({ratio:.2f}x smaller)")


def _nbytes(x) -> int:
    return 0 if x is None else int(x.size) * x.dtype.itemsize


def _layer_filter(include, exclude):
    """Whether a layer's '/'-joined path is chosen: it matches ``include`` (any layer when
    None) and not ``exclude``; each a regular expression (a string or compiled) or a list
    of them, any of which ``re.search``-es the path."""
    def compiled(name, value):
        patterns = [] if value is None else [value] if isinstance(value, (str, re.Pattern)) \
            else value
        if not isinstance(patterns, (list, tuple)) or not all(
                isinstance(p, (str, re.Pattern)) for p in patterns):
            raise TypeError(f"{name} must be a regular expression (str) or a list of them, "
                            f"got {value!r}")
        return [re.compile(p) for p in patterns]  # each alone: its own flags and groups

    included, excluded = compiled("include", include), compiled("exclude", exclude)
    return lambda path: ((include is None or any(p.search(path) for p in included))
                         and not any(p.search(path) for p in excluded))


def quantize_model(model, *, bits: int = 4, block_size: int = 128,
                   include: str | collections.abc.Sequence[str] | None = None,
                   exclude: str | collections.abc.Sequence[str] | None = None,
                   symmetric: bool = False) -> QuantizationSummary:
    """Replaces the ``nnx.Linear`` layers of ``model`` by quantized :class:`Linear`, in place.

    A layer is replaced when its path, its keys joined by '/' (e.g.
    ``'layers/0/mlp/up'``), matches the regular expression ``include``
    (``re.search``; all layers when ``None``) and does not match ``exclude``;
    either may also be a list of expressions, any of which matches.
    Layers may sit in attributes, ``nnx.List`` / ``nnx.Dict`` or (``nnx.data``)
    lists and dicts; a layer shared by several parents is replaced everywhere
    by one quantized layer. Only exact ``nnx.Linear`` instances are replaced:
    subclasses (e.g. ``nnx.LoRALinear``) have extra behaviour a quantized layer
    would drop.

    Returns a :class:`QuantizationSummary`.
    """
    chosen = _layer_filter(include, exclude)
    graph = list(nnx.iter_graph(model))  # (path, node); each node once, parents after children
    if type(model) is nnx.Linear:
        raise TypeError("quantize_model replaces the Linear layers inside a model; for a lone "
                        "nnx.Linear use jax_marlin.flax.Linear.from_linear(layer)")
    new_layers: dict[int, Linear] = {}
    replaced, before, after = [], 0, 0
    for path, node in graph:
        if type(node) is not nnx.Linear:
            continue
        name = "/".join(str(key) for key in path)
        if not chosen(name):
            continue
        layer = Linear.from_linear(node, bits=bits, block_size=block_size, symmetric=symmetric)
        new_layers[id(node)] = layer
        replaced.append(name)
        bias = None if node.bias is None else node.bias[...]
        before += _nbytes(node.kernel[...]) + _nbytes(bias)
        after += layer.weights.nbytes + _nbytes(bias)
    for path, node in graph:  # every parent: swap the references it holds
        _replace_children(node, new_layers, "/".join(str(key) for key in path))
    return QuantizationSummary(tuple(replaced), before, after)


def _replace_children(parent, new_layers: dict[int, Linear], where: str) -> None:
    if isinstance(parent, collections.abc.MutableSequence):  # list, nnx.List
        for i, child in enumerate(parent):
            if id(child) in new_layers:
                parent[i] = new_layers[id(child)]
    elif isinstance(parent, collections.abc.MutableMapping):  # dict, nnx.Dict
        for key, child in list(parent.items()):
            if id(child) in new_layers:
                parent[key] = new_layers[id(child)]
    elif isinstance(parent, nnx.Module):
        for key, child in list(vars(parent).items()):
            if id(child) in new_layers:
                setattr(parent, key, new_layers[id(child)])
    elif isinstance(parent, tuple):
        if any(id(child) in new_layers for child in parent):
            raise TypeError(f"cannot replace a Linear inside the immutable {type(parent).__name__} "
                            f"at {where or 'the root'!r}: hold it in an nnx.List, or exclude it")
