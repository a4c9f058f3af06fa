"""Flax Linen: :class:`Dense` on quantized weights, and :func:`quantize_params`.

The contract, for Linen users:

- ``Dense(features, bits=4, block_size=128, symmetric=False)`` computes
  ``x @ W + b`` with :func:`jax_marlin.matmul_nbits`. Its quantized tensors
  (``codes``, ``scales`` and, unless symmetric, ``zero_points``) live in the
  **'quantized'** collection, not in 'params': an optax optimizer over
  ``variables['params']`` never sees them. The bias stays in 'params'
  (trainable).
- ``Dense.init`` quantizes a freshly initialized float kernel (``kernel_init``),
  so a model initializes as usual.
- As ``nn.Dense``, it takes ``in_features`` from its input, and the input
  must match the weights': their K is kept in the 'quantized' collection as
  the shape of a leaf of zeros, ``in_features`` (``uint8 [K]``, K bytes;
  Linen variables are arrays, and a shape stays static under ``jit``; an
  empty ``[K, 0]`` would do, but orbax refuses to save zero-size arrays).
- To convert a trained float model, replace its ``nn.Dense`` by this ``Dense``
  (same name, same ``features``) and convert the variables with
  :func:`quantize_params`, with the same ``bits``/``block_size``/``symmetric``::

      variables = quantize_params(float_variables["params"], bits=4, block_size=128,
                                  exclude=r"lm_head")  # that one stays an nn.Dense
      y = QuantizedModel().apply(variables, x)
"""

from __future__ import annotations

from typing import Any, Callable

try:
    import flax.linen as nn
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "jax_marlin.flax.linen needs Flax: pip install 'jax_marlin[flax]' or pip install flax"
    ) from e

import jax.numpy as jnp

import jax_marlin
from jax_marlin import _checks
from jax_marlin.flax import _layer_filter
from jax_marlin.weights import MarlinWeights

__all__ = ["COLLECTION", "Dense", "quantize_kernel", "quantize_params"]

COLLECTION = "quantized"


def quantize_kernel(kernel, *, bits: int = 4, block_size: int = 128,
                    symmetric: bool = False) -> MarlinWeights:
    """A float ``[in, out]`` kernel -> prepared :class:`jax_marlin.MarlinWeights`."""
    q = jax_marlin.quantize(kernel, bits=bits, block_size=block_size, symmetric=symmetric)
    return jax_marlin.prepare(q.packed, q.scales, q.zero_points, K=q.K, N=q.N, bits=bits,
                              block_size=block_size)


def _leaves(weights: MarlinWeights) -> dict:
    leaves = {"codes": weights.codes, "scales": weights.scales,
              "in_features": jnp.zeros((weights.K,), jnp.uint8)}
    if weights.zero_points is not None:
        leaves["zero_points"] = weights.zero_points
    return leaves


def quantize_params(params, *, bits: int = 4, block_size: int = 128, symmetric: bool = False,
                    include=None, exclude=None):
    """Float Linen params -> variables for a model whose ``nn.Dense`` are :class:`Dense`.

    ``params`` is a (nested) params dict: every sub-dict holding a 2-D
    ``'kernel'`` is taken as a Dense layer, its kernel quantized into the
    'quantized' collection at the same path; everything else (biases, norms,
    embeddings) is kept in 'params'. ``include`` / ``exclude`` choose the layers
    by their path (keys joined by '/', e.g. ``'decoder/layers_0/up'``) as in
    :func:`jax_marlin.flax.quantize_model`: a regular expression or a list of
    them; a layer left out keeps its float kernel (that layer stays an
    ``nn.Dense`` in the model). Returns ``{'params': ..., 'quantized': ...}``.
    """
    chosen = _layer_filter(include, exclude)

    def split(tree, path):
        kept, quantized = {}, {}
        layer = getattr(tree.get("kernel"), "ndim", None) == 2 and chosen("/".join(path))
        if layer:
            quantized.update(_leaves(quantize_kernel(tree["kernel"], bits=bits,
                                                     block_size=block_size,
                                                     symmetric=symmetric)))
        for name, value in tree.items():
            if layer and name == "kernel":
                continue
            if hasattr(value, "items"):
                sub_kept, sub_quantized = split(value, (*path, str(name)))
                if sub_kept:
                    kept[name] = sub_kept
                if sub_quantized:
                    quantized[name] = sub_quantized
            else:
                kept[name] = value
        return kept, quantized

    kept, quantized = split(params, ())
    return {"params": kept, COLLECTION: quantized}


class Dense(nn.Module):
    """A linear layer ``y = x @ W + b`` with a quantized ``W`` (see the module docstring).

    Attributes:
      features: the number of output features.
      bits, block_size, symmetric: the quantization (as :func:`jax_marlin.quantize`).
      use_bias: whether to add a bias (in 'params').
      dtype: if set, inputs are cast to it; the output has the input's dtype.
      kernel_init, bias_init, param_dtype: for ``init`` (the float kernel that is
        quantized, and the bias).
    """

    features: int
    bits: int = 4
    block_size: int = 128
    symmetric: bool = False
    use_bias: bool = True
    dtype: Any = None
    param_dtype: Any = jnp.float32
    kernel_init: Callable = nn.initializers.lecun_normal()
    bias_init: Callable = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, inputs):
        if self.dtype is not None:
            inputs = jnp.asarray(inputs).astype(self.dtype)
        in_features = inputs.shape[-1]
        if self.has_variable(COLLECTION, "in_features"):  # (absent in variables before it)
            stored = self.get_variable(COLLECTION, "in_features").shape[0]
            if stored != in_features:
                raise ValueError(
                    f"Dense {self.name!r}: the input has {in_features} features, but its "
                    f"quantized weights were made for {stored}")
        fresh = {}
        if not self.has_variable(COLLECTION, "codes"):
            if not self.is_initializing():
                raise ValueError(
                    f"Dense {self.name!r}: no quantized weights: apply it with the "
                    f"'{COLLECTION}' collection (from init or quantize_params) in its variables")
            # init: quantize a float kernel
            kernel = self.kernel_init(self.make_rng("params"), (in_features, self.features),
                                      self.param_dtype)
            fresh = _leaves(quantize_kernel(kernel, bits=self.bits, block_size=self.block_size,
                                            symmetric=self.symmetric))
        elif self.has_variable(COLLECTION, "zero_points") == self.symmetric:
            stored = "holds" if self.symmetric else "holds no"
            raise ValueError(
                f"Dense {self.name!r}: symmetric={self.symmetric}, but its '{COLLECTION}' "
                f"collection {stored} zero_points: quantize_params and this Dense must agree "
                f"on symmetric")
        leaf = lambda name: self.variable(COLLECTION, name, lambda: fresh[name]).value  # noqa: E731
        if fresh:
            leaf("in_features")
        weights = MarlinWeights(leaf("codes"), leaf("scales"),
                                None if self.symmetric else leaf("zero_points"),
                                K=in_features, N=self.features, bits=self.bits,
                                block_size=self.block_size)
        try:
            _checks.prepared_weights(weights)
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"Dense {self.name!r}: its '{COLLECTION}' arrays do not fit features="
                f"{self.features}, bits={self.bits}, block_size={self.block_size}; "
                f"quantize_params and this Dense must agree ({e})") from e
        bias = None
        if self.use_bias:
            bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype)
        return jax_marlin.matmul_nbits(inputs, weights, bias)
