"""One GEMM (the fused path unless --impl says otherwise), a few times, for Nsight Compute.

    ncu --kernel-name regex:stream_gemm --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python3 tools/profile_one.py --K 8192 --N 28672 --M 1
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jax_marlin as jm


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--K", type=int, default=8192)
    parser.add_argument("--N", type=int, default=28672)
    parser.add_argument("--M", type=int, default=1)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--dtype", default="float16")
    # More than the ncu runs' --launch-skip 6 (tools/gpu_probes.sh): one launch a call.
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--impl", default="fused", choices=["fused", "dense", "auto"])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    dtype = jnp.dtype(args.dtype)
    kernel = jnp.asarray(rng.standard_normal((args.K, args.N), np.float32))
    q = jm.quantize(kernel, block_size=args.block)
    w = jm.prepare(q.packed, q.scales.astype(dtype), q.zero_points, K=args.K, N=args.N,
                   block_size=args.block)
    a = jnp.asarray(rng.standard_normal((args.M, args.K)), dtype)
    fn = jax.jit(lambda a, w: jm.matmul_nbits(a, w, impl=args.impl))
    for _ in range(args.calls):
        fn(a, w).block_until_ready()
    print("done", args)


if __name__ == "__main__":
    main()
