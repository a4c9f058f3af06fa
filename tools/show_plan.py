"""The streaming kernel's grid on this GPU for a few shapes (jax_marlin.ops.stream_plan).

    python3 tools/show_plan.py --shapes 8192x28672,28672x8192 --ms 1,2,4,16
"""

import argparse
import types

import jax_marlin  # noqa: F401  (loads the CUDA module)
from jax_marlin import ops


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="8192x28672,28672x8192,4096x28672,4096x4096")
    parser.add_argument("--ms", default="1,2,4,8,16")
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--split-k", type=int, default=0)
    args = parser.parse_args()
    for shape in args.shapes.split(","):
        K, N = (int(x) for x in shape.split("x"))
        w = types.SimpleNamespace(K=K, N=N, block_size=args.block, zero_point_kind="packed")
        for M in (int(m) for m in args.ms.split(",")):
            print(f"{K}x{N} M={M}: {ops.stream_plan(M, w, args.dtype, args.split_k)}")


if __name__ == "__main__":
    main()
