"""Benchmark: jax_marlin against the other ways to multiply by a 4-bit weight.

Run ``python -m jax_marlin.bench`` (``--quick`` for a short first run, ``--help``
for every option). In one process it times, for each weight shape ``K x N``,
batch ``M``, activation dtype and quantization group:

``jax_marlin``        ``jm.matmul_nbits(x, w)`` (``impl="auto"``)
``jax_marlin_fused``  the same, ``impl="fused"`` (``--no-forced`` drops the forced rows)
``jax_marlin_dense``  the same, ``impl="dense"``
``dense``             ``jnp.dot(x, w)`` with dense ``[K, N]`` weights of the activation dtype
``xla_int4``          what a JAX user writes today: ``uint4 [K, N]`` codes and
                      ``[K / group, N]`` scales and ``uint4`` zero points, dequantized
                      inside the jitted function, then ``jnp.dot``
``tinygemm``          ``torch.ops.aten._weight_int4pack_mm`` (only when torch with
                      CUDA works here; bf16 activations where it takes no fp16, as
                      the note says; a failure skips the row with a message), in
                      the JAX rows' loop: the same passes, checksum and nudge
``dense_pass``,       not in the default set: ``dense``, ``jax_marlin`` and tinygemm
``jax_marlin_pass``,  timed as bare passes over the rotation, no checksum (below)
``tinygemm_pass``

Protocol (``shared/bench/ANCHORS.md``):

* Weights never sit in L2: each impl rotates through enough distinct weight
  copies that their bytes exceed ``4 x L2`` (at least 2 copies; fewer for dense
  weights, which are 4x larger than int4 ones).
* One timed call runs many GEMMs: a jitted function applies the op to ``x`` with
  each copy in turn (a Python-unrolled pass over the copies, repeated by a
  ``lax.fori_loop``; no weight is sliced inside the loop). A pass holds at
  least ``--min-pass-gemms`` (16) copies: where fewer distinct weights fill the
  rotation (large shapes), the rest are duplicates in buffers of their own. The
  outputs of a pass feed one float32 checksum (sum of ``|y|``: a few small
  kernels per pass, ~6-8 us on the H200), which nudges ``x`` before the next
  pass, so no GEMM is dead code or loop-invariant (and the weights pass an
  optimization barrier with that ``x``, so XLA cannot hoist what is computed from
  the weights alone, such as ``xla_int4``'s dequantization, out of the loop: it
  did, on the CPU, until session 44); 16 GEMMs share that cost
  (with 2 copies a pass it added ~3 us to every 8192 x 28672 GEMM: session 12).
  The timed loops compile with XLA's ``dot-merger`` pass off: it merged pairs of
  the pass's independent dense 4096 x 4096 dots on the same ``x`` into one GEMM
  of twice the width (session 12), which times another shape. At least ``--min-gemms`` (64) GEMMs and
  ``--min-call-ms`` (20 ms) per call, unless a single call would pass
  ``--max-call-ms`` (GEMMs of milliseconds, where dispatch costs nothing):
  the ``gemms_per_call`` column says how many ran. The passes are sized by
  timing calls (``Timing.sized_passes``): a one-pass call carries the call's
  fixed cost, and sizing from it alone left fast GEMMs' calls at a third of
  the 20 ms (until session 37). A call has a fixed cost
  (dispatch, the loop, the host sync); over 2 ms calls, the earlier default, it
  added 1-3 us to every small GEMM, dense and int4 alike (4096 x 4096 at M = 1 on
  the H200: 13.5 / 12.3 us dense / int4 with 2 ms calls, 10.3 / 9.2 us with
  20 ms calls; session 4, calls 2 and 3).
* Time per GEMM = host wall time of one call (``block_until_ready``) divided by
  its GEMMs, after a warm-up (compile + one run); the median of ``--repeats``
  (>= 5) calls, measured twice: ``us`` and ``us_run2`` are the two independent
  medians, ``spread_pct`` their difference. tinygemm runs the same loop in
  torch: a CUDA graph of one pass (the nudge of ``x`` by the running checksum,
  the rotation's GEMMs, one float32 checksum of their outputs; eager launches
  if capture fails), replayed as many passes a call as the same sizing rules
  ask, host wall time of the call, ``x`` and the checksum reset at its start.
  (Until session 44 tinygemm was timed by CUDA events around replays of bare
  passes, with no checksum: not the JAX rows' way, so a comparison with it was
  not like for like.) The ``*_pass`` rows time bare passes: for JAX, one jitted
  pass over the same rotation that returns every output, called back to back,
  host wall time over its GEMMs (median of ``--repeats`` calls of as many
  passes as the loop's rules ask for); ``tinygemm_pass``, CUDA events around
  graph replays of a pass. Their ``speedup_vs_dense`` is against ``dense_pass``.
* Data are random normal (never zeros). The first GEMM of a timed call (copy 0,
  the unmodified ``x``), from one more call of the timed program, is checked
  against a float32 dequantize-then-dot of the ONNX tensors (``rel_err``,
  relative Frobenius error). A row past ``CHECK_TOLERANCE`` for its dtype (or
  with a non-finite output) is kept in the CSV with a note starting ``CHECK
  FAILED``, left out of the summary and the plot, and the command exits with
  status 1 after the run.
* ``speedup_vs_dense = us(dense, same K, N, M, dtype) / us(impl)``;
  ``weight_GBps`` counts the quantized bytes for every row (codes ``N K / 2`` +
  scales ``2 N K / group`` + zero points ``N K / group / 2``), as the anchors do;
  ``read_GBps`` counts what the impl actually reads (dense: ``2 N K``).

Extra sections (on in the full run, before the sweep): ``--layer-stack`` (one
jitted chain of 32 layers ``x = tanh(x @ W_i)``, 4096 x 4096 at M = 1: the time
per layer, and its excess over the rotated per-GEMM time of the same shape,
i.e. the launch overhead of a layer plus its small tanh kernel) and ``--repack``
(device time of ``prepare`` for 8192 x 28672, compiled first). The sweep runs
dtype by dtype (float16 first) and stops starting blocks after ``--budget-s``.
Outputs: a table as it goes, a CSV written row by row, a summary, and a PNG of
jax_marlin's speed-up over dense against M (skipped, with a message, without
matplotlib).
"""

from __future__ import annotations

import os

# Before any backend starts: let torch and JAX share the GPU.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import argparse  # noqa: E402
import csv  # noqa: E402
import dataclasses  # noqa: E402
import functools  # noqa: E402
import importlib.util  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jax_marlin as jm  # noqa: E402
from jax_marlin import _ffi, _format  # noqa: E402

DEFAULT_SHAPES = "4096x4096,4096x14336,14336x4096,8192x28672,28672x8192"
DEFAULT_MS = "1,2,4,8,16,32,64,128,256,1024,4096"
QUICK_SHAPES = "4096x14336,8192x28672"
QUICK_MS = "1,16,64,256,4096"
IMPLS = ("dense", "jax_marlin", "jax_marlin_fused", "jax_marlin_dense", "xla_int4", "tinygemm")
PASS_IMPLS = ("dense_pass", "jax_marlin_pass", "tinygemm_pass")  # opt-in (--impls): bare passes
TINYGEMM_IMPLS = ("tinygemm", "tinygemm_pass")
ALL_IMPLS = IMPLS + PASS_IMPLS
FORCED = ("jax_marlin_fused", "jax_marlin_dense")
COLUMNS = ("K", "N", "M", "dtype", "group", "impl", "us", "speedup_vs_dense", "us_run2",
           "spread_pct", "weight_GBps", "read_GBps", "TFLOPs", "rel_err", "gemms_per_call",
           "copies", "compile_s", "device", "jax_version", "note")
DEFAULT_L2_MB = 60.0
F32 = jnp.float32
# The largest rel_err a row may have. h200.csv's rows read at most 3.3e-3 (tinygemm, with
# bf16 activations; jax_marlin 2.8e-4 in float16, 2.2e-3 in bfloat16, the 32-layer stack
# 1.5e-3); a wrong zero point, scale or nibble order reads 0.1-1.5. float32 as float16:
# the GPU's float32 dots may run in TF32.
CHECK_TOLERANCE = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-2}


def log(*parts):
    print(*parts, flush=True)


# --- settings --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Timing:
    """How each configuration is timed (see the module docstring)."""

    repeats: int
    min_gemms: int
    min_call_s: float
    max_call_s: float
    rotate_bytes: float  # the weight bytes one pass must exceed (4 x L2)
    max_copies: int
    min_pass_gemms: int = 16  # weights a pass at least (duplicates of the copies)

    def copies(self, bytes_per_copy: float) -> int:
        return int(min(self.max_copies, max(2, math.ceil(self.rotate_bytes / bytes_per_copy))))

    def passes(self, copies: int, pass_s: float) -> int:
        """Passes per timed call, from the measured time of one pass."""
        passes = max(math.ceil(self.min_gemms / copies), math.ceil(self.min_call_s / pass_s))
        if passes * pass_s > self.max_call_s:
            passes = max(1, int(self.max_call_s / pass_s))
        return min(passes, 100_000)

    def sized_passes(self, copies: int, call_s) -> int:
        """Passes per timed call, sized by timing calls: ``call_s(p)`` is the wall time in
        s of one warm call of ``p`` passes.

        A one-pass call also carries the call's fixed cost (dispatch, the loop's launch,
        the host sync: ~0.65 ms at 8192 x 28672, M = 1 on the H200, session 37), so sizing
        from it alone left the fast GEMMs' calls short of ``min_call_s`` (session 31's
        table at 8192 x 28672, M = 1: 7.7 ms for jax_marlin's 193 GEMMs, charged ~3.4 us
        each of it, and 17.5 ms for dense's 161, ~4.0 us each). Where the sized call still
        falls short, the passes are sized again from the time a pass adds, the difference
        of the two calls, in which the fixed cost cancels; no more than ``max_call_s``
        allows at the sized call's own rate, so a noisy first call cannot blow it up.
        """
        one = call_s(1)
        passes = self.passes(copies, one)
        if passes == 1:
            return 1
        wall = call_s(passes)
        per_pass = (wall - one) / (passes - 1)
        if wall >= self.min_call_s or per_pass <= 0:
            return passes
        ceiling = max(passes, int(passes * self.max_call_s / wall))
        return max(passes, min(self.passes(copies, per_pass), ceiling))


class Deadline:
    def __init__(self, budget_s):
        self.start = time.perf_counter()
        self.budget_s = budget_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def passed(self) -> bool:
        return self.budget_s is not None and self.elapsed() > self.budget_s


def block_size_for(K: int, group: int) -> int:
    """The MatMulNBits block size; ``group == -1`` is per-channel (next power of two >= K)."""
    return group if group > 0 else max(16, 1 << (K - 1).bit_length())


def quantized_bytes(K: int, N: int, block: int) -> float:
    blocks = _format.k_blocks(K, block)
    return N * K / 2 + N * blocks * 2 + N * blocks / 2


def tree_bytes(tree) -> int:
    """The bytes ``tree``'s arrays hold, 4-bit types at half a byte (numpy gives them one)."""
    def nbytes(x):
        if jnp.issubdtype(x.dtype, jnp.integer) and jnp.iinfo(x.dtype).bits < 8:
            return x.size * jnp.iinfo(x.dtype).bits / 8
        return x.size * x.dtype.itemsize
    return sum(nbytes(x) for x in jax.tree_util.tree_leaves(tree))


# --- weights ------------------------------------------------------------------------


def onnx_copies(key, K, N, block, dtype, count):
    """``count`` distinct quantized weights (MatMulNBits tensors), scales in ``dtype``."""
    out = []
    for k in jax.random.split(key, count):
        kernel = (jax.random.normal(k, (K, N), F32) * K ** -0.5).astype(dtype)
        out.append(jm.quantize(kernel, bits=4, block_size=block, symmetric=False))
    return out


def onnx_arrays(q):
    return q.packed, q.scales, q.zero_points


def onnx_kwargs(q):
    return dict(K=q.K, N=q.N, bits=q.bits, block_size=q.block_size)


@functools.partial(jax.jit, static_argnames=("K", "N", "block_size"))
def _codes_and_zero_points(packed, scales, zero_points, *, K, N, block_size):
    """ONNX tensors -> codes ``uint8 [N, K]``, scales ``[N, blocks]``, zero points
    ``uint8 [N, blocks]``."""
    blocks = _format.k_blocks(K, block_size)
    codes = _format.unpack_codes(packed, 4)[:, :K]
    zp = _format.unpack_zero_points(zero_points.reshape(N, -1), 4, blocks)
    return codes, scales.reshape(N, blocks), zp


def xla_int4_group(K: int, block: int) -> int:
    """The group of the XLA int4 layout: the block, or all of K when one block covers it."""
    return K if _format.k_blocks(K, block) == 1 else block


@functools.partial(jax.jit, static_argnames=("K", "N", "block_size", "dtype"))
def _xla_int4_weights(packed, scales, zero_points, *, K, N, block_size, dtype):
    codes, scales, zp = _codes_and_zero_points(packed, scales, zero_points, K=K, N=N,
                                               block_size=block_size)
    group = xla_int4_group(K, block_size)
    k_pad = _format.k_blocks(K, group) * group  # K itself unless a group straddles the end
    codes = jnp.pad(codes, ((0, 0), (0, k_pad - K)))
    return codes.T.astype(jnp.uint4), scales.T.astype(dtype), zp.T.astype(jnp.uint4)


def xla_int4_weights(q, dtype):
    return _xla_int4_weights(*onnx_arrays(q), K=q.K, N=q.N, block_size=q.block_size,
                             dtype=jnp.dtype(dtype))


def dense_weight(q, dtype):
    return _dense_weight(*onnx_arrays(q), **onnx_kwargs(q), dtype=jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnames=("K", "N", "bits", "block_size", "dtype"))
def _dense_weight(packed, scales, zero_points, *, dtype, **kw):
    return jm.reference.dequantize(packed, scales, zero_points, **kw).T.astype(dtype)


def marlin_weights(q, dtype):
    return jm.prepare(*onnx_arrays(q), **onnx_kwargs(q), scale_dtype=dtype)


# --- the ops under test ---------------------------------------------------------------


def op_dense(x, w):
    return jnp.dot(x, w)


def op_xla_int4(x, w):
    codes, scales, zp = w
    K, N = x.shape[-1], codes.shape[1]
    groups = scales.shape[0]
    dtype = x.dtype
    weight = codes.reshape(groups, -1, N).astype(dtype) - zp.astype(dtype)[:, None, :]
    weight = (weight * scales[:, None, :]).reshape(-1, N)[:K]
    return jnp.dot(x, weight)


def op_marlin(impl):
    return lambda x, w: jm.matmul_nbits(x, w, impl=impl)


def checksum(*ys):
    """A float32 function of every element of ``ys`` that no rewrite moves through a dot.

    One reduction over all the outputs of a pass: one small kernel per pass, not
    per GEMM, so that it adds little to the time of small GEMMs.
    """
    return jnp.sum(jnp.abs(jnp.concatenate([y.reshape(-1) for y in ys])), dtype=F32)


def in_rotation(copies, n: int, duplicate=lambda w: jax.tree.map(lambda a: a.copy(), w)):
    """``copies`` extended to at least ``n`` weights by duplicates, each in buffers of its
    own (``Array.copy``; tinygemm's torch tensors pass their own ``duplicate``): XLA sees
    distinct parameters (nothing to merge), the L2 distinct addresses, and no weight is
    quantized again."""
    out = list(copies)
    while len(out) < n:
        out.append(duplicate(copies[len(out) % len(copies)]))
    return tuple(out)


def loop_compiler_options():
    """XLA options of the timed loops: ``dot-merger`` off, added to any passes that
    ``XLA_FLAGS`` already turns off (the option replaces the flag's list)."""
    disabled = ["dot-merger"]
    for flag in os.environ.get("XLA_FLAGS", "").split():
        name, _, value = flag.partition("=")
        if name == "--xla_disable_hlo_passes" and value:
            disabled += [p for p in value.split(",") if p and p not in disabled]
    return {"xla_disable_hlo_passes": ",".join(disabled)}


def make_loop(op):
    """The timed function: ``1 + passes * len(weights)`` GEMMs in one call.

    Returns the first GEMM's output (``x`` and copy 0, for the check) and a
    float32 checksum of every output, which also nudges ``x`` between passes.
    ``passes`` is static: with a trip count known at compile time XLA runs the
    loop without reading its predicate back to the host every pass, a sync
    that would otherwise be charged to the GEMMs.
    """

    @functools.partial(jax.jit, static_argnums=2, compiler_options=loop_compiler_options())
    def loop(x, weights, passes):
        y0 = op(x, weights[0])
        total = checksum(y0)

        def one_pass(_, carry):
            x, total = carry
            x = x + (jnp.tanh(total) * 1e-3).astype(x.dtype)
            # The weights pass a barrier with the nudged x, so that nothing computed
            # from them alone (xla_int4's dequantization) is hoisted out of the loop
            # and run once for all passes: each GEMM must read its weight as stored.
            x, pass_weights = jax.lax.optimization_barrier((x, weights))
            return x, total + checksum(*(op(x, w) for w in pass_weights))

        _, total = jax.lax.fori_loop(0, passes, one_pass, (x, total))
        return y0, total

    return loop


JAX_OPS = {
    "dense": op_dense,
    "xla_int4": op_xla_int4,
    "jax_marlin": op_marlin("auto"),
    "jax_marlin_fused": op_marlin("fused"),
    "jax_marlin_dense": op_marlin("dense"),
}
LOOPS = {name: make_loop(op) for name, op in JAX_OPS.items()}


def make_pass(op):
    """One pass over the rotation with no checksum and no loop, every output returned (so
    none is dead code): what ``tinygemm_pass``'s CUDA graph replays run."""

    @functools.partial(jax.jit, compiler_options=loop_compiler_options())
    def one_pass(x, weights):
        return tuple(op(x, w) for w in weights)

    return one_pass


PASSES = {"dense_pass": make_pass(op_dense), "jax_marlin_pass": make_pass(op_marlin("auto"))}


@jax.jit
def _reference(x, weight_nk):
    """The float32 oracle: ``x @ weight_nk^T`` at the highest precision."""
    return jnp.einsum("mk,nk->mn", x.astype(F32), weight_nk, precision=jax.lax.Precision.HIGHEST)


@jax.jit
def _rel_err(y, ref_all):
    ref = ref_all[: y.shape[0]]
    return jnp.linalg.norm(y.astype(F32) - ref) / jnp.linalg.norm(ref)


# --- timing -------------------------------------------------------------------------------


def medians_us(call, repeats: int, per: int = 1) -> list[float]:
    """The two independent medians (``us``, ``us_run2``) of ``repeats`` timed calls, in us
    per ``per`` (GEMMs or layers a call), after one untimed call: a loop's timed trip count
    compiles once more, and session 31's call C read the layer stack's first median at
    11.96 against a second of 8.44 us a layer where nothing had run the timed call yet."""
    return [wall for wall, _ in median_runs_us(call, repeats, per)]


def median_runs_us(call, repeats: int, per: int = 1) -> list[tuple[float, float]]:
    """``medians_us``'s two runs, each as (median wall time, median host dispatch time) of
    the same calls. The dispatch, the time until ``call`` returns before its results are
    ready, nears the wall time where the GPU waits for the host (the layer stack: session
    32 call E read ~7.6 us a layer for dense and 4-bit alike)."""
    jax.block_until_ready(call())
    runs = []
    for _ in range(2):
        times = call_times_s(call, repeats)
        runs.append((statistics.median(wall for _, wall in times) * 1e6 / per,
                     statistics.median(host for host, _ in times) * 1e6 / per))
    return runs


def call_times_s(call, repeats: int) -> list[tuple[float, float]]:
    """(host time until ``call`` returns, wall time until its results are ready), in s, for
    each of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        returned = time.perf_counter()
        jax.block_until_ready(out)
        times.append((returned - start, time.perf_counter() - start))
    return times


def median_call_s(call, repeats: int) -> float:
    return statistics.median(wall for _, wall in call_times_s(call, repeats))


@dataclasses.dataclass
class Measurement:
    us: float
    us_run2: float
    gemms: int
    copies: int
    compile_s: float
    rel_err: float
    read_bytes: float
    note: str = ""


def measure_jax(impl, x, weights, ref_all, timing: Timing) -> Measurement:
    loop, copies = LOOPS[impl], len(weights)
    start = time.perf_counter()
    y0, total = jax.block_until_ready(loop(x, weights, 1))  # compile + first run
    compile_s = time.perf_counter() - start

    def call_s(passes):  # the shorter of two warm calls, against a one-off hiccup
        jax.block_until_ready(loop(x, weights, passes))  # compiles a new trip count
        return min(wall for _, wall in call_times_s(lambda: loop(x, weights, passes), 2))

    passes = timing.sized_passes(copies, call_s)
    gemms = 1 + passes * copies
    call = functools.partial(loop, x, weights, passes)
    us = medians_us(call, timing.repeats, gemms)
    y0, total = jax.block_until_ready(call())  # the timed program's own output is checked
    note = "" if bool(jnp.isfinite(total)) else "non-finite running sum"
    return Measurement(us[0], us[1], gemms, copies, compile_s, float(_rel_err(y0, ref_all)),
                       tree_bytes(weights[0]), note)


def measure_jax_pass(impl, x, weights, ref_all, timing: Timing) -> Measurement:
    """``PASSES[impl]`` called ``passes`` times back to back (dispatch is asynchronous: the
    host queues the passes while the GPU runs them), wall time over the GEMMs."""
    one_pass, copies = PASSES[impl], len(weights)
    start = time.perf_counter()
    ys = jax.block_until_ready(one_pass(x, weights))
    compile_s = time.perf_counter() - start

    def call_s(passes):
        return min(wall for _, wall in call_times_s(
            lambda: [one_pass(x, weights) for _ in range(passes)][-1], 2))

    passes = timing.sized_passes(copies, call_s)

    def call():
        for _ in range(passes):
            out = one_pass(x, weights)
        return out

    us = medians_us(call, timing.repeats, passes * copies)
    return Measurement(us[0], us[1], passes * copies, copies, compile_s,
                       float(_rel_err(ys[0], ref_all)), tree_bytes(weights[0]))


# --- torch tinygemm ---------------------------------------------------------------------------


@functools.cache
def torch_cuda():
    """``(torch, None)`` when torch with CUDA works beside JAX here, else ``(None, reason)``."""
    if jax.default_backend() != "gpu":
        return None, "JAX runs on no GPU"
    if importlib.util.find_spec("torch") is None:
        return None, "torch is not installed"
    # Import in a child first, in the same order as here (JAX's backend, then
    # torch's CUDA), so that a crash costs the row and not the benchmark.
    probe = ("import jax, jax.numpy as jnp; jnp.ones(1).block_until_ready(); import torch; "
             "assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'; "
             "torch.ones(1, device='cuda').sum().item()")
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              timeout=180)
    except subprocess.TimeoutExpired:
        return None, "probe of torch + CUDA timed out"
    if done.returncode != 0:
        return None, f"torch + CUDA probe failed: {done.stderr.strip()[-400:]}"
    import torch

    return torch, None


def l2_bytes(override_mb, torch):
    if override_mb is not None:
        return override_mb * 2**20, f"{override_mb:g} MB (--l2-mb)"
    size = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) if torch else 0
    if size:
        return size, f"{size / 2**20:.1f} MB (torch)"
    return DEFAULT_L2_MB * 2**20, f"{DEFAULT_L2_MB:.0f} MB (assumed)"


@functools.partial(jax.jit, static_argnames=("K", "N", "block_size", "high_first"))
def _tinygemm_arrays(packed, scales, zero_points, *, K, N, block_size, high_first):
    """uint8 ``[N, K / 2]`` codes (two per byte) and float32 ``[blocks, N, 2]`` scales and zeros.

    tinygemm dequantizes ``(q - 8) * scale + zero``; ours is ``(q - zp) * scale``,
    so ``zero = (8 - zp) * scale``.
    """
    codes, scales, zp = _codes_and_zero_points(packed, scales, zero_points, K=K, N=N,
                                               block_size=block_size)
    even, odd = codes[:, 0::2], codes[:, 1::2]
    pairs = (even << 4) | odd if high_first else (odd << 4) | even
    scales = scales.astype(F32)
    zeros = (8.0 - zp.astype(F32)) * scales
    return pairs.astype(jnp.uint8), jnp.stack([scales.T, zeros.T], axis=-1)


class TinyGemm:
    """``torch.ops.aten._weight_int4pack_mm`` on the same quantized weights.

    Packing (torch >= 2.5 on CUDA): uint8 ``[N, K / 2]`` codes through
    ``_convert_weight_to_int4pack(w, inner_k_tiles=8)``, scales and zeros
    ``[K / group, N, 2]`` in the activation dtype. The first working setting of
    (activation dtype, nibble order) is kept for the block: the config's dtype
    first (tinygemm may take bf16 only), the even k in the high nibble first.
    """

    GROUPS = (32, 64, 128, 256)
    INNER_K_TILES = 8

    def __init__(self, torch):
        self.torch = torch
        self.release()

    def unsupported(self, K, N, block):
        if block not in self.GROUPS or K % block:
            return f"tinygemm takes group sizes {self.GROUPS} dividing K, not {block}"
        if K % (16 * self.INNER_K_TILES) or N % 8:
            return f"tinygemm needs K % {16 * self.INNER_K_TILES} == 0 and N % 8 == 0"
        return None

    def _weights(self, onnx, torch_dtype, high_first):
        key = (torch_dtype, high_first)
        if key not in self._cache:
            self._cache.clear()  # one setting on the device at a time
            torch, out = self.torch, []
            for q in onnx:
                pairs, sz = _tinygemm_arrays(*onnx_arrays(q), K=q.K, N=q.N,
                                             block_size=q.block_size, high_first=high_first)
                pairs = torch.from_numpy(np.array(pairs)).cuda()
                packed = torch.ops.aten._convert_weight_to_int4pack(pairs, self.INNER_K_TILES)
                out.append((packed, torch.from_numpy(np.array(sz)).to("cuda", torch_dtype)))
            self._cache[key] = out
        return self._cache[key]

    def _settings(self, dtype):
        torch = self.torch
        dtypes = [torch.bfloat16] if dtype == jnp.bfloat16 else [torch.float16, torch.bfloat16]
        settings = [(d, high_first) for d in dtypes for high_first in (True, False)]
        return [self._setting] if self._setting else settings

    def _checked(self, x_host, onnx, dtype, ref_all, mm):
        """Activations and weights of the first setting that runs and passes the check."""
        if self._failure:
            raise RuntimeError(f"{self._failure} (at the block's first M)")
        problems, failed = [], set()
        for torch_dtype, high_first in self._settings(dtype):
            if torch_dtype in failed:
                continue
            try:
                weights = self._weights(onnx, torch_dtype, high_first)
                x = self.torch.from_numpy(x_host).to("cuda", torch_dtype)
                y0 = mm(x, *weights[0])
                rel_err = float(_rel_err(jnp.asarray(y0.float().cpu().numpy()), ref_all))
            except RuntimeError as error:  # e.g. tinygemm takes bf16 activations only
                problems.append(f"{torch_dtype}: {str(error).splitlines()[0][:120]}")
                failed.add(torch_dtype)
                continue
            if rel_err < 0.05:
                self._setting = (torch_dtype, high_first)
                note = "" if torch_dtype == _torch_dtype(self.torch, dtype) else (
                    f"{str(torch_dtype).split('.')[-1]} activations")
                return x, weights, rel_err, "; ".join(
                    n for n in (note, "" if high_first else "low nibble first") if n)
            problems.append(f"{torch_dtype} high_first={high_first}: rel_err {rel_err:.3g}")
        self._failure = "tinygemm: no setting ran and passed the check: " + " | ".join(problems)
        raise RuntimeError(self._failure)

    def measure(self, x_host, onnx, dtype, ref_all, timing: Timing,
                bare: bool = False) -> Measurement:
        """The ``tinygemm`` row (``bare``: the ``tinygemm_pass`` row)."""
        block = onnx[0].block_size

        def mm(x, packed, scales_and_zeros):
            return self.torch.ops.aten._weight_int4pack_mm(x, packed, block, scales_and_zeros)

        x, weights, rel_err, note = self._checked(x_host, onnx, dtype, ref_all, mm)
        # A pass as long as the JAX rows': the pass's fixed work is shared alike.
        weights = in_rotation(weights, timing.min_pass_gemms,
                              lambda w: tuple(t.clone() for t in w))
        timed = self._bare_passes if bare else self._loop
        us, gemms, compile_s, graph_note, y0 = timed(mm, x, weights, timing)
        if y0 is not None:  # the timed graph's own first GEMM, checked as the JAX rows are
            rel_err = float(_rel_err(jnp.asarray(y0.float().cpu().numpy()), ref_all))
        packed, sz = weights[0]
        read = packed.numel() * packed.element_size() + sz.numel() * sz.element_size()
        return Measurement(us[0], us[1], gemms, len(weights), compile_s, rel_err, read,
                           "; ".join(n for n in (note, graph_note) if n))

    def _loop(self, mm, x, weights, timing):
        """make_loop's timed call in torch: each pass nudges ``x`` by the running float32
        checksum, runs every GEMM of the rotation and adds one checksum of all their
        outputs; a call resets both and runs ``passes`` of them, host wall time."""
        torch = self.torch
        x_run = x.clone()
        total = torch.zeros((), device=x.device, dtype=torch.float32)
        first = []  # the pass's first output, in the graph's memory

        def one_pass():
            x_run.add_((torch.tanh(total) * 1e-3).to(x_run.dtype))
            ys = [mm(x_run, packed, sz) for packed, sz in weights]
            first[:] = ys[:1]
            total.add_(torch.linalg.vector_norm(torch.cat([y.reshape(-1) for y in ys]), ord=1,
                                                dtype=torch.float32))

        start = time.perf_counter()
        replay, graph_note = self._graph(one_pass)
        compile_s = time.perf_counter() - start

        def call(passes):
            x_run.copy_(x)
            total.zero_()
            for _ in range(passes):
                replay()
            torch.cuda.synchronize()

        def wall_s(passes):
            start = time.perf_counter()
            call(passes)
            return time.perf_counter() - start

        call(1)  # the first pass's nudge is tanh(0) = 0: its first output is x @ copy 0
        y0 = first[0].clone()
        passes = timing.sized_passes(len(weights), lambda p: min(wall_s(p), wall_s(p)))
        gemms = passes * len(weights)
        us = [statistics.median(wall_s(passes) for _ in range(timing.repeats)) * 1e6 / gemms
              for _ in range(2)]
        if not math.isfinite(float(total)):
            graph_note = "; ".join(n for n in (graph_note, "non-finite running sum") if n)
        return us, gemms, compile_s, graph_note, y0

    def _bare_passes(self, mm, x, weights, timing):
        """CUDA events around graph replays of bare passes (no checksum, no nudge)."""
        def one_pass():
            for packed, sz in weights:
                mm(x, packed, sz)

        start = time.perf_counter()
        replay, graph_note = self._graph(one_pass)
        compile_s = time.perf_counter() - start
        passes = timing.passes(len(weights), self._events_s(replay, 1))
        us = []
        for _ in range(2):
            runs = [self._events_s(replay, passes) for _ in range(timing.repeats)]
            us.append(statistics.median(runs) * 1e6 / (passes * len(weights)))
        return us, passes * len(weights), compile_s, graph_note, None

    def _graph(self, one_pass):
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            one_pass()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                one_pass()
            graph.replay()
            torch.cuda.synchronize()
            return graph.replay, ""
        except Exception as error:  # noqa: BLE001  (any capture failure: time eagerly)
            torch.cuda.synchronize()
            return one_pass, f"eager launches (graph capture failed: {error!s:.80})"

    def _events_s(self, replay, passes):
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(passes):
            replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def release(self):
        """Frees the block's weights (call when the shape, dtype or group changes)."""
        self._cache, self._setting, self._failure = {}, None, None
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()


def _torch_dtype(torch, dtype):
    return torch.float16 if dtype == jnp.float16 else torch.bfloat16


# --- output -----------------------------------------------------------------------------


class Results:
    """Rows as they come: printed, appended to the CSV, kept for the summary."""

    def __init__(self, path, device, jax_version):
        self.path, self.rows, self.failures = path, [], []
        self.context = dict(device=device, jax_version=jax_version)
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", newline="") as f:
            csv.writer(f).writerow(COLUMNS)
        log(f"{'K':>6} {'N':>6} {'M':>5} {'dtype':>8} {'grp':>4} {'impl':<20} {'us':>10} "
            f"{'us_run2':>10} {'x_dense':>7} {'wGB/s':>7} {'TFLOP/s':>7} {'rel_err':>8}  note")

    def dense_us(self, K, N, M, dtype, group, baseline="dense"):
        for row in reversed(self.rows):
            if (row["K"], row["N"], row["M"], row["dtype"], row["group"], row["impl"]) == (
                    K, N, M, dtype, group, baseline) and not row.get("check_failed"):
                return row["us"]
        return None  # (a baseline that failed its check gives no ratio)

    def add(self, K, N, M, dtype, group, impl, m: Measurement, dense_us=None):
        """One row; ``dense_us`` is the baseline (default: this config's ``dense`` row, or
        its ``dense_pass`` row for a ``*_pass`` row)."""
        baseline = "dense_pass" if impl in PASS_IMPLS else "dense"
        if impl == baseline:
            dense_us = m.us
        elif dense_us is None:
            dense_us = self.dense_us(K, N, M, dtype, group, baseline)
        dense = dense_us
        wbytes = quantized_bytes(K, N, block_size_for(K, group))
        row = dict(K=K, N=N, M=M, dtype=dtype, group=group, impl=impl, us=m.us,
                   speedup_vs_dense=dense / m.us if dense else None, us_run2=m.us_run2,
                   spread_pct=100 * abs(m.us_run2 - m.us) / m.us,
                   weight_GBps=wbytes / m.us / 1e3 if M else None,
                   read_GBps=m.read_bytes / m.us / 1e3 if m.read_bytes else None,
                   TFLOPs=2 * M * N * K / m.us / 1e6 if M else None, rel_err=m.rel_err,
                   gemms_per_call=m.gemms, copies=m.copies, compile_s=m.compile_s,
                   note=m.note, **self.context)
        tolerance = CHECK_TOLERANCE.get(str(dtype), 1e-2)
        if m.rel_err is not None and not (m.rel_err <= tolerance and "non-finite" not in m.note):
            row["check_failed"] = True
            row["note"] = "; ".join(n for n in (
                f"CHECK FAILED: rel_err {m.rel_err:.3g} (tolerance {tolerance:g})", m.note) if n)
        self.rows.append(row)
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerow([_csv_value(row.get(c)) for c in COLUMNS])
        log(f"{K:>6} {N:>6} {M:>5} {dtype:>8} {group:>4} {impl:<20} {m.us:>10.2f} "
            f"{m.us_run2:>10.2f} {_fmt(row['speedup_vs_dense'], '7.2f')} "
            f"{_fmt(row['weight_GBps'], '7.0f')} {_fmt(row['TFLOPs'], '7.2f')} "
            f"{_fmt(m.rel_err, '8.1e')}  {row['note']}")


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def _fmt(value, spec):
    width = int(spec.split(".")[0])
    if value is None or not math.isfinite(value):
        return " " * (width - 1) + "-"
    return f"{value:{spec}}"


def print_summary(rows, ms):
    """Pivots of the sweep: microseconds, then speed-up over dense, per shape and impl."""
    sweep = [r for r in rows if r["impl"] in ALL_IMPLS and not r.get("check_failed")]
    blocks = list(dict.fromkeys((r["dtype"], r["group"]) for r in sweep))
    for title, key, spec in (("us per GEMM", "us", "8.1f"),
                             ("speed-up over dense", "speedup_vs_dense", "8.2f")):
        for dtype, group in blocks:
            log(f"\n== {title}: {dtype}, group {group} ==")
            log(f"{'K x N':<12} {'impl':<17}" + "".join(f"{'M=' + str(m):>9}" for m in ms))
            selected = [r for r in sweep if (r["dtype"], r["group"]) == (dtype, group)]
            for shape in dict.fromkeys((r["K"], r["N"]) for r in selected):
                for impl in ALL_IMPLS:
                    cells = {r["M"]: r[key] for r in selected
                             if (r["K"], r["N"], r["impl"]) == (*shape, impl)}
                    if cells:
                        log(f"{f'{shape[0]}x{shape[1]}':<12} {impl:<17}"
                            + "".join(" " + _fmt(cells.get(m), spec) for m in ms))


def plot(rows, path, group):
    try:
        import matplotlib
        import matplotlib.ticker

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log(f"plot: matplotlib is not installed, skipping {path}")
        return
    selected = [r for r in rows if r["impl"] == "jax_marlin" and r["group"] == group
                and r["speedup_vs_dense"] and not r.get("check_failed")]
    if not selected:
        log("plot: no jax_marlin rows with a dense baseline, nothing to plot")
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    shapes = list(dict.fromkeys((r["K"], r["N"]) for r in selected))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, shape in enumerate(shapes):
        for dtype, style in (("float16", "-"), ("bfloat16", "--")):
            points = sorted((r["M"], r["speedup_vs_dense"]) for r in selected
                            if (r["K"], r["N"], r["dtype"]) == (*shape, dtype))
            if points:
                ax.plot(*zip(*points), style, marker="o", markersize=3,
                        color=colors[i % len(colors)], label=f"{shape[0]}x{shape[1]} {dtype}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({r["M"] for r in selected}))
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("M (rows of activations)")
    ax.set_ylabel("speed-up over jnp.dot with dense weights")
    ax.set_title(f"jax_marlin W4A16, group {group}: {selected[0]['device']}")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    log(f"plot: wrote {path}")


# --- sections ---------------------------------------------------------------------------


def try_measure(label, fn, results=None):
    """Runs one measurement; a failure prints a clear message, is listed in
    ``results.failures`` (the command then exits 1) and returns None."""
    try:
        return fn()
    except Exception as error:  # noqa: BLE001  (one failed row must not end the run)
        if results is not None:
            results.failures.append(label)
        log(f"    FAILED {label}: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
        log("    " + "".join(traceback.format_exc().splitlines(True)[-4:]).replace("\n", "\n    "))
        return None


def run_sweep(args, timing: Timing, results: Results, key, deadline: Deadline, tinygemm):
    """Every (dtype, group, shape) block, float16 first; none starts after the budget."""
    impls = [i for i in ALL_IMPLS if i in args.impls]
    blocks = [(d, g, s) for d in args.dtypes for g in args.groups for s in args.shapes]
    sweep_start = time.perf_counter()
    for done, (dtype, group, (K, N)) in enumerate(blocks):
        label = f"{K}x{N} {dtype} group {group}"
        if done:
            spent = time.perf_counter() - sweep_start
            log(f"[sweep: {done}/{len(blocks)} blocks in {spent:.0f} s; at this rate "
                f"~{spent / done * (len(blocks) - done):.0f} s more; budget left "
                f"{deadline.budget_s - deadline.elapsed():.0f} s]")
        if deadline.passed():
            log(f"budget of {deadline.budget_s:.0f} s spent: SKIPPING {label}")
            continue
        key, sub = jax.random.split(key)
        start = time.perf_counter()
        try_measure(label, lambda: sweep_block(args, timing, results, deadline, sub, K, N, dtype,
                                               group, impls, tinygemm), results)
        log(f"[{label}: {time.perf_counter() - start:.1f} s; elapsed {deadline.elapsed():.0f} s]")


def sweep_block(args, timing, results, deadline, key, K, N, dtype, group, impls, tinygemm):
    """Every M and impl of one (shape, dtype, group): weights built once."""
    block = block_size_for(K, group)
    log(f"-- {K}x{N} {dtype} group {group} (block {block}): building weights")
    start = time.perf_counter()
    qbytes = quantized_bytes(K, N, block)
    n_int4, n_dense = timing.copies(qbytes), timing.copies(2 * K * N)
    for name, n, nbytes in (("int4", n_int4, qbytes), ("dense", n_dense, 2 * K * N)):
        if n * nbytes < timing.rotate_bytes:  # capped by --max-copies
            log(f"   WARNING: {n} {name} copies rotate {n * nbytes / 2**20:.1f} MiB, less than "
                f"{timing.rotate_bytes / 2**20:.0f} MiB (4 x L2): raise --max-copies to keep "
                f"the weights out of the L2")
    key_w, key_x = jax.random.split(key)
    onnx = onnx_copies(key_w, K, N, block, dtype, n_int4)
    weights = {}
    if "dense" in impls or "dense_pass" in impls:
        dense = tuple(dense_weight(q, dtype) for q in onnx[:n_dense])
        weights.update({impl: dense for impl in ("dense", "dense_pass") if impl in impls})
    if "xla_int4" in impls:
        weights["xla_int4"] = tuple(xla_int4_weights(q, dtype) for q in onnx)
    marlin = tuple(marlin_weights(q, dtype) for q in onnx) if any(
        i.startswith("jax_marlin") for i in impls) else ()
    for impl in impls:
        if impl.startswith("jax_marlin"):
            weights[impl] = marlin
    built = {impl: len(w) for impl, w in weights.items()}
    rotations = {id(w): in_rotation(w, timing.min_pass_gemms) for w in weights.values()}
    weights = {impl: rotations[id(w)] for impl, w in weights.items()}
    x_all = jax.random.normal(key_x, (max(args.ms), K), F32).astype(dtype)
    ref_all = _reference(x_all, jm.reference.dequantize(*onnx_arrays(onnx[0]),
                                                        **onnx_kwargs(onnx[0])))
    jax.block_until_ready((weights, ref_all))
    log(f"   {n_int4} int4 copies ({qbytes / 2**20:.1f} MiB each), {n_dense} dense copies "
        f"({2 * K * N / 2**20:.1f} MiB each), built in {time.perf_counter() - start:.1f} s; "
        f"a pass: " + ", ".join(f"{impl} {len(w)} ({built[impl]} distinct)"
                                for impl, w in weights.items()))
    for M in args.ms:
        if deadline.passed():
            log(f"budget of {deadline.budget_s:.0f} s spent: SKIPPING {K}x{N} {dtype} M={M}+")
            break
        x = x_all[:M]
        for impl in impls:
            label = f"{impl} {K}x{N} M={M} {dtype} group {group}"
            if impl in TINYGEMM_IMPLS:
                if tinygemm is None:
                    continue
                reason = tinygemm.unsupported(K, N, block)
                if reason:
                    if M == args.ms[0]:
                        log(f"    tinygemm skipped for {K}x{N} group {group}: {reason}")
                    continue
                x_host = np.array(x.astype(F32))
                m = try_measure(label, lambda: tinygemm.measure(
                    x_host, onnx, jnp.dtype(dtype), ref_all, timing, bare=impl != "tinygemm"),
                    results)
            else:
                measure = measure_jax_pass if impl in PASS_IMPLS else measure_jax
                m = try_measure(label, lambda: measure(impl, x, weights[impl], ref_all, timing),
                                results)
            if m is not None:
                results.add(K, N, M, dtype, group, impl, m)
    if tinygemm is not None:
        tinygemm.release()


def chained(op):
    @jax.jit
    def stack(x, weights):
        for w in weights:
            x = jnp.tanh(op(x, w))
        return x

    return stack


def run_layer_stack(args, timing: Timing, results: Results, key):
    """A jitted stack of small layers at M = 1: per-layer time and launch overhead."""
    K, N = args.stack_shape
    layers, dtype, group = args.stack_layers, "float16", 128
    if K != N:
        raise ValueError("--stack-shape must be square (each layer feeds the next)")
    log(f"\n== layer stack: {layers} layers of {K}x{N}, M=1, {dtype}, group {group} ==")
    key_w, key_x = jax.random.split(key)
    onnx = onnx_copies(key_w, K, N, group, dtype, layers)
    marlin = tuple(marlin_weights(q, dtype) for q in onnx)
    dense = tuple(dense_weight(q, dtype) for q in onnx)
    x = jax.random.normal(key_x, (1, K), F32).astype(dtype)
    ref_weights = tuple(jm.reference.dequantize(*onnx_arrays(q), **onnx_kwargs(q)) for q in onnx)
    ref = chained(_reference)(x.astype(F32), ref_weights)
    ref_single = _reference(x, ref_weights[0])
    stack_us = {}
    for impl, weights in (("dense", dense), ("jax_marlin", marlin)):
        rotated = measure_jax(impl, x, weights, ref_single, timing)
        stack = chained(JAX_OPS[impl])
        start = time.perf_counter()
        jax.block_until_ready(stack(x, weights))
        compile_s = time.perf_counter() - start
        # As many chained stacks a timed call as the GEMM loops' passes (>= --min-gemms
        # layers and --min-call-ms): with two stacks a call (64 layers) the call's fixed
        # cost (dispatch, sync) added ~8-15 us to every layer, dense and 4-bit alike,
        # and read 23.2 against 19.3 us a layer where one traced call ran 7.0 against
        # 11.7 (session 28 call D, tools/stack_trace.py).
        def run_calls(calls, stack=stack, weights=weights):
            y = x
            for _ in range(calls):
                y = stack(y, weights)
            return y

        calls = timing.sized_passes(layers, lambda c: median_call_s(lambda: run_calls(c), 3))
        runs = median_runs_us(functools.partial(run_calls, calls), timing.repeats, calls * layers)
        us, dispatch = [wall for wall, _ in runs], runs[0][1]
        rel_err = float(_rel_err(stack(x, weights), ref))
        overhead = us[0] - rotated.us
        name = f"{impl}_stack{layers}"
        stack_us[impl] = us[0]
        m = Measurement(us[0], us[1], calls * layers, layers, compile_s, rel_err,
                        rotated.read_bytes,
                        f"per layer; rotated per-GEMM {rotated.us:.2f} us "
                        f"(run2 {rotated.us_run2:.2f}); overhead {overhead:.2f} us/layer; "
                        f"host dispatch {dispatch:.2f} us/layer")
        results.add(K, N, 1, dtype, group, name, m, dense_us=stack_us["dense"])
        log(f"   {name}: {us[0]:.2f} us/layer (run2 {us[1]:.2f}); rotated single-shape "
            f"{rotated.us:.2f} us/GEMM; launch overhead {overhead:.2f} us/layer; host "
            f"dispatch {dispatch:.2f} us/layer; rel_err {rel_err:.1e}")


def run_repack(args, timing: Timing, results: Results, key):
    """Device time of ``prepare`` with the ONNX tensors already on the device."""
    K, N = args.repack_shape
    group, dtype = 128, "float16"
    log(f"\n== repack: prepare() for {K}x{N}, group {group}, {dtype} scales ==")
    (q,) = onnx_copies(key, K, N, group, dtype, 1)
    jax.block_until_ready(onnx_arrays(q))

    def prepare():
        return jm.prepare(*onnx_arrays(q), **onnx_kwargs(q))

    start = time.perf_counter()
    w = jax.block_until_ready(prepare())  # compiles the repack
    compile_s = time.perf_counter() - start
    prepared, onnx_bytes = tree_bytes(w), tree_bytes(onnx_arrays(q))
    del w
    us = medians_us(prepare, timing.repeats)
    note = (f"prepared {prepared} B vs ONNX {onnx_bytes} B "
            f"(ratio {prepared / onnx_bytes:.4f}); first call incl. compile {compile_s:.2f} s")
    log(f"   prepare: {us[0] / 1e3:.3f} ms (run2 {us[1] / 1e3:.3f} ms); {note}")
    m = Measurement(us[0], us[1], 1, 1, compile_s, None, onnx_bytes, note)
    results.add(K, N, 0, dtype, group, f"prepare_{K}x{N}", m)


# --- command line ---------------------------------------------------------------------------


def _shape(text):
    K, N = (int(v) for v in text.lower().split("x"))
    return K, N


def _list(kind):
    return lambda text: [kind(v) for v in text.split(",") if v.strip()]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m jax_marlin.bench", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"a short first run: shapes {QUICK_SHAPES}, M {QUICK_MS}, float16, "
                        "no extra sections")
    p.add_argument("--shapes", type=_list(_shape), help=f"KxN list (default {DEFAULT_SHAPES})")
    p.add_argument("--ms", type=_list(int), help=f"M list (default {DEFAULT_MS})")
    p.add_argument("--dtypes", type=_list(str), help="default float16,bfloat16")
    p.add_argument("--groups", type=_list(int), default=[128],
                   help="group sizes; -1 = per-channel (default 128)")
    p.add_argument("--impls", type=_list(str), default=list(IMPLS),
                   help=f"subset of {','.join(ALL_IMPLS)} (default: all but "
                        f"{','.join(PASS_IMPLS)}; dense gives the baseline, dense_pass the "
                        "*_pass rows)")
    p.add_argument("--no-forced", action="store_true",
                   help=f"drop the forced-path rows {', '.join(FORCED)}")
    p.add_argument("--layer-stack", action=argparse.BooleanOptionalAction, default=None,
                   help="the layer-stack section (default: on, off with --quick)")
    p.add_argument("--stack-shape", type=_shape, default=(4096, 4096))
    p.add_argument("--stack-layers", type=int, default=32)
    p.add_argument("--repack", action=argparse.BooleanOptionalAction, default=None,
                   help="the prepare() timing section (default: on, off with --quick)")
    p.add_argument("--repack-shape", type=_shape, default=(8192, 28672))
    p.add_argument("--sweep", action=argparse.BooleanOptionalAction, default=True,
                   help="the main shape x M sweep (default on)")
    p.add_argument("--csv", help="output CSV (default bench.csv; docs/perf/h200.csv with "
                                 "--write-docs)")
    p.add_argument("--plot", help="output PNG (default: the CSV path with .png)")
    p.add_argument("--write-docs", action="store_true",
                   help="write to docs/perf/h200.csv and docs/perf/h200.png")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per median (>= 5)")
    p.add_argument("--min-gemms", type=int, default=64, help="GEMMs per timed call")
    p.add_argument("--min-pass-gemms", type=int, default=16,
                   help="weights per pass of the timed loop (duplicated copies where fewer)")
    p.add_argument("--min-call-ms", type=float, default=20.0)
    p.add_argument("--max-call-ms", type=float, default=250.0)
    p.add_argument("--l2-mb", type=float, help="L2 size (default: from torch, else 60)")
    p.add_argument("--max-copies", type=int, default=64)
    p.add_argument("--budget-s", type=float,
                   help="stop starting new sweep blocks after this many seconds "
                        "(default 510, 170 with --quick)")
    p.add_argument("--mem-fraction", type=float,
                   help="XLA_PYTHON_CLIENT_MEM_FRACTION for JAX (before its backend starts)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.shapes = args.shapes or _list(_shape)(QUICK_SHAPES if args.quick else DEFAULT_SHAPES)
    args.ms = args.ms or _list(int)(QUICK_MS if args.quick else DEFAULT_MS)
    args.dtypes = [str(jnp.dtype(d)) for d in (args.dtypes or (
        ["float16"] if args.quick else ["float16", "bfloat16"]))]
    for name in ("layer_stack", "repack"):
        if getattr(args, name) is None:
            setattr(args, name, not args.quick)
    unknown = set(args.impls) - set(ALL_IMPLS)
    if unknown:
        p.error(f"unknown impls {sorted(unknown)}; choose from {ALL_IMPLS}")
    bad_groups = [g for g in args.groups if g != -1 and (g < 16 or g & (g - 1))]
    if bad_groups:
        p.error(f"groups must be powers of two >= 16, or -1 (per-channel): {bad_groups}")
    if args.no_forced:
        args.impls = [i for i in args.impls if i not in FORCED]
    if args.budget_s is None:
        args.budget_s = 170.0 if args.quick else 510.0
    args.csv = args.csv or ("docs/perf/h200.csv" if args.write_docs else "bench.csv")
    args.plot = args.plot or os.path.splitext(args.csv)[0] + ".png"
    return args


def main(argv=None, *, exit_status=False):
    """Runs the benchmark; returns its rows, or with ``exit_status`` the command's status: 1
    where a row failed its output check or a measurement raised, else 0."""
    args = parse_args(argv)
    if args.mem_fraction is not None:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = str(args.mem_fraction)
    from jax._src import xla_bridge

    started = getattr(xla_bridge, "backends_are_initialized", lambda: False)()
    if args.mem_fraction is not None and started:
        log("note: JAX's backend is already running; --mem-fraction has no effect")
    deadline = Deadline(args.budget_s)
    device = jax.devices()[0]
    torch = tinygemm = None
    if set(TINYGEMM_IMPLS) & set(args.impls) and args.sweep:
        torch, reason = torch_cuda()
        if torch is None:
            log(f"tinygemm: skipped, {reason}")
        else:
            tinygemm = TinyGemm(torch)
    l2, l2_note = l2_bytes(args.l2_mb, torch)
    timing = Timing(repeats=args.repeats, min_gemms=args.min_gemms,
                    min_call_s=args.min_call_ms / 1e3, max_call_s=args.max_call_ms / 1e3,
                    rotate_bytes=4 * l2, max_copies=args.max_copies,
                    min_pass_gemms=args.min_pass_gemms)
    log(f"jax_marlin bench on {device.device_kind} ({device.platform}), jax {jax.__version__}, "
        f"build {jm.build_info()}")
    if device.platform == "gpu" and not _ffi.has_cuda_kernel():
        checkout = _ffi.source_checkout()
        log("WARNING: no CUDA module is loaded, so the jax_marlin rows time the XLA fallback"
            + (f" (imported from the source checkout {checkout}: run from another directory)"
               if checkout else ""))
    log(f"L2 {l2_note}: rotating > {4 * l2 / 2**20:.0f} MiB of weights per impl; "
        f"{timing.repeats} repeats x 2 runs; >= {timing.min_gemms} GEMMs per call; "
        f"XLA_PYTHON_CLIENT_PREALLOCATE={os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE')}")
    log(f"sweep: shapes {args.shapes}, M {args.ms}, dtypes {args.dtypes}, groups {args.groups}, "
        f"impls {args.impls}; budget {args.budget_s:.0f} s; CSV {args.csv}")
    results = Results(args.csv, device.device_kind, jax.__version__)
    key = jax.random.key(args.seed)
    sections = [("layer stack", args.layer_stack, run_layer_stack),
                ("repack", args.repack, run_repack),
                ("sweep", args.sweep, functools.partial(
                    run_sweep, deadline=deadline, tinygemm=tinygemm))]
    for name, enabled, run in sections:
        if not enabled:
            continue
        start = time.perf_counter()
        key, sub = jax.random.split(key)
        try_measure(name, lambda: run(args, timing, results, sub), results)
        log(f"[section {name}: {time.perf_counter() - start:.1f} s; "
            f"elapsed {deadline.elapsed():.0f} s]")
    if args.sweep:
        print_summary(results.rows, args.ms)
        plot(results.rows, args.plot, 128 if 128 in args.groups else args.groups[0])
    log(f"\nwrote {len(results.rows)} rows to {args.csv}; total {deadline.elapsed():.0f} s")
    failed = [r for r in results.rows if r.get("check_failed")]
    if failed:
        log(f"{len(failed)} rows failed the output check (exit status 1):")
    for r in failed:
        log(f"  {r['impl']} {r['K']}x{r['N']} M={r['M']} {r['dtype']} group {r['group']}: "
            f"{r['note']}")
    if results.failures:
        log(f"{len(results.failures)} measurements raised (exit status 1): "
            + "; ".join(results.failures))
    if exit_status:
        return 1 if failed or results.failures else 0
    return results.rows


if __name__ == "__main__":
    sys.exit(main(exit_status=True))
