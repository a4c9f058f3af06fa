"""The CUDA paths, on a GPU (skipped elsewhere). Budget: well under 2 minutes on an H200.

Output poisoning: the FFI handler's signature (5 inputs, output + workspace)
leaves no room for an aliased, NaN-filled output buffer, so instead every call
here (a) runs right after a large NaN-filled device buffer was freed, so the
allocator is likely to hand that memory back as the output, and (b) is checked
for finiteness and against the float64 oracle on ragged shapes (M, N and K not
multiples of any tile), where an unwritten element or a padding column leaking
into the output would show as NaN or as a large error.
"""

import random
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_marlin as jm
from jax_marlin import _layout, _shapes, ops
from conftest import (BF16, Case, activations, assert_close, header_constant, make_case,
                      np_pack, oracle64, requires_gpu, to_jnp, WGMMA_PRODUCER_ROWS)

pytestmark = [pytest.mark.gpu, requires_gpu]

HALF = {"f16": np.dtype(np.float16), "bf16": BF16}
HALVES64_MIN_M = header_constant("wgmma_plan.h", "kWgHalves64MinM")  # 64-row halves from here
# split_k: 0 = the planner's choice; > 0 an aligned split of every column group; -C the
# streaming kernel's tile split with C blocks per 64-column tile (a thread-block
# cluster adding through distributed shared memory when C > 1, sm_90), where it fits
# (ffi/stream_plan.h is_forced_tile_split).
# 1000 + C: the group cluster (test_the_group_cluster_is_the_aligned_split_bit_for_bit).
PATHS = [("fused", 1), ("fused", 2), ("fused", 5), ("fused", -1), ("fused", -4), ("fused", 0),
         ("dense", 0)]


def poison_allocator(nbytes=256 << 20):
    junk = jnp.full((nbytes // 2,), jnp.nan, jnp.float16)
    junk.block_until_ready()
    del junk


def assert_fused_right_and_reproducible(a, w, b, want, dtype, split_k=0):
    """The fused path at `split_k`, twice, each call right after the allocator was
    poisoned: right against `want`, and bitwise the same both times."""
    fn = jax.jit(lambda a, w, b: ops._bind(a, w, b, impl="fused", split_k=split_k))
    poison_allocator()
    first = np.asarray(fn(a, w, b))
    assert_close(first, want, dtype)
    poison_allocator()
    np.testing.assert_array_equal(np.asarray(fn(a, w, b)).view(np.uint16), first.view(np.uint16))


def _all_paths(a, w, b):
    return tuple(ops._bind(a, w, b, impl=impl, split_k=split_k) for impl, split_k in PATHS)


_all_paths_jit = jax.jit(_all_paths)


def _shape_cases(num=24, seed=7):
    """A covering list over the ragged shape axes (each value appears several times)."""
    axes = {
        "M": [1, 3, 17, 65, 130],
        "N": [37, 130, 200, 520],
        "K": [72, 200, 1000, 4100],
        "block": [32, 128, "channel"],
        "zp": ["packed", "none", "float"],
        "bias": [False, True],
    }
    r = random.Random(seed)
    columns = {}
    for name, values in axes.items():
        column = (values * (num // len(values) + 1))[:num]
        r.shuffle(column)
        columns[name] = column
    cases = []
    for i in range(num):
        c = {name: columns[name][i] for name in axes}
        if c["block"] == "channel":
            c["block"] = 1 << (c["K"] - 1).bit_length()
        cases.append(c)
    return cases


def _check_every_path(rng, c, act):
    """Every forced path of case ``c`` against the float64 oracle; returns the
    operands and the expected output for further checks."""
    case = make_case(rng, N=c["N"], K=c["K"], block_size=c["block"], zp=c["zp"],
                     scale_dtype=act)
    a = activations(rng, (c["M"], c["K"]), act)
    b = activations(rng, (c["N"],), act) if c["bias"] else None
    w = case.prepare()
    want = oracle64(a, case, b)
    poison_allocator()
    outs = _all_paths_jit(jnp.asarray(a), w, to_jnp(b))
    for (impl, split_k), out in zip(PATHS, outs):
        assert out.dtype == act, (impl, split_k)
        assert_close(out, want, act)
    return a, w, b, want


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("c", _shape_cases(), ids=lambda c: "M{M}-N{N}-K{K}-b{block}-{zp}{b}".format(
    b="-bias" if c["bias"] else "", **c))
def test_every_path_matches_oracle(rng, c, dtype):
    act = HALF[dtype]
    a, w, b, want = _check_every_path(rng, c, act)
    # The public entry point, eagerly, after poisoning.
    poison_allocator()
    assert_close(jm.matmul_nbits(jnp.asarray(a), w, to_jnp(b)), want, act)


def _stream_cases():
    """M <= 16 picks the weight-streaming kernel (groups >= 32, packed or no
    zero points; group 16 and float zero points fall back to the tiled one).
    Rows 1-8 use one n8 tile, 9-16 two; N crosses 512-column groups raggedly."""
    return [
        dict(M=1, N=1100, K=1000, block=128, zp="packed", bias=True),
        dict(M=5, N=37, K=72, block=32, zp="none", bias=False),
        dict(M=8, N=600, K=4100, block=64, zp="packed", bias=False),
        dict(M=9, N=1100, K=200, block=256, zp="packed", bias=True),
        dict(M=16, N=520, K=4100, block=32, zp="none", bias=True),
        dict(M=12, N=130, K=1000, block=1024, zp="packed", bias=False),  # per-channel
        dict(M=2, N=200, K=520, block=16, zp="packed", bias=False),  # tiled fallback
        dict(M=7, N=200, K=520, block=64, zp="float", bias=True),  # tiled fallback
        # Group rows (M x G <= 8 with G = 128 / block groups a step): one and two rows
        # with four groups a step (two rows: a row's columns on two lanes), three and
        # four with two; ragged K (the last step's groups past K) and N.
        dict(M=1, N=1100, K=1000, block=32, zp="packed", bias=True),
        dict(M=2, N=600, K=4100, block=32, zp="none", bias=False),
        dict(M=2, N=130, K=200, block=32, zp="packed", bias=True),
        dict(M=3, N=200, K=520, block=64, zp="packed", bias=True),
        dict(M=4, N=1100, K=1000, block=64, zp="none", bias=True),
        # Groups of 32 on two n8 tiles: dequantized at the scale before the MMA.
        dict(M=12, N=600, K=1000, block=32, zp="packed", bias=True),
    ]


def _takes_group_rows(M, block):
    """The streaming kernel's group rows (ffi/stream_plan.h): 2 or 4 groups a step, M x G <= 8."""
    groups = 128 // block if block < 128 else 1
    return groups > 1 and M * groups <= 8


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("c", _stream_cases(), ids=lambda c: "M{M}-N{N}-K{K}-b{block}-{zp}".format(**c))
def test_small_m_kernel_every_split(rng, c, dtype):
    _, w, _, _ = _check_every_path(rng, c, HALF[dtype])
    plan = ops.stream_plan(c["M"], w, HALF[dtype])
    if plan is not None:  # streamed
        assert plan["group_rows"] == _takes_group_rows(c["M"], c["block"]), (c, plan)


@pytest.mark.parametrize("M, block", [(1, 128), (16, 128), (1, 32), (2, 32), (4, 64)])
def test_small_m_balanced_grid_crosses_column_groups(rng, M, block):
    """4096 x 17408: 272 tiles, too many for the tile split on an H200, so the
    stream-K grid spreads 1088 steps over ~2 blocks per SM: blocks start and end
    inside column groups and most groups are summed from several partials (with
    groups of 32 and 64 at these M, from the group rows' per-group columns)."""
    case = make_case(rng, N=17408, K=4096, block_size=block, zp="packed", scale_dtype=np.float16)
    a = activations(rng, (M, 4096), np.float16)
    w = case.prepare()
    plan = ops.stream_plan(M, w, np.float16)
    assert plan["tile_split"] == 0 and plan["max_parts"] > 1, plan
    assert plan["group_rows"] == _takes_group_rows(M, block), plan
    assert_fused_right_and_reproducible(a, w, None, oracle64(a, case), np.float16)


@pytest.mark.parametrize("M", [1, 5, 16])
def test_small_m_tile_split_on_a_projection_shape(rng, M):
    """4096 x 4096 (64 tiles) through the planner's own choice, which on an H200 is the
    tile split with clusters of 2 blocks per tile (tests/test_stream_plan.py checks that
    choice on the host): right and bitwise reproducible. Every other case forces one
    and four blocks per tile too (split_k = -1, -4 in PATHS)."""
    case = make_case(rng, N=4096, K=4096, block_size=128, zp="packed", scale_dtype=np.float16)
    a = activations(rng, (M, 4096), np.float16)
    b = activations(rng, (4096,), np.float16)
    w = case.prepare()
    assert_fused_right_and_reproducible(a, w, b, oracle64(a, case, b), np.float16)


# (M, K, N): the planner's tile split on an H200 (C blocks a tile), session 14's probe.
SMALL_GRIDS = {(1, 896, 896): 1, (1, 4864, 896): 8, (16, 4864, 896): 8, (1, 2048, 512): 2,
               (16, 8192, 2048): 2}


@pytest.mark.parametrize("M, K, N", list(SMALL_GRIDS))
def test_small_grids_take_the_tile_split(rng, M, K, N):
    """Small decoders' projections through the planner's own grid: on an H200 the tile
    split with the C the host model picks (tests/test_stream_plan.py) from the cluster
    counts the device reports (16 x 8192 x 2048 takes C = 2 because clusters of 4 place
    only 120 blocks there: a planner that ignored the query would take C = 4). Right
    against the oracle and bitwise reproducible on any GPU."""
    case = make_case(rng, N=N, K=K, block_size=128, zp="packed", scale_dtype=np.float16)
    a = activations(rng, (M, K), np.float16)
    w = case.prepare()
    plan = ops.stream_plan(M, w, np.float16)
    if "H200" in jax.devices("gpu")[0].device_kind:
        assert plan["tile_split"] == SMALL_GRIDS[M, K, N] and plan["max_parts"] == 1, plan
    assert_fused_right_and_reproducible(a, w, None, oracle64(a, case), np.float16)



# split_k = GROUP_CLUSTER + C: stream-K's aligned split of C blocks a column group, run as
# a thread-block cluster that adds the C partials on chip (ffi/stream_plan.h, sm_90).
GROUP_CLUSTER = 1000


@pytest.mark.parametrize("M,K,N,block,zp,bias,C,dtype", [
    (1, 4096, 1536, 128, "packed", False, 4, "f16"),
    (1, 2048, 1100, 32, "packed", True, 2, "f16"),   # group rows; the last group's warps idle
    (4, 1000, 700, 64, "none", True, 3, "f16"),      # slices of unequal size, K ragged
    (8, 8192, 520, 8192, "packed", False, 8, "f16"),  # per-channel: one group of all of k
    (3, 2048, 1000, 32, "none", True, 6, "bf16"),    # groups of 32 without group rows
    (5, 4096, 700, 64, "packed", False, 7, "bf16"),
    (9, 4096, 2048, 128, "packed", True, 5, "f16"),
    (16, 2048, 1024, 32, "packed", True, 4, "f16"),  # the 16-row kernel that prescales
    (16, 4096, 1536, 64, "none", False, 2, "bf16"),
])
def test_the_group_cluster_is_the_aligned_split_bit_for_bit(rng, M, K, N, block, zp, bias, C,
                                                            dtype):
    """The group cluster adds a column group's C partials in its blocks' shared memory,
    in block order, as the reduce kernel adds the aligned split's: the same output bit
    for bit, right against the oracle, and reproducible run to run."""
    act = HALF[dtype]
    case = make_case(rng, N=N, K=K, block_size=block, zp=zp, scale_dtype=act)
    a = activations(rng, (M, K), act)
    b = activations(rng, (N,), act) if bias else None
    w = case.prepare()
    plan = ops.stream_plan(M, w, act, split_k=GROUP_CLUSTER + C)
    if float(jax.devices("gpu")[0].compute_capability) < 9:
        pytest.skip("thread-block clusters need sm_90")
    assert plan["group_cluster"] == C and plan["max_parts"] == 1, plan
    assert plan["blocks"] == -(-N // 512) * C, plan
    assert ops.stream_plan(M, w, act, split_k=C)["max_parts"] == C
    assert_fused_right_and_reproducible(a, w, b, oracle64(a, case, b), act,
                                        split_k=GROUP_CLUSTER + C)
    clustered, aligned = (np.asarray(jax.jit(lambda a, w, b, s=s: ops._bind(
        a, w, b, impl="fused", split_k=s))(a, w, b)) for s in (GROUP_CLUSTER + C, C))
    np.testing.assert_array_equal(clustered.view(np.uint16), aligned.view(np.uint16))


@pytest.mark.parametrize("M,K,N,C", [(1, 4096, 14336, 4), (1, 4096, 32000, 2), (6, 4096, 14336, 4)])
def test_the_planner_takes_the_group_cluster(rng, M, K, N, C):
    """Where the group cluster's blocks fit one an SM with few steps more than stream-K's
    (ffi/stream_plan.h), the planner's own grid is the group cluster on an H200 (the host
    model in tests/test_stream_plan.py agrees): right and reproducible on any GPU."""
    case = make_case(rng, N=N, K=K, block_size=128, zp="packed", scale_dtype=np.float16)
    a = activations(rng, (M, K), np.float16)
    b = activations(rng, (N,), np.float16)
    w = case.prepare()
    plan = ops.stream_plan(M, w, np.float16)
    if "H200" in jax.devices("gpu")[0].device_kind:
        assert plan["group_cluster"] == C and plan["max_parts"] == 1, plan
    assert_fused_right_and_reproducible(a, w, b, oracle64(a, case, b), np.float16)


@pytest.mark.parametrize("M", [1, 4, 16])
def test_streamed_gemm_reads_what_the_kernel_before_it_wrote(rng, M):
    """GEMMs back to back in one program, each one's A the previous one's output (a
    stream-K shape, so the kernel before the next GEMM is a reduce kernel, then a tile
    split shape), and weights repacked in the same jitted program as the GEMM that reads
    them: what a launch that may overlap its predecessor (a programmatic dependent
    launch) would have to get right."""
    cases = [make_case(rng, N=n, K=k, block_size=128, zp="packed", scale_dtype=np.float16)
             for n, k in [(17408, 4096), (4096, 17408), (4096, 4096)]]
    weights = [c.prepare() for c in cases]
    a = activations(rng, (M, 4096), np.float16)

    @jax.jit
    def chain(x, weights):
        outs = []
        for w in weights:
            x = jm.matmul_nbits(x, w)
            outs.append(x)
        return outs

    poison_allocator()
    outs = chain(jnp.asarray(a), weights)
    x = a
    for case, out in zip(cases, outs):
        # Each GEMM against the oracle on the A it was given (the previous output).
        assert_close(out, oracle64(x, case), np.float16)
        x = np.asarray(out)

    case = cases[0]
    made_here = jax.jit(lambda x, packed, scales, zp: jm.matmul_nbits(
        x, jm.prepare(packed, scales, zp, **case.attrs)))
    poison_allocator()
    out = made_here(jnp.asarray(a), jnp.asarray(case.packed), jnp.asarray(case.scales),
                    jnp.asarray(case.zero_points))
    assert_close(out, oracle64(a, case), np.float16)


@pytest.mark.parametrize("M, block, zp, bias", [(16, 128, "packed", False), (15, 128, "none", True),
                                               (16, 32, "packed", True), (16, 64, "packed", False)])
def test_small_m_a_in_phases(rng, M, block, zp, bias):
    """15992 x 12300 (ragged K and N) at M = 15-16: on an H200 two blocks an SM cannot
    stage all of a one-wave grid's A, so the planner stages it in phases of P steps in two
    alternating slots (ffi/stream_plan.h), with a block barrier at each phase; blocks
    hold 11-12 steps, so the last phase is short. Groups of 32 take the prescaled
    kernel (no sums), 64 two sums a step. Right against the jax.numpy oracle, and
    bitwise reproducible."""
    K, N = 15992, 12300
    case = make_case(rng, N=N, K=K, block_size=block, zp=zp, scale_dtype=np.float16)
    a = activations(rng, (M, K), np.float16)
    b = activations(rng, (N,), np.float16) if bias else None
    w = case.prepare()
    plan = ops.stream_plan(M, w, np.float16)
    phased = plan is not None and plan["a_phase_steps"] < -(-plan["total_steps"] // plan["blocks"])
    if "H200" in jax.devices("gpu")[0].device_kind:
        assert phased, plan  # tests/test_stream_plan.py models this choice on the host
    elif not phased:
        pytest.skip(f"this GPU stages all of A at once here ({plan})")
    want = jm.reference.matmul_nbits(
        jnp.asarray(a, jnp.float32), case.packed, case.scales, case.zero_points, **case.attrs,
        bias=None if b is None else jnp.asarray(b, jnp.float32))
    assert_fused_right_and_reproducible(a, w, to_jnp(b), np.asarray(want), np.float16)


@pytest.mark.parametrize("M, block, zp, bias, split_k, dtype", [
    (16, 128, "packed", True, -2, "f16"), (12, 128, "none", False, -2, "bf16"),
    (16, 32, "packed", False, -2, "f16"), (16, 64, "none", True, -2, "bf16"),
    (16, 128, "packed", False, -1, "f16"), (11, 64, "packed", True, -1, "f16")])
def test_tile_split_a_in_phases_per_warp(rng, M, block, zp, bias, split_k, dtype):
    """12100 x 1000 (ragged K and N: 95 k-steps) at M = 11-16 as a tile split of 1 or 2
    blocks a tile: a block's A (47-48 or 95 steps) does not fit its shared memory, so each
    warp stages its own 5-12 steps in phases of P in two slots of its own
    (ffi/stream_plan.h), handed over with warp-wide syncs; the warps' step counts differ
    and the last phase is short. Groups of 32 take the prescaled kernel (no sums), 64
    two sums a step. Right against the jax.numpy oracle, and bitwise reproducible."""
    act = HALF[dtype]
    K, N = 12100, 1000
    case = make_case(rng, N=N, K=K, block_size=block, zp=zp, scale_dtype=act)
    a = activations(rng, (M, K), act)
    b = activations(rng, (N,), act) if bias else None
    w = case.prepare()
    plan = ops.stream_plan(M, w, act, split_k)
    if plan is None or plan["tile_split"] != -split_k:
        pytest.skip(f"no tile split of {-split_k} on this GPU ({plan})")
    phased = plan["a_phase_steps"] < -(-plan["k_steps"] // plan["tile_split"])
    if "H200" in jax.devices("gpu")[0].device_kind:
        assert phased, plan  # tests/test_stream_plan.py models this choice on the host
    elif not phased:
        pytest.skip(f"this GPU stages all of A at once here ({plan})")
    assert_fused_right_and_reproducible(a, w, to_jnp(b), oracle64(a, case, b), act,
                                        split_k=split_k)


def test_stream_plan_reports_each_kernel(rng):
    """ops.stream_plan (what tests use to know their path) against what it must say: a
    decode GEMM streams; a forced aligned split gives that many parts; a forced tile
    split (sm_90, clusters) gives that many blocks per tile and no reduce; M = 17 and up
    is the tiled kernel's."""
    w = make_case(rng, N=4096, K=4096, block_size=128, zp="packed",
                  scale_dtype=np.float16).prepare()
    plan = ops.stream_plan(1, w, np.float16)
    assert plan is not None and plan["blocks"] > 0 and plan["k_steps"] == 4096 // 128, plan
    forced = ops.stream_plan(1, w, np.float16, 3)
    assert forced["max_parts"] == 3 and forced["tile_split"] == 0, forced
    if float(jax.devices("gpu")[0].compute_capability) >= 9:
        split = ops.stream_plan(1, w, np.float16, -4)
        assert split["tile_split"] == 4 and split["max_parts"] == 1, split
    assert ops.stream_plan(17, w, np.float16) is None


@pytest.mark.parametrize("blocks_per_tile", [2, 3, 8])
@pytest.mark.parametrize("M", [1, 11])
def test_cluster_tile_split_sizes(rng, M, blocks_per_tile):
    """Every cluster size the tile split may use (and an odd one), on a ragged shape
    whose k-steps (K = 2000: 16 steps) do not divide evenly between the blocks: some
    warps get no step at C = 3 and 8. Right, and bitwise reproducible."""
    case = make_case(rng, N=1000, K=2000, block_size=64, zp="packed", scale_dtype=np.float16)
    a = activations(rng, (M, 2000), np.float16)
    b = activations(rng, (1000,), np.float16)
    w = case.prepare()
    assert_fused_right_and_reproducible(a, w, b, oracle64(a, case, b), np.float16,
                                        split_k=-blocks_per_tile)


@pytest.mark.parametrize("bits", [2, 8])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_other_bit_widths_take_dense_path(rng, bits, dtype):
    act = HALF[dtype]
    case = make_case(rng, N=130, K=200, bits=bits, block_size=32, scale_dtype=act)
    a = activations(rng, (17, 200), act)
    out = jm.matmul_nbits(jnp.asarray(a), case.prepare(), impl="fused")
    assert_close(out, oracle64(a, case), act)


def test_float32_on_gpu_is_full_precision(rng):
    case = make_case(rng, N=520, K=1000, block_size=128, scale_dtype=np.float32)
    a = activations(rng, (65, 1000), np.float32)
    assert_close(jm.matmul_nbits(jnp.asarray(a), case.prepare()), oracle64(a, case), np.float32)


@pytest.mark.parametrize("split_k", [0, 3, 8, -1, -4])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_split_k_is_bitwise_deterministic(rng, split_k, dtype):
    act = HALF[dtype]
    case = make_case(rng, N=520, K=4100, block_size=128, scale_dtype=act)
    w = case.prepare()
    a = jnp.asarray(activations(rng, (16, 4100), act))
    fn = jax.jit(lambda a, w: ops._bind(a, w, None, impl="fused", split_k=split_k))
    first = np.asarray(fn(a, w))
    for _ in range(3):
        poison_allocator()
        np.testing.assert_array_equal(np.asarray(fn(a, w)).view(np.uint16),
                                      first.view(np.uint16))
    assert_close(first, oracle64(np.asarray(a), case), act)


# The reduce kernel has three modes, chosen by the plan's most parts a column group:
# up to 8 (the 8-load rows; PATHS' splits of 2 and 5), 9 to 16 (the 16-load rows: 9,
# the first past the 8-load rows, and 12) and more (8 threads an output, the sliced sums).
@pytest.mark.parametrize("split_k", [9, 12, 24])
@pytest.mark.parametrize("M", [5, 16])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_the_reduce_kernel_past_8_parts(rng, split_k, M, dtype):
    act = HALF[dtype]
    case = make_case(rng, N=1100, K=4100, block_size=128, scale_dtype=act)
    w = case.prepare()
    a = activations(rng, (M, 4100), act)
    b = activations(rng, (1100,), act)
    plan = ops.stream_plan(M, w, act, split_k=split_k)
    assert plan["max_parts"] == split_k and plan["tile_split"] == 0, plan
    assert_fused_right_and_reproducible(jnp.asarray(a), w, jnp.asarray(b), oracle64(a, case, b),
                                        act, split_k=split_k)


@pytest.mark.parametrize("impl", ["auto", "fused"])
def test_large_m(rng, impl):
    case = make_case(rng, N=520, K=1000, block_size=128)
    a = activations(rng, (1500, 1000), np.float16)
    out = jax.jit(jm.matmul_nbits, static_argnames="impl")(jnp.asarray(a), case.prepare(),
                                                            impl=impl)
    assert_close(out, oracle64(a, case), np.float16)


def test_rank3_and_vmap_on_gpu(rng):
    case = make_case(rng, N=130, K=200, block_size=32)
    w = case.prepare()
    a = activations(rng, (4, 3, 200), np.float16)
    fn = jax.jit(jax.vmap(lambda x: jm.matmul_nbits(x, w)))
    assert_close(fn(jnp.asarray(a)), oracle64(a, case), np.float16)


def test_empty_batch_on_gpu(rng):
    w = make_case(rng, N=37, K=200, block_size=64).prepare()
    for impl in ("auto", "fused", "dense"):
        out = jm.matmul_nbits(jnp.zeros((2, 0, 200), jnp.float16), w, impl=impl)
        assert out.shape == (2, 0, 37)


def _cuda_dequantized(w, act):
    poison_allocator()  # an element the kernel misses reads NaN, not an earlier result
    return np.asarray(ops._dequantize_cuda_weights(w, act))


def _assert_bitwise_dequantize(got, w, act):
    """Integer zero points: bitwise weights.dequantize in the dtype (code - zp exact, one
    rounding at the scale, both ways). Float zero points: bitwise weights.dequantize in
    float32, rounded once to the dtype (as the kernel computes them)."""
    assert got.shape == (w.N, w.K) and got.dtype == act
    if w.zero_point_kind == "float":
        want = np.asarray(jm.weights.dequantize(w, jnp.float32)).astype(act)
    else:
        want = np.asarray(jm.weights.dequantize(w, act))
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("N, K, block, zp", [(130, 1000, 32, "packed"), (37, 200, 16, "none"),
                                             (520, 4104, 128, "float"), (64, 72, 128, "packed"),
                                             (65, 8, 64, "packed"), (40, 72, 256, "none")])
def test_cuda_dequantization_matches_weights_dequantize(rng, N, K, block, zp, dtype):
    """The dense path's CUDA dequantization against jax_marlin.weights.dequantize: ragged N
    (a partial tile), K past a group and past a 64-k chunk (K = 200 ends inside a unit's
    second half; K = 8 and 72 with groups of 64 and 256 leave whole units of padding),
    groups of 16 to 256, every zero-point kind, bitwise."""
    act = HALF[dtype]
    w = make_case(rng, N=N, K=K, block_size=block, zp=zp, scale_dtype=act).prepare()
    _assert_bitwise_dequantize(_cuda_dequantized(w, act), w, act)


def test_cuda_dequantization_strides_over_more_tiles_than_a_grid_holds(rng):
    """More than 65535 column tiles (the grid's y limit): blocks take a second tile."""
    w = make_case(rng, N=64 * 65535 + 100, K=16, block_size=16, zp="packed",
                  scale_dtype=np.float16).prepare()
    _assert_bitwise_dequantize(_cuda_dequantized(w, jnp.float16), w, jnp.float16)


FORCE_TILED_KERNEL = -2000  # ffi/wgmma_kernel.h kForceTiledKernel
FORCE_WGMMA_REDUCE = -2001  # ffi/wgmma_kernel.h kForceWgmmaReduce

WGMMA_CASES = [(M, N, K, block, zp)
               for M in (17, 33, 64, 65, 128, 130, 256, 300, 1000)
               for N, K, block, zp in [(200, 1000, 32, "packed"), (200, 384, 64, "packed"),
                                       (520, 4100, 128, "none"),
                                       (130, 200, "channel", "float"), (130, 1056, 32, "none"),
                                       (72, 1056, 32, "float"), (136, 4096, 32, "float")]]
# (N, K) -> (splits, stages per split) where the heuristic splits k, at every M up to 300
# (ffi/wgmma_plan.h plan_wgmma_grid, ChooseSplits on an H200: 132 SMs). K = 4100, groups of
# 128: 66 stages of 64 of k, at most 66 // 8 = 8 splits; 5 column blocks (10 tiles) fill one
# wave at any S <= 16, so cost = ceil(66 / S) + 4 (+ 12 for the reduce) is least at S = 8
# (9 stages each, the last 66 - 63 = 3). K = 4096, groups of 32: 64 stages, S = 8 of 8. The
# others have at most 17 stages, so at most 2 splits: one costs stages + 4, two
# ceil(stages / 2) + 16, more. (At M = 129-256 the on-chip split may replan the short-k
# shapes as 128-row blocks with k in 2, clusters of 2 with no reduce, and at M = 113-128 as
# 64-row blocks the same way: the test then checks that grid instead.) Past 256 rows there
# are ceil(M / 256) row blocks: at M = 1000 (four, the last of 232 rows) K = 4100 has 20
# blocks and a workspace of 7 splits (2^22 floats // (1000 x 576)), and S = 6 (11 stages)
# fills one wave for 11 + 4 + 12 = 27, where S = 7 takes two, 2 x 14 + 12 = 40.
WGMMA_SPLITS = {(520, 4100): (8, 9), (136, 4096): (8, 8)}
WGMMA_SPLITS_M1000 = {(520, 4100): (6, 11), (136, 4096): (8, 8)}


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("M, N, K, block, zp", WGMMA_CASES)
def test_wgmma_kernel_against_the_oracle_and_the_tiled_kernel(rng, M, N, K, block, zp, dtype):
    """The Hopper wgmma kernel (M = 17..4096 on sm_90; docs/design/wgmma.md): block rows of
    32, 64, 128 and 256 with M across each edge, two and four 256-row blocks (M = 300, and
    1000 with a last block of 232 rows), ragged N (an idle second warpgroup at N = 130 and
    520, a tile of 8 real columns at N = 72), K past a stage and a group edge, a last stage
    of two units (K = 1056, groups of 32: 66 units), groups of 32 (two a stage) with every
    zero-point kind, 128 and per-channel, a bias. K = 4100 and 4096 over a few column blocks
    take the k-split (8 splits by the heuristic, 6 for K = 4100 at M = 1000; 4100's last
    split has 3 stages at 8, fewer than the ring's prefetch), the others one split, or at
    M = 129-256 the on-chip split's 128-row grid (at M = 113-128 its 64-row one);
    ops.wgmma_plan asserts the grid (rows, blocks, splits). Against the oracle and bitwise
    reproducible; the tiled kernel, forced on the same operands, against the oracle too
    (both paths stay reachable).
    """
    act = HALF[dtype]
    if block == "channel":
        block = 1 << (K - 1).bit_length()
    case = make_case(rng, N=N, K=K, block_size=block, zp=zp, scale_dtype=act)
    a = activations(rng, (M, K), act)
    b = activations(rng, (N,), act)
    w = case.prepare()
    if float(jax.devices("gpu")[0].compute_capability) != 9.0 or (
            90 not in jm.build_info()["cuda_architectures"]):
        pytest.skip("the wgmma kernel is sm_90a code: a 9.0 GPU and a build for 90")
    assert ops.planned_kernel(M, w, act) == "wgmma"  # never a silent fallback on 9.0
    assert ops.planned_kernel(M, w, act, FORCE_TILED_KERNEL) == "tiled"
    plan = ops.wgmma_plan(M, w, act)
    k_pad = -(-K // block) * block
    stages = -(-k_pad // 64)
    splits, per_split = (WGMMA_SPLITS_M1000 if M == 1000 else WGMMA_SPLITS).get((N, K),
                                                                                (1, stages))
    assert plan is not None, plan
    rows = next((r for r in (32, 64, 128, 256) if M <= r), 256)
    if plan["cluster_k"]:  # the on-chip split (ffi/wgmma_plan.h): k in 2, maybe half the rows
        halved = {256: (256, 128),
                  128: (128, 64) if M >= HALVES64_MIN_M else (128,)}.get(rows, (rows,))
        assert plan["splits"] == 2 and plan["rows"] in halved, plan
        assert plan["n_blocks"] == -(-N // 128), plan
        assert plan["m_blocks"] == -(-M // plan["rows"]), plan
        assert plan["stages_per_split"] == -(-stages // 2), plan
    else:
        assert plan["rows"] == rows, plan
        assert (plan["n_blocks"], plan["m_blocks"]) == (-(-N // 128), -(-M // rows)), plan
        assert (plan["splits"], plan["stages_per_split"]) == (splits, per_split), plan
    assert 0 < plan["smem_bytes"] <= 227 * 1024, plan
    assert ops.wgmma_plan(M, w, act, FORCE_TILED_KERNEL) is None
    want = oracle64(a, case, b)
    assert_fused_right_and_reproducible(jnp.asarray(a), w, to_jnp(b), want, act)
    tiled = jax.jit(lambda a, w, b: ops._bind(a, w, b, impl="fused", split_k=FORCE_TILED_KERNEL))
    assert_close(np.asarray(tiled(jnp.asarray(a), w, to_jnp(b))), want, act)


def _cluster_case(rng, M, N, K, act):
    """A group-128 case whose wgmma plan is the on-chip k-split, and its plan: on an H200
    every caller's shape must plan it (a default build: the feature must not go quietly
    off); elsewhere the test skips where the plan has none."""
    case = make_case(rng, N=N, K=K, block_size=128, zp="packed", scale_dtype=act)
    w = case.prepare()
    plan = ops.wgmma_plan(M, w, act)
    if "H200" in jax.devices("gpu")[0].device_kind:
        assert plan is not None and plan["cluster_k"], plan
    if plan is None or not plan["cluster_k"]:
        pytest.skip(f"no k-split cluster planned here: {plan}")
    return case, w, plan


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
# Where a cluster is planned on an H200 (tests/test_wgmma_plan.py's planner, the H200's
# limits): 256-row blocks (the first three, 200 x 8000 with an idle second warpgroup in its
# last block), 128-row blocks (100 x 8000 x 2056, and the 4096-column shapes replanned from
# 256 rows; with -DJAX_MARLIN_WGMMA_MAX_ROWS=128 all of them), 64- and 32-row blocks two an
# SM (50 x 14300 and 20 x 14336: 224 blocks, clusters of 2 sharing SMs), and 64-row blocks
# replanned from 128 rows (the last two: M = 113-128 on ~4096 columns, two row blocks, the
# second ragged: 56 and 49 rows).
@pytest.mark.parametrize("M, N, K", [(256, 8192, 4096), (200, 8000, 4100), (150, 6100, 8192),
                                     (100, 8000, 2056), (256, 4096, 4096), (200, 4000, 4100),
                                     (50, 14300, 2056), (20, 14336, 4104), (120, 4000, 4100),
                                     (113, 4100, 2056)])
def test_wgmma_k_split_in_clusters(rng, M, N, K, dtype):
    """A k-split in two runs as clusters of 2 blocks that add their halves through
    distributed shared memory (ffi/wgmma_plan.h; ragged M, N and K, a bias): against the
    oracle and bitwise reproducible."""
    act = HALF[dtype]
    case, w, plan = _cluster_case(rng, M, N, K, act)
    assert plan["splits"] == 2, plan
    a = activations(rng, (M, K), act)
    b = activations(rng, (N,), act)
    assert_fused_right_and_reproducible(jnp.asarray(a), w, to_jnp(b), oracle64(a, case, b), act)


@pytest.mark.parametrize("M, N, K, act", [(200, 8000, 4100, BF16), (256, 4096, 4096, np.float16),
                                          (20, 12000, 2056, np.float16),
                                          (120, 4000, 4100, BF16)])
def test_wgmma_cluster_exchange_bitwise_the_same_back_to_back(rng, M, N, K, act):
    """The on-chip split's exchange run 48 times back to back on one stream: every output
    bitwise the same and right. compute-sanitizer's racecheck reports write-write hazards
    between a block's ring copies (cp.async) and its peer's stores into that ring after
    the cluster barrier (session 19: 0 to 16 a run of these shapes, varying between
    identical runs, and the same with a __syncthreads before the barrier), as if it did
    not order the copies' completion (cp.async.wait_group 0 in every thread, then
    barrier.cluster's release and acquire) before the peer's stores. A store that a late
    copy overwrote would read as a wrong, varying output here."""
    case, w, _ = _cluster_case(rng, M, N, K, act)
    a = activations(rng, (M, K), act)
    b = activations(rng, (N,), act)
    fn = jax.jit(lambda a, w, b: ops._bind(a, w, b, impl="fused", split_k=0))
    a_dev, b_dev = jnp.asarray(a), jnp.asarray(b)
    outs = [fn(a_dev, w, b_dev) for _ in range(48)]  # dispatched without waiting: back to back
    first = np.asarray(outs[0])
    assert_close(first, oracle64(a, case, b), act)
    for i, y in enumerate(outs[1:], 1):
        np.testing.assert_array_equal(np.asarray(y).view(np.uint16), first.view(np.uint16),
                                      err_msg=f"run {i}")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("M, N, K", [(256, 8192, 4096), (200, 8000, 4100), (100, 8000, 2056),
                                     (256, 4096, 4096), (50, 14300, 2056), (20, 14336, 4104),
                                     (120, 4000, 4100)])
def test_wgmma_on_chip_split_has_the_reduce_kernels_bits(rng, M, N, K, dtype):
    """The on-chip split adds split 0's half and split 1's in the reduce kernel's order,
    bias last, one rounding: on the same grid (FORCE_WGMMA_REDUCE keeps the plan and sends
    the partials through the workspace and the reduce kernel) the outputs are bitwise
    equal, and right."""
    act = HALF[dtype]
    case, w, plan = _cluster_case(rng, M, N, K, act)
    assert ops.wgmma_plan(M, w, act, FORCE_WGMMA_REDUCE) == dict(plan, cluster_k=False)
    assert ops.planned_kernel(M, w, act, FORCE_WGMMA_REDUCE) == "wgmma"
    a = jnp.asarray(activations(rng, (M, K), act))
    b = to_jnp(activations(rng, (N,), act))

    def run(split_k):
        return np.asarray(jax.jit(lambda a, w, b: ops._bind(
            a, w, b, impl="fused", split_k=split_k))(a, w, b))

    on_chip, reduced = run(0), run(FORCE_WGMMA_REDUCE)
    assert_close(on_chip, oracle64(np.asarray(a), case, np.asarray(b)), act)
    np.testing.assert_array_equal(on_chip.view(np.uint16), reduced.view(np.uint16))


FORCE_WGMMA_CP_ASYNC = -2002  # ffi/wgmma_kernel.h kForceWgmmaCpAsync

# The producer warpgroup's edges (ffi/wgmma_kernel.cu wgmma_producer): groups of 32 (two a
# stage; K = 1056: 33 groups, a last stage of two units whose second group slot the producer
# zeroes; K = 1080: ragged, 34 groups, whole stages), an odd count of
# 64-column tiles (N = 130, 520: a block of one tile, whose second warpgroup's slot is never
# filled), per-channel groups with a last stage wholly past K (K = 136, k_pad = 256: the TMA
# box of k = 192..255 is all zero fill), every zero-point kind, and the workspace k-split
# (K = 4100 and 4096 over few column blocks: 8 splits, the last of 3 stages), and exactly
# one pass over the 256-row ring (K = 384: 6 stages, 6 slots; a reviewer's case).
PRODUCER_SHAPES = [(200, 1000, 32, "packed"), (130, 1056, 32, "none"), (72, 1080, 32, "float"),
                   (72, 136, "channel", "packed"), (520, 4100, 128, "none"),
                   (136, 4096, 32, "float"), (200, 384, 64, "packed")]


def _producer_build():
    """Skips unless the producer mainloop can run here: a 9.0 GPU and a build with it
    (build_info()["wgmma_producer"]: the default; -DJAX_MARLIN_WGMMA_PRODUCER=0 leaves it
    out)."""
    info = jm.build_info()
    if float(jax.devices("gpu")[0].compute_capability) != 9.0 or (
            90 not in info["cuda_architectures"]):
        pytest.skip("the wgmma kernel is sm_90a code: a 9.0 GPU and a build for 90")
    if info.get("wgmma_producer", 0) != 1:
        pytest.skip("a build without the wgmma producer (-DJAX_MARLIN_WGMMA_PRODUCER=0)")


def _assert_producer_has_the_cp_async_bits(rng, M, case, w, act, reduce_too=False):
    """The producer warpgroup's mainloop (256-row blocks' default) against the
    cp.async ring's (FORCE_WGMMA_CP_ASYNC) on the same grid: bitwise equal (same A
    registers, B bytes and wgmma order; the bytes that differ are codes that meet zero
    scales and zero activations, or activation rows past the tail map's box, which feed
    only output rows past M), reproducible, and right. The plans say which mainloop each runs (the planner's and the
    launch's one decision, ffi/wgmma_kernel.cu launched_plan), so an override that did not
    reach the launch would fail here rather than compare the producer with itself."""
    N, K = case.N, case.K
    plan = ops.wgmma_plan(M, w, act)
    assert plan is not None, plan
    assert plan["producer"] is (plan["rows"] == WGMMA_PRODUCER_ROWS), plan
    if plan["rows"] != 256:  # M = 129-256 may plan 128-row blocks in clusters (no producer)
        pytest.skip(f"a {plan['rows']}-row plan: no producer")
    if not plan["producer"]:
        pytest.skip(f"M = {M}, K = {K}, groups of {case.block_size}: the cp.async ring's plan")
    assert ops.wgmma_plan(M, w, act, FORCE_WGMMA_CP_ASYNC) == dict(plan, producer=False,
                                                                  stream_k_blocks=0)
    assert ops.planned_kernel(M, w, act, FORCE_WGMMA_CP_ASYNC) == "wgmma"
    a = activations(rng, (M, K), act)
    b = activations(rng, (N,), act)
    a_dev, b_dev = jnp.asarray(a), to_jnp(b)

    def run(split_k):
        return np.asarray(jax.jit(lambda a, w, b: ops._bind(
            a, w, b, impl="fused", split_k=split_k))(a_dev, w, b_dev))

    producer, again, cp_async = run(0), run(0), run(FORCE_WGMMA_CP_ASYNC)
    assert_close(producer, oracle64(a, case, b), act)
    np.testing.assert_array_equal(again.view(np.uint16), producer.view(np.uint16),
                                  err_msg="producer, run twice")
    np.testing.assert_array_equal(producer.view(np.uint16), cp_async.view(np.uint16),
                                  err_msg=f"producer vs cp.async, plan {plan}")
    if reduce_too:  # the producer's k halves through the workspace and the reduce kernel
        np.testing.assert_array_equal(run(FORCE_WGMMA_REDUCE).view(np.uint16),
                                      producer.view(np.uint16), err_msg="producer + reduce")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("M", [200, 256, 257, 300, 520, 1024, 2049, 4096])
@pytest.mark.parametrize("N, K, block, zp", PRODUCER_SHAPES)
def test_wgmma_producer_has_the_cp_async_bits(rng, M, N, K, block, zp, dtype):
    """The producer warpgroup (256-row blocks) against the cp.async mainloop, in one
    process: one 256-row block (M = 200, 256, where the plan keeps 256 rows), two to four
    of them along the grid's rows (M = 1024; M = 257, 300 and 520 ragged, their last blocks
    of 1, 44 and 8 rows read through the tail map's boxes of 8, 48 and 8 rows), nine and
    sixteen past 1024 (M = 2049, its last block of 1 row, and 4096: kWgmmaMaxM), the edges
    of PRODUCER_SHAPES."""
    _producer_build()
    act = HALF[dtype]
    if block == "channel":
        block = 1 << (K - 1).bit_length()
    case = make_case(rng, N=N, K=K, block_size=block, zp=zp, scale_dtype=act)
    _assert_producer_has_the_cp_async_bits(rng, M, case, case.prepare(), act)


FORCE_WGMMA_NO_STREAM_K = -2003  # ffi/wgmma_kernel.h kForceWgmmaNoStreamK
FORCE_WGMMA_STREAM_K = -2004  # ffi/wgmma_kernel.h kForceWgmmaStreamK

# Grids the H200 runs stream-K (tests/test_wgmma_plan.py models the choice). N = 16936: 265
# 64-column tiles, so the last tile pair holds one (its second warpgroup's outputs are
# never stored, its partial still published and added): 133 tiles of 32 stages at M = 256,
# all stream-K, each cut in two; 266 at M = 300 (the second row block's 44 rows through the
# tail map), a wave whole and 134 stream-K; 399 at M = 520 (three row blocks, 8 rows in the
# last), two waves whole. 224 tiles of 33 stages with groups of 32 (the last stage's second
# group slot zeroed) and of 64 stages with float zero points and no bias: a wave whole and
# 92 tiles cut up to three ways.
STREAM_K_SHAPES = [(256, 16936, 2048, 128, "packed", True), (300, 16936, 2048, 128, "none", True),
                   (520, 16936, 2048, 128, "packed", True),
                   (200, 28672, 2080, 32, "packed", True), (256, 28672, 4096, 64, "float", False)]


@pytest.mark.parametrize("M, K, N", [(256, 8192, 28672), (256, 4096, 4096), (768, 28672, 8192),
                                     (768, 8192, 28672)])
def test_the_workspace_holds_stream_k_area_only_where_the_plan_runs_it(M, K, N):
    """The lowered call's fp32 workspace is the split-K floats, plus stream-K's 21 MB area
    exactly where this GPU's plan runs stream-K (ops._workspace_floats). On an H200:
    256 x 8192 x 28672 and 768 x 8192 x 28672 stream-K; 256 x 4096 x 4096 the 128-row
    cluster plan and 768 x 28672 x 8192 the grid (the L2 rule), neither holding the area.
    The products stay right either way (the other GPU tests run these plans)."""
    _producer_build()
    q = jm.quantize(jnp.zeros((K, N), jnp.float32), block_size=128)  # only the shapes matter
    w = jm.prepare(q.packed, q.scales.astype(jnp.float16), q.zero_points, K=K, N=N,
                   block_size=128)
    plan = ops.wgmma_plan(M, w, jnp.float16)
    if "H200" in jax.devices("gpu")[0].device_kind:
        assert (plan["stream_k_blocks"] > 0) == (N == 28672), plan
    text = jax.jit(lambda a, w: jm.matmul_nbits(a, w)).lower(
        jax.ShapeDtypeStruct((M, K), jnp.float16), w).as_text()
    line = next(l for l in text.splitlines() if "stablehlo.custom_call" in l)
    workspace = int(re.search(r"tensor<(\d+)xf32>", line).group(1))
    split = _shapes.split_k_workspace_floats(M, _layout.n_pad(N))
    area = _shapes.STREAM_K_WORKSPACE_FLOATS if plan["stream_k_blocks"] else 0
    assert split <= workspace - area < split + 64 and f"stream_k_floats = {area}" in line, (
        workspace, area, line)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("M, N, K, block, with_bias", [
    (256, 4096, 4096, 128, True),  # 32 tiles of 64 stages, each cut 4-5 ways
    (200, 2050, 1056, 32, False),  # 17 tile pairs (the last one tile) of 17 stages, run 2-3:
                                   # up to 9 holders a tile; groups of 32, N % 8 = 2
])
def test_wgmma_stream_k_forced_under_one_wave(rng, M, N, K, block, with_bias, dtype):
    """kForceWgmmaStreamK: a 256-row plan run stream-K with no more tiles than blocks (no
    whole wave; every tile cut among several blocks, its owner adding all their partials),
    which the planner does not take by itself (the probe times it against the cluster
    plan): right against the oracle, and bitwise the same run to run with another product
    between."""
    _producer_build()
    act = HALF[dtype]
    case = make_case(rng, N=N, K=K, block_size=block, zp="packed", scale_dtype=act)
    w = case.prepare()
    plan = ops.wgmma_plan(M, w, act, FORCE_WGMMA_STREAM_K)
    assert plan["producer"] and plan["splits"] == 1 and not plan["cluster_k"], plan
    assert 0 < plan["n_blocks"] * plan["m_blocks"] <= plan["stream_k_blocks"], plan
    a, other = activations(rng, (M, K), act), activations(rng, (M, K), act)
    b = activations(rng, (N,), act) if with_bias else None

    def run(a):
        return np.asarray(jax.jit(lambda a, w, b: ops._bind(
            a, w, b, impl="fused", split_k=FORCE_WGMMA_STREAM_K))(
                jnp.asarray(a), w, None if b is None else to_jnp(b)))

    streamed, between, again = run(a), run(other), run(a)
    assert_close(streamed, oracle64(a, case, b), act)
    assert_close(between, oracle64(other, case, b), act)
    np.testing.assert_array_equal(again.view(np.uint16), streamed.view(np.uint16),
                                  err_msg="forced stream-K, run twice with another between")


def _stream_k_whole_tiles(tiles, stages, blocks):
    """The tiles stream-K leaves whole, ffi/wgmma_stream_k.h's schedule written out again:
    the data-parallel waves (the last joins the rest where that is under half a wave) and
    the stream-K tiles that one run holds from stage 0 to the end."""
    waves = tiles // blocks
    if waves and 2 * (tiles % blocks) < blocks:
        waves -= 1
    dp = waves * blocks
    run, longer = divmod((tiles - dp) * stages, blocks)

    def block_of(i):
        in_longer = longer * (run + 1)
        return i // (run + 1) if i < in_longer else longer + (i - in_longer) // run

    return set(range(dp)) | {dp + k for k in range(tiles - dp)
                             if block_of(k * stages) == block_of((k + 1) * stages - 1)}


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("M, N, K, block, zp, with_bias", STREAM_K_SHAPES)
def test_wgmma_stream_k(rng, M, N, K, block, zp, with_bias, dtype):
    """Stream-K (the producer's 256-row grids with a part-empty last wave, on one
    persistent block an SM): right against the oracle; bitwise the same run to run (a cut
    tile's owner adds its peers' partials in block order, whatever order they land in),
    with another product between the two runs, so that stale partials or flags left in the
    workspace would show; every tile it leaves whole bitwise that of one block a tile
    (FORCE_WGMMA_NO_STREAM_K: the same stages in the same order), so each whole tile went
    to the right place. The plans say which grid each call ran."""
    _producer_build()
    act = HALF[dtype]
    case = make_case(rng, N=N, K=K, block_size=block, zp=zp, scale_dtype=act)
    w = case.prepare()
    plan = ops.wgmma_plan(M, w, act)
    assert plan["producer"] and plan["stream_k_blocks"] > 0, plan
    assert ops.wgmma_plan(M, w, act, FORCE_WGMMA_NO_STREAM_K) == dict(plan, stream_k_blocks=0)
    a, other = activations(rng, (M, K), act), activations(rng, (M, K), act)
    b = activations(rng, (N,), act) if with_bias else None

    def run(a, split_k=0):
        return np.asarray(jax.jit(lambda a, w, b: ops._bind(
            a, w, b, impl="fused", split_k=split_k))(jnp.asarray(a), w,
                                                     None if b is None else to_jnp(b)))

    streamed, between, again = run(a), run(other), run(a)
    grid = run(a, FORCE_WGMMA_NO_STREAM_K)
    assert_close(streamed, oracle64(a, case, b), act)
    assert_close(between, oracle64(other, case, b), act)
    assert_close(grid, oracle64(a, case, b), act)
    np.testing.assert_array_equal(again.view(np.uint16), streamed.view(np.uint16),
                                  err_msg="stream-K, run twice with another product between")
    tiles = plan["n_blocks"] * plan["m_blocks"]
    whole = _stream_k_whole_tiles(tiles, plan["stages_per_split"], plan["stream_k_blocks"])
    assert len(whole) < tiles, "no tile cut: the fix-up went untested"
    for t in whole:
        x, y = divmod(t, plan["m_blocks"])
        rows, cols = slice(256 * y, 256 * (y + 1)), slice(128 * x, 128 * (x + 1))
        np.testing.assert_array_equal(streamed[rows, cols].view(np.uint16),
                                      grid[rows, cols].view(np.uint16),
                                      err_msg=f"whole tile {t} (pair {x}, row block {y})")


def test_wgmma_producer_plans_only_what_it_handles(rng):
    """Every 256-row grid plans the producer, ragged last row blocks and odd counts of
    groups of 32 included: the launched plan, after every run-time check (tensor-map
    encoder, register budget)."""
    _producer_build()
    for K, block in [(512, 128), (1056, 32)]:
        case = make_case(rng, N=256, K=K, block_size=block, zp="packed", scale_dtype=np.float16)
        w = case.prepare()
        for M in [200, 257, 300, 383, 384, 513, 640, 1000, 1024, 1025, 4096]:
            plan = ops.wgmma_plan(M, w, jnp.float16)
            assert plan["rows"] == 256 or M <= 256, (M, plan)
            want = plan["rows"] == WGMMA_PRODUCER_ROWS
            assert plan["producer"] is want, (K, M, plan)


@pytest.mark.parametrize("M", [300, 384, 512])
def test_wgmma_group_past_the_end_meets_zero_scales(rng, M):
    """Groups of 32 with an odd count (K = 1056: the last 64-k stage holds two units of 16,
    its second group slot past k_blocks): the units past k_pad must dequantize to exactly
    0, whatever codes a ring slot still holds. With every earlier code 0, the last group's
    scale 20000 (fp16) and zero point 8, a stale code 0 under that group's words would be
    -160000, -Inf, and Inf x the zero activations there NaN, where the weights are finite
    (the last group's codes are all 8: zeros); the producer zeroes that slot (it copied
    group k_blocks - 1 there before). The plan (the producer at every 256-row plan), the
    planned kernel (M = 300 through the tail map, 384 and 512 without) and the cp.async
    ring, each against the oracle and bitwise against each other (fp16 only: bf16's range
    holds -160000)."""
    N, K, block = 256, 1056, 32
    kb = K // block
    codes = np.zeros((N, kb * block), np.uint8)
    codes[:, (kb - 1) * block:] = 8
    scales = np.full((N, kb), 1 / 64, np.float16)
    scales[:, -1] = 20000
    zero_points = np_pack(np.full((N, kb + 1), 8, np.uint8), 4)
    case = Case(np_pack(codes, 4).reshape(N, kb, block // 2), scales, zero_points, K, N, 4,
                block)
    w = case.prepare()
    info = jm.build_info()
    if float(jax.devices("gpu")[0].compute_capability) == 9.0 and (
            90 in info["cuda_architectures"]):
        plan = ops.wgmma_plan(M, w, jnp.float16)
        assert plan is not None and plan["rows"] == 256, plan
        if info.get("wgmma_producer"):
            assert plan["producer"] is (plan["rows"] == WGMMA_PRODUCER_ROWS), plan
    a = activations(rng, (M, K), np.float16)
    a_dev = jnp.asarray(a)

    def run(split_k):
        return np.asarray(jax.jit(lambda a, w: ops._bind(
            a, w, None, impl="fused", split_k=split_k))(a_dev, w))

    planned, cp_async = run(0), run(FORCE_WGMMA_CP_ASYNC)
    assert_close(planned, oracle64(a, case), np.float16)
    assert_close(cp_async, oracle64(a, case), np.float16)
    np.testing.assert_array_equal(planned.view(np.uint16), cp_async.view(np.uint16))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("M, N, K", [(200, 8000, 4104), (256, 8192, 8192)])
def test_wgmma_producer_in_clusters_has_the_cp_async_bits(rng, M, N, K, dtype):
    """The on-chip split's clusters with the producer warpgroup (it takes part in the
    cluster barrier; the peer pushes its half into this ring only once the ring is quiet):
    bitwise the cp.async mainloop's, and the reduce kernel's (FORCE_WGMMA_REDUCE), right.
    Both shapes plan 256-row blocks in clusters on an H200 (session 22's probe, and
    tests/test_wgmma_plan.py's 256 x 8192 x 8192)."""
    _producer_build()
    act = HALF[dtype]
    case, w, plan = _cluster_case(rng, M, N, K, act)
    if "H200" in jax.devices("gpu")[0].device_kind:
        assert plan["rows"] == 256 and plan["producer"], plan
    _assert_producer_has_the_cp_async_bits(rng, M, case, w, act, reduce_too=True)


def test_wgmma_plan_exactly_where_the_wgmma_kernel_runs(rng):
    """ops.wgmma_plan gives a grid exactly where planned_kernel says "wgmma" (any GPU: None
    off sm_90 or without the sm_90a build), never for a split_k override."""
    w = make_case(rng, N=200, K=512, block_size=64, zp="packed",
                  scale_dtype=np.float16).prepare()
    for M in (1, 16, 17, 256, 257, 1024, 1025, ops.WGMMA_MAX_M, ops.WGMMA_MAX_M + 1):
        for split_k in (0, 2, FORCE_TILED_KERNEL):
            plan = ops.wgmma_plan(M, w, np.float16, split_k)
            assert (plan is not None) == (ops.planned_kernel(M, w, np.float16, split_k) ==
                                          "wgmma"), (M, split_k, plan)
            assert plan is None or split_k == 0


@pytest.mark.parametrize("M, block, fused", [(ops.WGMMA_MAX_M, 128, True),
                                              (ops.WGMMA_MAX_M, 16, False),
                                              (ops.WGMMA_MAX_M + 1, 128, False)])
def test_auto_takes_wgmma_to_its_last_row_on_hopper(rng, M, block, fused):
    """impl="auto" on a 9.0 GPU: the wgmma kernel's whole range (it beat the dense path at
    M = 256, NOTES session 7); groups of 16 (no wgmma) and M past it stay dense; right
    either way."""
    if float(jax.devices("gpu")[0].compute_capability) != 9.0 or (
            90 not in jm.build_info()["cuda_architectures"]):
        pytest.skip("the wgmma kernel is sm_90a code: a 9.0 GPU and a build for 90")
    case = make_case(rng, N=200, K=512, block_size=block, zp="packed", scale_dtype=np.float16)
    w = case.prepare()
    a = activations(rng, (M, 512), np.float16)
    fn = jax.jit(lambda a, w: jm.matmul_nbits(a, w))
    text = fn.lower(jnp.asarray(a), w).as_text()
    assert ("jax_marlin_matmul_nbits_cuda" in text) == fused
    assert_close(np.asarray(fn(jnp.asarray(a), w)), oracle64(a, case, None), np.float16)


def test_layer_stack_under_jit(rng):
    """32 layers in one jitted program (XLA may run it as a CUDA graph), run twice."""
    layers, width, M = 32, 512, 8
    cases = [make_case(rng, N=width, K=width, block_size=128, zp=zp, scale_dtype=np.float16)
             for zp in ["packed", "none", "float", "packed"] * (layers // 4)]
    weights = [c.prepare() for c in cases]
    a = activations(rng, (M, width), np.float16)

    def normalize(x):
        return x / jnp.sqrt(jnp.mean(jnp.square(x.astype(jnp.float32)), -1, keepdims=True)
                            ).astype(x.dtype)

    @jax.jit
    def stack(x, weights):
        for w in weights:
            x = normalize(jax.nn.relu(jm.matmul_nbits(x, w)) + x)
        return x

    first = np.asarray(stack(jnp.asarray(a), weights))
    second = np.asarray(stack(jnp.asarray(a), weights))
    np.testing.assert_array_equal(first.view(np.uint16), second.view(np.uint16))

    x = a.astype(np.float64)
    for c in cases:
        x = np.maximum(x @ c.weight64().T, 0) + x
        x = x / np.sqrt(np.mean(x * x, -1, keepdims=True))
    # 32 layers of fp16 roundings compound: a looser bound than one layer's 2e-3.
    assert_close(first, x, np.float16, tol=2e-2)
