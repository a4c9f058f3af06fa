"""Token-by-token decoding of a Llama-style decoder, fp16 vs 4-bit weights (jax_marlin).

    python examples/decode.py                       # 8B-class dims on a GPU, tiny on CPU
    python examples/decode.py --layers 8 --out decode.json

A decoder of RMSNorm, grouped-query attention with rotary embeddings and a
fixed-size KV cache, and a SwiGLU MLP, written in Flax NNX with random fp16
weights. As in serving stacks (vLLM, TensorRT-LLM), the q/k/v projections are
fused into one ``qkv`` Linear and the MLP's gate and up into one ``gate_up``:
four larger GEMMs per layer instead of seven small ones, each reading its
weight in one pass. Each step feeds one token per sequence and greedily picks
the next; all ``--steps`` steps run in one jitted ``lax.scan``, so the timing
holds no Python dispatch. It is timed at batch 1 and 16 in fp16, then every
Linear layer is quantized in place by ``jax_marlin.flax.quantize_model``
(4 bits, block 128) and timed again with the same module code.
Defaults are Llama-3-8B's layer dimensions, with 4 layers (``--layers``) and a 32k
vocabulary (``--vocab``; Llama-3's is 128256); on CPU they
shrink to a tiny model unless given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import statistics
import time

import jax
import jax.numpy as jnp
from flax import nnx

import jax_marlin
import jax_marlin.flax as jmf

GPU_DEFAULTS = dict(hidden=4096, intermediate=14336, heads=32, kv_heads=8, layers=4, vocab=32000)
CPU_DEFAULTS = dict(hidden=256, intermediate=512, heads=8, kv_heads=2, layers=2, vocab=512)


@dataclasses.dataclass(frozen=True)
class Config:
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    layers: int
    vocab: int
    max_len: int
    rope_theta: float = 500000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def linear(k, n, rngs):
    init = jax.nn.initializers.normal(k ** -0.5)
    return nnx.Linear(k, n, use_bias=False, param_dtype=jnp.float16, kernel_init=init, rngs=rngs)


class RMSNorm(nnx.Module):
    def __init__(self, dim, eps=1e-5):
        self.weight = nnx.Param(jnp.ones((dim,), jnp.float16))
        self.eps = eps

    def __call__(self, x):
        x32 = x.astype(jnp.float32)
        x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return (x32 * self.weight[...].astype(jnp.float32)).astype(x.dtype)


def rope(x, pos, theta):
    """Rotary embedding of ``x [B, 1, heads, head_dim]`` at position ``pos``."""
    half = x.shape[-1] // 2
    freq = theta ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angle = pos.astype(jnp.float32) * freq
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).astype(x.dtype)


class Attention(nnx.Module):
    def __init__(self, cfg: Config, rngs):
        self.cfg = cfg
        d = cfg.head_dim
        self.qkv = linear(cfg.hidden, (cfg.heads + 2 * cfg.kv_heads) * d, rngs)
        self.o = linear(cfg.heads * d, cfg.hidden, rngs)

    def __call__(self, x, cache, pos):
        cfg, (B, S, _) = self.cfg, x.shape
        d, groups = cfg.head_dim, cfg.heads // cfg.kv_heads
        q, k, v = jnp.split(self.qkv(x), [cfg.heads * d, (cfg.heads + cfg.kv_heads) * d], -1)
        q = rope(q.reshape(B, S, cfg.heads, d), pos, cfg.rope_theta)
        k = rope(k.reshape(B, S, cfg.kv_heads, d), pos, cfg.rope_theta)
        v = v.reshape(B, S, cfg.kv_heads, d)
        k_cache = jax.lax.dynamic_update_slice(cache[0], k, (0, pos, 0, 0))
        v_cache = jax.lax.dynamic_update_slice(cache[1], v, (0, pos, 0, 0))
        q = q.reshape(B, cfg.kv_heads, groups, d)  # S == 1
        scores = jnp.einsum("bhgd,bthd->bhgt", q, k_cache,
                            preferred_element_type=jnp.float32) * d ** -0.5
        causal = jnp.arange(cfg.max_len) <= pos  # the cache holds positions 0..pos
        probs = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1)
        out = jnp.einsum("bhgt,bthd->bhgd", probs.astype(v_cache.dtype), v_cache)
        return self.o(out.reshape(B, S, cfg.heads * d)), (k_cache, v_cache)


class MLP(nnx.Module):
    def __init__(self, cfg: Config, rngs):
        self.gate_up = linear(cfg.hidden, 2 * cfg.intermediate, rngs)
        self.down = linear(cfg.intermediate, cfg.hidden, rngs)

    def __call__(self, x):
        gate, up = jnp.split(self.gate_up(x), 2, -1)
        return self.down(jax.nn.silu(gate) * up)


class Block(nnx.Module):
    def __init__(self, cfg: Config, rngs):
        self.attn_norm, self.attn = RMSNorm(cfg.hidden), Attention(cfg, rngs)
        self.mlp_norm, self.mlp = RMSNorm(cfg.hidden), MLP(cfg, rngs)

    def __call__(self, x, cache, pos):
        h, cache = self.attn(self.attn_norm(x), cache, pos)
        x = x + h
        return x + self.mlp(self.mlp_norm(x)), cache


class Decoder(nnx.Module):
    def __init__(self, cfg: Config, rngs):
        self.cfg = cfg
        self.embed = nnx.Embed(cfg.vocab, cfg.hidden, param_dtype=jnp.float16, rngs=rngs)
        self.layers = nnx.List([Block(cfg, rngs) for _ in range(cfg.layers)])
        self.norm = RMSNorm(cfg.hidden)
        self.lm_head = linear(cfg.hidden, cfg.vocab, rngs)

    def __call__(self, tokens, caches, pos):
        """``tokens [B, 1]`` at position ``pos`` -> logits ``[B, vocab]``, new caches."""
        x = self.embed(tokens)
        new_caches = []
        for block, cache in zip(self.layers, caches):
            x, cache = block(x, cache, pos)
            new_caches.append(cache)
        return self.lm_head(self.norm(x))[:, -1], tuple(new_caches)


def empty_caches(cfg: Config, batch: int):
    shape = (batch, cfg.max_len, cfg.kv_heads, cfg.head_dim)
    return tuple((jnp.zeros(shape, jnp.float16), jnp.zeros(shape, jnp.float16))
                 for _ in range(cfg.layers))


def generator(model: Decoder, batch: int, steps: int):
    """A jitted call that greedily decodes ``steps`` tokens from position 0 with empty
    caches, and its arguments: ``generate(*args)`` returns the tokens ``[batch, steps]``."""
    cfg = model.cfg
    graphdef, state = nnx.split(model)

    # The state is an argument, not a closure: closed-over weights would be baked into
    # the executable as constants, which is not how a served model runs.
    @jax.jit
    def generate(state, tokens):
        model = nnx.merge(graphdef, state)

        def step(carry, pos):
            tokens, caches = carry
            logits, caches = model(tokens, caches, pos)
            tokens = jnp.argmax(logits, axis=-1).astype(jnp.int32)[:, None]
            return (tokens, caches), tokens[:, 0]

        carry = (tokens, empty_caches(cfg, batch))
        _, out = jax.lax.scan(step, carry, jnp.arange(steps, dtype=jnp.int32))
        return out.T

    tokens = jax.random.randint(jax.random.key(0), (batch, 1), 0, cfg.vocab, jnp.int32)
    return generate, (state, tokens)


def tokens_per_second(model: Decoder, batch: int, steps: int, warmup: int = 1,
                      repeats: int = 3):
    """Greedy decoding of ``steps`` tokens in one call (``generator``): ``warmup`` untimed
    calls (the first compiles), then ``repeats`` timed. Returns the median call's tokens/s
    and the generated tokens ``[batch, steps]``.
    """
    generate, args = generator(model, batch, steps)
    for _ in range(warmup):
        jax.block_until_ready(generate(*args))
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(generate(*args))
        seconds.append(time.perf_counter() - start)
    return batch * steps / statistics.median(seconds), out


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in GPU_DEFAULTS:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=None,
                            help=f"default {GPU_DEFAULTS[name]} (GPU), {CPU_DEFAULTS[name]} (CPU)")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed calls before the timed ones (the first compiles)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed calls; the median is reported")
    parser.add_argument("--steps", type=int, default=None,
                        help="tokens decoded per call (64 GPU, 8 CPU)")
    parser.add_argument("--bits", type=int, default=4)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--out", type=pathlib.Path, help="write the results as JSON")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    backend = jax.default_backend()
    defaults = CPU_DEFAULTS if backend == "cpu" else GPU_DEFAULTS
    dims = {k: getattr(args, k) if getattr(args, k) is not None else v
            for k, v in defaults.items()}
    steps = args.steps or (8 if backend == "cpu" else 64)
    cfg = Config(**dims, max_len=steps)  # each call decodes from position 0
    print(f"backend {backend} ({jax.devices()[0].device_kind}); {cfg}")

    start = time.perf_counter()
    model = Decoder(cfg, nnx.Rngs(0))
    jax.block_until_ready(nnx.state(model))
    print(f"built the fp16 model in {time.perf_counter() - start:.1f} s")

    results = {"config": dataclasses.asdict(cfg), "backend": backend,
               "device": jax.devices()[0].device_kind, "steps": steps,
               "bits": args.bits, "block_size": args.block_size, "repeats": args.repeats,
               "batches": {}}
    for batch in args.batch:
        rate, _ = tokens_per_second(model, batch, steps, args.warmup, args.repeats)
        results["batches"][batch] = {"fp16_tokens_per_s": rate}
        print(f"fp16   batch {batch:3d}: {rate:10.1f} tokens/s")

    # Quantize every Linear (attention, MLP, lm_head) in place: no second fp16 copy.
    start = time.perf_counter()
    summary = jmf.quantize_model(model, bits=args.bits, block_size=args.block_size)
    jax.block_until_ready(nnx.state(model))
    print(f"{summary} in {time.perf_counter() - start:.1f} s")
    results.update(linear_bytes_fp16=summary.bytes_before, linear_bytes_quantized=summary.bytes_after,
                   layers_quantized=len(summary.replaced))
    for batch in args.batch:
        rate, _ = tokens_per_second(model, batch, steps, args.warmup, args.repeats)
        entry = results["batches"][batch]
        entry.update(quantized_tokens_per_s=rate, speedup=rate / entry["fp16_tokens_per_s"])
        print(f"{args.bits}-bit  batch {batch:3d}: {rate:10.1f} tokens/s "
              f"({entry['speedup']:.2f}x vs fp16)")
    if jax.default_backend() == "cpu":
        print("(on the CPU the 4-bit layers run the C++ reference kernel, or from 16 rows a "
              "float32 dequantize-then-dot: exact, not tuned for speed; the speed-up is the "
              "GPU's)")

    results["jax_marlin"] = jax_marlin.build_info()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str))
        print(f"wrote {args.out}")
    return results


if __name__ == "__main__":
    main()
