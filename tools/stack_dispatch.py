"""The host's share of the bench's layer stack: dispatch time a call against wall time.

    python3 tools/stack_dispatch.py [--layers 8 32 128] [--shape 4096] [--calls 20]
    XLA_FLAGS=--xla_gpu_enable_command_buffer= python3 tools/stack_dispatch.py   # no graphs

Session 32 (call E) read the bench's 32-layer stack (jax_marlin/bench.py run_layer_stack)
at 7.6 us a layer of host dispatch for dense and 4-bit alike, about the 4-bit stack's GPU
time, so its wall time followed the host. For each impl and layer count this prints, in
us a call and a layer: the host time until one call returns (``dispatch``), the wall
time of one call waited for (``single``), and the wall time a call of ``--calls`` calls
chained back to back (``chained``, the bench's timing). Dispatch that grows with the
layers and with command buffers on, and not without them, would put the cost in XLA's
command-buffer update for each call's new buffers.
"""

from __future__ import annotations

import argparse
import statistics

import jax

from jax_marlin import bench, ops


def timings(stack, x, weights, calls: int, repeats: int) -> dict[str, float]:
    """Medians over ``repeats`` of dispatch and single (the same calls) and chained, us a
    call, with the bench's own timers (``bench.call_times_s``, ``bench.median_call_s``)."""
    def one():
        return stack(x, weights)

    def chain():
        y = x
        for _ in range(calls):
            y = stack(y, weights)
        return y

    jax.block_until_ready(one())
    times = bench.call_times_s(one, repeats)
    return {"dispatch": statistics.median(host for host, _ in times) * 1e6,
            "single": statistics.median(wall for _, wall in times) * 1e6,
            "chained": bench.median_call_s(chain, repeats) * 1e6 / calls}


# The stacks' layer ops, one table for --impls and the operands: the bench's dense and
# 4-bit ops, our dequantization then XLA's dot (an FFI call of one plain kernel, a control
# for what an FFI call costs), and the fused kernel on a forced grid of one block a tile
# (split_k = -1: no thread-block cluster, where the planner's 4096 x 4096 grid at M = 1 is
# clusters of 2, ffi/stream_plan.h).
OPS = {name: bench.JAX_OPS[name] for name in ("dense", "jax_marlin", "jax_marlin_dense")}
OPS["jax_marlin_c1"] = lambda x, w: ops._bind(x, w, None, impl="fused", split_k=-1)


def add_impls_argument(parser):
    parser.add_argument("--impls", nargs="+", default=["dense", "jax_marlin"],
                        choices=list(OPS), help="the layer ops to stack (OPS, above)")


def stack_operands(shape: int, layers: int):
    """The stack's input ``[1, shape]`` and, for each of OPS, ``layers`` weights of shape x
    shape (group 128, fp16; the 4-bit ops share theirs)."""
    key_w, key_x = jax.random.split(jax.random.key(0))
    x = jax.random.normal(key_x, (1, shape)).astype("float16")
    onnx = bench.onnx_copies(key_w, shape, shape, 128, "float16", layers)
    dense = tuple(bench.dense_weight(q, "float16") for q in onnx)
    marlin = tuple(bench.marlin_weights(q, "float16") for q in onnx)
    return x, {name: dense if name == "dense" else marlin for name in OPS}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--shape", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    add_impls_argument(parser)
    args = parser.parse_args(argv)
    K = N = args.shape
    x, weights = stack_operands(K, max(args.layers))
    print(f"backend {jax.default_backend()}; {K}x{N}, M = 1; us a call (a layer)")
    print(f"{'impl':<16} {'layers':>6} {'dispatch':>18} {'single':>18} {'chained':>18}")
    for layers in args.layers:
        for impl in args.impls:
            stack = bench.chained(OPS[impl])
            t = timings(stack, x, weights[impl][:layers], args.calls, args.repeats)
            cells = " ".join(f"{t[k]:9.1f} {f'({t[k] / layers:.2f})':>8}" for k in
                             ("dispatch", "single", "chained"))
            print(f"{impl:<16} {layers:>6} {cells}", flush=True)


if __name__ == "__main__":
    main()
