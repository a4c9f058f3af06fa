"""``matmul_nbits``: the public op, then the primitive behind it.

The primitive takes the activations and the leaves of :class:`MarlinWeights`
and is lowered per platform: CPU to the C++ FFI handler, CUDA to the fused
tensor-core kernel (on either, where that does not pay or does not apply, to a
dequantize-then-dot in XLA), and every other platform to that XLA path. Its
abstract evaluation, lowerings, batching and AD rules sit side by side below.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from jax_marlin import _checks, _ffi, _layout, _shapes
from jax_marlin.weights import MarlinWeights, dequantize
from jax_marlin.weights import check as check_weights

IMPLS = ("auto", "fused", "dense")


def matmul_nbits(a, weights: MarlinWeights, bias=None, *, impl: str = "auto"):
    """``a @ dequant(W)^T (+ bias)`` for prepared MatMulNBits weights.

    ``a``: ``[..., K]`` float16, bfloat16 or float32 (any leading dims, M = 0
    included); result ``[..., N]`` in ``a``'s dtype. float16 / bfloat16 run on
    the GPU's tensor cores with fp32 accumulation; float32 is computed in
    float32 (on the GPU by a dequantize-then-dot at the highest precision).
    ``bias`` is ``[N]``, cast to ``a``'s dtype; the fused kernels add it in fp32
    before the single final rounding, the GPU's dense path (large M) adds it to
    the rounded dot, as ``jnp.dot(a, w) + bias`` would.

    ``impl`` picks the path: ``"auto"`` (by M, from measurements),
    ``"fused"`` (the fused kernel wherever it applies; on the CPU the C++
    kernel) or ``"dense"`` (dequantize, then XLA's dot). Platforms other than
    CUDA and the CPU ignore it.
    """
    check_weights(weights)
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    a = _checks.as_array("a", a)
    _checks.activations(a, weights.K)
    if bias is not None:
        bias = _checks.as_array("bias", bias)
        _checks.bias(bias, weights.N)
        bias = bias.astype(a.dtype)
    return _bind(a, weights, bias, impl=impl, split_k=0)


def _zero_points_operand(w: MarlinWeights):
    # Absent operands travel as empty arrays so that the primitive has one
    # signature; the zero-point kind says how to read the zero points.
    return w.zero_points if w.zero_points is not None else jnp.zeros((0,), jnp.uint8)


def _weight_params(w: MarlinWeights):
    """The primitive's static description of the weights."""
    return dict(K=w.K, N=w.N, bits=w.bits, block_size=w.block_size,
                zero_point_kind=w.zero_point_kind)


def _bind(a, w: MarlinWeights, bias, *, impl: str, split_k: int):
    bias = bias if bias is not None else jnp.zeros((0,), a.dtype)
    return matmul_nbits_p.bind(a, w.codes, w.scales, _zero_points_operand(w), bias,
                               **_weight_params(w), impl=impl, split_k=split_k)


matmul_nbits_p = Primitive("jax_marlin_matmul_nbits")

_ZERO_POINT_KINDS = {"implicit": 0, "packed": 1, "float": 2}

# From M on, the GPU takes the dense path (dequantize, then cuBLAS through XLA)
# instead of the fused kernel. Measured on the H200: docs/perf/NOTES.md.
DENSE_FROM_M = 256
# On the CPU, from M on impl="auto" takes the dense path too (dequantize in float32, then
# XLA's dot, which runs on every core) instead of the C++ kernel, which decodes each weight
# strip once per call but multiplies on one core. Measured on a 2-core x86 machine
# (session 44, jitted, fp16 activations, ms; kernel / dense): 4096 x 4096 at M = 1 28 / 45,
# M = 8 35 / 43, M = 16 49 / 49, M = 32 84 / 69; 4096 x 14336 at M = 8 122 / 186, M = 16
# 177 / 168, M = 32 297 / 182; 14336 x 4096 at M = 16 237 / 144; at M = 128 on 4096 x 4096
# 273 / 63.
CPU_DENSE_FROM_M = 16
# But the dense path makes the whole float32 weight each call (8x the 4-bit bytes): past
# this size the kernel, which decodes 64 columns at a time, keeps the call's memory small
# (a 4096 x 128256 head would take 2.1 GB a call; 8192 x 28672 at M = 16 read 708 ms on
# the kernel against 605 dense here: little to lose).
CPU_DENSE_MAX_WEIGHT_BYTES = 512 << 20
# Except on Hopper, where impl="auto" takes the wgmma kernel (ffi/wgmma_kernel.h) up to
# its own limit: it beat the dense path at every M from 256 to 1024 on the four large
# benchmark shapes but one tie (4096 x 14336 at M = 1024; session 9 calls 1-2), and at M =
# 2048 and 4096 on 4096 x 4096, 8192 x 28672 and 28672 x 8192 by 4-11% (session 32 call
# B, docs/perf/NOTES.md), where the dense path read 0.86-0.96x fp16 and the kernel
# 0.96-1.00x. Past 4096 rows nothing has been measured.
WGMMA_MAX_M = 4096


def _weights(codes, scales, zero_points, params) -> MarlinWeights:
    zp = None if params["zero_point_kind"] == "implicit" else zero_points
    return MarlinWeights(codes, scales, zp, K=params["K"], N=params["N"], bits=params["bits"],
                         block_size=params["block_size"])


# --- abstract evaluation -----------------------------------------------------

def _abstract_eval(a, codes, scales, zero_points, bias, *, N, **_):
    return jax.core.ShapedArray(a.shape[:-1] + (N,), a.dtype)


matmul_nbits_p.def_abstract_eval(_abstract_eval)


def _impl(*args, **params):
    return _dispatch.apply_primitive(matmul_nbits_p, *args, **params)


from jax._src import dispatch as _dispatch  # noqa: E402  (eager calls jit the op)

matmul_nbits_p.def_impl(_impl)


# --- lowerings -----------------------------------------------------------------

def _dot_dequantized(spec, x, codes, scales, zero_points, params, dot_dtype=jnp.float32,
                     dequantizer=None):
    """``einsum(spec, x, W)`` with ``W [N, K]`` dequantized in ``x``'s dtype (by
    ``dequantizer(codes, scales, zero_points, dtype, params)``, jax.numpy's by default),
    accumulated in fp32 (float32 inputs at the highest precision) and returned in
    ``dot_dtype``: the dense path and the transpose share it."""
    if dequantizer is None:
        weight = dequantize(_weights(codes, scales, zero_points, params), x.dtype)
    else:
        weight = dequantizer(codes, scales, zero_points, x.dtype, params)
    precision = jax.lax.Precision.HIGHEST if x.dtype == jnp.float32 else None
    return jnp.einsum(spec, x, weight, precision=precision, preferred_element_type=dot_dtype)


def _dense(a, codes, scales, zero_points, bias, *, dot_dtype=jnp.float32, dequantizer=None,
           **params):
    """Dequantize, then one dot: the path for every platform without a kernel. The dot's
    result is ``dot_dtype`` and the bias is added in it, then the sum is cast to ``a``'s
    dtype."""
    y = _dot_dequantized("...k,nk->...n", a, codes, scales, zero_points, params, dot_dtype,
                         dequantizer)
    if bias.size:
        y = y + bias.astype(y.dtype)
    return y.astype(a.dtype)


def _dequantize_cuda(codes, scales, zero_points, dtype, params):
    """The 4-bit weights as a dense ``[N, K]`` matrix in ``dtype`` (float16 or bfloat16;
    K % 8 == 0) by the CUDA kernel (ffi/dequant_kernel.cu), in one pass over the tile
    layout, where XLA's fusion of jax.numpy's unpack and un-permute takes ~240 us on
    8192 x 28672 against ~150 us of traffic. Bitwise ``weights.dequantize`` for integer
    zero points; for float ones, bitwise ``weights.dequantize`` in float32 cast to
    ``dtype`` (one rounding, where jax.numpy's dense path in ``dtype`` rounds twice)."""
    call = jax.ffi.ffi_call(_ffi.DEQUANTIZE_CUDA_TARGET,
                            jax.ShapeDtypeStruct((params["N"], params["K"]), dtype))
    float_zp = params["zero_point_kind"] == "float"
    return call(codes, scales.astype(dtype), zero_points.astype(dtype) if float_zp else zero_points,
                **_ffi_attributes(params))


@functools.partial(jax.jit, static_argnames=("dtype", "K", "N", "bits", "block_size",
                                               "zero_point_kind"))
def _dequantize_cuda_jit(codes, scales, zero_points, *, dtype, **params):
    return _dequantize_cuda(codes, scales, zero_points, dtype, params)


def _dequantize_cuda_weights(w: MarlinWeights, dtype):
    """``_dequantize_cuda`` on a ``MarlinWeights``, jitted once per shape and dtype (for
    tests and the sanitizer sweep, which check the kernel alone)."""
    return _dequantize_cuda_jit(w.codes, w.scales, _zero_points_operand(w), dtype=dtype,
                                **_weight_params(w))


def _ffi_attributes(params):
    return dict(K=np.int64(params["K"]), N=np.int64(params["N"]), bits=np.int64(params["bits"]),
                block_size=np.int64(params["block_size"]),
                zero_point_kind=np.int64(_ZERO_POINT_KINDS[params["zero_point_kind"]]))


def _cpu(a, codes, scales, zero_points, bias, *, impl, **params):
    K, N = params["K"], params["N"]
    M = _shapes.rows(a.shape)
    f32 = jnp.float32
    dense_fits = 4 * K * N <= CPU_DENSE_MAX_WEIGHT_BYTES
    if not _ffi.has_cpu_kernel() or impl == "dense" or (
            impl == "auto" and M >= CPU_DENSE_FROM_M and dense_fits):
        # In float32 throughout, as the C++ kernel computes: the weight is not rounded
        # to a's dtype, and the bias is added before the one rounding of the output.
        return _dense(a.astype(f32), codes, scales, zero_points, bias, **params).astype(a.dtype)
    if params["zero_point_kind"] == "float":
        zero_points = zero_points.astype(f32)
    call = jax.ffi.ffi_call(_ffi.CPU_TARGET, jax.ShapeDtypeStruct((M, N), f32))
    out = call(a.reshape(M, K).astype(f32), codes, scales.astype(f32), zero_points,
               bias.astype(f32), **_ffi_attributes(params))
    return out.reshape(*a.shape[:-1], N).astype(a.dtype)


def fused_applies(dtype, bits: int) -> bool:
    """Whether the fused CUDA kernel handles these activations and weights."""
    return (_ffi.has_cuda_kernel() and bits == 4 and dtype in (jnp.float16, jnp.bfloat16)
            and _local_gpus_have_mma_sync())


@functools.cache
def _local_gpus_have_mma_sync() -> bool:
    """The kernel needs SM80+ (cp.async, bf16 mma.sync); older GPUs take the dense path.

    Lowering for CUDA on a machine without a local GPU (ahead-of-time, or to
    inspect the program) assumes a supported one.
    """
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        return True
    return all(float(getattr(d, "compute_capability", "8.0")) >= 8.0 for d in gpus)


def _wgmma_runs(block_size: int) -> bool:
    """Whether the CUDA module's Hopper wgmma kernel takes M = 17..WGMMA_MAX_M here: every
    local GPU is compute capability 9.0, the build carries sm_90a code, and groups hold at
    least 32 of k (ffi/wgmma_kernel.cu WgmmaGemmApplies; without a local GPU, no)."""
    return block_size >= 32 and _local_gpus_run_wgmma()


@functools.cache
def _local_gpus_run_wgmma() -> bool:
    if not _ffi.has_cuda_kernel() or 90 not in _ffi.build_info()["cuda_architectures"]:
        return False
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        return False
    return all(float(getattr(d, "compute_capability", "0")) == 9.0 for d in gpus)


def _cuda(a, codes, scales, zero_points, bias, *, impl, split_k, **params):
    M = _shapes.rows(a.shape)
    fused_up_to = WGMMA_MAX_M if _wgmma_runs(params["block_size"]) else DENSE_FROM_M - 1
    use_fused = fused_applies(a.dtype, params["bits"]) and (
        impl == "fused" or (impl == "auto" and M <= fused_up_to))
    if not use_fused or M == 0:
        # The dot in a's dtype, as jnp.dot runs it on dense weights (cuBLAS accumulates
        # fp16 and bf16 in fp32 either way): a float32 [M, N] result and its cast cost up
        # to 7% at M = 512 to 4096 on the large shapes (session 8 call 6, NOTES).
        # The weight from the CUDA dequantization where it applies (4 bits, a half
        # dtype, 16-byte rows; an empty batch needs no weight at all).
        cuda_weight = (fused_applies(a.dtype, params["bits"]) and params["K"] % 8 == 0
                       and M > 0)
        return _dense(a, codes, scales, zero_points, bias, dot_dtype=a.dtype,
                      dequantizer=_dequantize_cuda if cuda_weight else None, **params)
    K, N = params["K"], params["N"]
    lead = a.shape[:-1]
    a = a.reshape(M, K)
    k_kernel = _shapes.round_up(K, 8)  # 16-byte rows for cp.async; zeros meet padded codes
    if k_kernel != K:
        a = jnp.pad(a, ((0, 0), (0, k_kernel - K)))
    if params["zero_point_kind"] == "float":  # the kernel adds -zp * scale after scaling
        zero_points = (-zero_points.astype(jnp.float32) * scales.astype(jnp.float32)).astype(a.dtype)
    split_floats, stream_k_floats = _workspace_floats(
        M, k_kernel, N, params["block_size"], params["zero_point_kind"],
        a.dtype == jnp.bfloat16, split_k)
    call = jax.ffi.ffi_call(
        _ffi.CUDA_TARGET,
        (jax.ShapeDtypeStruct((M, N), a.dtype),
         jax.ShapeDtypeStruct((split_floats + stream_k_floats,), jnp.float32)))
    attributes = _ffi_attributes(params)
    attributes["K"] = np.int64(k_kernel)
    out, _ = call(a, codes, scales.astype(a.dtype), zero_points, bias, split_k=np.int64(split_k),
                  stream_k_floats=np.int64(stream_k_floats), **attributes)
    return out.reshape(*lead, N)


def _workspace_floats(M: int, K: int, N: int, block_size: int, zero_point_kind: str,
                      bfloat16: bool, split_k: int) -> tuple[int, int]:
    """The CUDA kernels' fp32 workspace for the GEMM `_cuda` launches (K already rounded
    up to 8): the split-K floats, then stream-K's area, which starts 256 bytes from the
    buffer's start, a multiple of it (its partials move as float4; the planner checks
    their 16-byte alignment and runs without stream-K otherwise). The area (21 MB) is
    there only where this GPU's wgmma planner, asked with it, runs stream-K: a plan
    without it (the 128-row halves, the k-splits, the grids) would only hold the memory.
    The kernel plans again at run time; given no area it runs without stream-K."""
    split = _shapes.split_k_workspace_floats(M, _layout.n_pad(N))
    stream_k = _shapes.stream_k_workspace_floats(M, _wgmma_runs(block_size))
    if not stream_k:
        return split, 0
    split = _shapes.round_up(split, 64)
    plan = _ffi.cuda_module().wgmma_plan(M, K, N, block_size,
                                         _ZERO_POINT_KINDS[zero_point_kind], bfloat16,
                                         split + stream_k, stream_k, split_k)
    return (split, stream_k) if plan and plan["stream_k_blocks"] else (split, 0)


def stream_plan(M: int, w, dtype, split_k: int = 0):
    """The streaming CUDA kernel's grid for an (M, K) x `w` GEMM on the current GPU, as
    `_cuda` would launch it (a dict: blocks, k_steps, total_steps, smem_bytes, max_parts
    (1: no reduce kernel), tile_split (> 0: blocks per tile of the tile split),
    group_cluster (> 1: stream-K's blocks of a column group in a cluster), group_rows
    (groups of 32 or 64 at M x groups a step <= 8: a column of the MMA per row and
    group), a_phase_steps (fewer than a block's steps, total_steps / blocks rounded up:
    A is staged that many steps at a time; under the tile split each warp stages its own
    steps that many at a time where it is fewer than k_steps / tile_split rounded up)),
    or None
    where the tiled kernel runs it. Every path computes the same product, so tests ask
    this which one they hit.
    """
    return _plan_query("stream_plan", M, w, dtype, split_k)


def wgmma_plan(M: int, w, dtype, split_k: int = 0):
    """The Hopper wgmma kernel's grid for an (M, K) x `w` GEMM on the current GPU, as `_cuda`
    would launch it (a dict: rows (the block's activation rows, 32/64/128/256), n_blocks,
    m_blocks, splits (> 1: a k-split, added by the reduce kernel or, where cluster_k, by the
    two splits' blocks on chip as clusters of 2), stages_per_split, smem_bytes, cluster_k,
    producer (True: 256-row blocks fed by the producer warpgroup, False: the cp.async ring),
    stream_k_blocks (> 0: the producer's tiles run stream-K on that many persistent blocks,
    ffi/wgmma_stream_k.h; 0: one block a tile)), or
    None where another kernel runs it (not sm_90, M outside 17..WGMMA_MAX_M, a split_k
    override, or a build without sm_90a code). Past 256 rows: 256-row blocks, m_blocks of
    them. The one override it takes, -2001 (ffi/wgmma_kernel.h kForceWgmmaReduce, for
    tests), keeps the grid and adds a 2-way split with the reduce kernel where the plan adds
    it on chip;
    -2002 (kForceWgmmaCpAsync) keeps the grid with the cp.async ring; -2003
    (kForceWgmmaNoStreamK) keeps the producer on one block a tile; -2004
    (kForceWgmmaStreamK) runs a 256-row plan stream-K whatever its tile count.
    """
    return _plan_query("wgmma_plan", M, w, dtype, split_k)


def planned_kernel(M: int, w, dtype, split_k: int = 0) -> str:
    """Which CUDA kernel `_cuda` would run an (M, K) x `w` GEMM with on the current GPU:
    "stream" (M <= 16), "wgmma" (sm_90, M = 17..WGMMA_MAX_M) or "tiled"."""
    return _plan_query("planned_kernel", M, w, dtype, split_k)


def _plan_query(name, M, w, dtype, split_k):
    """Asks the CUDA module's planner `name` about the GEMM `_cuda` would launch (the
    same K rounding and workspace size)."""
    if not _ffi.has_cuda_kernel():
        raise RuntimeError(f"jax_marlin: {name} needs the CUDA module")
    K, bfloat16 = _shapes.round_up(w.K, 8), jnp.dtype(dtype) == jnp.bfloat16
    workspace = _workspace_floats(M, K, w.N, w.block_size, w.zero_point_kind, bfloat16,
                                  split_k)
    return getattr(_ffi.cuda_module(), name)(
        M, K, w.N, w.block_size, _ZERO_POINT_KINDS[w.zero_point_kind], bfloat16,
        sum(workspace), workspace[1], split_k)


def _cuda_rule(ctx, *args, **params):
    fn = functools.partial(_cuda, **params)
    return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)


def _without(params, *names):
    return {k: v for k, v in params.items() if k not in names}


def _cpu_rule(ctx, *args, **params):
    fn = functools.partial(_cpu, **_without(params, "split_k"))
    return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)


def _dense_rule(ctx, *args, **params):
    fn = functools.partial(_dense, **_without(params, "impl", "split_k"))
    return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)


mlir.register_lowering(matmul_nbits_p, _dense_rule)
mlir.register_lowering(matmul_nbits_p, _cpu_rule, platform="cpu")
mlir.register_lowering(matmul_nbits_p, _cuda_rule, platform="cuda")


# --- batching ------------------------------------------------------------------

def _batch(args, dims, **params):
    a, codes, scales, zero_points, bias = args
    a_dim, *weight_dims, bias_dim = dims
    if any(d is not None for d in weight_dims):
        return _batch_over_weights(args, dims, params)
    if bias_dim is not None:
        # A bias per member: one op each, so that each adds its bias in fp32 before the
        # one rounding, as an unbatched call does (added after the op, a batched bias
        # rounded twice: 132 of 512 bf16 outputs differed).
        return _batch_over_weights(args, dims, params)
    # Shared weights, never copied: batched activations fold into M.
    if a_dim == a.ndim - 1:
        a, a_dim = jnp.moveaxis(a, a_dim, 0), 0
    return matmul_nbits_p.bind(a, codes, scales, zero_points, bias, **params), a_dim


def _batch_over_weights(args, dims, params):
    """A batch of weights (e.g. experts) or of biases: one op per member, in a loop;
    only the batched operands are sliced, the shared ones are closed over."""
    batched = [i for i, d in enumerate(dims) if d is not None]
    sliced = tuple(jnp.moveaxis(args[i], dims[i], 0) for i in batched)

    def one(members):
        operands = list(args)
        for i, member in zip(batched, members):
            operands[i] = member
        return matmul_nbits_p.bind(*operands, **params)

    return jax.lax.map(one, sliced), 0


batching.primitive_batchers[matmul_nbits_p] = _batch


# --- differentiation -------------------------------------------------------------
# The op is linear in `a` and affine in `bias`; the quantized weights are
# constants (codes are integers; scales are not trained through this op).

def _jvp(primals, tangents, **params):
    a, codes, scales, zero_points, bias = primals
    a_dot, _, scales_dot, zp_dot, bias_dot = tangents
    if type(scales_dot) is not ad.Zero or type(zp_dot) is not ad.Zero:
        raise NotImplementedError("jax_marlin.matmul_nbits is not differentiable in the "
                                  "quantized weights; differentiate in a and bias")
    out = matmul_nbits_p.bind(*primals, **params)
    has_bias_dot = type(bias_dot) is not ad.Zero and bias.size
    if type(a_dot) is not ad.Zero:
        # The op is affine: its tangent is the op on (a_dot, bias_dot), one rounding.
        bias_dot = bias_dot.astype(a.dtype) if has_bias_dot else jnp.zeros((0,), a.dtype)
        out_dot = matmul_nbits_p.bind(a_dot, codes, scales, zero_points, bias_dot, **params)
    elif has_bias_dot:
        out_dot = jnp.broadcast_to(bias_dot.astype(out.dtype), out.shape)
    else:
        out_dot = jnp.zeros(out.shape, out.dtype)
    return out, out_dot


def _transpose(cotangent, a, codes, scales, zero_points, bias, **params):
    # Linear in a and bias (the jvp binds the op on their tangents together).
    if any(ad.is_undefined_primal(x) for x in (codes, scales, zero_points)):
        raise NotImplementedError("jax_marlin.matmul_nbits transposes only in a and bias")
    a_bar = ad.Zero(a.aval) if ad.is_undefined_primal(a) else None
    bias_bar = ad.Zero(bias.aval) if ad.is_undefined_primal(bias) else None
    if type(cotangent) is not ad.Zero:
        if a_bar is not None:
            dtype = a.aval.dtype
            a_bar = _dot_dequantized("...n,nk->...k", cotangent.astype(dtype), codes, scales,
                                     zero_points, params).astype(dtype)
        if bias_bar is not None:
            rows = tuple(range(cotangent.ndim - 1))
            bias_bar = cotangent.astype(jnp.float32).sum(rows).astype(bias.aval.dtype)
    return a_bar, None, None, None, bias_bar


ad.primitive_jvps[matmul_nbits_p] = _jvp
ad.primitive_transposes[matmul_nbits_p] = _transpose
