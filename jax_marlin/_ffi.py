"""Loads the compiled FFI modules and registers their handlers with XLA."""

from __future__ import annotations

import importlib
import pathlib
import re
import warnings

import jax

CPU_TARGET = "jax_marlin_matmul_nbits_cpu"
CUDA_TARGET = "jax_marlin_matmul_nbits_cuda"
DEQUANTIZE_CUDA_TARGET = "jax_marlin_dequantize_cuda"


def _load(name):
    try:
        return importlib.import_module(f"jax_marlin.{name}"), None
    except ImportError as error:  # not built, or built for another platform
        return None, f"{type(error).__name__}: {error}"


_cpu, _cpu_error = _load("_cpu")
_cuda, _cuda_error = _load("_cuda")


def source_checkout() -> str | None:
    """The source checkout this package was imported from, where no compiled module is
    beside it (``python -m jax_marlin.bench`` run in the checkout: the current directory
    comes first on ``sys.path`` and shadows the installed package); else None."""
    root = pathlib.Path(__file__).resolve().parent.parent
    if _cpu is None and _cuda is None and (root / "CMakeLists.txt").is_file() \
            and (root / "pyproject.toml").is_file():
        return str(root)
    return None


if (_checkout := source_checkout()) is not None:
    warnings.warn(
        f"jax_marlin was imported from its source checkout ({_checkout}), which holds "
        "no compiled FFI module, so every call takes the XLA fallback; to use the installed "
        "package (pip install .), run from another directory", RuntimeWarning, stacklevel=2)

for _module, _platform in ((_cpu, "cpu"), (_cuda, "CUDA")):
    if _module is not None:
        for _name, _capsule in _module.registrations().items():
            jax.ffi.register_ffi_target(_name, _capsule, platform=_platform, api_version=1)


def has_cpu_kernel() -> bool:
    return _cpu is not None


def has_cuda_kernel() -> bool:
    return _cuda is not None


def cuda_module():
    """The CUDA binding module (for the plan queries, jax_marlin.ops.stream_plan and
    wgmma_plan); None if not built."""
    return _cuda


def build_info() -> dict:
    """What this installation was compiled with.

    Always: ``cpu`` / ``cuda``, whether each FFI module is present;
    ``cuda_architectures``, the SM targets of the CUDA kernels ([] without the CUDA
    module); ``cuda_runtime_version`` (None without it); ``xla_ffi_api_version``, the
    version of the XLA FFI headers the handlers were compiled against (a handler loads
    on any jaxlib whose own version is at least this; None without either module);
    ``jax_version``, the running jax. With the CUDA module: ``wgmma_producer``, the
    wgmma kernel's JAX_MARLIN_WGMMA_PRODUCER (1, the default: the producer warpgroup
    at 256 rows; 0 where built with -DJAX_MARLIN_WGMMA_PRODUCER=0). Without a module:
    ``cuda_import_error`` / ``cpu_import_error``, why it did not import (on a build
    without CUDA, a ModuleNotFoundError: expected, not a fault).
    """
    info = {
        "cpu": _cpu is not None,
        "cuda": _cuda is not None,
        "cuda_architectures": [],
        "cuda_runtime_version": None,
        "xla_ffi_api_version": None,
        "jax_version": jax.__version__,
    }
    module = _cuda or _cpu
    if module is not None:
        info["xla_ffi_api_version"] = tuple(module.xla_ffi_api_version())
    if _cuda is not None:
        # "90a" or "90-real" name architecture 90 too.
        info["cuda_architectures"] = sorted({int(re.match(r"\d+", a).group())
                                             for a in _cuda.cuda_architectures().split(",")})
        info["cuda_runtime_version"] = int(_cuda.cuda_runtime_version())
        # JAX_MARLIN_WGMMA_PRODUCER of the wgmma kernel (0: off, or no wgmma kernel).
        info["wgmma_producer"] = int(_cuda.wgmma_producer())
    else:
        info["cuda_import_error"] = _cuda_error
    if _cpu is None:
        info["cpu_import_error"] = _cpu_error
    return info
