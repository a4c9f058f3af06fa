"""Shared helpers: random MatMulNBits tensors, a float64 numpy oracle, markers.

The oracle here decodes the ONNX bytes with plain numpy (no jax_marlin code),
so it is independent of the package it checks.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import zlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jax_marlin as jm

# Float32 oracles (jnp.dot, nnx.Linear) must be float32 on every backend: XLA's
# GPU default for a float32 dot is TF32, ~1e-3 off, which would hide real errors.
jax.config.update("jax_default_matmul_precision", "highest")

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"f16": np.dtype(np.float16), "bf16": BF16, "f32": np.dtype(np.float32)}

# The ONNX IR version of the models the tests build: 10 holds opset 21 and loads on
# every onnxruntime we meet (onnx 1.23 would write 14, which onnxruntime 1.30 refuses).
ONNX_IR_VERSION = 10

# Relative Frobenius error allowed against the float64 oracle, by activation dtype.
TOLERANCE = {np.dtype(np.float16): 2e-3, BF16: 1e-2, np.dtype(np.float32): 1e-5}


def has_gpu() -> bool:
    try:
        return bool(jax.devices("gpu")) and bool(jm.build_info()["cuda"])
    except RuntimeError:
        return False


requires_gpu = pytest.mark.skipif(
    not has_gpu(), reason="needs a jax GPU device and the CUDA module built")


@pytest.fixture
def rng(request):
    """A generator seeded by the test's id, so every case draws its own inputs."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# --- numpy decoding of the ONNX format (independent of jax_marlin) -------------

def np_unpack(packed: np.ndarray, bits: int) -> np.ndarray:
    """uint8 [..., nbytes] -> values [..., nbytes * 8 / bits], lowest bits first."""
    packed = np.asarray(packed, np.uint8)
    per_byte = 8 // bits
    out = np.empty(packed.shape + (per_byte,), np.uint8)
    for i in range(per_byte):
        out[..., i] = (packed >> (i * bits)) & ((1 << bits) - 1)
    return out.reshape(*packed.shape[:-1], packed.shape[-1] * per_byte)


def np_pack(values: np.ndarray, bits: int) -> np.ndarray:
    values = np.asarray(values, np.uint8)
    per_byte = 8 // bits
    grouped = values.reshape(*values.shape[:-1], -1, per_byte).astype(np.uint32)
    out = np.zeros(grouped.shape[:-1], np.uint32)
    for i in range(per_byte):
        out |= grouped[..., i] << (i * bits)
    return out.astype(np.uint8)


def k_blocks(K, block):
    return -(-K // block)


@dataclasses.dataclass
class Case:
    """The tensors of one MatMulNBits node, as a producer would hand them over."""

    packed: np.ndarray  # uint8 [N, kb, blob]
    scales: np.ndarray  # [N, kb]
    zero_points: np.ndarray | None  # uint8 packed, float [N, kb], or None
    K: int
    N: int
    bits: int
    block_size: int

    @property
    def attrs(self):
        return dict(K=self.K, N=self.N, bits=self.bits, block_size=self.block_size)

    def prepare(self, **kw):
        return jm.prepare(self.packed, self.scales, self.zero_points, **self.attrs, **kw)

    def weight64(self) -> np.ndarray:
        """The logical weight [N, K] in float64, decoded with numpy alone."""
        N, K, bits, block = self.N, self.K, self.bits, self.block_size
        kb = k_blocks(K, block)
        codes = np_unpack(self.packed.reshape(N, -1), bits).astype(np.float64)
        codes = codes.reshape(N, kb, block)
        scales = self.scales.astype(np.float64).reshape(N, kb)
        if self.zero_points is None:
            zp = np.full((N, kb), 2.0 ** (bits - 1))
        elif self.zero_points.dtype == np.uint8:
            zp = np_unpack(self.zero_points.reshape(N, -1), bits)[:, :kb].astype(np.float64)
        else:
            zp = self.zero_points.astype(np.float64).reshape(N, kb)
        w = (codes - zp[..., None]) * scales[..., None]
        return w.reshape(N, kb * block)[:, :K]


def make_case(rng, *, N, K, bits=4, block_size=128, zp="packed", scale_dtype=np.float16,
              junk_padding=True) -> Case:
    """Random codes, scales and zero points (never zeros).

    ``zp``: "packed" (uint8), "none" (symmetric) or "float" (code units, the
    scales' dtype). With ``junk_padding`` the padded code slots of the last
    block and the padding values of the zero-point rows hold random values,
    which a correct implementation never reads.
    """
    kb = k_blocks(K, block_size)
    k_pad = kb * block_size
    top = (1 << bits) - 1
    codes = rng.integers(0, top + 1, size=(N, k_pad), dtype=np.uint8)
    if not junk_padding:
        codes[:, K:] = 0
    packed = np_pack(codes, bits).reshape(N, kb, block_size * bits // 8)
    # Scales of either sign, sized so that outputs are O(1).
    magnitude = rng.uniform(0.5, 1.5, size=(N, kb)) / (top * np.sqrt(K))
    scales = (magnitude * rng.choice([-1.0, 1.0], size=(N, kb))).astype(scale_dtype)
    if zp == "none":
        zero_points = None
    elif zp == "packed":
        per_byte = 8 // bits
        row = -(-kb // per_byte) * per_byte
        values = rng.integers(0, top + 1, size=(N, row), dtype=np.uint8)
        if not junk_padding:
            values[:, kb:] = 1 << (bits - 1)
        zero_points = np_pack(values, bits)
    elif zp == "float":
        zero_points = rng.uniform(0, top, size=(N, kb)).astype(scale_dtype)
    else:
        raise ValueError(zp)
    return Case(packed, np.asarray(scales), zero_points, K, N, bits, block_size)


def activations(rng, shape, dtype) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def oracle64(a, case: Case, bias=None) -> np.ndarray:
    """float64 ``a @ W^T (+ bias)`` on the values a and bias actually hold."""
    y = np.asarray(a).astype(np.float64) @ case.weight64().T
    if bias is not None:
        y = y + np.asarray(bias).astype(np.float64)
    return y


def rel_err(got, want) -> float:
    got = np.asarray(got).astype(np.float64)
    want = np.asarray(want).astype(np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


# The largest single-element error allowed, in units of the tolerance times the oracle's
# root mean square: the Frobenius norm averages an error confined to one column (a wrong
# zero point or scale, a misplaced fragment) over the whole output, where 256 x 8192 in
# float16 read 1.7e-3 with a column 14% off (session 44's test audit). Rounding spreads its
# error over every element: its peak is a few times the relative error.
PEAK_FACTOR = 10


def assert_close(got, want, dtype, tol=None):
    """Finite, right shape, within the dtype's relative Frobenius tolerance, and no element
    off by more than PEAK_FACTOR tolerances of the oracle's root mean square."""
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got.astype(np.float64))), "non-finite output"
    tol = TOLERANCE[np.dtype(dtype)] if tol is None else tol
    err = rel_err(got, want)
    assert err <= tol, f"relative error {err:.3g} > {tol:.3g}"
    if want.size:
        diff = np.abs(got.astype(np.float64) - np.asarray(want, np.float64))
        rms = max(float(np.sqrt(np.mean(np.square(np.asarray(want, np.float64))))), 1e-30)
        worst = np.unravel_index(np.argmax(diff), diff.shape)
        assert diff[worst] <= PEAK_FACTOR * tol * rms, (
            f"element {tuple(int(i) for i in worst)} off by {diff[worst]:.3g}, more than "
            f"{PEAK_FACTOR} x {tol:.3g} x the oracle's rms {rms:.3g}")


def to_jnp(x):
    return None if x is None else jnp.asarray(x)


def _cuda_include():
    candidates = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(pathlib.Path(nvcc).resolve().parents[1]))
    candidates.append("/usr/local/cuda")
    for root in filter(None, candidates):
        if (pathlib.Path(root) / "include" / "cuda_runtime.h").exists():
            return pathlib.Path(root) / "include"
    return None


def header_constant(header: str, name: str) -> int:
    """``constexpr int name = N;`` of ``ffi/<header>``, read from the header so a test's
    model and the planner cannot drift."""
    text = (pathlib.Path(__file__).resolve().parents[1] / "ffi" / header).read_text()
    return int(re.search(rf"constexpr int {name} = (\d+);", text).group(1))


def header_define(header: str, name: str) -> int:
    """The default of ``#define name N`` in ``ffi/<header>`` (a build knob's value where no
    ``-D`` overrides it)."""
    text = (pathlib.Path(__file__).resolve().parents[1] / "ffi" / header).read_text()
    return int(re.search(rf"#define {name} (\d+)", text).group(1))


# The wgmma plans the producer warpgroup runs: every one of these rows (a ragged last row
# block through the tail map, a group slot past k_blocks zeroed), whatever M, K and groups.
WGMMA_PRODUCER_ROWS = header_constant("wgmma_plan.h", "kWgProducerRows")


def tool_module(name: str):
    """``tools/<name>.py`` of this checkout, imported as a module."""
    spec = importlib.util.spec_from_file_location(
        name, pathlib.Path(__file__).resolve().parents[1] / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cuda_tool(name: str) -> pathlib.Path | None:
    """A CUDA binary tool (cuobjdump, nvdisasm): from CUOBJDUMP's folder, PATH, or the
    NVIDIA wheels of the test extra (site-packages/nvidia/cu*/bin); None if none."""
    if os.environ.get("CUOBJDUMP"):
        found = pathlib.Path(os.environ["CUOBJDUMP"]).with_name(name)
        if found.exists():
            return found
    if shutil.which(name):
        return pathlib.Path(shutil.which(name))
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else []):
        for found in sorted(pathlib.Path(root).glob(f"cu*/bin/{name}")):
            if not os.access(found, os.X_OK):  # a wheel may unpack without the x bit
                found.chmod(found.stat().st_mode | 0o111)
            return found
    return None


def cuobjdump_or_skip():
    """(cuobjdump, the environment to run it in: nvdisasm found through NVDISASM_PATH), or
    a skip where either tool is missing."""
    tools = [cuda_tool("cuobjdump"), cuda_tool("nvdisasm")]
    if None in tools:
        pytest.skip("needs cuobjdump and nvdisasm (pip install nvidia-cuda-cuobjdump "
                    "nvidia-cuda-nvdisasm)")
    return str(tools[0]), dict(os.environ, NVDISASM_PATH=str(tools[1].parent))


def host_planner(tmp_path_factory, source: str, defines=()):
    """A grid planner check, ``tests/cpp/<source>``, compiled against ``ffi/`` with the host
    compiler and ``-D`` each of ``defines`` (the test skips without a compiler or without
    the CUDA runtime headers). Returns ``run(cases, *argv)``: each case one line on stdin,
    each answer one line of ints, or None where the planner printed "declined"."""
    cxx = shutil.which("c++") or shutil.which("g++")
    include = _cuda_include()
    if cxx is None or include is None:
        pytest.skip("needs a C++ compiler and the CUDA runtime headers")
    root = pathlib.Path(__file__).resolve().parents[1]
    exe = tmp_path_factory.mktemp("plan") / pathlib.Path(source).stem
    subprocess.run([cxx, "-std=c++17", "-O2", f"-I{root / 'ffi'}", f"-I{include}",
                    *(f"-D{d}" for d in defines), str(root / "tests" / "cpp" / source),
                    "-o", str(exe)], check=True)

    def run(cases, *argv):
        lines = "".join(" ".join(str(v) for v in c) + "\n" for c in cases)
        out = subprocess.run([str(exe), *map(str, argv)], input=lines, capture_output=True,
                             text=True, check=True, timeout=60).stdout.split("\n")
        return [None if l == "declined" else tuple(map(int, l.split())) for l in out[:len(cases)]]

    return run
