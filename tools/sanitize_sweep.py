"""Ragged shapes through the fused CUDA kernels and the dense path, for compute-sanitizer.

    XLA_PYTHON_CLIENT_ALLOCATOR=platform compute-sanitizer --tool memcheck \
        --kernel-name kns=marlin python3 tools/sanitize_sweep.py
    (and --tool racecheck)
    SWEEP_SPLIT_K=-2 ... python3 tools/sanitize_sweep.py   # the fused part: one grid only
    SWEEP_PARTS="group_clusters wgmma_clusters" ...          # some parts only (PARTS)

The platform allocator gives every buffer its own cudaMalloc, so an access one
element past a buffer is outside any allocation and memcheck sees it (inside
XLA's default pool it would not be). Every result is also checked against the
float32 oracle, so a run that reports no error has computed the right thing.
"""

import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np

import jax_marlin as jm
from jax_marlin import ops

# (M, N, K). (12, 130, 4100): the tile split's 16-row kernels, whose warps stage their own
# A, with ~2 of K's 33 steps a warp at C = 2 (at K <= 1000 a warp has at most one).
# (16, 130, 12100): with the tile split of two forced (SWEEP_SPLIT_K=-2) a block's A does
# not fit, so each warp stages its 5-6 steps in phases of 2 (stream_plan.h).
SHAPES = [(1, 37, 72), (2, 130, 200), (3, 130, 200), (12, 130, 200), (12, 600, 1000),
          (12, 130, 4100), (16, 130, 12100), (17, 200, 1000), (65, 520, 136), (130, 70, 4100),
          (300, 70, 4100)]  # two 256-row wgmma blocks and a k-split


def _operands(rng, M, N, K, block, dtype, zp="packed"):
    """Random weights quantized with groups of `block` (zero points packed, none, or float),
    prepared; activations and a bias of `dtype`; and the float32 oracle of the product."""
    q = jm.quantize(rng.standard_normal((K, N)).astype(np.float32), block_size=block,
                    symmetric=zp == "none")
    zero_points = q.zero_points
    if zp == "float":
        zero_points = jnp.asarray(rng.uniform(0, 15, q.scales.shape), q.scales.dtype)
    w = jm.prepare(q.packed, q.scales, zero_points, K=K, N=N, block_size=block)
    a = jnp.asarray(rng.standard_normal((M, K)), dtype)
    bias = jnp.asarray(rng.standard_normal(N), dtype)
    ref = jm.reference.matmul_nbits(a.astype(jnp.float32), q.packed, q.scales, zero_points,
                                    K=K, N=N, bits=4, block_size=block,
                                    bias=bias.astype(jnp.float32))
    return w, a, bias, ref


def _cases(rng):
    for (M, N, K), zp, dtype in itertools.product(
            SHAPES, ["packed", "none", "float"], [jnp.float16, jnp.bfloat16]):
        w, a, bias, ref = _operands(rng, M, N, K, 32 if K < 1000 else 128, dtype, zp)
        yield (M, N, K, zp, dtype), a, w, bias, ref


def _check(case, a, w, bias, ref, impl, split_k):
    y = jax.jit(lambda a, w, b: ops._bind(a, w, b, impl=impl, split_k=split_k))(a, w, bias)
    err = float(jnp.linalg.norm(y.astype(jnp.float32) - ref) / jnp.linalg.norm(ref))
    assert np.isfinite(err) and err < (2e-3 if case[-1] == jnp.float16 else 1e-2), (
        case, impl, split_k, err)


def _check_dequantize(case, w):
    """The CUDA dequantization alone, its output a buffer of its own (inside the dense
    path's program the weight is an XLA temporary, where a write past it would land in
    the same allocation and memcheck would not see it)."""
    got = ops._dequantize_cuda_weights(w, case[-1])
    want = jm.weights.dequantize(w, jnp.float32)
    err = float(jnp.max(jnp.abs(got.astype(jnp.float32) - want)) / jnp.max(jnp.abs(want)))
    assert np.isfinite(err) and err < 1e-2, (case, err)


def fused_and_dense(cases, passes):
    # Per case, each (impl, split_k) of a pass; the dense pass comes second (it runs
    # XLA's dot too, so a failure there leaves the first pass's count printed).
    for impls in passes:
        checked = 0
        for case, a, w, bias, ref in cases:
            for impl, split_k in impls:
                _check(case, a, w, bias, ref, impl, split_k)
                checked += 1
        print(f"sanitize sweep: {checked} {impls[0][0]} calls checked against the oracle",
              flush=True)


def dequantizations(cases):
    checked = 0
    for case, _, w, _, _ in cases:
        if case[2] % 8 == 0 and ops.fused_applies(case[-1], 4):
            _check_dequantize(case, w)
            checked += 1
    print(f"sanitize sweep: {checked} CUDA dequantizations checked against the oracle",
          flush=True)


def a_phases(rng):
    # A in phases (ffi/stream_plan.h): only a grid this large needs it (on an H200,
    # 15992 x 12300 at M = 16: 264 blocks of 11-12 steps, phases of 5; the last one short).
    M, N, K, block = 16, 12300, 15992, 128
    w, a, bias, ref = _operands(rng, M, N, K, block, jnp.float16)
    _check((M, N, K, "packed", jnp.float16), a, w, bias, ref, "fused", 0)
    plan = ops.stream_plan(M, w, jnp.float16)
    steps = -(-plan["total_steps"] // plan["blocks"])
    if "H200" in jax.devices()[0].device_kind:  # tests/test_stream_plan.py: the H200's plan
        assert plan["a_phase_steps"] < steps, plan
    print(f"sanitize sweep: A staged {plan['a_phase_steps']} steps at a time over {steps} "
          "steps a block, checked", flush=True)


def group_clusters(rng):
    # The group cluster (ffi/stream_plan.h) at M <= 8, where the planner takes it: the
    # sweep's shapes have too few k-steps for it (split_k = 1003 falls back there but at
    # M = 12). Forced here, each plan checked to be the group cluster on sm_90: one-row
    # and group-row kernels, groups of 32 without group rows, implicit zero points, bf16,
    # and C = 3, 5, 6, 8 (slices of unequal size).
    checked = 0
    for M, N, K, block, zp, dtype, C in [(1, 1100, 2048, 32, "packed", jnp.float16, 3),
                                         (3, 600, 2048, 32, "none", jnp.bfloat16, 5),
                                         (5, 1000, 1024, 128, "none", jnp.float16, 6),
                                         (8, 520, 4096, 64, "packed", jnp.bfloat16, 8)]:
        w, a, bias, ref = _operands(rng, M, N, K, block, dtype, zp)
        if float(jax.devices()[0].compute_capability) >= 9:
            plan = ops.stream_plan(M, w, dtype, 1000 + C)
            assert plan["group_cluster"] == C, (M, N, K, C, plan)
            checked += 1
        _check((M, N, K, zp, dtype), a, w, bias, ref, "fused", 1000 + C)
    print(f"sanitize sweep: {checked} group-cluster calls checked", flush=True)


PARTS = ("fused", "dense", "dequantize", "a_phases", "group_clusters", "wgmma_clusters",
         "wgmma_producer", "wgmma_stream_k")


def main():
    # The fused kernels: the heuristic's choice, a forced split-K reduce, and a
    # forced tile split with clusters of two, three and eight blocks (where k has
    # the steps they need; three cuts a tile's outputs unevenly between the
    # blocks that store them); the dense path with its CUDA dequantization where
    # K % 8 == 0; then the grids only larger shapes get. The cases (weights,
    # oracle) are made once.
    # SWEEP_SPLIT_K=s: the fused part with that split_k alone (a short run for a
    # tool that cannot finish the whole sweep in its time: racecheck, session 13).
    # SWEEP_PARTS="fused dense ...": those parts of PARTS alone, one process each being
    # a shorter run for a tool that crashes on long ones (compute-sanitizer, session 21).
    parts = os.environ.get("SWEEP_PARTS", " ".join(PARTS)).split()
    unknown = set(parts) - set(PARTS)
    assert not unknown, f"SWEEP_PARTS: {sorted(unknown)} not among {PARTS}"
    cases = (list(_cases(np.random.default_rng(0)))
             if {"fused", "dense", "dequantize"} & set(parts) else [])
    # 1003: the group cluster of 3 blocks a column group (ffi/stream_plan.h).
    fused = (("fused", 0), ("fused", 3), ("fused", -2), ("fused", -3), ("fused", -8),
             ("fused", 1003))
    if "SWEEP_SPLIT_K" in os.environ:
        fused = (("fused", int(os.environ["SWEEP_SPLIT_K"])),)
    passes = [impls for part, impls in (("fused", fused), ("dense", (("dense", 0),)))
              if part in parts]
    fused_and_dense(cases, passes)
    if "dequantize" in parts:
        dequantizations(cases)
    if "a_phases" in parts:
        a_phases(np.random.default_rng(1))
    if "group_clusters" in parts:
        group_clusters(np.random.default_rng(2))
    if "wgmma_clusters" in parts:
        wgmma_k_split_clusters(np.random.default_rng(3))
    if "wgmma_producer" in parts:
        wgmma_producer(np.random.default_rng(4))
    if "wgmma_stream_k" in parts:
        wgmma_stream_k(np.random.default_rng(5))


def _check_wgmma_where_planned(rng, shapes, planned):
    """Each (M, N, K, block, dtype) of ``shapes`` whose wgmma plan has ``planned`` set,
    through the fused path against the oracle; returns how many ran."""
    checked = 0
    for M, N, K, block, dtype in shapes:
        w, a, bias, ref = _operands(rng, M, N, K, block, dtype)
        plan = ops.wgmma_plan(M, w, dtype)
        if plan is None or not plan[planned]:
            continue
        _check((M, N, K, "packed", dtype), a, w, bias, ref, "fused", 0)
        checked += 1
    return checked


def wgmma_k_split_clusters(rng):
    """The wgmma kernel's k-split as clusters of 2 (ffi/wgmma_plan.h; where the plan has
    them): ragged M, N and K, the halves added through distributed shared memory.
    Alone: python3 -c "import sanitize_sweep as s, numpy as np;
    s.wgmma_k_split_clusters(np.random.default_rng(1))" (from tools/). With the exchange
    through plain stores after a cluster barrier, racecheck read 0-16 write-write hazards
    a run here (session 19): it does not order the copies' completion by barrier.cluster.
    The exchange now goes through mbarriers (release/acquire at cluster scope), which
    racecheck follows; tests/test_gpu.py's back-to-back test checks it too."""
    shapes = [(100, 8000, 2056, 128, jnp.float16), (200, 8000, 4100, 128, jnp.bfloat16),
              (20, 12000, 2056, 128, jnp.float16),  # 32-row blocks, two an SM
              (120, 4000, 4100, 128, jnp.float16)]  # 64-row halves: two row blocks, 56 rows last
    checked = _check_wgmma_where_planned(rng, shapes, "cluster_k")
    if "H200" in jax.devices()[0].device_kind:  # every shape plans the cluster there
        assert checked == len(shapes), checked
    print(f"sanitize sweep: {checked} wgmma k-split clusters checked", flush=True)


def wgmma_producer(rng):
    """The wgmma kernel's producer warpgroup (256-row blocks; in a build with
    -DJAX_MARLIN_WGMMA_PRODUCER=0 nothing runs and the count reads 0): two 256-row blocks
    (the second 44 rows, read through the tail map) with 33 groups of 32 (the last
    stage's second group slot zeroed) and ragged N and K, and 256-row blocks in k-split
    clusters (session 22's racecheck shapes, calls F-H), 300 x 8002 (N % 8 = 2, one
    split): the epilogue's staged tile, whole 16-byte chunks and the ragged last ones, and
    2049 x 136 (nine row blocks, the last one row through the tail map: past 1024 rows,
    where stream-K has no workspace)."""
    checked = 0
    if jm.build_info().get("wgmma_producer"):  # no operands built for a build without it
        checked = _check_wgmma_where_planned(
            rng, [(300, 1000, 1056, 32, jnp.bfloat16), (200, 8000, 4104, 128, jnp.float16),
                  (300, 8002, 1056, 128, jnp.float16), (2049, 136, 1056, 32, jnp.float16)],
            "producer")
        if "H200" in jax.devices()[0].device_kind:  # all four plan the producer there
            assert checked == 4, checked
    print(f"sanitize sweep: {checked} wgmma producer calls checked", flush=True)


def wgmma_stream_k(rng):
    """The producer's stream-K (ffi/wgmma_stream_k.h): persistent blocks walking their
    segments, the cut tiles' partials through the workspace and the flags. 300 x 2048 x
    16936: 266 tiles (two row blocks, the second 44 rows through the tail map, the last
    tile pair one 64-column tile), a wave whole and 134 tiles stream-K on 132 blocks; 200 x
    2080 x 28672 with groups of 32 (33 stages, the last one's second group slot zeroed):
    one wave whole, the rest cut up to three ways. racecheck
    follows the ring's mbarriers across segments; the flags are global memory, which it
    does not follow (tests/test_gpu.py checks their sums)."""
    checked = 0
    if jm.build_info().get("wgmma_producer"):
        checked = _check_wgmma_where_planned(
            rng, [(300, 16936, 2048, 128, jnp.float16), (200, 28672, 2080, 32, jnp.bfloat16)],
            "stream_k_blocks")
        if "H200" in jax.devices()[0].device_kind:  # both plan stream-K there
            assert checked == 2, checked
        # Forced under one wave (kForceWgmmaStreamK): 17 tile pairs, every tile cut up to
        # 9 ways, N % 8 = 2.
        case = (200, 2050, 1056, 32, jnp.float16)
        w, a, bias, ref = _operands(rng, *case)
        _check(case, a, w, bias, ref, "fused", -2004)
        checked += 1
    print(f"sanitize sweep: {checked} wgmma stream-K calls checked", flush=True)


if __name__ == "__main__":
    main()
