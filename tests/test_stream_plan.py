"""The streaming kernel's grid planner (ffi/stream_plan.h), on the host.

Its mistakes would not show as wrong numbers in most GPU tests but as writes
past the workspace (more partials than it holds) or launches over the shared
memory limit, on GPUs nobody here has (A100, 99 KB parts). So it is compiled
here with the host compiler and checked, shape by shape and device by device,
against an independent model of the block partition.
"""

import bisect
import itertools
import pathlib
import re

import pytest
from conftest import header_constant, host_planner

from jax_marlin import _layout, _shapes

ROOT = pathlib.Path(__file__).resolve().parents[1]

# (SMs, opt-in shared memory per block, compute capability)
DEVICES = {
    "h200": (132, 232448, 90),
    "a100": (108, 166912, 80),
    "ada_99kb": (128, 101376, 89),
    "small": (20, 101376, 86),
}
SHAPES = [(8192, 28672), (28672, 8192), (4096, 4096), (4096, 1024), (14336, 4096),
          (72, 37), (1000, 1100), (200, 70000), (8192, 128256), (65536, 131072),
          (4096, 14336), (4096, 32000), (5120, 13824)]
RING_BYTES = 8 * 16 * 512  # 8 warps x 2 steps x 8 units x 512 bytes
GROUP_WORD_BYTES = 160  # a group's 64 scales and 8 zero-point words, in the words ring
ZERO_ROW_BYTES = 256
A_ROW_BYTES = 272


MAX_PARTS = header_constant("stream_plan.h", "kMaxStreamParts")
# kAPhaseMinSteps = kRingSteps + 1 (the code ring's depth, a -D default in the header)
PHASE_MIN_STEPS = int(re.search(r"#define JAX_MARLIN_STREAM_RING_STEPS (\d+)",
                                (ROOT / "ffi" / "stream_plan.h").read_text()).group(1)) + 1
# kTilePhaseMinSteps = kRingSteps: the tile split's per-warp phases
TILE_PHASE_MIN_STEPS = PHASE_MIN_STEPS - 1
TILE_PHASE_MAX_BLOCK_STEPS = int(re.search(
    r"#define JAX_MARLIN_STREAM_TILE_PHASE_MAX_STEPS (\d+)",
    (ROOT / "ffi" / "stream_plan.h").read_text()).group(1))
TILE_SPLIT_MAX_STEPS = header_constant("stream_plan.h", "kTileSplitMaxSteps")
TILE_SPLIT_MIN_BLOCKS = header_constant("stream_plan.h", "kTileSplitMinBlocks")
TILE_SPLIT_TARGET_STEPS = header_constant("stream_plan.h", "kTileSplitTargetSteps")
TILE_SPLIT_TARGET_STEPS_WIDE = header_constant("stream_plan.h", "kTileSplitTargetStepsWide")
TILE_SPLIT_TWO_BLOCKS_MAX_STEPS = header_constant("stream_plan.h", "kTileSplitTwoBlocksMaxSteps")
MAX_CLUSTER = int(re.search(r"#define JAX_MARLIN_TILE_SPLIT_MAX_CLUSTER (\d+)",
                            (ROOT / "ffi" / "stream_plan.h").read_text()).group(1))
# The blocks clusters of 2, 4 and 8 place at once on the H200, one block an SM
# (QueryClusterBlocks, printed by the probe in session 14's call C): every plan below is made
# with them (only sm_90 parts form clusters).
H200_CLUSTER_BLOCKS = (132, 120, 120)
PLAN_ARGV = (MAX_CLUSTER, ",".join(map(str, H200_CLUSTER_BLOCKS)))
GROUP_CLUSTER = header_constant("stream_plan.h", "kGroupClusterOverride")
GROUP_CLUSTER_MAX_M = int(re.search(r"constexpr int64_t kGroupClusterMaxM = (\d+);",
                                    (ROOT / "ffi" / "stream_plan.h").read_text()).group(1))
GROUP_CLUSTER_EXTRA_STEPS = int(re.search(
    r"constexpr int64_t kGroupClusterExtraSteps = (\d+);",
    (ROOT / "ffi" / "stream_plan.h").read_text()).group(1))


@pytest.fixture(scope="module")
def planner(tmp_path_factory):
    run = host_planner(tmp_path_factory, "stream_plan_check.cc")

    def plan(cases, max_cluster=MAX_CLUSTER):  # argv[1]: the cap on the cluster size
        return run(cases, max_cluster, PLAN_ARGV[1])

    return plan


def _model_parts(T, L, B):
    """Most blocks any column group's L steps touch, from the partition itself."""
    starts = [b * T // B for b in range(B + 1)]
    assert all(a < b for a, b in zip(starts, starts[1:])), "an empty block"
    most = 1
    for g in range(T // L):
        first = bisect.bisect_right(starts, g * L) - 1
        last = bisect.bisect_right(starts, g * L + L - 1) - 1
        most = max(most, last - first + 1)
    return most, max(b - a for a, b in zip(starts, starts[1:]))


def _cases(split_k):
    for device, (K, N), M, group in itertools.product(
            DEVICES, SHAPES, [1, 3, 8, 9, 16], [32, 64, 128, "channel"]):
        block = 1 << (K - 1).bit_length() if group == "channel" else group
        block = max(block, 16)
        workspace = _shapes.split_k_workspace_floats(M, _layout.n_pad(N))
        yield device, (M, K, N, block, workspace, *DEVICES[device], split_k)


def _fixed_bytes(groups_per_step):
    """The code ring, the group-words ring (8 warps x 3 steps x groups per step), the zero
    row, the code ring's barriers (one of 8 bytes per 4-unit run of the ring)."""
    return (RING_BYTES + 8 * 3 * groups_per_step * GROUP_WORD_BYTES + ZERO_ROW_BYTES
            + RING_BYTES // (4 * 512) * 8)


def _tile_split_inbox(C, M):
    """With C > 1 blocks a tile, each holds an inbox for the cluster's fp32 totals of its
    slice of the M x 64 outputs: C slots of the largest slice, ceil(16 M / C) quads of 16
    bytes (16-byte aligned: 16 bytes of slack)."""
    return C * -(-16 * M // C) * 16 + 16 if C > 1 else 0


def _tile_split_phase(C, L, M, groups, sums, smem_limit):
    """A warp's phase of A under the tile split (0: the block's A fits whole, -1: nothing
    fits). From M = 9, where the block's ceil(L / C) steps do not fit, each of the 8
    warps holds two slots of P steps, P the most that fit and at least the ring's
    depth; with C > 1 only where a block has at most kTilePhaseMaxBlockSteps steps."""
    room = smem_limit - _fixed_bytes(groups) - _tile_split_inbox(C, M)
    step = M * (A_ROW_BYTES + sums)
    if -(-L // C) * step <= room:
        return 0
    P = room // (2 * 8 * step)
    short = C == 1 or -(-L // C) <= TILE_PHASE_MAX_BLOCK_STEPS  # with clusters: short blocks
    return P if M >= 9 and P >= TILE_PHASE_MIN_STEPS and short else -1


def _tile_split_fits(C, L, M, n_tiles, groups, sums, smem_limit, cc):
    """Whether C blocks a tile fit, and their shared memory: the block's A whole, or
    8 warps x 2 P steps of it in phases (_tile_split_phase), and the inbox."""
    P = _tile_split_phase(C, L, M, groups, sums, smem_limit)
    steps = 16 * P if P > 0 else -(-L // C)
    smem = _fixed_bytes(groups) + steps * M * (A_ROW_BYTES + sums) + _tile_split_inbox(C, M)
    return (C == 1 or (C <= 8 and cc >= 90)) and C <= L and P >= 0, smem


def _group_cluster_fits(C, L, M, groups, sums, smem_limit, cc, max_cluster=8):
    """C blocks a column group (sm_90), each staging A for at most ceil(L / C) steps,
    then the inbox (16-byte aligned): C slots of ceil(128 M / C) quads of 16 bytes and an
    8-byte barrier. Returns (fits, shared memory)."""
    inbox = -(-(_fixed_bytes(groups) + -(-L // C) * M * (A_ROW_BYTES + sums)) // 16) * 16
    smem = inbox + C * -(-128 * M // C) * 16 + 8
    return cc >= 90 and 2 <= C <= min(L, max_cluster) and smem <= smem_limit, smem


def _cluster_room(sms, placed):
    """Blocks one wave of clusters holds, one an SM: the device's count (0 = unknown: all
    SMs; -1 = none fits)."""
    return min(sms, placed) if placed > 0 else (0 if placed < 0 else sms)


def _rule_group_cluster(L, M, n_groups, groups, sums, sms, smem_limit, cc,
                        cluster_blocks=H200_CLUSTER_BLOCKS, max_cluster=8):
    """The group cluster's C where stream-K would cut and no tile split is taken (0:
    none): at M <= kGroupClusterMaxM, the largest C in 2, 4, 8 (at most max_cluster)
    whose n_groups x C blocks fit one an SM (at most the blocks clusters of C place), if
    its blocks' ceil(L / C) steps exceed stream-K's T / SMs by at most
    kGroupClusterExtraSteps, and it fits."""
    if M > GROUP_CLUSTER_MAX_M:
        return 0
    chosen = 0
    for i, C in enumerate((2, 4, 8)):
        if C > max_cluster or n_groups * C > _cluster_room(sms, cluster_blocks[i]):
            break
        chosen = C
    if not chosen or -(-L // chosen) * sms > n_groups * L + GROUP_CLUSTER_EXTRA_STEPS * sms:
        return 0
    fits, _ = _group_cluster_fits(chosen, L, M, groups, sums, smem_limit, cc, max_cluster)
    return chosen if fits else 0


def _rule_blocks_a_tile(L, M, n_tiles, groups, sums, sms, smem_limit, cc, max_cluster=8,
                        cluster_blocks=H200_CLUSTER_BLOCKS):
    """The tile split's C where stream-K would cut (0: none), restated over the set of
    grids that fit: C in 1, 2, 4, 8 (at most max_cluster) whose blocks have at most
    kTileSplitMaxSteps steps and that run in one wave (one block an SM, at most the
    blocks clusters of C place, 0 = unknown = all SMs; C = 1 with short k: two an SM
    where two blocks' shared memory fits). Of those, the smallest C whose blocks have at
    most the target steps; else the largest, if it has at least kTileSplitMinBlocks
    blocks."""
    two_block_cap = min(smem_limit, (smem_limit + 1024) // 2 - 1024)
    target = TILE_SPLIT_TARGET_STEPS_WIDE if M > 8 else TILE_SPLIT_TARGET_STEPS
    fitting = []
    for C in (1, 2, 4, 8):
        fits, smem = _tile_split_fits(C, L, M, n_tiles, groups, sums, smem_limit, cc)
        if not fits or C > max_cluster or -(-L // C) > TILE_SPLIT_MAX_STEPS:
            continue
        if C == 1:
            two = L <= TILE_SPLIT_TWO_BLOCKS_MAX_STEPS and smem <= two_block_cap
            wave = 2 * sms if two else sms
        else:
            wave = _cluster_room(sms, cluster_blocks[C.bit_length() - 2])
        if n_tiles * C <= wave:
            fitting.append(C)
    on_target = [C for C in fitting if -(-L // C) <= target]
    if on_target:
        return min(on_target)
    if fitting and n_tiles * max(fitting) >= TILE_SPLIT_MIN_BLOCKS:
        return max(fitting)
    return 0




@pytest.mark.parametrize("split_k", [0, 1, 3, -1, -4, GROUP_CLUSTER + 3, GROUP_CLUSTER + 8])
def test_planned_grids_fit_the_device_and_the_workspace(planner, split_k):
    cases = list(_cases(split_k))
    results = planner([c for _, c in cases])
    planned = 0
    for (device, case), got in zip(cases, results):
        M, K, N, block, workspace, sms, smem_limit, cc, _ = case
        if got is None:
            continue
        planned += 1
        B, T, L, smem, any_cut, parts, tile_split, phase, phased, group_cluster = got
        n_pad = _layout.n_pad(N)
        k_pad = -(-K // block) * block
        # Two fp32 sums of A per row and group, per step; none for groups of 32 at
        # M = 9-16, which the kernel dequantizes before the MMA (no fold).
        groups = max(1, 128 // block)
        sums = 0 if (M > 8 and block == 32) else 8 * groups
        assert L == -(-k_pad // 128), case
        n_tiles = n_pad // 64
        step = M * (A_ROW_BYTES + sums)
        n_groups = -(-n_pad // 512)
        # The planner's own choice (a forced group cluster that does not fit falls back
        # to it).
        auto = split_k == 0 or split_k > GROUP_CLUSTER
        if split_k > GROUP_CLUSTER:  # forced: taken exactly where it fits
            fits, _ = _group_cluster_fits(split_k - GROUP_CLUSTER, L, M, groups, sums,
                                          smem_limit, cc)
            assert fits == (group_cluster == split_k - GROUP_CLUSTER), (case, got)
        if group_cluster:
            C = group_cluster
            fits, want_smem = _group_cluster_fits(C, L, M, groups, sums, smem_limit, cc)
            assert fits and smem == want_smem, (case, got, want_smem)
            assert B == n_groups * C and T == n_groups * L, (case, got)
            assert not any_cut and parts == 1 and not tile_split, (case, got)
            assert phase == -(-L // C) and not phased, (case, got)
            if split_k == 0:  # chosen by itself: the rule's C, where no tile split is
                assert C == _rule_group_cluster(L, M, n_groups, groups, sums, sms,
                                                smem_limit, cc), (case, got)
                assert not _rule_blocks_a_tile(L, M, n_tiles, groups, sums, sms,
                                               smem_limit, cc), (case, got)
            continue
        if tile_split:
            # C = tile_split blocks per 64-column tile (a cluster when C > 1,
            # sm_90 only), each staging A for its part of k; no partials.
            C = tile_split
            fits, want_smem = _tile_split_fits(C, L, M, n_tiles, groups, sums, smem_limit, cc)
            assert fits and smem == want_smem, (case, got)
            assert B == n_tiles * C and T == n_tiles * L and not any_cut and parts == 1, (
                case, got)
            # A in phases of P steps a warp where the block's does not fit whole
            # (stream_a_phased, which picks the launched kernel, says so)
            P = _tile_split_phase(C, L, M, groups, sums, smem_limit)
            assert phase == (P if P > 0 else -(-L // C)) and phased == (P > 0), (case, got)
            if split_k < 0:
                assert C == -split_k, (case, got)
                continue
            # Chosen by itself (or where the group cluster does not fit): the rule's C
            # (stream_plan.h).
            assert auto, (case, got)
            rule = _rule_blocks_a_tile(L, M, n_tiles, groups, sums, sms, smem_limit, cc)
            assert C == rule, (case, got, rule)
            continue
        if auto and any_cut:
            # stream-K cuts only where no tile split is one wave and no group cluster
            # is taken
            assert _rule_blocks_a_tile(L, M, n_tiles, groups, sums, sms, smem_limit, cc) == 0, (
                case, got)
            assert _rule_group_cluster(L, M, n_groups, groups, sums, sms, smem_limit, cc) == 0, (
                case, got)
        if split_k == -4 and cc >= 90:
            # Forced clusters of 4 decline only where they cannot fit.
            fits, _ = _tile_split_fits(4, L, M, n_tiles, groups, sums, smem_limit, cc)
            assert not fits, (case, got)
        assert T == -(-n_pad // 512) * L, case
        assert 1 <= B <= T, case
        model_parts, most_steps = _model_parts(T, L, B)
        assert parts == model_parts and any_cut == (parts > 1), (case, got, model_parts)
        if parts > 1:  # every partial has its place in the workspace
            assert parts * M * n_pad <= workspace, (case, got)
        assert parts <= MAX_PARTS, (case, got)  # the reduce kernel adds no more
        # The largest block's A steps (two phases of them where A is staged in
        # phases), the zero row and the ring fit its shared memory, which fits the
        # device.
        assert smem == _fixed_bytes(groups) + min(most_steps, 2 * phase) * step, (case, got)
        assert smem <= smem_limit, (case, got)
        # stream_a_phased (which picks the launched kernel) says the same
        assert phased == (phase < most_steps), (case, got)
        if phase < most_steps:  # A in phases: see test_a_in_phases for where
            assert (split_k <= 0 or split_k > GROUP_CLUSTER) and M >= 9, (case, got)
            assert phase >= PHASE_MIN_STEPS, (case, got)
        else:
            assert phase == most_steps, (case, got)
        if 0 < split_k < GROUP_CLUSTER:  # an aligned split: every group cut the same way
            groups = T // L
            assert B % groups == 0 and 1 <= B // groups <= min(split_k, L), (case, got)
    assert planned > len(cases) // 2


def test_a_larger_workspace_never_buys_more_partials_than_the_reduce_adds(planner):
    """A long, narrow GEMV would cut its one column group 264 ways if the workspace let it."""
    sms, smem, cc = DEVICES["h200"]
    cases = [(M, K, N, 128, 1 << 40, sms, smem, cc, split_k)
             for M in (1, 16) for K, N in [(65536, 512), (32768, 1024), (8192, 64)]
             for split_k in (0, 200)]
    for case, got in zip(cases, planner(cases)):
        assert got is not None, case
        B, T, L, _, _, parts, tile_split, _, _, _ = got
        if tile_split:  # no partials at all
            assert parts == 1 and B == T // L * tile_split, (case, got)
            continue
        assert parts == _model_parts(T, L, B)[0] and 1 < parts <= MAX_PARTS, (case, got)


def test_the_issue_shapes_stream_on_the_h200(planner):
    """The planner must not quietly hand the decode shapes to the tiled kernel."""
    sms, smem, cc = DEVICES["h200"]
    cases = [(M, K, N, 128, _shapes.split_k_workspace_floats(M, _layout.n_pad(N)), sms, smem,
              cc, 0) for M in (1, 4, 8, 16) for K, N in SHAPES[:5]]
    for case, got in zip(cases, planner(cases)):
        assert got is not None, case
        B, T, tile_split = got[0], got[1], got[6]
        if tile_split:  # C blocks per tile, one wave of them
            assert B <= sms * (2 if tile_split == 1 else 1), (case, got)
        else:
            assert B >= min(T, sms), (case, got)  # every SM gets work


def test_the_tile_split_is_chosen_where_it_measured_faster(planner):
    """H200 (docs/perf/NOTES.md; session 3 call 7, session 4 call 1, session 14 calls A and
    B): the blocks per tile (C; 0 = stream-K) the planner picks for the shapes the grids
    were measured on, the fastest measured grid of each (within 0.2 us; 4096 x 14336 at
    M = 1 is the one exception, kept with stream-K at 15.00 against 14.41 us)."""
    sms, smem, cc = DEVICES["h200"]
    expect = {(1, 4096, 4096): 2, (16, 4096, 4096): 2, (1, 4096, 6144): 1, (1, 8192, 8192): 1,
              (1, 4096, 1024): 4, (1, 14336, 4096): 2, (1, 4096, 28672): 0, (1, 8192, 28672): 0,
              (1, 4096, 14336): 0, (8, 4096, 14336): 0, (3, 8192, 14336): 0,
              (16, 4096, 14336): 0, (1, 2048, 4096): 2,
              # session 14: small decoders' projections, and clusters past what fits
              (1, 256, 512): 1, (1, 896, 896): 1, (1, 896, 1152): 1, (1, 896, 128): 1,
              (1, 896, 9728): 1, (1, 4864, 896): 8, (16, 4864, 896): 8, (1, 2048, 512): 2,
              (1, 2048, 2048): 2, (16, 2048, 2048): 2,
              (1, 2048, 3072): 2, (1, 2048, 16384): 1, (1, 8192, 2048): 2,
              (16, 8192, 2048): 2,
              # session 15: from M = 9, blocks of 2 steps
              (16, 2048, 512): 8, (16, 896, 1152): 4}
    cases = [(M, K, N, 128, _shapes.split_k_workspace_floats(M, _layout.n_pad(N)), sms, smem, cc,
              0) for M, K, N in expect]
    for key, got in zip(expect, planner(cases)):
        assert got is not None and got[6] == expect[key], (key, got)
    # Without clusters (sm_80) a tile gets one block.
    a100 = [(1, 4096, 4096, 128, _shapes.split_k_workspace_floats(1, 4096), *DEVICES["a100"], 0)]
    assert planner(a100)[0][6] == 1


def test_the_group_cluster_is_chosen_where_it_measured_faster(planner):
    """H200 (docs/perf/NOTES.md, session 15 calls D-F): the group cluster's C (0: none)
    the planner picks where stream-K would cut. 4096 x 14336 and 4096 x 32000 ran
    12.53 / 21.12 us against stream-K's 14.62 / 22.99; 4096 x 28672 at C = 2 tied and
    8192 x 28672 lost (38.1 against 35.7), both kept with stream-K; 16 rows are past
    kGroupClusterMaxM. Without clusters (sm_80) there is none."""
    sms, smem, cc = DEVICES["h200"]
    expect = {(1, 4096, 14336): 4, (1, 4096, 32000): 2, (4, 4096, 14336): 4,
              (1, 4096, 28672): 0, (2, 4096, 28672): 0, (1, 8192, 28672): 0,
              (1, 28672, 8192): 0, (16, 4096, 14336): 0}
    cases = [(M, K, N, 128, _shapes.split_k_workspace_floats(M, _layout.n_pad(N)), sms, smem, cc,
              0) for M, K, N in expect]
    for key, got in zip(expect, planner(cases)):
        assert got is not None and got[9] == expect[key] and got[6] == 0, (key, got)
        assert got[4] == (expect[key] == 0), (key, got)  # no group cluster: stream-K cuts
    a100 = [(1, 4096, 14336, 128, _shapes.split_k_workspace_floats(1, 14336),
             *DEVICES["a100"], 0)]
    assert planner(a100)[0][9] == 0


@pytest.mark.parametrize("device, counts", [
    ((132, 232448, 90), "0,0,0"),        # the H200 where the query failed: counts unknown
    ((114, 232448, 90), "114,104,96"),   # an sm_90 part with fewer SMs and other GPCs
    ((148, 232448, 100), "148,140,128"),  # a larger part
    ((132, 232448, 90), "132,66,30"),    # clusters that place poorly
    ((132, 232448, 90), "132,-1,-1"),    # clusters of 4 and 8 do not fit at all
])
@pytest.mark.parametrize("max_cluster", [1, 8])
def test_the_rule_on_other_devices(planner, tmp_path_factory, device, counts, max_cluster):
    """The tile split's C and the group cluster's on sm_90+ parts other than the H200, with
    other cluster counts, and without clusters (max_cluster = 1: an sm_80 build on an
    sm_90 part), against the models; the shapes include the edges of each condition: the one-wave bound for C = 4
    (N = 1920 / 1984 at M = 9: 120 / 124 blocks), the two-block C = 1 (L = 16 / 17;
    N = 16896 / 16960: 264 / 265 tiles), the target's change at M = 8 / 9, and short k."""
    run = host_planner(tmp_path_factory, "stream_plan_check.cc")
    sms, smem, cc = device
    blocks = tuple(int(c) for c in counts.split(","))
    shapes = [(9, 4096, 1920), (9, 4096, 1984), (1, 2048, 16896), (1, 2048, 16960),
              (1, 2176, 16384), (8, 2048, 512), (9, 2048, 512), (1, 896, 896), (16, 896, 1152),
              (1, 8192, 512), (1, 4096, 1024), (16, 8192, 2048), (1, 8192, 2048),
              (1, 4096, 4096), (16, 4096, 4096), (1, 14336, 4096), (1, 4096, 14336),
              (12, 4864, 896), (1, 256, 512), (3, 65536, 64), (1, 4096, 32000),
              (4, 5120, 13824), (1, 4096, 28672)]
    cases = [(M, K, N, 128, _shapes.split_k_workspace_floats(M, _layout.n_pad(N)), sms, smem,
              cc, 0) for M, K, N in shapes]
    checked = 0
    for case, got in zip(cases, run(cases, max_cluster, counts)):
        M, K, N = case[:3]
        assert got is not None, case
        B, T, L, smem_used, any_cut, parts, C, _, _, group_cluster = got
        n_tiles = _layout.n_pad(N) // 64
        if not C and not any_cut and not group_cluster:
            continue  # stream-K cuts nothing: the rules are not asked
        checked += 1
        want = _rule_blocks_a_tile(L, M, n_tiles, 1, 8, sms, smem, cc, max_cluster, blocks)
        assert C == want, (case, counts, max_cluster, got, want)
        if C:
            assert C <= max_cluster and B == n_tiles * C, (case, got)
            continue
        want = _rule_group_cluster(L, M, T // L, 1, 8, sms, smem, cc, blocks, max_cluster)
        assert group_cluster == want, (case, counts, max_cluster, got, want)
        if group_cluster:
            assert group_cluster <= max_cluster and B == T // L * group_cluster, (case, got)
    assert checked > len(cases) // 2


def test_no_clusters_keep_the_old_floor(planner):
    """Without clusters a short-of-target C = 1 needs kTileSplitMinBlocks blocks: few
    blocks with long k stay stream-K (4096 x 1024 at C = 1 measured slower, session 3)."""
    a100 = DEVICES["a100"]
    cases = [(1, K, N, 128, _shapes.split_k_workspace_floats(1, _layout.n_pad(N)), *a100, 0)
             for K, N in [(8192, 512), (4096, 1024), (4096, 4096)]]
    assert [got[6] for got in planner(cases)] == [0, 0, 1]
    h200 = [(1, 4096, 1024, 128, _shapes.split_k_workspace_floats(1, 1024), *DEVICES["h200"], 0)]
    assert planner(h200, max_cluster=1)[0][6] == 0
    assert planner(h200)[0][6] == 4


ONE_BLOCK_MIN_PARTS = int(re.search(r"#define JAX_MARLIN_STREAM_ONE_BLOCK_MIN_PARTS (\d+)",
                                     (ROOT / "ffi" / "stream_plan.h").read_text()).group(1))


def test_deeply_cut_two_wave_grids_take_one_block_an_sm(planner, tmp_path_factory):
    """From M = 9, a grid that two blocks an SM spread over more than one wave, with some column
    group cut into more than kStreamOneBlockMinParts partials, is planned with one block
    an SM; every other plan is the one the planner makes with the rule off, and the
    replanned grids keep the partition's invariants (the parts the workspace holds, the
    shared memory the device has). On the H200 it is 28672 x 8192 at M = 12-16 (33
    partials, measured 7-16% faster with one block), not 8192 x 28672 (11 partials,
    measured 0-3% slower)."""
    # Both without A in phases (test_a_in_phases), which takes some of these grids first.
    rule_on = host_planner(tmp_path_factory, "stream_plan_check.cc",
                           defines=["JAX_MARLIN_STREAM_A_PHASES=0"])
    rule_off = host_planner(tmp_path_factory, "stream_plan_check.cc",
                            defines=["JAX_MARLIN_STREAM_ONE_BLOCK_MIN_PARTS=2147483647",
                                     "JAX_MARLIN_STREAM_A_PHASES=0"])
    cases = [c for _, c in _cases(0)]
    replanned = 0
    for case, got, off in zip(cases, rule_on(cases, *PLAN_ARGV), rule_off(cases, *PLAN_ARGV)):
        M, K, N, block, workspace, sms, smem_limit, cc, _ = case
        deep_two_waves = (M >= 9 and off is not None and not off[6] and off[0] > 2 * sms
                          and off[5] > ONE_BLOCK_MIN_PARTS)
        if not deep_two_waves:
            assert got == off, (case, off, got)
            continue
        replanned += 1
        assert got is not None, case  # the two-block grid stays if one block cannot fit
        B, T, L, smem, any_cut, parts, tile_split, _, _, _ = got
        model_parts, _ = _model_parts(T, L, B)
        assert B <= T and smem <= smem_limit, (case, got)
        assert parts == model_parts and parts <= MAX_PARTS, (case, got)
        assert parts == 1 or parts * M * _layout.n_pad(N) <= workspace, (case, got)
    assert replanned
    sms, smem, cc = DEVICES["h200"]
    h200 = [(M, K, N, 128, _shapes.split_k_workspace_floats(M, _layout.n_pad(N)), sms, smem, cc,
             0) for M, K, N in [(16, 28672, 8192), (12, 28672, 8192), (16, 8192, 28672),
                                (8, 28672, 8192)]]
    assert [got[0] for got in rule_on(h200, *PLAN_ARGV)] == [132, 132, 528, 264]


def test_the_tile_split_stages_a_in_phases_per_warp(planner, tmp_path_factory):
    """From M = 9, a tile split whose blocks cannot hold A for all of their steps stages it
    per warp in phases (each of the 8 warps two slots of P steps, P the most that fit,
    at least the ring's depth), where without such phases the planner had no tile split
    at all. Every other plan is the one without. On the H200: 11008 x 4096 at M = 16
    (C = 2, 43 steps a block) and 8192 x 8192 from M = 10 (C = 1, 64 steps), which ran
    stream-K with its reduce; not 14336 x 4096 at M = 16 (C = 2 would hold 56 steps a
    block: stream-K stays), nor 9 x 14336 x 4096, whose A fits whole."""
    no_phases = host_planner(tmp_path_factory, "stream_plan_check.cc",
                             defines=["JAX_MARLIN_STREAM_TILE_PHASES=0"])
    phased = 0
    for split_k in (0, -1, -2):
        cases = [c for _, c in _cases(split_k)]
        for case, got, off in zip(cases, planner(cases), no_phases(cases, *PLAN_ARGV)):
            M, K, N, block, workspace, sms, smem_limit, cc, _ = case
            if got is None or not got[6] or not got[8]:
                assert got == off, (case, off, got)
                continue
            phased += 1
            B, T, L, smem, _, _, C, P, _, _ = got
            assert off is None or not off[6] or (split_k < 0 and off[6] != C), (case, off, got)
            groups = max(1, 128 // block)
            step = M * (A_ROW_BYTES + (0 if (M > 8 and block == 32) else 8 * groups))
            inbox = _tile_split_inbox(C, M)
            assert M >= 9 and P >= TILE_PHASE_MIN_STEPS, (case, got)
            assert C == 1 or -(-L // C) <= TILE_PHASE_MAX_BLOCK_STEPS, (case, got)
            assert _fixed_bytes(groups) + -(-L // C) * step + inbox > smem_limit, (case, got)
            assert smem == _fixed_bytes(groups) + 16 * P * step + inbox <= smem_limit, (case, got)
            assert smem + 16 * step > smem_limit, (case, got)  # P is the most that fit
    assert phased
    sms, smem, cc = DEVICES["h200"]
    h200 = [(M, K, N, 128, _shapes.split_k_workspace_floats(M, _layout.n_pad(N)), sms, smem, cc,
             0) for M, K, N in [(16, 11008, 4096), (16, 14336, 4096), (9, 14336, 4096),
                                (16, 8192, 8192), (12, 8192, 8192)]]
    assert [(got[6], got[7], got[8]) for got in planner(h200)] == [
        (2, 2, 1), (2, 2, 1), (2, 56, 0), (1, 2, 1), (1, 3, 1)]


def test_a_in_phases(planner, tmp_path_factory):
    """From M = 9, where two blocks an SM would need more than one wave to stage A for all
    of their steps, a one-wave grid stages it in phases (two slots of P steps that
    alternate), as long as that grid cuts no column group into more than
    kStreamOneBlockMinParts partials; P is the most steps two slots of which fit half an
    SM's shared memory, and at least 3. Every other plan is the one the planner makes
    without phases. On the H200: 8192 x 28672 at M = 12-16 (528 blocks, 11 partials ->
    264, 6), not 28672 x 8192 (its one wave would cut 17 partials: one block an SM stays)."""
    no_phases = host_planner(tmp_path_factory, "stream_plan_check.cc",
                             defines=["JAX_MARLIN_STREAM_A_PHASES=0"])
    cases = [c for _, c in _cases(0)]
    phased = 0
    for case, got, off in zip(cases, planner(cases), no_phases(cases, *PLAN_ARGV)):
        M, K, N, block, workspace, sms, smem_limit, cc, _ = case
        # every step staged at once, or the tile split (its phases are a warp's:
        # test_the_tile_split_stages_a_in_phases_per_warp)
        if got is None or got[6] or got[7] >= -(-got[1] // got[0]):
            assert got == off and (got is None or got[6] or not got[8]), (case, off, got)
            continue
        phased += 1
        B, T, L, smem, any_cut, parts, tile_split, phase, launches_phased, _ = got
        assert launches_phased, (case, got)
        # Without phases: more than one wave of two blocks an SM, or the one-block grid
        # the planner takes for such a grid when it cuts too finely.
        half_sm = min(smem_limit, (smem_limit + 1024) // 2 - 1024)
        assert off is not None and not off[6], (case, off, got)
        assert off[0] > 2 * sms or off[3] > half_sm, (case, off, got)
        assert M >= 9 and not tile_split and B <= 2 * sms, (case, got)
        assert parts == _model_parts(T, L, B)[0] and parts <= ONE_BLOCK_MIN_PARTS, (case, got)
        assert parts == 1 or parts * M * _layout.n_pad(N) <= workspace, (case, got)
        groups = max(1, 128 // block)
        step = M * (A_ROW_BYTES + (0 if block == 32 else 8 * groups))
        assert phase >= PHASE_MIN_STEPS, (case, got)
        assert smem == _fixed_bytes(groups) + 2 * phase * step <= half_sm, (case, got)
        assert _fixed_bytes(groups) + 2 * (phase + 1) * step > half_sm, (case, got)
    assert phased
    sms, smem, cc = DEVICES["h200"]
    h200 = [(M, K, N, 128, _shapes.split_k_workspace_floats(M, _layout.n_pad(N)), sms, smem, cc,
             0) for M, K, N in [(16, 8192, 28672), (12, 8192, 28672), (11, 8192, 28672),
                                (16, 28672, 8192)]]
    assert [(got[0], got[5], got[7]) for got in planner(h200)] == [
        (264, 6, 5), (264, 6, 6), (264, 6, 14), (132, 9, 28)]


@pytest.mark.parametrize("split_k", [0, -2, -4, GROUP_CLUSTER + 4])
def test_no_clusters_where_the_code_has_none(planner, split_k):
    """An sm_90 part running a build for sm_80 only (its cluster epilogue compiled
    out): the launcher caps the cluster size at 1, and no plan may exceed it."""
    cases = [c for _, c in _cases(split_k) if c[7] >= 90]
    assert cases
    for case, got in zip(cases, planner(cases, max_cluster=1)):
        assert got is None or (got[6] <= 1 and got[9] == 0), (case, got)
    # The same cases with clusters allowed do use them somewhere.
    assert any(got is not None and (got[6] > 1 or got[9] > 1) for got in planner(cases))


def test_planning_is_fast_even_when_nothing_fits(planner):
    """It runs on every call: a shape it must decline costs microseconds, not seconds."""
    import time
    sms, smem, cc = DEVICES["ada_99kb"]
    cases = [(16, 65536, 131072, 32, _shapes.split_k_workspace_floats(16, 131072), sms, smem,
              cc, 0)] * 200
    start = time.perf_counter()
    planner(cases)
    assert time.perf_counter() - start < 5.0


def test_python_and_cuda_agree_on_which_m_streams():
    """The workspace is sized in Python for the kernel the launcher picks in C++."""
    header = (ROOT / "ffi" / "stream_kernel.h").read_text()
    assert int(re.search(r"kStreamMaxM = (\d+);", header).group(1)) == _shapes.STREAM_MAX_M
    assert MAX_PARTS == _shapes.MAX_STREAM_PARTS  # the workspace holds what the reduce adds


def test_the_a_staging_walk_copies_every_chunk_once_in_order(tmp_path_factory):
    """The kernel stages A without dividing by M or the k-steps for every copy
    (AStagingWalk carries its indices from one copy to the next). Each thread's
    copies must be the ones the direct division gives, in the same order: the
    block's (256 threads) and a warp's own (32), M = 1-16, a step range starting
    inside a tile or past its end (stream-K runs on into the next tile)."""
    run = host_planner(tmp_path_factory, "a_staging_check.cc")
    chunks_per_row = 16  # kStepK / 8: a staged row of 128 k in 16-byte chunks
    cases = [(threads, rows, count, k_begin, k_steps)
             for threads in (32, 256) for rows in (1, 2, 3, 9, 15, 16)
             for count in (1, 2, 3, 7, 17) for k_begin, k_steps in
             ((0, 1), (0, 32), (5, 7), (31, 32), (200, 3), (111, 112), (40, 2))]
    answers = run(cases)
    assert len(answers) == len(cases)
    for case, got in zip(cases, answers):
        threads, rows, count, k_begin, k_steps = case
        total = count * rows * chunks_per_row
        want = []
        for t in range(min(threads, total)):
            for c in range(t, total, threads):
                i = c // (rows * chunks_per_row)
                want += [i, (c // chunks_per_row) % rows, c % chunks_per_row,
                         (k_begin + i) % k_steps]
        assert list(got) == want, case
