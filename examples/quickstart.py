"""Quantize one layer, prepare it once, run the jitted op; check it and time it.

    python examples/quickstart.py            # sizes suited to the default backend
    python examples/quickstart.py --K 8192 --N 28672 --M 1

Prints the error against the ``jax.numpy`` oracle and the time against
``jnp.dot`` with the dense weight, on the CPU or on the GPU where there is one.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_marlin as jm


def time_per_call(fn, *args, repeats=5):
    jax.block_until_ready(fn(*args))  # compile and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main():
    on_gpu = jax.default_backend() == "gpu"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--K", type=int, default=8192 if on_gpu else 1024)
    parser.add_argument("--N", type=int, default=28672 if on_gpu else 1024)
    parser.add_argument("--M", type=int, default=1)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    args = parser.parse_args()
    K, N, M, dtype = args.K, args.N, args.M, jnp.dtype(args.dtype)
    print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind}); "
          f"build: {jm.build_info()}")

    key_w, key_x = jax.random.split(jax.random.key(0))
    kernel = (jax.random.normal(key_w, (K, N), jnp.float32) / np.sqrt(K)).astype(dtype)
    x = jax.random.normal(key_x, (M, K), jnp.float32).astype(dtype)

    # Once, at load time: quantize (ONNX MatMulNBits tensors), then repack.
    q = jm.quantize(kernel, bits=4, block_size=args.block_size)
    weights = jm.prepare(q.packed, q.scales, q.zero_points, K=K, N=N, bits=4,
                         block_size=args.block_size)

    # Many times, under jit: no repack happens here.
    layer = jax.jit(jm.matmul_nbits)
    y = layer(x, weights)
    oracle = jm.reference.matmul_nbits(x.astype(jnp.float32), q.packed, q.scales,
                                       q.zero_points, K=K, N=N, bits=4,
                                       block_size=args.block_size)
    error = jnp.linalg.norm(y.astype(jnp.float32) - oracle) / jnp.linalg.norm(oracle)
    print(f"y = x @ W^T: x {x.shape} {dtype}, W {N}x{K} int4 (group {args.block_size}) "
          f"-> y {y.shape}; relative error vs the jax.numpy oracle: {float(error):.2e}")

    # Timing: 32 multiplies per jitted call, so dispatch is amortised.
    def repeat(f, w):
        def run(x):
            def body(_, acc):
                return acc + f(x + acc[:, :1].astype(x.dtype) * 0, w)[:, :1].astype(jnp.float32)
            return jax.lax.fori_loop(0, 32, body, jnp.zeros((M, 1), jnp.float32))
        return jax.jit(run)

    dense_weight = kernel.T  # [N, K], what jnp.dot would use
    t_int4 = time_per_call(repeat(jm.matmul_nbits, weights), x) / 32
    t_dense = time_per_call(repeat(lambda x, w: jnp.dot(x, w.T), dense_weight), x) / 32
    print(f"time per multiply: jax_marlin {t_int4 * 1e6:.1f} us, jnp.dot {t_dense * 1e6:.1f} us "
          f"-> {t_dense / t_int4:.2f}x")
    print(f"weight bytes: int4 {weights.nbytes / 1e6:.1f} MB, dense "
          f"{dense_weight.size * dense_weight.dtype.itemsize / 1e6:.1f} MB")
    if not on_gpu:
        print("(on the CPU the op runs a plain C++ reference kernel, or from 16 rows a float32 "
              "dequantize-then-dot: exact, not tuned for speed; the fused kernel is the GPU's)")


if __name__ == "__main__":
    main()
