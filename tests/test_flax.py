"""jax_marlin.flax: the nnx Linear, quantize_model and the Linen Dense.

Oracles: the float Flax layers (within quantization error) and the same layers
with the dequantized weights (tight).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("flax")
optax = pytest.importorskip("optax")
import flax.linen as nn  # noqa: E402
import flax.serialization  # noqa: E402
from flax import nnx  # noqa: E402

import jax_marlin  # noqa: E402
import jax_marlin.flax as jmf  # noqa: E402
from jax_marlin import _checks  # noqa: E402
from jax_marlin.flax import linen as jml  # noqa: E402


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _dequantized_linear(layer: jmf.Linear) -> nnx.Linear:
    """The float layer with the quantized layer's exact (dequantized) weight."""
    float_layer = nnx.Linear(layer.in_features, layer.out_features,
                             use_bias=layer.bias is not None, rngs=nnx.Rngs(0))
    float_layer.kernel[...] = jax_marlin.dequantize(layer.weights, jnp.float32).T
    if layer.bias is not None:
        float_layer.bias[...] = layer.bias[...]
    return float_layer


@pytest.mark.parametrize("bits, block_size, symmetric, use_bias",
                         [(4, 32, False, True), (4, 64, True, False), (8, 32, False, True)])
def test_linear_matches_float_linear(bits, block_size, symmetric, use_bias):
    linear = nnx.Linear(200, 72, use_bias=use_bias, rngs=nnx.Rngs(0))  # K % block != 0
    if use_bias:
        linear.bias[...] = jax.random.normal(jax.random.key(1), (72,))
    layer = jmf.Linear.from_linear(linear, bits=bits, block_size=block_size, symmetric=symmetric)
    assert (layer.in_features, layer.out_features, layer.bits) == (200, 72, bits)
    assert layer.weights.block_size == block_size
    _checks.prepared_weights(layer.weights)  # the arrays agree with the fields
    assert (layer.zero_points is None) == symmetric
    x = jax.random.normal(jax.random.key(2), (3, 5, 200))
    y = layer(x)
    assert y.shape == (3, 5, 72) and y.dtype == x.dtype
    np.testing.assert_allclose(y, _dequantized_linear(layer)(x), rtol=1e-5, atol=1e-5)
    assert _rel(y, linear(x)) < (0.1 if bits == 4 else 0.01)


def test_from_weights_and_dtype():
    kernel = jax.random.normal(jax.random.key(0), (64, 48))
    q = jax_marlin.quantize(kernel, bits=4, block_size=32)
    weights = jax_marlin.prepare(q.packed, q.scales, q.zero_points, K=64, N=48, bits=4,
                                 block_size=32)
    bias = jnp.arange(48, dtype=jnp.float32)
    layer = jmf.Linear.from_weights(weights, bias)
    x = jax.random.normal(jax.random.key(1), (4, 64))
    np.testing.assert_allclose(layer(x), jax_marlin.matmul_nbits(x, weights, bias), rtol=1e-6)
    half = jmf.Linear.from_weights(weights, bias, dtype=jnp.float16)
    assert half(x).dtype == jnp.float16
    with pytest.raises(TypeError, match="MarlinWeights"):
        jmf.Linear.from_weights(kernel)


def test_quantized_tensors_are_not_params():
    linear = nnx.Linear(64, 32, rngs=nnx.Rngs(0))
    layer = jmf.Linear.from_linear(linear, block_size=32)
    params = nnx.state(layer, nnx.Param)
    assert set(params.keys()) == {"bias"}
    frozen = nnx.state(layer, jmf.QuantizedWeight)
    assert set(frozen.keys()) == {"codes", "scales", "zero_points"}

    # An optimizer over nnx.Param trains the bias and never touches the weights.
    optimizer = nnx.Optimizer(layer, optax.sgd(0.1), wrt=nnx.Param)
    x = jax.random.normal(jax.random.key(1), (8, 64))
    target = jax.random.normal(jax.random.key(2), (8, 32))
    loss_fn = lambda model: jnp.mean((model(x) - target) ** 2)  # noqa: E731
    codes_before = np.asarray(layer.codes[...]).copy()
    scales_before = np.asarray(layer.scales[...]).copy()
    losses = []
    for _ in range(3):
        loss, grads = nnx.value_and_grad(loss_fn)(layer)
        assert set(grads.keys()) == {"bias"}
        optimizer.update(layer, grads)
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    np.testing.assert_array_equal(layer.codes[...], codes_before)
    np.testing.assert_array_equal(layer.scales[...], scales_before)


def _two_layers(seed, dtype=jnp.float32):
    return nnx.Sequential(nnx.Linear(96, 80, param_dtype=dtype, rngs=nnx.Rngs(seed)), jax.nn.relu,
                          nnx.Linear(80, 16, param_dtype=dtype, rngs=nnx.Rngs(seed + 1)))


def test_state_round_trips_through_update_and_serialization():
    source, target = _two_layers(0), _two_layers(10)
    jmf.quantize_model(source, block_size=32)
    jmf.quantize_model(target, block_size=32)
    x = jax.random.normal(jax.random.key(3), (2, 96))
    expected = source(x)
    assert not np.allclose(target(x), expected)

    # nnx.split / merge and nnx.state / update.
    graphdef, state = nnx.split(source)
    np.testing.assert_array_equal(nnx.merge(graphdef, state)(x), expected)
    copy = _two_layers(20)
    jmf.quantize_model(copy, block_size=32)
    nnx.update(copy, nnx.state(source))
    np.testing.assert_array_equal(copy(x), expected)

    # flax.serialization: state dicts of the pure state, and msgpack bytes.
    def restore(model, decode):
        state = nnx.state(model)
        nnx.replace_by_pure_dict(state, decode(nnx.to_pure_dict(state)))
        nnx.update(model, state)

    pure = nnx.to_pure_dict(nnx.state(source))
    state_dict = flax.serialization.to_state_dict(pure)
    restore(target, lambda template: flax.serialization.from_state_dict(template, state_dict))
    np.testing.assert_array_equal(target(x), expected)

    fresh = _two_layers(30)
    jmf.quantize_model(fresh, block_size=32)
    data = flax.serialization.to_bytes(pure)
    restore(fresh, lambda template: flax.serialization.from_bytes(template, data))
    np.testing.assert_array_equal(fresh(x), expected)
    assert fresh.layers[0].codes[...].dtype == source.layers[0].codes[...].dtype


class _Block(nnx.Module):
    def __init__(self, rngs):
        self.up = nnx.Linear(64, 96, rngs=rngs)
        self.down = nnx.Linear(96, 64, use_bias=False, rngs=rngs)
        self.norm = nnx.LayerNorm(64, rngs=rngs)

    def __call__(self, x):
        return x + self.down(jax.nn.gelu(self.up(self.norm(x))))


class _Model(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Linear(40, 64, rngs=rngs)
        self.layers = nnx.List([_Block(rngs), _Block(rngs)])
        self.extra = nnx.data([nnx.Linear(64, 64, rngs=rngs)])
        self.heads = nnx.Dict(out=nnx.Linear(64, 24, rngs=rngs))
        self.plain = nnx.data({"gate": nnx.Linear(64, 64, rngs=rngs)})
        self.tied = self.extra[0]  # shared: one layer, two parents

    def __call__(self, x):
        h = self.embed(x)
        for block in self.layers:
            h = block(h)
        h = self.tied(self.extra[0](h)) * jax.nn.sigmoid(self.plain["gate"](h))
        return self.heads["out"](h)


def _dequantized_copy(float_model, quantized_model, paths):
    """The float model with each replaced layer's dequantized weight (the tight oracle)."""
    reference = nnx.clone(float_model)
    nodes = dict(nnx.iter_graph(reference))
    quantized = dict(nnx.iter_graph(quantized_model))
    for path in paths:
        key = tuple(int(k) if k.isdigit() else k for k in path.split("/"))
        float_layer, layer = nodes[key], quantized[key]
        kernel = jax_marlin.dequantize(layer.weights, jnp.float32).T
        float_layer.kernel[...] = kernel.astype(float_layer.kernel[...].dtype)
    return reference


def test_quantize_model_replaces_every_linear_in_place():
    model = _Model(nnx.Rngs(0))
    float_model = nnx.clone(model)
    x = jax.random.normal(jax.random.key(1), (4, 40))
    summary = jmf.quantize_model(model, bits=4, block_size=32)
    expected_paths = {"embed", "layers/0/up", "layers/0/down", "layers/1/up", "layers/1/down",
                      "extra/0", "heads/out", "plain/gate"}
    assert set(summary.replaced) == expected_paths
    assert not any(type(node) is nnx.Linear for _, node in nnx.iter_graph(model))
    assert model.tied is model.extra[0] and isinstance(model.tied, jmf.Linear)
    assert isinstance(model.layers[1].down, jmf.Linear) and model.layers[1].down.bias is None
    assert isinstance(model.layers[0].norm, nnx.LayerNorm)

    float_bytes = sum(int(v.size) * v.dtype.itemsize
                      for path, v in jax.tree_util.tree_leaves_with_path(nnx.state(float_model))
                      if "norm" not in jax.tree_util.keystr(path))
    assert summary.bytes_before == float_bytes
    assert 0 < summary.bytes_after < summary.bytes_before / 3
    assert "8 Linear layers" in str(summary)

    y = nnx.jit(lambda m, x: m(x))(model, x)
    reference = _dequantized_copy(float_model, model, summary.replaced)
    np.testing.assert_allclose(y, reference(x), rtol=2e-5, atol=2e-5)
    assert _rel(y, float_model(x)) < 0.3  # 4-bit error, compounded over 6 layers


def test_quantize_model_include_exclude():
    model = _Model(nnx.Rngs(0))
    summary = jmf.quantize_model(model, block_size=32, include=r"^layers/", exclude=r"/down$")
    assert summary.replaced == ("layers/0/up", "layers/1/up")
    assert isinstance(model.layers[0].up, jmf.Linear)
    assert model.layers[0].up.weights.block_size == 32
    assert type(model.layers[0].down) is nnx.Linear and type(model.embed) is nnx.Linear
    # Calling it again quantizes what is left.
    rest = jmf.quantize_model(model, bits=8, block_size=32)
    assert "layers/0/up" not in rest.replaced and "layers/0/down" in rest.replaced
    assert model.layers[0].down.bits == 8 and model.layers[0].up.bits == 4


def test_quantize_model_takes_lists_of_patterns():
    model = _Model(nnx.Rngs(0))
    summary = jmf.quantize_model(model, block_size=32, include=[r"^layers/0/", r"^embed$"],
                                 exclude=[r"/down$"])
    assert sorted(summary.replaced) == ["embed", "layers/0/up"]
    assert jmf.quantize_model(_Model(nnx.Rngs(0)), block_size=32, include=[]).replaced == ()
    # Each pattern alone: its own inline flags; compiled ones as they are.
    summary = jmf.quantize_model(_Model(nnx.Rngs(0)), block_size=32,
                                 include=["(?i)^EMBED$", re.compile(r"^layers/1/up$")])
    assert sorted(summary.replaced) == ["embed", "layers/1/up"]
    with pytest.raises(TypeError, match="exclude must be a regular expression .* got 3"):
        jmf.quantize_model(_Model(nnx.Rngs(0)), exclude=3)


def test_quantize_model_fp16_under_jit():
    model = _two_layers(0, jnp.float16)
    float_model = nnx.clone(model)
    summary = jmf.quantize_model(model, block_size=32)
    assert model.layers[0].scales[...].dtype == jnp.float16
    x = jax.random.normal(jax.random.key(1), (3, 96), jnp.float16)
    y = nnx.jit(lambda m, x: m(x))(model, x)
    assert y.dtype == jnp.float16
    reference = _dequantized_copy(float_model, model, summary.replaced)
    np.testing.assert_allclose(np.asarray(y, np.float32), np.asarray(reference(x), np.float32),
                               rtol=2e-2, atol=2e-2)


def test_quantize_model_leaves_subclasses_and_names_a_tuple():
    """Only exact nnx.Linear layers are replaced (a LoRA layer's adapter would be dropped),
    and a Linear in a tuple, which cannot be swapped in place, is an error naming where."""
    class WithLora(nnx.Module):
        def __init__(self, rngs):
            self.lora = nnx.LoRALinear(32, 32, lora_rank=4, rngs=rngs)
            self.plain = nnx.Linear(32, 32, rngs=rngs)

    model = WithLora(nnx.Rngs(0))
    assert jmf.quantize_model(model, block_size=32).replaced == ("plain",)
    assert type(model.lora) is nnx.LoRALinear and isinstance(model.plain, jmf.Linear)

    class WithTuple(nnx.Module):
        def __init__(self, rngs):
            self.pair = nnx.data((nnx.Linear(32, 32, rngs=rngs), nnx.Linear(32, 32, rngs=rngs)))

    with pytest.raises(TypeError, match="'pair'.*nnx.List"):
        jmf.quantize_model(WithTuple(nnx.Rngs(0)), block_size=32)


def test_quantize_model_rejects_a_lone_linear():
    with pytest.raises(TypeError, match="from_linear"):
        jmf.quantize_model(nnx.Linear(32, 32, rngs=nnx.Rngs(0)))


class _LinenMLP(nn.Module):
    dense: type = nn.Dense
    kwargs: tuple = ()

    @nn.compact
    def __call__(self, x):
        kw = dict(self.kwargs)
        x = jax.nn.relu(self.dense(120, name="up", **kw)(x))
        return self.dense(40, name="down", **kw)(x)


@pytest.mark.parametrize("bits, symmetric", [(4, False), (4, True), (8, False)])
def test_linen_dense_quantize_params(bits, symmetric):
    x = jax.random.normal(jax.random.key(0), (5, 72))
    float_model = _LinenMLP()
    float_vars = float_model.init(jax.random.key(1), x)
    float_vars = jax.tree.map(lambda v: v + 0.05, float_vars)  # non-zero biases
    kw = (("bits", bits), ("block_size", 32), ("symmetric", symmetric))
    model = _LinenMLP(dense=jml.Dense, kwargs=kw)
    variables = jml.quantize_params(float_vars["params"], bits=bits, block_size=32,
                                    symmetric=symmetric)
    assert set(variables["params"]["up"]) == {"bias"}
    expected_leaves = {"codes", "scales", "in_features"} | (
        set() if symmetric else {"zero_points"})
    assert set(variables["quantized"]["up"]) == expected_leaves
    y = model.apply(variables, x)

    # Tight: the float model with the dequantized kernels.
    def dequantized(name, K, N):
        leaves = variables["quantized"][name]
        w = jax_marlin.MarlinWeights(leaves["codes"], leaves["scales"], leaves.get("zero_points"),
                                     K=K, N=N, bits=bits, block_size=32)
        return jax_marlin.dequantize(w, jnp.float32).T

    ref_params = jax.tree.map(lambda v: v, float_vars["params"])
    ref_params["up"]["kernel"] = dequantized("up", 72, 120)
    ref_params["down"]["kernel"] = dequantized("down", 120, 40)
    np.testing.assert_allclose(y, float_model.apply({"params": ref_params}, x), rtol=1e-5,
                               atol=1e-5)
    assert _rel(y, float_model.apply(float_vars, x)) < (0.1 if bits == 4 else 0.01)


def test_linen_dense_checks_its_input_against_the_stored_k(tmp_path):
    """K is stored (the shape of a leaf): an input a few features short of the last block,
    which the arrays alone cannot tell, is refused; the leaf survives Flax's serialization
    and an orbax checkpoint; variables without it (from before) still apply."""
    x = jax.random.normal(jax.random.key(0), (2, 200))
    dense = jml.Dense(features=16, block_size=32)
    variables = dense.init(jax.random.key(1), x)
    assert variables["quantized"]["in_features"].shape == (200,)
    with pytest.raises(ValueError, match=r"Dense .*the input has 190 features, but its "
                                         r"quantized weights were made for 200"):
        dense.apply(variables, x[:, :190])
    restored = flax.serialization.from_bytes(variables, flax.serialization.to_bytes(variables))
    assert restored["quantized"]["in_features"].shape == (200,)
    y = dense.apply(restored, x)
    np.testing.assert_array_equal(y, dense.apply(variables, x))
    try:
        import orbax.checkpoint as ocp
    except ImportError:
        ocp = None
    if ocp is not None:  # what flax.training's checkpoints use
        path, checkpointer = tmp_path / "ckpt", ocp.StandardCheckpointer()
        checkpointer.save(path, variables)
        checkpointer.wait_until_finished()  # the save is asynchronous
        restored = checkpointer.restore(path)
        assert restored["quantized"]["in_features"].shape == (200,)
        np.testing.assert_array_equal(dense.apply(restored, x), y)
    older = {**variables, "quantized": {k: v for k, v in variables["quantized"].items()
                                        if k != "in_features"}}
    np.testing.assert_array_equal(dense.apply(older, x), y)


def test_linen_quantize_params_include_exclude():
    """A layer left out keeps its float kernel in 'params', for a model where it is still an
    nn.Dense; the rest are quantized as usual."""
    x = jax.random.normal(jax.random.key(0), (5, 72))
    float_vars = _LinenMLP().init(jax.random.key(1), x)

    class Mixed(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = jax.nn.relu(jml.Dense(120, block_size=32, name="up")(x))
            return nn.Dense(40, name="down")(x)

    for kwargs in (dict(exclude=r"down$"), dict(include=[r"^up$"])):
        variables = jml.quantize_params(float_vars["params"], block_size=32, **kwargs)
        assert set(variables["quantized"]) == {"up"}
        assert set(variables["params"]["down"]) == {"kernel", "bias"}
        y = Mixed().apply(variables, x)
        assert _rel(y, _LinenMLP().apply(float_vars, x)) < 0.1
    with pytest.raises(TypeError, match="include must be a regular expression"):
        jml.quantize_params(float_vars["params"], include=1)


def test_linen_dense_init_apply():
    x = jax.random.normal(jax.random.key(0), (2, 3, 100))
    dense = jml.Dense(features=50, block_size=32)
    variables = dense.init(jax.random.key(1), x)
    assert set(variables) == {"params", "quantized"}
    assert set(variables["params"]) == {"bias"}
    y = dense.apply(variables, x)
    assert y.shape == (2, 3, 50) and y.dtype == x.dtype
    # Same init key, same float kernel: the float Dense agrees within quantization error.
    float_vars = nn.Dense(50).init(jax.random.key(1), x)
    assert _rel(y, nn.Dense(50).apply(float_vars, x)) < 0.1
    # Gradients flow to the bias (and the input) only.
    grads = jax.grad(lambda p: jnp.sum(dense.apply({**variables, "params": p}, x) ** 2))(
        variables["params"])
    assert set(grads) == {"bias"} and np.all(np.isfinite(grads["bias"]))


def test_linen_dense_refuses_variables_it_cannot_read():
    """Dense.apply without the 'quantized' collection, or with zero points the layer's
    `symmetric` disagrees with, raises a ValueError naming the layer (it had fallen into
    init and asked for a PRNG key, or dropped the stored zero points)."""
    x = jax.random.normal(jax.random.key(0), (2, 64))
    asymmetric = jml.Dense(features=16, block_size=32)
    variables = asymmetric.init(jax.random.key(1), x)
    with pytest.raises(ValueError, match=r"Dense .*no quantized weights: apply it with the "
                                         r"'quantized' collection"):
        asymmetric.apply({"params": variables["params"]}, x)
    with pytest.raises(ValueError, match=r"symmetric=True, but its 'quantized' collection "
                                         r"holds zero_points"):
        jml.Dense(features=16, block_size=32, symmetric=True).apply(variables, x)
    symmetric_vars = jml.Dense(features=16, block_size=32, symmetric=True).init(
        jax.random.key(1), x)
    with pytest.raises(ValueError, match=r"symmetric=False, but its 'quantized' collection "
                                         r"holds no zero_points"):
        asymmetric.apply(symmetric_vars, x)
    with pytest.raises(ValueError, match=r"Dense .*'quantized' arrays do not fit features=16, "
                                         r"bits=4, block_size=64; quantize_params and this "
                                         r"Dense must agree"):
        jml.Dense(features=16, block_size=64).apply(variables, x)
