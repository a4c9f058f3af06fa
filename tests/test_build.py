"""What the build says about itself, checked against what actually runs."""

import os
import pathlib
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_marlin as jm
from jax_marlin import _ffi
from conftest import cuobjdump_or_skip


def test_the_compiled_cpu_module_is_what_runs():
    # Without the C++ module every CPU test would silently exercise the dense
    # fallback instead of the FFI handler: this guards the suite itself.
    info = jm.build_info()
    assert info["cpu"], info
    text = jax.jit(jm.matmul_nbits).trace(
        jnp.ones((2, 64), jnp.float32),
        jm.prepare(np.zeros((8, 2, 16), np.uint8), np.ones((8, 2), np.float32), K=64, N=8,
                   block_size=32)).lower(lowering_platforms=("cpu",)).as_text()
    assert _ffi.CPU_TARGET in text


def test_an_import_from_the_source_checkout_warns_that_it_has_no_kernels(tmp_path):
    """`python -m jax_marlin.bench` run in the checkout imports the source tree, which
    has no compiled module, and would time the XLA fallback in silence (session 37's
    call F did): the import says so. The installed package, imported from elsewhere by
    the same interpreter, says nothing."""
    root = pathlib.Path(__file__).resolve().parent.parent
    source = root / "jax_marlin"
    code = ("import jax_marlin; from jax_marlin import _ffi; "
            "print(jax_marlin.__file__); print(_ffi.has_cpu_kernel() or _ffi.has_cuda_kernel())")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(cwd):
        result = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env,
                                capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            return None, None, result.stderr
        path, compiled = result.stdout.split()
        return pathlib.Path(path).parent, compiled == "True", result.stderr

    elsewhere, compiled, stderr = run(tmp_path)
    if elsewhere is None:
        pytest.skip("jax_marlin is not installed in this interpreter")
    if elsewhere == source:
        pytest.skip("an editable install: the checkout is the installed package")
    assert "source checkout" not in stderr
    here, compiled, stderr = run(root)
    assert here == source, stderr
    if compiled:
        pytest.skip("this checkout's sources find compiled modules (an in-place build)")
    assert "imported from its source checkout" in stderr
    assert str(root) in stderr


def test_build_info_reports_the_ffi_headers_and_cuda():
    info = jm.build_info()
    major, minor = info["xla_ffi_api_version"]
    assert (major, minor) >= (0, 1)
    assert info["jax_version"] == jax.__version__
    if info["cuda"]:
        assert set(info["cuda_architectures"]) & {80, 90}
        assert info["cuda_runtime_version"] >= 12000


# Each timeline build: the kernel file, its flag, the architecture it compiles for
# (the wgmma kernel exists only as sm_90a code) and its kernel's name in the SASS.
TIMELINE_BUILDS = [
    ("stream_kernel.cu", "-DJAX_MARLIN_STREAM_TIMELINE", "sm_90", "stream_gemm_kernel"),
    ("wgmma_kernel.cu", "-DJAX_MARLIN_WGMMA_TIMELINE", "sm_90a", "wgmma_gemm_kernel"),
]


@pytest.mark.parametrize("source,flag,arch,kernel", TIMELINE_BUILDS,
                         ids=[b[0].split("_")[0] for b in TIMELINE_BUILDS])
def test_the_timeline_build_compiles_and_the_package_carries_none_of_it(tmp_path, source, flag,
                                                                        arch, kernel):
    """ffi/stream_timeline.h: the kernels' timestamps exist only in a build with
    -DJAX_MARLIN_STREAM_TIMELINE or -DJAX_MARLIN_WGMMA_TIMELINE (tools/latency_probe.cu's).
    Those builds must keep compiling, and the package's CUDA module must not read the
    global timer."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc")
    cuobjdump, env = cuobjdump_or_skip()
    root = pathlib.Path(__file__).resolve().parents[1]
    cubin = tmp_path / "timeline.cubin"
    subprocess.run([nvcc, "-std=c++17", "-O3", "-cubin", "--expt-relaxed-constexpr", flag,
                    "-DJAX_MARLIN_WGMMA=1", "-gencode",
                    f"arch={arch.replace('sm', 'compute')},code={arch}", "-I",
                    str(root / "ffi"), str(root / "ffi" / source), "-o", str(cubin)], check=True)
    sass = subprocess.run([cuobjdump, "-sass", str(cubin)], check=True, capture_output=True,
                          text=True, env=env).stdout
    assert kernel in sass and "GLOBALTIMER" in sass
    info = jm.build_info()
    # (A module built without sm_90 has no wgmma kernel to look for.)
    if info["cuda"] and (arch == "sm_90" or 90 in info["cuda_architectures"]):
        module = next(pathlib.Path(jm.__file__).parent.glob("_cuda*.so"))
        sass = subprocess.run([cuobjdump, "-sass", str(module)], check=True,
                              capture_output=True, text=True, env=env).stdout
        assert kernel in sass and "GLOBALTIMER" not in sass


@pytest.mark.parametrize("extra", ["flax", "onnx"])
def test_the_extras_are_optional(extra):
    """README: `import jax_marlin` needs neither Flax nor onnx, and the submodule that does
    says which install it needs. The package is blocked in a fresh interpreter, so this
    holds whether or not it is installed here."""
    code = (
        f"import sys; sys.modules[{extra!r}] = None\n"
        "import jax_marlin\n"
        f"assert {extra!r} not in [m.split('.')[0] for m in sys.modules if sys.modules[m]]\n"
        "try:\n"
        f"    import jax_marlin.{extra}\n"
        "except ImportError as e:\n"
        f"    assert \"pip install 'jax_marlin[{extra}]'\" in str(e), e\n"
        "    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok", out.stderr
