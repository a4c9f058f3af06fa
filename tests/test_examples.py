"""examples/decode.py: its KV-cached decoding against a full causal forward pass.

The oracle is the same network written once more in numpy float64, over the whole
sequence at once (no cache, no rotary table, the causal mask over positions), from the
module's own weights; for the 4-bit model, from the quantized layers' dequantized
weights. It checks what the decode benchmark's speed rests on: that the cache layout,
the rotary embedding and the grouped heads compute the model they claim to.
"""

import importlib.util
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

nnx = pytest.importorskip("flax.nnx")

import jax_marlin  # noqa: E402
import jax_marlin.flax as jmf  # noqa: E402

_EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "decode.py"


@pytest.fixture(scope="module")
def decode():
    spec = importlib.util.spec_from_file_location("decode_example", _EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _kernel(layer):
    """A layer's ``[in, out]`` weight in float64: a float nnx.Linear's kernel, or a
    quantized Linear's dequantized weight."""
    if isinstance(layer, jmf.Linear):
        return np.asarray(jax_marlin.weights.dequantize(layer.weights, jnp.float32),
                          np.float64).T
    return np.asarray(layer.kernel[...], np.float64)


def _rms(x, weight, eps=1e-5):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * np.asarray(weight, np.float64)


def _reference_logits(model, tokens):
    """Logits ``[B, T, vocab]`` of the whole sequence ``tokens [B, T]`` at once."""
    cfg = model.cfg
    B, T = tokens.shape
    H, KV, d = cfg.heads, cfg.kv_heads, cfg.head_dim
    half = d // 2
    angle = np.arange(T)[:, None] * cfg.rope_theta ** (-np.arange(half) / half)
    cos, sin = np.cos(angle)[None, :, None], np.sin(angle)[None, :, None]

    def rotate(x):  # [B, T, heads, d]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)

    x = np.asarray(model.embed.embedding[...], np.float64)[tokens]
    causal = np.tril(np.ones((T, T), bool))
    for block in model.layers:
        h = _rms(x, block.attn_norm.weight[...]) @ _kernel(block.attn.qkv)
        q = rotate(h[..., :H * d].reshape(B, T, H, d))
        k = rotate(h[..., H * d:(H + KV) * d].reshape(B, T, KV, d))
        v = h[..., (H + KV) * d:].reshape(B, T, KV, d)
        k, v = np.repeat(k, H // KV, axis=2), np.repeat(v, H // KV, axis=2)  # query head i reads kv head i // groups
        scores = np.einsum("bthd,bshd->bhts", q, k) / np.sqrt(d)
        scores = np.where(causal, scores, -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        out = np.einsum("bhts,bshd->bthd", probs, v).reshape(B, T, H * d)
        x = x + out @ _kernel(block.attn.o)
        gate, up = np.split(_rms(x, block.mlp_norm.weight[...]) @ _kernel(block.mlp.gate_up), 2, -1)
        x = x + (gate / (1 + np.exp(-gate)) * up) @ _kernel(block.mlp.down)
    return _rms(x, model.norm.weight[...]) @ _kernel(model.lm_head)


def _cached_logits(decode, model, tokens):
    """Logits ``[B, T, vocab]`` fed one token a step through the example's cache (the
    given tokens, not the model's own picks), under jit."""
    B, T = tokens.shape
    graphdef, state = nnx.split(model)

    @jax.jit
    def run(state, tokens):
        model = nnx.merge(graphdef, state)

        def step(caches, inputs):
            token, pos = inputs
            logits, caches = model(token[:, None], caches, pos)
            return caches, logits

        _, logits = jax.lax.scan(step, decode.empty_caches(model.cfg, B),
                                 (tokens.T, jnp.arange(T, dtype=jnp.int32)))
        return jnp.swapaxes(logits, 0, 1)

    return np.asarray(run(state, jnp.asarray(tokens)), np.float64)


def _small_config(decode, max_len):
    # Two query heads a kv head; with blocks of 64, K = 96 and 160 end in a short block.
    return decode.Config(hidden=96, intermediate=160, heads=6, kv_heads=3, layers=2,
                         vocab=200, max_len=max_len)


@pytest.mark.parametrize("quantized", [False, True], ids=["fp16", "4bit"])
def test_decode_example_cache_matches_a_full_causal_forward(decode, quantized):
    T = 7
    model = decode.Decoder(_small_config(decode, T), nnx.Rngs(0))
    if quantized:
        summary = jmf.quantize_model(model, bits=4, block_size=64)
        assert len(summary.replaced) == 2 * 4 + 1, summary.replaced
    tokens = np.random.default_rng(0).integers(0, model.cfg.vocab, (2, T))
    got = _cached_logits(decode, model, tokens)
    want = _reference_logits(model, tokens)
    err = np.linalg.norm(got - want, axis=-1) / np.linalg.norm(want, axis=-1)
    assert err.max() < 1e-2, err  # fp16 activations and weights, float64 oracle


def test_decode_example_main_reports_both_models(decode, tmp_path):
    out = tmp_path / "decode.json"
    results = decode.main(["--hidden", "64", "--intermediate", "96", "--heads", "4",
                           "--kv-heads", "2", "--layers", "1", "--vocab", "50",
                           "--steps", "3", "--batch", "1", "2", "--out", str(out)])
    assert out.exists()
    assert results["layers_quantized"] == 4 + 1
    assert results["linear_bytes_quantized"] < results["linear_bytes_fp16"]
    for batch in (1, 2):
        entry = results["batches"][batch]
        assert entry["fp16_tokens_per_s"] > 0 and entry["quantized_tokens_per_s"] > 0
        assert entry["speedup"] == pytest.approx(
            entry["quantized_tokens_per_s"] / entry["fp16_tokens_per_s"])
