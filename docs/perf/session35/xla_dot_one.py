"""jnp.dot with dense fp16 weights, a few calls, for Nsight Compute (XLA's own GEMM
kernel at one shape, beside tools/profile_one.py's int4 kernel).
    python3 docs/perf/session35/xla_dot_one.py --K 4096 --N 4096 --M 512
"""
import argparse

import jax
import jax.numpy as jnp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--K", type=int, default=4096)
    p.add_argument("--N", type=int, default=4096)
    p.add_argument("--M", type=int, default=512)
    p.add_argument("--calls", type=int, default=10)
    a = p.parse_args()
    kx, kw = jax.random.split(jax.random.key(0))
    x = jax.random.normal(kx, (a.M, a.K), jnp.float16)
    w = (jax.random.normal(kw, (a.K, a.N), jnp.float32) * a.K ** -0.5).astype(jnp.float16)
    dot = jax.jit(jnp.dot)
    for _ in range(a.calls):
        y = dot(x, w)
    jax.block_until_ready(y)
    print("done", y.shape, y.dtype)


if __name__ == "__main__":
    main()
