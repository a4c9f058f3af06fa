"""The README's runnable examples, run as a user runs them: each script in a fresh
interpreter on this machine's default backend, with small sizes where it takes them.

Each script checks itself against an oracle it prints (quickstart: the ``jax.numpy``
reference; flax_model: the dequantized float model; onnx_example: onnxruntime's own
MatMulNBits kernel; tensor_parallel: the ``jax.numpy`` reference, for each form); the
tests read those figures back and hold them to a bound, so a script that stops
matching, or stops running, fails here. (examples/decode.py has its
own tests, tests/test_examples.py.)
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

_EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _run(script, *args):
    # On a GPU this test's own process may hold most of the memory already (JAX takes 75%
    # by default): the script's process takes only what it uses.
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    proc = subprocess.run([sys.executable, str(_EXAMPLES / script), *args],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout


def _figure(text, label):
    """The number printed after ``label``."""
    found = re.search(re.escape(label) + r"\s*([-+0-9.eE]+)", text)
    assert found, (label, text[-2000:])
    return float(found.group(1))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_quickstart_matches_the_oracle(dtype):
    # K = 320 in blocks of 64; the README's main command, at a size any backend runs fast.
    out = _run("quickstart.py", "--K", "320", "--N", "192", "--M", "3", "--block-size", "64",
               "--dtype", dtype)
    error = _figure(out, "relative error vs the jax.numpy oracle:")
    assert error < (2e-3 if dtype == "float16" else 1e-5), out
    assert _figure(out, "time per multiply: jax_marlin") > 0


def test_flax_model_example_matches_its_dequantized_float_model():
    pytest.importorskip("flax")
    out = _run("flax_model.py")
    assert re.search(r"quantized 3 Linear layers", out), out
    assert _figure(out, "max abs error vs the dequantized float model:") < 1e-3


def test_onnx_example_matches_onnxruntime():
    for module in ("flax", "onnx", "onnxruntime", "onnx_ir"):
        pytest.importorskip(module)
    out = _run("onnx_example.py")
    # float32 both ways (issue 4 asks <= 1e-3; they read ~5e-7)
    assert _figure(out, "relative error, jax_marlin (Flax) vs onnxruntime MatMulNBits:") <= 1e-5


def test_tensor_parallel_example_matches_the_oracle_without_gathering():
    # Four CPU devices where the machine has fewer than two accelerators.
    out = _run("tensor_parallel.py")
    for form in ("column-parallel", "row-parallel"):
        line = next(l for l in out.splitlines() if l.startswith(form))
        assert _figure(line, "all-gathers") == 0, out
        assert _figure(line, "relative error vs the jax.numpy oracle:") < 2e-3, out
