"""The wgmma kernel's grid planner (ffi/wgmma_plan.h), on the host.

A wrong plan shows as partials written past the workspace, a launch over the
shared-memory limit or an empty k-split, on shapes and devices the GPU tests do
not reach. So it is compiled here with the host compiler and checked against the
workspace the lowering allocates, the device limits, an independent model of the
split heuristic, and the grids Nsight Compute showed on the H200.
"""

import collections
import itertools
import pathlib
import shutil
import subprocess

import pytest
from conftest import WGMMA_PRODUCER_ROWS, header_constant, header_define, host_planner

from jax_marlin import _layout, _shapes

# (SMs, opt-in shared memory per block): Hopper parts only, the kernel is sm_90a.
# "many": more SMs than stream-K's partial slots (kStreamKMaxBlocks), none such yet.
DEVICES = {"h200": (132, 232448), "h100_pcie": (114, 232448), "small": (16, 232448),
           "many": (200, 232448)}
SHAPES = [(8192, 28672), (28672, 8192), (4096, 4096), (4096, 14336), (14336, 4096),
          (1000, 200), (4100, 520), (4096, 136), (72, 37), (65536, 131072)]
MS = [17, 32, 33, 64, 65, 128, 129, 200, 256, 257, 300, 383, 384, 512, 639, 640, 1000, 1024,
      1025, 2048, 2049, 4096]
GROUPS = [32, 64, 128, "channel"]


FILL = header_constant("wgmma_plan.h", "kWgFillStages")
REDUCE = header_constant("wgmma_plan.h", "kWgReduceStages")
MIN_STAGES = header_constant("wgmma_plan.h", "kWgMinStagesPerSplit")
MAX_SPLITS = header_constant("wgmma_plan.h", "kWgMaxSplits")
HALVES64_MIN_M = header_constant("wgmma_plan.h", "kWgHalves64MinM")
SMEM_LIMIT = 227 * 1024
# JAX_MARLIN_WGMMA_PRODUCER's default (the host planner is compiled without -D for it).
PRODUCER = header_define("wgmma_plan.h", "JAX_MARLIN_WGMMA_PRODUCER")


@pytest.fixture(scope="module")
def planner(tmp_path_factory):
    return host_planner(tmp_path_factory, "wgmma_plan_check.cc")


def _model_splits(base_blocks, stages, max_splits, slots):
    """The cost model written out again: waves x (stages a split + fill) + the reduce."""
    best, best_cost = 1, None
    for s in range(1, max_splits + 1):
        per = -(-stages // s)
        if -(-stages // per) != s:
            continue
        cost = -(-base_blocks * s // slots) * (per + FILL) + (REDUCE if s > 1 else 0)
        if best_cost is None or cost < best_cost:
            best, best_cost = s, cost
    return best


def _cases():
    for device, (K, N), M, group in itertools.product(DEVICES, SHAPES, MS, GROUPS):
        block = 1 << (K - 1).bit_length() if group == "channel" else group
        block = max(block, 32)
        workspace = _shapes.split_k_workspace_floats(M, _layout.n_pad(N))
        yield device, (M, K, N, block, workspace, *DEVICES[device])


def test_planned_grids_fit_the_workspace_the_device_and_the_model(planner):
    cases = list(_cases())
    for (device, case), got in zip(cases, planner([c for _, c in cases])):
        M, K, N, block, workspace, sms, _ = case
        rows, n_blocks, m_blocks, splits, per_split, smem, cluster_k, producer, stream_k = got
        assert not stream_k, (case, got)  # no stream-K workspace given: none planned
        assert not cluster_k, (case, got)  # no cluster counts given: none planned
        # The producer warpgroup feeds every 256-row block (a ragged last one through its
        # own tensor map, a group slot past k_blocks zeroed), no smaller one.
        assert producer == bool(PRODUCER and rows == WGMMA_PRODUCER_ROWS), (
            case, got)
        n_pad = _layout.n_pad(N)
        stages = -(-(-(-K // block) * block // 16) // 4)
        # The smallest wgmma N that holds M, else 256-row blocks; two tiles a block.
        assert rows == min([r for r in (32, 64, 128) if r >= M] + [256]), (case, got)
        assert m_blocks == -(-M // rows) and n_blocks == -(-(n_pad // 64) // 2), (case, got)
        # The ring (stages of rows x 128 B + 5 KB, + 1 KB of alignment) fits the block:
        # 8 stages up to 128 rows (a stage's shared loads issued a stage early, two stages
        # a barrier), 6 at 256.
        ring = 8 if rows <= 128 else 6
        # + 256 B at 256 rows in a build with the producer warpgroup: its full/empty
        # mbarriers (kBarrierBytes).
        barriers = 256 if rows == 256 and PRODUCER else 0
        assert smem == ring * (rows * 128 + 5120) + 1024 + barriers <= SMEM_LIMIT, (case, got)
        # No empty split, every stage in one, the partials inside the workspace.
        assert per_split * splits >= stages > per_split * (splits - 1), (case, got)
        if splits > 1:
            assert splits * M * n_pad <= workspace and per_split >= MIN_STAGES, (case, got)
        max_splits = min(workspace // (M * n_pad), stages // MIN_STAGES, MAX_SPLITS)
        slots = sms * (2 if rows <= 64 else 1)
        want = (_model_splits(n_blocks * m_blocks, stages, max_splits, slots)
                if max_splits > 1 else 1)
        assert splits == want, (case, got, want)


@pytest.mark.parametrize("K, N, M, grid", [
    (8192, 28672, 64, (224, 1, 1)),  # session 7 call 5: 224 blocks, no split
    (28672, 8192, 64, (64, 1, 4)),   # session 7 call 5: 64 x 1 x 4 and the reduce kernel
])
def test_h200_grids_are_the_ones_nsight_compute_showed(planner, K, N, M, grid):
    workspace = _shapes.split_k_workspace_floats(M, _layout.n_pad(N))
    (got,) = planner([(M, K, N, 128, workspace, *DEVICES["h200"])])
    assert (got[1], got[2], got[3]) == grid


H200_CLUSTER_BLOCKS = "132,120,120"  # clusters of 2, 4, 8 placed at once (QueryClusterBlocks)
H200_L2_BYTES = 60 * 1024 * 1024  # cudaDevAttrL2CacheSize


def _model_us(rows, blocks, per_split, splits, cluster_k, slots, M, n_pad):
    """The planner's time model written out again: waves x (stages + 10) x a stage's
    time (0.33 us at 64 rows, else 0.178 + 0.00208 rows), plus an on-chip exchange of
    0.3 us or a reduce of 0.95 us and its bytes ((4 splits + 2) M n_pad) at 4.2 TB/s."""
    waves = -(-blocks // slots)
    stage = 0.33 if rows <= 64 else 0.178 + 0.00208 * rows
    reduce = 0.95 + (4 * splits + 2) * M * n_pad / 4.2e6
    extra = (0.3 if cluster_k else reduce) if splits > 1 else 0.0
    return waves * (per_split + 10) * stage + extra


def test_the_on_chip_split(planner, tmp_path_factory):
    """Where clusters of 2 place all its blocks at once, a k-split in two runs as clusters
    (no reduce), and M = 129-256 takes 128-row blocks with k in 2 on chip where the time
    model says they beat 256-row blocks (M = 113-128: 64-row blocks against 128-row ones,
    where every block still has an SM); a -DJAX_MARLIN_WGMMA_CLUSTER_K=0 build plans no
    cluster. The H200's measured cases (the kernels alone): session 18 at M = 256, 4096 x
    4096 on chip in 19.1 us against 22.7, 8192 x 4096 in 33.2 against 33.9; 14336 x 4096
    stays with 256 rows (50.8 against 54.4 on chip). Session 33 (calls A and B): 128 x 4096
    x 4096 in 64-row halves 13.8 against 14.8, from 113 rows on (100 rows lost, 112 keeps
    128-row blocks), 128 x 8192 x 4096 keeps 128 rows (22.7 against 25.1 in halves), and
    three shapes with few partial bytes go back from 128-row clusters to 256 rows and the
    reduce (256 x 3072 x 1024 12.7 against 15.0, 129 x 8192 x 4096 29.4 against 32.4, 192 x
    6144 x 3072 21.9 against 25.7)."""
    run = planner
    plain = host_planner(tmp_path_factory, "wgmma_plan_check.cc",
                         defines=["JAX_MARLIN_WGMMA_CLUSTER_K=0"])
    cases = [c for d, c in _cases() if d == "h200"]
    for case, got, off in zip(cases, run(cases, H200_CLUSTER_BLOCKS),
                              plain(cases, H200_CLUSTER_BLOCKS)):
        M, K, N, block, workspace, sms, _ = case
        rows, n_blocks, m_blocks, splits, per_split, smem, cluster_k, *_ = got
        assert not off[6], (case, off)  # the =0 build plans no cluster
        blocks = n_blocks * m_blocks * splits
        room = 132 * (2 if rows <= 64 else 1)  # clusters of 2 place twice as many 2 an SM
        if cluster_k:
            assert splits == 2 and blocks <= room, (case, got)
            assert splits * M * _layout.n_pad(N) <= workspace, (case, got)
        if got[:7] != off[:6] + (cluster_k,):  # replanned with half the rows on chip
            # 256 -> 128 rows at M = 129-256; 128 -> 64 at M = 113-128, where each block
            # still has an SM of its own.
            assert cluster_k and off[0] == 2 * rows and rows < M <= 2 * rows, (case, got)
            assert rows == 128 or M >= HALVES64_MIN_M, (case, got)
            assert rows == 128 or (rows == 64 and blocks <= sms), (case, got)
            # k in two halves, every stage covered, none empty; the grid of `rows` rows.
            stages = -(-(-(-K // block) * block // 16) // 4)
            assert per_split == -(-stages // 2) and per_split < stages, (case, got)
            assert (n_blocks, m_blocks) == (off[1], -(-M // rows)), (case, got)
            slots = sms * (2 if rows <= 64 else 1)
            n_pad = _layout.n_pad(N)
            mine = _model_us(rows, blocks, per_split, 2, True, slots, M, n_pad)
            theirs = _model_us(off[0], off[1] * off[2] * off[3], off[4], off[3],
                               off[3] == 2 and off[1] * off[2] * 2 <= 132, sms, M, n_pad)
            assert mine < theirs, (case, got, off)
        else:
            assert cluster_k == (splits == 2 and blocks <= room), (case, got)
    want = {(256, 4096, 4096): (128, 32, 2, 2, 1), (256, 8192, 4096): (128, 32, 2, 2, 1),
            (128, 4096, 4096): (64, 32, 2, 2, 1), (128, 8192, 4096): (128, 32, 1, 4, 0),
            (113, 4096, 4096): (64, 32, 2, 2, 1), (112, 4096, 4096): (128, 32, 1, 4, 0),
            (256, 3072, 1024): (256, 8, 1, 6, 0), (129, 8192, 4096): (256, 32, 1, 4, 0),
            (192, 6144, 3072): (256, 24, 1, 5, 0),
            (128, 14336, 4096): (128, 32, 1, 4, 0), (128, 4096, 6144): (128, 48, 1, 5, 0),
            (256, 14336, 4096): (256, 32, 1, 4, 0), (256, 8192, 8192): (256, 64, 1, 2, 1),
            (64, 4096, 14336): (64, 112, 1, 2, 1), (32, 4096, 14336): (32, 112, 1, 2, 1),
            (256, 8192, 28672): (256, 224, 1, 1, 0), (256, 28672, 8192): (256, 64, 1, 2, 1)}
    h200 = [(M, K, N, 128, _shapes.split_k_workspace_floats(M, _layout.n_pad(N)),
             *DEVICES["h200"]) for M, K, N in want]
    for (M, K, N, *_), got in zip(h200, run(h200, H200_CLUSTER_BLOCKS)):
        assert (got[0], got[1], got[2], got[3], got[6]) == want[M, K, N], (M, K, N, got)


@pytest.mark.parametrize("counts, on_chip", [("128,120,120", True), ("127,120,120", False),
                                             ("0,0,0", False), ("-1,-1,-1", False)])
def test_the_on_chip_split_needs_room_for_every_block(planner, counts, on_chip):
    """256 x 8192 x 8192 (128 blocks, k in 2): on chip exactly where clusters of 2 place all
    128 blocks at once; with one fewer, an unknown count or none, the same grid and the
    reduce."""
    case = (256, 8192, 8192, 128, _shapes.split_k_workspace_floats(256, _layout.n_pad(8192)),
            *DEVICES["h200"])
    (got,) = planner([case], counts)
    assert got[:4] == (256, 64, 1, 2) and got[6] == on_chip, (counts, got)


@pytest.fixture(scope="module")
def stream_k(tmp_path_factory):
    """tests/cpp/wgmma_stream_k_check.cc compiled: run(tiles, stages, blocks) -> the
    segments, (block, tile, stage_begin, stage_end, whole, owner, first_peer, last_peer)."""
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    root = pathlib.Path(__file__).resolve().parents[1]
    exe = tmp_path_factory.mktemp("stream_k") / "wgmma_stream_k_check"
    subprocess.run([cxx, "-std=c++17", "-O2", f"-I{root / 'ffi'}",
                    str(root / "tests" / "cpp" / "wgmma_stream_k_check.cc"), "-o", str(exe)],
                   check=True)

    def run(tiles, stages, blocks):
        out = subprocess.run([str(exe)], input=f"{tiles} {stages} {blocks}\n",
                             capture_output=True, text=True, check=True, timeout=60).stdout
        lines = out.split("\n")
        assert lines[lines.index("end") + 1:] == [""], out[-200:]
        return [tuple(map(int, l.split())) for l in lines[:lines.index("end")]]

    return run


@pytest.mark.parametrize("tiles, stages, blocks", [
    (224, 128, 132),  # 256 x 8192 x 28672 on an H200: one wave whole, 92 tiles stream-K
    (896, 128, 132),  # 1024 x 8192 x 28672: six waves whole
    (224, 64, 132), (128, 64, 132), (140, 16, 132), (300, 7, 114), (5, 7, 3), (7, 5, 3),
    (133, 64, 132),  # 1 tile over a wave: the wave joins the stream-K part
    (448, 128, 132), (264, 128, 132), (265, 3, 132),
    (200, 1, 132),  # runs of 0 or 1 stage (run = 0)
    (32, 64, 132), (1, 64, 132)])  # forced (kForceWgmmaStreamK): fewer tiles than blocks
def test_the_stream_k_schedule(stream_k, tiles, stages, blocks):
    """ffi/wgmma_stream_k.h (docs/design/wgmma_stream_k.md): every (tile, stage) exactly
    once; the whole waves data-parallel; the rest in runs one stage apart at most; a block
    publishes at most one partial (its run's first segment); each cut tile's owner holds
    stage 0 and names exactly the blocks holding the tile's other stages, all after it."""
    segments = stream_k(tiles, stages, blocks)
    seen = collections.Counter()
    for b, t, s0, s1, whole, owner, *_ in segments:
        assert 0 <= b < blocks and 0 <= t < tiles and 0 <= s0 < s1 <= stages
        assert whole == (s0 == 0 and s1 == stages) and owner == (s0 == 0 and not whole)
        seen.update((t, s) for s in range(s0, s1))
    assert seen == collections.Counter((t, s) for t in range(tiles) for s in range(stages))
    # Whole waves data-parallel, but the last joins the rest where the rest is under half
    # a wave, so that a cut tile has at most three holders (two partials to add).
    waves = tiles // blocks
    if waves and 2 * (tiles % blocks) < blocks:
        waves -= 1
    dp_tiles = waves * blocks
    assert sorted((b, t) for b, t, *_ in segments if t < dp_tiles) == sorted(
        (t % blocks, t) for t in range(dp_tiles))
    runs = collections.Counter()
    for b, t, s0, s1, *_ in segments:
        if t >= dp_tiles:
            runs[b] += s1 - s0
    lengths = [runs[b] for b in range(blocks)]  # a run may be empty where R x S < P
    assert max(lengths) - min(lengths) <= 1, lengths
    holders = collections.defaultdict(list)
    for b, t, s0, s1, whole, owner, first, last in segments:
        if t >= dp_tiles and not whole:
            holders[t].append((s0, b, owner, first, last))
    partials = collections.Counter()
    for t, parts in holders.items():
        parts.sort()
        s0, b, owner, first, last = parts[0]
        assert s0 == 0 and owner, (t, parts)
        assert [p[1] for p in parts[1:]] == list(range(first, last + 1)) and first == b + 1
        assert not any(p[2] for p in parts[1:]), (t, parts)
        partials.update(p[1] for p in parts[1:])
    assert max(partials.values(), default=0) <= 1
    assert all(len(parts) <= 3 for parts in holders.values()) or tiles <= blocks, holders
    # Each block's order (the kernel's walk): its data-parallel tiles, then its run, where
    # a partial can only come first and an owner's segment only last, so no block waits
    # (as an owner) before it has published.
    for b in range(blocks):
        mine = [seg for seg in segments if seg[0] == b]
        assert [t for _, t, *_ in mine if t < dp_tiles] == list(range(b, dp_tiles, blocks))
        run = [seg for seg in mine if seg[1] >= dp_tiles]
        assert [seg[1] for seg in run] == sorted(seg[1] for seg in run)
        for j, (_, _, _, _, whole, owner, *_) in enumerate(run):
            assert whole or (owner and j == len(run) - 1) or (not owner and j == 0), run


FIXUP = header_constant("wgmma_plan.h", "kWgStreamKFixupStages")
MAX_PERCENT = header_constant("wgmma_plan.h", "kWgStreamKMaxPercent")
MAX_BLOCKS = header_constant("wgmma_stream_k.h", "kStreamKMaxBlocks")


def _model_stream_k(tiles, stages, slots):
    """Stream-K's stage times written out again: the data-parallel waves, the longest run
    and the fix-up on one block a slot (at most MAX_BLOCKS), against one block a tile's
    waves on every slot; its blocks where it saves enough."""
    if tiles <= slots:
        return 0
    blocks = min(slots, MAX_BLOCKS)
    waves = tiles // blocks
    if waves and 2 * (tiles % blocks) < blocks:
        waves -= 1
    run = -(-(tiles - waves * blocks) * stages // blocks)
    grid = -(-tiles // slots) * stages
    return blocks if (waves * stages + run + FIXUP) * 100 <= grid * MAX_PERCENT else 0


def test_stream_k_is_planned_where_the_model_says_it_saves(planner):
    """With the stream-K area ops.py adds (M = 129..1024), a producer grid of one block a
    tile and no k-split runs stream-K on one block an SM where the waves it saves pay for
    the fix-up (wgmma_plan.h wgmma_stream_k_blocks); without the area, or with too
    small a one, never."""
    assert _shapes.STREAM_K_WORKSPACE_FLOATS == header_constant(
        "wgmma_stream_k.h", "kStreamKFlagFloats") + MAX_BLOCKS * header_constant(
        "wgmma_stream_k.h", "kStreamKPartialFloats")
    cases = [(*case, _shapes.stream_k_workspace_floats(case[0], True)) for _, case in _cases()]
    short = [case[:7] + (case[7] - 1,) for case in cases]
    by_device = collections.Counter()
    for case, got, without in zip(cases, planner(cases), planner(short)):
        M, K, N, block, workspace, sms, _, area = case
        rows, n_blocks, m_blocks, splits, per_split, _, cluster_k, producer, stream_k = got
        assert not without[8], (case, without)
        assert got[:8] == without[:8], (case, got, without)  # the grid itself is the same
        if not (producer and splits == 1 and not cluster_k and area):
            assert stream_k == 0, (case, got)
            continue
        want = _model_stream_k(n_blocks * m_blocks, per_split, sms)
        assert stream_k == want, (case, got, want)
        by_device[sms] += bool(stream_k)
    assert by_device[DEVICES["h200"][0]] > 0 and by_device[DEVICES["many"][0]] > 0, by_device


@pytest.mark.parametrize("M, K, N, blocks", [
    (256, 8192, 28672, 132),   # 224 tiles: 256 stage times -> 128 + 90 + the fix-up
    (200, 4096, 28672, 132),
    (512, 8192, 28672, 132),   # 448 tiles: 3.4 waves
    (1024, 8192, 28672, 0),    # 6.8 waves: 3% to gain, under the fix-up's cost
    (256, 28672, 8192, 0),     # k in 2, clusters of 2
    (256, 4096, 17000, 132),   # 133 tiles: the whole wave joins the one left
    (256, 1024, 28672, 0),     # 16 stages a tile: the fix-up outweighs
    (768, 8192, 28672, 132),   # 672 tiles, 12.6 MB of activations: 621 -> 563 us (random)
    (768, 28672, 8192, 0),     # 44 MB of activations, over half the L2: 651 -> 678 us
])
def test_h200_stream_k_plans(planner, M, K, N, blocks):
    case = (M, K, N, 128, _shapes.split_k_workspace_floats(M, _layout.n_pad(N)),
            *DEVICES["h200"], _shapes.stream_k_workspace_floats(M, True), H200_L2_BYTES)
    (got,) = planner([case], H200_CLUSTER_BLOCKS)
    assert got[8] == blocks, got


def test_stream_k_keeps_the_grid_where_the_activations_crowd_the_l2(planner):
    """wgmma_stream_k_blocks' L2 rule: past kWgStreamKMaxL2Percent of the L2 in
    activations (M x K x 2 bytes) the grid stays; an unknown L2 (0) applies no rule, and
    the rule only ever turns stream-K off (the grid itself is the same)."""
    limit = header_constant("wgmma_plan.h", "kWgStreamKMaxL2Percent")
    checked = 0
    for _, case in _cases():
        if case[5] != DEVICES["h200"][0]:
            continue
        M, K = case[0], case[1]
        base = (*case, _shapes.stream_k_workspace_floats(M, True))
        unknown, known = planner([(*base, 0), (*base, H200_L2_BYTES)])
        assert known[:8] == unknown[:8], (case, known, unknown)
        crowded = M * K * 2 * 100 > H200_L2_BYTES * limit
        assert known[8] == (0 if crowded else unknown[8]), (case, known, unknown)
        checked += crowded and unknown[8] > 0
    assert checked > 0  # some plan the rule turned off
