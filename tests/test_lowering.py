"""What the primitive lowers to, per platform, and its abstract evaluation.

Lowering for CUDA needs no GPU: the StableHLO text is produced on this machine.
Where the CUDA module is not built, the dispatcher's choices are still checked
by pretending it is (``_ffi.has_cuda_kernel`` patched): the lowering only names
the custom-call target, it never loads it.
"""

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_marlin as jm
from jax_marlin import _ffi, _layout, _shapes, ops
from conftest import make_case

CUDA_TARGET = "jax_marlin_matmul_nbits_cuda"
CPU_TARGET = "jax_marlin_matmul_nbits_cpu"


def lowered_text(fn, *args, platform):
    return jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,)).as_text()


def custom_calls(text):
    return re.findall(r"stablehlo\.custom_call @(\w+)", text)


@pytest.fixture
def weights(rng):
    return {bits: make_case(rng, N=37, K=100, bits=bits, block_size=32).prepare()
            for bits in (2, 4, 8)}


@pytest.fixture(params=["built", "pretend"])
def cuda(request, monkeypatch):
    """The CUDA module as built here, or pretended present to test the dispatcher."""
    if request.param == "built":
        if not jm.build_info()["cuda"]:
            pytest.skip("the CUDA module is not built in this installation")
    else:
        monkeypatch.setattr(_ffi, "has_cuda_kernel", lambda: True)
    return request.param


def _spec(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_cuda_lowering_uses_fused_kernel_for_half_4bit(cuda, weights, dtype):
    w = weights[4]
    text = lowered_text(lambda a, w: jm.matmul_nbits(a, w), _spec((3, 5, 100), dtype), w,
                        platform="cuda")
    assert custom_calls(text) == [CUDA_TARGET]
    line = next(l for l in text.splitlines() if CUDA_TARGET in l)
    # K is padded to a multiple of 8 for the kernel's 16-byte rows; M folds leading dims.
    assert "K = 104" in line and "N = 37" in line and "split_k = 0" in line
    assert "zero_point_kind = 1" in line
    assert re.search(r"tensor<15x104x(f16|bf16)>", line)
    workspace = _shapes.split_k_workspace_floats(15, _layout.n_pad(37))
    assert f"tensor<{workspace}xf32>" in line


@pytest.mark.parametrize("case", [
    dict(dtype=jnp.float32, bits=4, M=5, impl="auto"),  # f32: dense, at full precision
    dict(dtype=jnp.float16, bits=8, M=5, impl="fused"),  # no fused kernel for 8 bits
    dict(dtype=jnp.float16, bits=2, M=5, impl="auto"),
    # K = 100 is not a multiple of 8: jax.numpy dequantizes (the CUDA one needs 16-byte rows).
    dict(dtype=jnp.float16, bits=4, M=5, impl="dense"),
    # Large M, past every fused kernel's range (wgmma's on Hopper included): dense.
    dict(dtype=jnp.float16, bits=4, M=max(ops.DENSE_FROM_M, ops.WGMMA_MAX_M + 1), impl="auto"),
    dict(dtype=jnp.float16, bits=4, M=0, impl="fused"),  # empty: nothing to launch
], ids=lambda c: f"{np.dtype(c['dtype']).name}-{c['bits']}bit-M{c['M']}-{c['impl']}")
def test_cuda_lowering_dense_paths_have_no_custom_call(cuda, weights, case):
    w = weights[case["bits"]]
    text = lowered_text(lambda a, w: jm.matmul_nbits(a, w, impl=case["impl"]),
                        _spec((case["M"], 100), case["dtype"]), w, platform="cuda")
    assert custom_calls(text) == []
    if case["M"]:
        assert "stablehlo.dot_general" in text


DEQUANTIZE_TARGET = "jax_marlin_dequantize_cuda"


@pytest.mark.parametrize("M, impl", [(5, "dense"),
                                     (max(ops.DENSE_FROM_M, ops.WGMMA_MAX_M + 1), "auto")])
@pytest.mark.parametrize("zp, kind", [("none", 0), ("packed", 1), ("float", 2)])
@pytest.mark.parametrize("dtype, mlir", [(jnp.float16, "f16"), (jnp.bfloat16, "bf16")])
def test_cuda_lowering_dense_path_dequantizes_with_the_cuda_kernel(cuda, rng, M, impl, zp, kind,
                                                                  dtype, mlir):
    """With K % 8 == 0 the dense path's weights come from the CUDA dequantization kernel
    ([N, K] in the activations' dtype), then one dot_general."""
    w = make_case(rng, N=130, K=256, block_size=64, zp=zp).prepare()
    text = lowered_text(lambda a, w: jm.matmul_nbits(a, w, impl=impl),
                        _spec((M, 256), dtype), w, platform="cuda")
    assert custom_calls(text) == [DEQUANTIZE_TARGET]
    line = next(l for l in text.splitlines() if DEQUANTIZE_TARGET in l)
    assert f"tensor<130x256x{mlir}>" in line and f"zero_point_kind = {kind}" in line
    assert "stablehlo.dot_general" in text


@pytest.mark.parametrize("hopper, block_size, last_fused", [
    (False, 32, 255),  # the mma.sync kernel's range elsewhere (README's figures, literally)
    (True, 32, 4096),  # the wgmma kernel's on Hopper
    (True, 16, 255),  # groups of 16: no wgmma kernel, the tiled one's range
])
def test_cuda_lowering_cuts_over_to_dense_where_the_fused_range_ends(cuda, monkeypatch, rng,
                                                                     hopper, block_size,
                                                                     last_fused):
    """README's "Which kernel runs where": impl="auto" keeps the fused kernel through the
    last M of its range and takes the dot from the next one (whether every local GPU runs
    the Hopper kernel is pretended; the lowering needs no GPU)."""
    monkeypatch.setattr(ops, "_local_gpus_run_wgmma", lambda: hopper)
    w = make_case(rng, N=40, K=128, block_size=block_size).prepare()
    for M, want in ((last_fused, [CUDA_TARGET]), (last_fused + 1, [DEQUANTIZE_TARGET])):
        text = lowered_text(jm.matmul_nbits, _spec((M, 128), jnp.float16), w, platform="cuda")
        assert custom_calls(text) == want, M


def test_cuda_lowering_fused_for_large_m_when_asked(cuda, weights):
    text = lowered_text(lambda a, w: jm.matmul_nbits(a, w, impl="fused"),
                        _spec((1500, 100), jnp.float16), weights[4], platform="cuda")
    assert custom_calls(text) == [CUDA_TARGET]


def test_cuda_lowering_passes_split_k_and_zero_point_kinds(cuda, rng):
    for zp, kind in (("none", 0), ("packed", 1), ("float", 2)):
        w = make_case(rng, N=130, K=256, block_size=64, zp=zp).prepare()
        text = lowered_text(
            lambda a, w: ops._bind(a, w, None, impl="fused", split_k=5),
            _spec((7, 256), jnp.float16), w, platform="cuda")
        line = next(l for l in text.splitlines() if CUDA_TARGET in l)
        assert "split_k = 5" in line and f"zero_point_kind = {kind}" in line and "K = 256" in line


def test_cuda_lowering_without_module_is_dense(monkeypatch, weights):
    monkeypatch.setattr(_ffi, "has_cuda_kernel", lambda: False)
    text = lowered_text(lambda a, w: jm.matmul_nbits(a, w), _spec((5, 100), jnp.float16),
                        weights[4], platform="cuda")
    assert custom_calls(text) == []


@pytest.mark.parametrize("capabilities", [["7.5"], ["9.0", "7.0"]])
def test_gpus_below_sm80_take_the_dense_path(monkeypatch, weights, capabilities):
    class Gpu:
        def __init__(self, capability):
            self.compute_capability = capability

    monkeypatch.setattr(_ffi, "has_cuda_kernel", lambda: True)
    monkeypatch.setattr(jax, "devices", lambda *_: [Gpu(c) for c in capabilities])
    ops._local_gpus_have_mma_sync.cache_clear()
    try:
        text = lowered_text(lambda a, w: jm.matmul_nbits(a, w, impl="fused"),
                            _spec((5, 100), jnp.float16), weights[4], platform="cuda")
    finally:
        ops._local_gpus_have_mma_sync.cache_clear()
    assert custom_calls(text) == []


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16, jnp.float32])
def test_cpu_lowering_uses_cpu_kernel(weights, bits, dtype):
    if not jm.build_info()["cpu"]:
        pytest.skip("the CPU module is not built")
    text = lowered_text(lambda a, w: jm.matmul_nbits(a, w), _spec((2, 3, 100), dtype),
                        weights[bits], platform="cpu")
    assert custom_calls(text) == [CPU_TARGET]
    assert re.search(r"custom_call @jax_marlin_matmul_nbits_cpu\(.*tensor<6x100xf32>", text)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.float32])
def test_cpu_lowering_takes_the_dense_path_from_its_m(weights, dtype):
    """impl="auto" runs the C++ kernel below ops.CPU_DENSE_FROM_M rows and a float32
    dequantize-then-dot from there; "fused" and "dense" force either at any M."""
    if not jm.build_info()["cpu"]:
        pytest.skip("the CPU module is not built")
    below, at = ops.CPU_DENSE_FROM_M - 1, ops.CPU_DENSE_FROM_M
    for M, impl, want in ((below, "auto", [CPU_TARGET]), (at, "auto", []),
                          (at, "fused", [CPU_TARGET]), (1, "dense", [])):
        text = lowered_text(lambda a, w: jm.matmul_nbits(a, w, impl=impl),
                            _spec((M, 100), dtype), weights[4], platform="cpu")
        assert custom_calls(text) == want, (M, impl)
        if not want:  # the weight in float32, not rounded to the activations' dtype
            assert re.search(r"dot_general.*tensor<\d+x100xf32>.*tensor<\d+x100xf32>", text), text


def test_cpu_lowering_keeps_large_weights_on_the_kernel(monkeypatch, weights):
    """Past ops.CPU_DENSE_MAX_WEIGHT_BYTES of float32 weight, impl="auto" keeps the C++
    kernel at any M (the dense path would make the whole float32 weight each call)."""
    if not jm.build_info()["cpu"]:
        pytest.skip("the CPU module is not built")
    w = weights[4]
    monkeypatch.setattr(ops, "CPU_DENSE_MAX_WEIGHT_BYTES", 4 * w.K * w.N - 1)
    text = lowered_text(lambda a, w: jm.matmul_nbits(a, w), _spec((64, 100), jnp.float32), w,
                        platform="cpu")
    assert custom_calls(text) == [CPU_TARGET]
    text = lowered_text(lambda a, w: jm.matmul_nbits(a, w, impl="dense"),
                        _spec((64, 100), jnp.float32), w, platform="cpu")
    assert custom_calls(text) == []  # "dense" still forces it


def test_build_info():
    info = jm.build_info()
    assert info["cpu"] is True
    assert info["jax_version"] == jax.__version__
    assert isinstance(info["xla_ffi_api_version"], tuple)
    assert isinstance(info["cuda"], bool)
    if not info["cuda"]:
        assert info["cuda_architectures"] == [] and "cuda_import_error" in info


@pytest.mark.parametrize("shape", [(5, 100), (2, 3, 100), (0, 100), (100,)])
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16, jnp.float32])
def test_eval_shape(weights, shape, dtype):
    out = jax.eval_shape(lambda a, w, b: jm.matmul_nbits(a, w, b), _spec(shape, dtype),
                         weights[4], _spec((37,), jnp.float32))
    assert out.shape == shape[:-1] + (37,) and out.dtype == dtype


def test_eval_shape_runs_no_kernel(monkeypatch, weights):
    def boom(*args, **kwargs):
        raise AssertionError("a kernel ran")

    monkeypatch.setattr(ops.matmul_nbits_p, "impl", boom)
    out = jax.eval_shape(jm.matmul_nbits, _spec((4, 100), jnp.float16), weights[4])
    assert out.shape == (4, 37)
    # The patch is real: an eager call does reach the implementation.
    with pytest.raises(AssertionError, match="a kernel ran"):
        jm.matmul_nbits(jnp.ones((4, 100), jnp.float16), weights[4])


@pytest.mark.parametrize("query", ["wgmma_plan", "stream_plan", "planned_kernel"])
def test_plan_queries_ask_the_module_for_the_launched_gemm(monkeypatch, rng, query):
    """The plan queries pass the CUDA module what `_cuda` launches with (K rounded up to 8,
    the zero-point kind's number, the dtype, the workspace it sizes), and need no GPU to
    say so: the module is a stand-in here."""
    calls = []

    class Module:
        def __getattr__(self, name):
            return lambda *args: calls.append((name, args)) or {"rows": 64}

    monkeypatch.setattr(_ffi, "has_cuda_kernel", lambda: True)
    monkeypatch.setattr(_ffi, "cuda_module", lambda: Module())
    w = make_case(rng, N=520, K=4100, block_size=128, zp="none").prepare()
    assert getattr(ops, query)(33, w, jnp.bfloat16, -7) == {"rows": 64}
    workspace = _shapes.split_k_workspace_floats(33, _layout.n_pad(520))
    # (33 rows: no stream-K area after the split-K floats, whatever the device.)
    assert calls == [(query, (33, 4104, 520, 128, 0, True, workspace, 0, -7))]


def test_wgmma_plan_needs_the_cuda_module(monkeypatch, weights):
    monkeypatch.setattr(_ffi, "has_cuda_kernel", lambda: False)
    with pytest.raises(RuntimeError, match="wgmma_plan needs the CUDA module"):
        ops.wgmma_plan(64, weights[4], jnp.float16)


def test_the_stream_k_area_is_there_where_the_planner_runs_stream_k(monkeypatch):
    """Where the wgmma kernel runs, M = 129..1024 asks this GPU's wgmma planner with
    stream-K's area after the split-K floats (starting on a 256-byte boundary: its
    partials move as float4, and the planner declines an unaligned one), and keeps the
    area only where that plan runs stream-K; elsewhere the workspace is the split-K
    floats alone, and nothing is asked. The planner is a stand-in here: stream-K on
    N = 28672 only; None (another kernel) for N = 136."""
    calls = []

    class Module:
        def wgmma_plan(self, *args):
            calls.append(args)
            N = args[2]
            return None if N == 136 else {"stream_k_blocks": 132 if N == 28672 else 0}

    monkeypatch.setattr(_ffi, "cuda_module", lambda: Module())
    monkeypatch.setattr(ops, "_wgmma_runs", lambda block_size: True)
    area = _shapes.STREAM_K_WORKSPACE_FLOATS
    for M, N in itertools.product([17, 128, 129, 256, 300, 1024, 1025], [136, 4096, 28672]):
        calls.clear()
        split, stream_k = ops._workspace_floats(M, 8192, N, 128, "float", True, -2004)
        want = _shapes.split_k_workspace_floats(M, _layout.n_pad(N))
        if 129 <= M <= 1024:
            assert split % 64 == 0 and want <= split < want + 64, (M, N, split)
            assert calls == [(M, 8192, N, 128, 2, True, split + area, area, -2004)], (M, N)
            assert stream_k == (area if N == 28672 else 0), (M, N)
        else:
            assert (split, stream_k) == (want, 0) and calls == [], (M, N)
    monkeypatch.setattr(ops, "_wgmma_runs", lambda block_size: False)
    calls.clear()
    assert ops._workspace_floats(256, 8192, 28672, 128, "packed", False, 0)[1] == 0
    assert calls == []


@pytest.mark.parametrize("M, N", [(16, 524352), (9, 1048576), (1, 8388672)])
def test_a_streaming_shape_too_wide_for_any_part_still_gets_a_workspace(M, N):
    """At M <= 16, M x n_pad past 2^23 floats leaves room for no part: the tiled kernel
    runs it, and the handler still needs a non-empty workspace (it had got 0 floats and
    refused the call: "stream_k_floats must be in [0, the workspace's floats)")."""
    assert _shapes.split_k_workspace_floats(M, _layout.n_pad(N)) == 1
    assert _shapes.split_k_workspace_floats(16, 1 << 19) == 1 << 23  # one part fits: room for it


@pytest.mark.parametrize("query", ["wgmma_plan", "stream_plan", "planned_kernel"])
@pytest.mark.parametrize("M, K, N, block_size", [(1, 4096, 0, 128), (1, 4096, 64, 0),
                                                 (0, 4096, 64, 128), (1, 4096, 64, 2 ** 40)])
def test_the_modules_plan_queries_refuse_shapes_the_planners_cannot_take(query, M, K, N,
                                                                         block_size):
    """The CUDA module's plan queries check their shape before any planner divides by it
    (N = 0 or block_size = 0 had ended the process with a floating-point exception), and
    before asking the device (so this runs without a GPU)."""
    module = _ffi.cuda_module()
    if module is None:
        pytest.skip("a build without the CUDA module")
    with pytest.raises(ValueError, match=r"a plan needs M >= 1, K and N in \[1, 2\^29\]"):
        getattr(module, query)(M, K, N, block_size, 1, False, 1 << 20, 0, 0)
