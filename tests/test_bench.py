"""The benchmark's plumbing, on the CPU with the smallest settings (not its numbers)."""

from __future__ import annotations

import csv
import os
import re
import signal
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_marlin
from jax_marlin import bench
from conftest import tool_module

SWEEP_IMPLS = ("dense", "jax_marlin", "jax_marlin_fused", "jax_marlin_dense", "xla_int4")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "bench.csv"
    returned = bench.main([
        "--shapes", "256x128", "--ms", "1,3", "--dtypes", "float16", "--groups", "128,-1",
        "--layer-stack", "--stack-shape", "128x128", "--stack-layers", "2",
        "--repack", "--repack-shape", "128x256",
        "--repeats", "1", "--min-gemms", "2", "--min-call-ms", "0", "--max-copies", "2",
        "--min-pass-gemms", "4",
        "--impls", ",".join(SWEEP_IMPLS),  # tinygemm needs torch with CUDA: not a plumbing test
        "--csv", str(path), "--plot", str(path.with_suffix(".png")),
    ])
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return path, rows, returned


def test_a_measurement_that_raises_sets_the_exit_status(tmp_path, monkeypatch):
    def broken(impl, *args):
        if impl == "jax_marlin":
            raise RuntimeError("a broken measurement")
        return real(impl, *args)

    real = bench.measure_jax
    monkeypatch.setattr(bench, "measure_jax", broken)
    argv = ["--shapes", "256x128", "--ms", "1", "--dtypes", "float16", "--no-layer-stack",
            "--no-repack", "--repeats", "1", "--min-gemms", "2", "--min-call-ms", "0",
            "--max-copies", "2", "--min-pass-gemms", "2", "--csv", str(tmp_path / "b.csv"),
            "--plot", str(tmp_path / "b.png")]
    assert bench.main(argv + ["--impls", "dense,jax_marlin"], exit_status=True) == 1
    assert bench.main(argv + ["--impls", "dense"], exit_status=True) == 0


def test_csv_columns_and_rows(run):
    _, rows, returned = run
    assert set(bench.COLUMNS) <= set(rows[0])
    assert len(rows) == len(returned)
    sweep = {(r["K"], r["N"], r["M"], r["group"], r["impl"]) for r in rows}
    expected = {("256", "128", m, g, impl) for m in ("1", "3") for g in ("128", "-1")
                for impl in SWEEP_IMPLS}
    assert expected <= sweep
    impls = {r["impl"] for r in rows}
    assert {"jax_marlin_stack2", "dense_stack2", "prepare_128x256"} <= impls
    for row in rows:
        assert float(row["us"]) > 0 and float(row["us_run2"]) > 0
        assert row["device"] and row["jax_version"]


def test_speedup_is_the_ratio_of_the_us_columns(run):
    _, rows, _ = run
    dense = {(r["K"], r["N"], r["M"], r["dtype"], r["group"]): float(r["us"])
             for r in rows if r["impl"] == "dense"}
    checked = 0
    for row in rows:
        key = (row["K"], row["N"], row["M"], row["dtype"], row["group"])
        if row["impl"] in SWEEP_IMPLS:
            assert float(row["speedup_vs_dense"]) == pytest.approx(
                dense[key] / float(row["us"]), rel=1e-4)
            checked += 1
    assert checked == 2 * 2 * len(SWEEP_IMPLS)
    stack = {r["impl"]: float(r["us"]) for r in rows if r["impl"].endswith("_stack2")}
    marlin_stack = next(r for r in rows if r["impl"] == "jax_marlin_stack2")
    assert float(marlin_stack["speedup_vs_dense"]) == pytest.approx(
        stack["dense_stack2"] / stack["jax_marlin_stack2"], rel=1e-4)


def test_the_stack_reports_its_host_dispatch(run):
    """Each stack row's note gives the host's time to dispatch its calls, a part of the
    call's wall time (two medians of the same calls, so within noise of it)."""
    _, rows, _ = run
    for row in (r for r in rows if r["impl"].endswith("_stack2")):
        match = re.search(r"host dispatch ([0-9.]+) us/layer", row["note"])
        assert match, row["note"]
        assert 0 < float(match.group(1)) <= 2 * max(float(row["us"]), float(row["us_run2"]))


def test_every_timed_output_was_checked(run):
    _, rows, _ = run
    for row in rows:
        if row["impl"].startswith("prepare_"):
            assert row["rel_err"] == ""
            assert "prepared" in row["note"] and "ONNX" in row["note"]
            continue
        assert 0 < float(row["rel_err"]) < 5e-3, row


def test_timed_calls_rotate_copies(run):
    """Two distinct copies (--max-copies), filled to a pass of four (--min-pass-gemms)."""
    _, rows, _ = run
    for row in rows:
        if row["impl"] in SWEEP_IMPLS:
            assert int(row["copies"]) == 4
            assert int(row["gemms_per_call"]) >= 1 + 4  # the checked GEMM + a pass


def test_plot_or_message(run, capsys):
    path, _, _ = run
    png = path.with_suffix(".png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not png.exists()
    else:
        assert png.stat().st_size > 0


def test_timing_rules():
    timing = bench.Timing(repeats=5, min_gemms=64, min_call_s=0.002, max_call_s=0.25,
                          rotate_bytes=4 * 60 * 2**20, max_copies=64)
    assert timing.copies(117e6) == 3  # 8192 x 28672 int4
    assert timing.copies(470e6) == 2  # at least two copies
    assert timing.copies(1e3) == 64
    assert timing.passes(4, 1e-5) == 200  # 2 ms per call from 10 us passes
    assert timing.passes(4, 1e-3) == 16  # 64 GEMMs
    assert timing.passes(2, 0.2) == 1  # long GEMMs: capped by the call time
    assert bench.block_size_for(14336, -1) == 16384
    assert bench.quantized_bytes(8192, 28672, 128) == pytest.approx(
        8192 * 28672 * (0.5 + 2 / 128 + 0.5 / 128))


def test_sized_passes_reach_the_minimum_call_despite_a_fixed_cost():
    """A call's fixed cost (dispatch, sync) must not count as pass time: a 20 ms call of
    0.6 ms passes with 0.7 ms fixed (8192 x 28672 at M = 1) needs 33 passes, where
    sizing from one pass's 1.3 ms gives 16 (a 10.3 ms call); sized again from the 0.6 ms
    a pass adds, 34."""
    timing = bench.Timing(repeats=5, min_gemms=64, min_call_s=0.02, max_call_s=0.25,
                          rotate_bytes=4 * 60 * 2**20, max_copies=64)
    fixed, per_pass = 0.7e-3, 0.6e-3
    calls = []

    def call_s(passes):
        calls.append(passes)
        return fixed + passes * per_pass

    passes = timing.sized_passes(16, call_s)
    assert fixed + passes * per_pass >= timing.min_call_s
    assert passes == 34
    assert calls == [1, 16]
    # without a fixed cost the first sizing holds and no third call is made
    calls.clear()
    assert timing.sized_passes(16, lambda p: calls.append(p) or p * per_pass) == 34
    assert calls == [1, 34]
    # long passes: one, capped by the call time, and no second call
    calls.clear()
    assert timing.sized_passes(2, lambda p: calls.append(p) or 0.3) == 1
    assert calls == [1]
    # a noisy second call (shorter than the first) keeps the first sizing
    assert timing.sized_passes(16, lambda p: 5e-3 if p == 1 else 4e-3) == 4
    # a pass that seems to add almost nothing (a slow first call) sizes no call past
    # max_call_s at the second call's measured rate
    passes = timing.sized_passes(16, lambda p: 5.0e-3 if p == 1 else 5.01e-3)
    assert passes * 5.01e-3 / 4 <= timing.max_call_s


def test_quick_and_default_settings():
    quick = bench.parse_args(["--quick"])
    assert quick.shapes == [(4096, 14336), (8192, 28672)]
    assert quick.ms == [1, 16, 64, 256, 4096] and quick.dtypes == ["float16"]
    assert not quick.layer_stack and not quick.repack
    full = bench.parse_args(["--no-forced"])
    assert len(full.shapes) == 5 and len(full.ms) == 11
    assert full.dtypes == ["float16", "bfloat16"] and full.groups == [128]
    assert full.layer_stack and full.repack and full.csv == "bench.csv"
    assert "jax_marlin_fused" not in full.impls and "jax_marlin" in full.impls
    assert bench.parse_args(["--write-docs"]).csv == "docs/perf/h200.csv"
    with pytest.raises(SystemExit):
        bench.parse_args(["--groups", "48"])


def test_ab_compare_reads_rounds_and_the_reference_spread(tmp_path):
    """tools/ab_compare.py (the A/B rounds of tools/ab_variants.sh, side by side) on two
    variants' bench CSVs over two rounds, against the numbers written into them."""
    ab_compare = tool_module("ab_compare")
    times = {("main", "bench.csv"): 40.0, ("main", "bench_r2.csv"): 43.0,
             ("var", "bench.csv"): 38.5, ("var", "bench_r2.csv"): 38.0}
    for (variant, name), us in times.items():
        (tmp_path / variant).mkdir(exist_ok=True)
        with open(tmp_path / variant / name, "w", newline="") as f:
            w = csv.DictWriter(f, ["K", "N", "M", "dtype", "group", "impl", "us"])
            w.writeheader()
            w.writerow(dict(K=8192, N=28672, M=1, dtype="float16", group=128, impl="dense",
                            us=110.0))
            w.writerow(dict(K=8192, N=28672, M=1, dtype="float16", group=128,
                            impl="jax_marlin", us=us))
    lines = ab_compare.compare(tmp_path, ["main", "var"])
    assert len(lines) == 2, lines  # a header and the one jax_marlin cell
    assert lines[1] == ("8192x28672 M=1 float16 g128: main 40.0 / 43.0 (41.5); "
                        "var 38.5 / 38.0 (38.2); spread 3.0")


def test_rotation_duplicates_are_distinct_weights_of_one_pass():
    """Large weights fill a pass with duplicates (``in_rotation``): equal values in buffers
    of their own, each one GEMM of the timed loop (no CSE merges them), whose checksum
    matches the GEMMs done one by one."""
    K, N = 64, 48
    xkey, wkey = jax.random.split(jax.random.key(3))
    x = jax.random.normal(xkey, (2, K), jnp.float32).astype(jnp.float16)
    copies = tuple(jax.random.normal(k, (K, N), jnp.float32).astype(jnp.float16) * 0.1
                   for k in jax.random.split(wkey, 2))
    weights = bench.in_rotation(copies, 5)
    assert len(weights) == 5 and weights[:2] == copies
    for i, w in enumerate(weights):
        np.testing.assert_array_equal(np.asarray(w), np.asarray(copies[i % 2]))
    pointers = {w.unsafe_buffer_pointer() for w in weights}
    assert len(pointers) == 5  # five buffers: five sets of addresses for the L2
    assert bench.in_rotation(copies, 1) == copies
    loop = bench.LOOPS["dense"]
    assert loop.lower(x, weights, 1).compile().as_text().count(" dot(") == 1 + 5
    y0, total = loop(x, weights, 1)
    f32 = jnp.float32
    expected = jnp.sum(jnp.abs(jnp.dot(x, weights[0]).astype(f32)))
    x1 = x + (jnp.tanh(expected) * 1e-3).astype(x.dtype)
    expected += sum(jnp.sum(jnp.abs(jnp.dot(x1, w).astype(f32))) for w in weights)
    np.testing.assert_allclose(float(total), float(expected), rtol=2e-3)
    np.testing.assert_array_equal(np.asarray(y0), np.asarray(jnp.dot(x, weights[0])))


def _while_carry(compiled_text):
    """The shape of the timed loop's carried tuple, from the compiled HLO."""
    (line,) = [l for l in compiled_text.split("\n") if " while(" in l]
    return line.split(" while(")[0].split(" = ", 1)[1]


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.float32])
def test_the_timed_loop_dequantizes_inside_every_pass(dtype):
    """XLA hoists what depends on the weights alone out of a loop: xla_int4's dequantization
    then ran once a call, and its passes timed dots on float weights (on the CPU, 481
    against 1753 us a GEMM, 1024 x 1024). The loop must carry the weights as stored, the
    uint4 codes, and no float weight of their shape."""
    K, N, block = 256, 128, 32
    q = jax_marlin.quantize(np.random.default_rng(0).standard_normal((K, N)).astype(np.float32),
                            block_size=block)
    weights = bench.in_rotation((bench.xla_int4_weights(q, dtype),), 2)
    x = jnp.ones((1, K), dtype)
    carry = _while_carry(bench.LOOPS["xla_int4"].lower(x, weights, 3).compile().as_text())
    arrays = [(kind, np.prod([int(d) for d in dims.split(",") if d]))
              for kind, dims in re.findall(r"(\w+)\[([\d,]*)\]", carry)]
    assert [kind for kind, size in arrays if size == K * N] == ["u4", "u4"], carry
    y0, total = bench.LOOPS["xla_int4"](x, weights, 3)
    np.testing.assert_allclose(np.asarray(y0, np.float32),
                               np.asarray(bench.op_xla_int4(x, weights[0]), np.float32))


def test_loop_compiler_options_keep_the_passes_xla_flags_turn_off(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert bench.loop_compiler_options() == {"xla_disable_hlo_passes": "dot-merger"}
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x --xla_disable_hlo_passes=cse,dot-merger")
    assert bench.loop_compiler_options() == {"xla_disable_hlo_passes": "dot-merger,cse"}


def test_bench_trace_drives_the_bench_loop(tmp_path, capsys, monkeypatch):
    """tools/bench_trace.py traces the bench's own timed loop (``bench.LOOPS``). On the CPU
    its trace holds no GPU kernels, but it must run: it is coupled to the loop's signature
    and the GEMM count, and a change there must show here, not on the GPU machine."""
    monkeypatch.setenv("XLA_FLAGS", "")  # the tool appends to it at import: restored after
    bench_trace = tool_module("bench_trace")
    bench_trace.main(["--K", "128", "--N", "128", "--passes", "1", "--min-pass-gemms", "4",
                      "--out", str(tmp_path)])
    out = capsys.readouterr().out
    for impl in ("jax_marlin", "dense"):
        assert f"128x128 M=1 {impl}: 5 GEMMs" in out  # 1 + 1 pass of 2 copies and 2 duplicates
        if jax.default_backend() == "cpu":
            assert f"{impl}: no GPU kernels in the trace" in out


def test_stack_dispatch_times_each_stack(capsys):
    """tools/stack_dispatch.py runs the bench's stacks (``bench.chained``) on any backend:
    a row per impl and layer count, each time a call positive, and the dispatch (part of
    the single call waited for) no longer than twice that call."""
    stack_dispatch = tool_module("stack_dispatch")
    stack_dispatch.main(["--layers", "1", "3", "--shape", "128", "--calls", "2",
                         "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines if line.startswith(("dense ", "jax_marlin "))]
    assert [(r[0], r[1]) for r in rows] == [
        (impl, layers) for layers in ("1", "3") for impl in ("dense", "jax_marlin")]
    for r in rows:
        dispatch, single, chained = (float(r[i]) for i in (2, 4, 6))
        assert min(dispatch, single, chained) > 0 and dispatch <= 2 * single, r


def test_gap_trace_measures_the_idle_time_between_calls(monkeypatch):
    """tools/gap_trace.py's reading of a trace: from the end of one call (its reduce kernel
    included) to the start of the next call's kernel, never across a pass's checksum."""
    monkeypatch.setenv("XLA_FLAGS", "")  # the tool appends to it at import: restored after
    gap_trace = tool_module("gap_trace")
    rows = [(0.0, 5.0, "stream_gemm_kernel"), (8.0, 5.0, "stream_gemm_kernel"),
            (16.0, 1.0, "stream_reduce_kernel"), (21.0, 5.0, "stream_gemm_kernel"),
            (26.0, 2.0, "input_reduce_fusion"), (30.0, 5.0, "stream_gemm_kernel")]
    # Gaps: 8 - 5 = 3, then 21 - (16 + 1) = 4; none across the fusion.
    assert gap_trace.gaps_between(rows, "stream_gemm") == (5.0, 3.5, 4, 2)
    assert gap_trace.gaps_between(rows, "dequant") is None


def test_pass_rows_time_the_ops_as_tinygemm_is_timed(tmp_path):
    """dense_pass and jax_marlin_pass (opt-in): a jitted pass over the rotation with every
    output returned, called back to back; checked against the oracle, ratios against
    dense_pass, and not in the default set."""
    path = tmp_path / "pass.csv"
    bench.main(["--shapes", "256x128", "--ms", "1,3", "--dtypes", "float16",
                "--no-layer-stack", "--no-repack", "--repeats", "1", "--min-gemms", "2",
                "--min-call-ms", "0", "--max-copies", "2", "--min-pass-gemms", "4",
                "--impls", "dense,dense_pass,jax_marlin_pass", "--csv", str(path)])
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert {(r["M"], r["impl"]) for r in rows} == {
        (m, i) for m in ("1", "3") for i in ("dense", "dense_pass", "jax_marlin_pass")}
    for m in ("1", "3"):
        by_impl = {r["impl"]: r for r in rows if r["M"] == m}
        marlin = by_impl["jax_marlin_pass"]
        assert float(marlin["speedup_vs_dense"]) == pytest.approx(
            float(by_impl["dense_pass"]["us"]) / float(marlin["us"]), rel=1e-4)
        assert float(by_impl["dense_pass"]["speedup_vs_dense"]) == pytest.approx(1.0)
        for r in (marlin, by_impl["dense_pass"]):
            assert 0 < float(r["rel_err"]) < 5e-3, r
            assert int(r["copies"]) == 4 and int(r["gemms_per_call"]) % 4 == 0, r
    assert not set(bench.PASS_IMPLS) & set(bench.parse_args([]).impls)


def test_power_sample_reads_the_busy_and_capped_samples():
    """tools/power_sample.py's summary of nvidia-smi's "clock, power, limit" lines: the busy
    samples (above the threshold: the GPU at work), of those the ones within 3% of the limit
    (at the cap: what a sustained run's clock is read from), and lines that are not three
    numbers (a header, [N/A], a line cut when the sampler stopped) skipped."""
    power_sample = tool_module("power_sample")
    text = "\n".join(["clocks.sm [MHz], power.draw [W], power.limit [W]", "1980, 85.2, 700.0",
                      "1470, 691.0, 700.0", "1500, 690.5, 700.0", "1455, 701.3, 700.0",
                      "[N/A], [N/A], [N/A]", "1980, 648.0, 700.0", "19"])
    got = power_sample.summarize(text, busy_watts=200)
    assert got == {"samples": 5, "busy": 4, "capped": 3,
                   "busy_clock_median": 1485.0, "busy_clock_min": 1455.0,
                   "busy_power_median": 690.75,
                   "capped_clock_median": 1470.0, "capped_clock_min": 1455.0,
                   "capped_power_median": 691.0}
    assert power_sample.summarize(text, busy_watts=800) == {"samples": 5, "busy": 0, "capped": 0}
    no_limit = power_sample.summarize("1470, 691.0, [N/A]\n1500, 690.0, [N/A]", busy_watts=200)
    assert (no_limit["busy"], no_limit["capped"], no_limit["busy_clock_median"]) == (2, 0, 1485)
    line = power_sample.describe(got, 200)
    assert "4 over 200 W (SM clock median 1485 MHz" in line, line
    assert "3 at the cap: SM clock median 1470 MHz (lowest 1455)" in line, line


def test_power_sample_runs_the_command_and_keeps_its_status(tmp_path, capsys, monkeypatch):
    """Without nvidia-smi (this machine, CI) the command still runs, its exit status is the
    tool's (128 + N for a signal N), --out's folder is made, and the line says that nothing
    was sampled."""
    power_sample = tool_module("power_sample")
    monkeypatch.setattr(power_sample.shutil, "which", lambda name: None)
    marker = tmp_path / "ran"
    out = str(tmp_path / "new" / "smi.csv")
    status = power_sample.main(["--out", out, "--", sys.executable, "-c",
                                f"open({str(marker)!r}, 'w').close(); raise SystemExit(3)"])
    assert status == 3 and marker.exists()
    assert "no nvidia-smi here, nothing sampled" in capsys.readouterr().out
    killed = power_sample.main(["--out", out, "--", sys.executable, "-c",
                                "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert killed == 128 + 9


def test_power_sample_samples_while_the_command_runs(tmp_path, capsys, monkeypatch):
    """With an nvidia-smi on the PATH (a stand-in that notes its arguments, then prints one
    capped sample every 10 ms until stopped), it is asked for the clock, the power and the
    limit of the chosen GPU, the samples land in --out while the command runs, and the
    sampler is stopped after it: the line reports them."""
    fake = tmp_path / "nvidia-smi"
    args_seen = tmp_path / "args"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {args_seen}\n"
                    "while true; do echo '1470, 691.0, 700.0'; sleep 0.01; done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    power_sample = tool_module("power_sample")
    out = tmp_path / "smi.csv"
    assert power_sample.main(["--out", str(out), "--gpu", "3", "--", sys.executable, "-c",
                              "import time; time.sleep(0.5)"]) == 0
    line = capsys.readouterr().out
    assert re.search(r"power_sample: (\d+) samples, \1 over 200 W .*, \1 at the cap: "
                     r"SM clock median 1470 MHz", line), line
    assert out.read_text().startswith("1470, 691.0, 700.0")
    assert args_seen.read_text().split() == [
        "-i", "3", "--query-gpu=clocks.sm,power.draw,power.limit",
        "--format=csv,noheader,nounits", "-lms", "50"]


def test_power_sample_stops_the_command_when_stopped(tmp_path, monkeypatch):
    """A SIGTERM to the tool while its command runs (here the command sends it to its
    parent, the test's process, where main runs) stops the command too, not only the tool,
    which exits with 143 and puts back the SIGTERM handler it found."""
    power_sample = tool_module("power_sample")
    monkeypatch.setattr(power_sample.shutil, "which", lambda name: None)
    pid_file = tmp_path / "pid"
    child = ("import os, signal, time; open({!r}, 'w').write(str(os.getpid())); "
             "os.kill(os.getppid(), signal.SIGTERM); time.sleep(60)").format(str(pid_file))
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        power_sample.main(["--out", str(tmp_path / "smi.csv"), "--", sys.executable, "-c", child])
    assert stopped.value.code == 143
    assert signal.getsignal(signal.SIGTERM) is before
    with pytest.raises(ProcessLookupError):  # waited for, so not even a zombie is left
        os.kill(int(pid_file.read_text()), 0)


def test_power_sample_default_gpu_follows_cuda_visible_devices(monkeypatch):
    """nvidia-smi's -i by default: the first visible GPU's index or UUID, else 0."""
    power_sample = tool_module("power_sample")
    for visible, gpu in (("2,3", "2"), ("GPU-8a1b", "GPU-8a1b"), ("", "0"), ("none", "0")):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert power_sample.default_gpu() == gpu, visible


def test_a_wrong_output_is_flagged_and_left_out(tmp_path, monkeypatch, capsys):
    """An impl whose output is off by 5% (as a wrong scale would be) keeps its row, marked
    CHECK FAILED, and is left out of the summary; the right impls are not marked."""
    wrong = bench.make_loop(lambda x, w: bench.op_xla_int4(x, w) * 1.05)
    monkeypatch.setitem(bench.LOOPS, "xla_int4", wrong)
    path = tmp_path / "bench.csv"
    status = bench.main([
        "--shapes", "256x128", "--ms", "1,3", "--dtypes", "float16", "--no-layer-stack",
        "--no-repack", "--repeats", "1", "--min-gemms", "2", "--min-call-ms", "0",
        "--max-copies", "2", "--min-pass-gemms", "2", "--impls", "dense,xla_int4",
        "--csv", str(path), "--plot", str(tmp_path / "bench.png")], exit_status=True)
    assert status == 1  # the command's exit status
    with open(path, newline="") as f:
        notes = {(r["impl"], r["M"]): r["note"] for r in csv.DictReader(f)}
    assert {key for key, note in notes.items() if note.startswith("CHECK FAILED")} == {
        ("xla_int4", "1"), ("xla_int4", "3")}
    assert re.match(r"CHECK FAILED: rel_err 0\.0(49|5)", notes[("xla_int4", "1")])
    assert not notes[("dense", "1")].startswith("CHECK FAILED")
    out = capsys.readouterr().out
    summary, report = out.split("== us per GEMM")[1].split("\nwrote ")
    assert "dense" in summary and "xla_int4" not in summary
    assert "2 rows failed the output check" in report
    # --max-copies 2 of these small weights rotate far less than 4 x L2: the log says so.
    assert re.search(r"WARNING: 2 int4 copies rotate 0\.0 MiB, less than \d+ MiB", out)


def test_tinygemm_rows_run_in_the_loop_and_as_bare_passes(tmp_path):
    """Where torch with CUDA works (the GPU machine): tinygemm timed in the JAX rows' loop
    (checksum and nudge, host wall time) and as bare passes, both checked against the
    oracle, each against its own baseline."""
    if bench.torch_cuda()[0] is None:
        pytest.skip(f"tinygemm needs torch with CUDA: {bench.torch_cuda()[1]}")
    rows = bench.main([
        "--shapes", "1024x512", "--ms", "1,4", "--dtypes", "bfloat16", "--no-layer-stack",
        "--no-repack", "--repeats", "1", "--min-gemms", "4", "--min-call-ms", "1",
        "--impls", "dense,dense_pass,tinygemm,tinygemm_pass",
        "--csv", str(tmp_path / "bench.csv"), "--plot", str(tmp_path / "bench.png")])
    by = {(r["impl"], r["M"]): r for r in rows}
    for M in (1, 4):
        for impl, baseline in (("tinygemm", "dense"), ("tinygemm_pass", "dense_pass")):
            row = by[(impl, M)]
            assert not row.get("check_failed") and row["rel_err"] < 1e-2, row
            assert row["speedup_vs_dense"] == pytest.approx(by[(baseline, M)]["us"] / row["us"])
            assert row["gemms_per_call"] % row["copies"] == 0  # whole passes, no extra GEMM


def test_xla_int4_rows_count_their_4_bit_arrays_at_half_a_byte():
    """read_GBps: xla_int4's uint4 codes and zero points are half a byte an element (numpy's
    itemsize says one), so its weight holds the format's bytes, no more."""
    K, N, block = 256, 64, 32
    q = jax_marlin.quantize(np.random.default_rng(0).standard_normal((K, N)).astype(np.float32),
                            block_size=block)
    weights = bench.xla_int4_weights(q, jnp.float16)
    assert bench.tree_bytes(weights) == bench.quantized_bytes(K, N, block)
