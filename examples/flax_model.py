"""Quantize a small Flax NNX MLP with jax_marlin.flax.quantize_model and compare outputs.

    python examples/flax_model.py
"""


import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import jax_marlin
import jax_marlin.flax as jmf


class MLP(nnx.Module):
    def __init__(self, dims, rngs):
        self.layers = nnx.List([nnx.Linear(k, n, rngs=rngs) for k, n in zip(dims[:-1], dims[1:])])

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = jax.nn.gelu(layer(x))
        return self.layers[-1](x)


def main():
    model = MLP((512, 1024, 1024, 256), nnx.Rngs(0))
    float_model = nnx.clone(model)  # keep the float weights to compare with

    summary = jmf.quantize_model(model, bits=4, block_size=128)  # in place
    print(summary)
    print("replaced:", ", ".join(summary.replaced))

    x = jax.random.normal(jax.random.key(1), (8, 512))
    forward = nnx.jit(lambda m, x: m(x))
    y, y_float = forward(model, x), forward(float_model, x)
    rel = float(jnp.linalg.norm(y - y_float) / jnp.linalg.norm(y_float))
    print(f"relative error vs the float model (4-bit quantization error): {rel:.4f}")

    # The same float model with the dequantized weights matches to float32 rounding.
    for float_layer, layer in zip(float_model.layers, model.layers):
        float_layer.kernel[...] = jax_marlin.dequantize(layer.weights, jnp.float32).T
    exact = float(jnp.max(jnp.abs(y - forward(float_model, x))))
    print(f"max abs error vs the dequantized float model: {exact:.2e}")
    assert exact < 1e-3 and np.isfinite(rel)


if __name__ == "__main__":
    main()
