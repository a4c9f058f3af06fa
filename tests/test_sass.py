"""What ptxas made of the Hopper kernel, read from the installed CUDA module (no GPU).

Three ways the wgmma producer kernel has lost speed or would, with every GPU test still
passing, all visible in its SASS:
- its registers: the producer warpgroup hands registers to the consumers with
  setmaxnreg, which needs the launch to hold exactly kWgLaunchRegs (168) a thread
  (ffi/wgmma_kernel.cu); at any other count the launcher falls back to the cp.async
  ring (13% slower at 256 x 8192 x 28672), and local memory means spills;
- its mainloop's uniform datapath: session 24's stream-K branch put a store with
  lane-dependent branches inside the loop around the mainloop, and ptxas moved the
  slot addresses and wgmma descriptors out of uniform registers (R2UR before every
  HGMMA, BSSY/BSYNC and WARPSYNC around every barrier wait): 18-40% slower on the H200
  (docs/perf/NOTES.md, session 24, call N);
- its wgmma pipeline: where ptxas sees a non-wgmma write of the accumulators inside the
  pipeline it serializes every wgmma (ptxas info C7515): each HGMMA then waits for its
  own completion (WARPGROUP.DEPBAR.LE gsb0, 0x0) instead of overlapping the next
  stage's dequantization. Seen in session 26 on a branch that moved stream-K's schedule
  (a conditional zeroing of the accumulators at a segment's start).

Needs cuobjdump and nvdisasm (a CUDA toolkit on PATH, or the nvidia-cuda-cuobjdump and
nvidia-cuda-nvdisasm wheels of the test extra) and a module built with sm_90a code;
skips otherwise.
"""

import importlib.util
import re
import subprocess

import pytest
from conftest import cuobjdump_or_skip, header_constant, tool_module

LAUNCH_REGS = header_constant("wgmma_kernel.cu", "kWgLaunchRegs")
# wgmma_gemm_kernel<T, kZP, 256, kTwoGroups, kProducer = true>
PRODUCER = re.compile(r"wgmma_gemm_kernel\w*Li256ELb[01]ELb1E")
# The loop finder: the predicated backward branch whose body holds the most MMAs.
SASS_MIX = tool_module("sass_mix")
# stream_gemm_kernel<T, kZP, kMT, kGroupUnits, kTileSplit, kGroupRows, kPhases,
# kGroupCluster>: the two flags that say whether a reduce kernel can follow.
STREAM_GEMM = re.compile(r"stream_gemm_kernel\w*?ELb([01])ELb[01]ELb[01]ELb([01])EEEv")


@pytest.fixture(scope="module")
def cuobjdump():
    """run(*args) -> cuobjdump's stdout on the installed CUDA module."""
    tool, env = cuobjdump_or_skip()
    spec = importlib.util.find_spec("jax_marlin._cuda")  # found, not imported (no GPU here)
    if spec is None or spec.origin is None:
        pytest.skip("a build without the CUDA module")

    def run(*args):
        return subprocess.run([tool, *args, spec.origin], check=True, capture_output=True,
                              text=True, env=env, timeout=300).stdout

    if "sm_90a" not in run("-lelf"):
        pytest.skip("a build without sm_90a code")
    return run


def _resources(cuobjdump):
    """{kernel name: {REG: n, STACK: n, LOCAL: n, ...}} of the producer instances."""
    found, name = {}, None
    for line in cuobjdump("-res-usage").splitlines():
        if line.strip().startswith("Function "):
            name = line.strip()[len("Function "):].rstrip(":")
        elif name and PRODUCER.search(name) and "REG:" in line:
            found[name] = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}
            name = None
    return found


def test_producer_instances_launch_with_the_register_budget(cuobjdump):
    found = _resources(cuobjdump)
    assert len(found) == 12, sorted(found)  # 2 dtypes x 3 zero-point kinds x 2 group layouts
    for name, res in found.items():
        assert res["REG"] == LAUNCH_REGS and res["STACK"] == 0 and res["LOCAL"] == 0, (name, res)


def test_the_producer_mainloop_keeps_the_uniform_datapath(cuobjdump):
    names = sorted(_resources(cuobjdump))
    assert names
    for name in names:
        code = SASS_MIX.functions(cuobjdump("-sass", "-fun", name))[name]
        # the consumers' loop over pairs of stages
        body = [t for _, t in SASS_MIX.hottest_loop(code)]
        hgmma = sum("HGMMA" in t for t in body)
        assert hgmma == 8, (name, hgmma)  # two stages of four k16 steps
        diverged = [t for t in body if re.search(r"\b(R2UR|BSSY|BSYNC|WARPSYNC)\b", t)]
        assert not diverged, (name, diverged[:6])
        assert any(re.search(r"\bU(MOV|LOP3|IADD3)\b", t) for t in body), name
        serialized = [t for t in body if re.search(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x0\b", t)]
        assert not serialized, (name, len(serialized))


def test_the_reduce_waits_for_the_stream_k_kernel_it_may_overlap(cuobjdump):
    """ffi/stream_kernel.cu, JAX_MARLIN_STREAM_REDUCE_PDL: on sm_90 a cut stream-K grid lets
    its reduce kernel launch at once (griddepcontrol.launch_dependents: PREEXIT, predicated
    on a reduce following) and the reduce waits for the grid's end and memory
    (griddepcontrol.wait: ACQBULK) before it reads a partial. A reduce reading before its
    wait would add stale partials only when the timing allows: a race the GPU tests could
    miss. The tile split and the group cluster have no reduce, and must not let XLA's next
    kernel start early. (A build with -DJAX_MARLIN_STREAM_REDUCE_PDL=0 has neither
    instruction, which is as safe.)"""
    functions = SASS_MIX.functions(cuobjdump("-sass", "-arch", "sm_90"))
    mains = {n: STREAM_GEMM.search(n) for n in functions if "stream_gemm_kernel" in n}
    reduces = {n: t for n, t in functions.items() if "stream_reduce_kernel" in n}
    assert mains and all(mains.values()) and reduces, (sorted(functions)[:4], len(reduces))
    waiting = {}
    for name, code in reduces.items():  # code: (address, instruction)
        loads = [a for a, t in code if re.search(r"\bLDG\b", t)]
        waits = [a for a, t in code if "ACQBULK" in t]
        assert loads, name
        waiting[name] = bool(waits) and waits[0] < loads[0]
    assert len(set(waiting.values())) == 1, waiting  # every reduce instance alike
    reduce_waits = next(iter(waiting.values()))
    for name, flags in mains.items():
        stream_k = flags.group(1) == "0" and flags.group(2) == "0"
        preexit = any("PREEXIT" in t for _, t in functions[name])
        assert preexit == (stream_k and reduce_waits), name


def test_the_loop_comparison_ignores_renaming_and_counts_rescheduling():
    """tools/sass_mix.py --compare: what a build change did to a loop, before a GPU runs it."""
    loop = [(0x0, "LDS.128 R8, [R2+0x10]"), (0x10, "HMMA.16816.F32 R4, R8, R12, R4"),
            (0x20, "IADD3 R2, R2, 0x20, RZ"), (0x30, "@P0 BRA 0x0")]
    renamed = [(a + 0x100, t.replace("R8", "R24").replace("P0", "P3").replace("0x0", "0x100"))
               for a, t in loop]
    swapped = [loop[0], loop[2], loop[1], loop[3]]
    assert SASS_MIX.moved(loop, renamed) == 0
    assert SASS_MIX.moved(loop, swapped) == 1  # one scheduled past the other
    assert SASS_MIX.moved(loop, loop[:2] + loop[3:]) == 1
    assert SASS_MIX.moved(loop, [(0x0, "LDS.64 R8, [R2+0x10]")] + loop[1:]) == 1  # a new width


def test_the_build_comparison_pairs_kernels_by_name_and_reads_loops_or_whole_kernels(
        monkeypatch, capsys):
    """tools/sass_mix.py --compare and --compare-whole on two stand-in builds: kernels
    paired by name with the anonymous namespace's hash and the parameter list masked; a
    change outside the loop moves the whole kernel but not its loop."""
    listing = ("\t\tFunction : _ZN10jax_marlin49_GLOBAL__N__9ba0515b_16_stream_kernel_cu_"
               "7c24bb5318stream_gemm_kernelI6__halfEEvNS0_12StreamParamsE\n"
               "        /*0000*/                   MOV R1, c[0x0][0x28] ;\n"
               "        /*0010*/                   EXIT ;\n")
    monkeypatch.setattr(SASS_MIX, "sass_listing", lambda cubin, tool: listing)
    assert SASS_MIX.kernels("a.cubin", "cuobjdump") == {
        "_ZN10jax_marlin49ANON18stream_gemm_kernelI6__halfEE":
            [(0x0, "MOV R1, c[0x0][0x28]"), (0x10, "EXIT")]}

    loop = [(0x10, "LDS.128 R8, [R2+0x10]"), (0x20, "HMMA.16816.F32 R4, R8, R12, R4"),
            (0x30, "@P0 BRA 0x10")]
    before = {"kernel_a": [(0x0, "MOV R2, RZ")] + loop + [(0x40, "EXIT")],
              "kernel_b": [(0x0, "MOV R2, RZ")] + loop + [(0x40, "EXIT")],
              "only_in_a": [(0x0, "EXIT")]}
    after = {"kernel_a": [(0x0, "MOV R2, RZ")] + loop + [(0x40, "EXIT")],
             "kernel_b": [(0x0, "IADD3 R2, R3, 0x4, RZ")] + loop + [(0x40, "EXIT")]}
    monkeypatch.setattr(SASS_MIX, "kernels", lambda cubin, tool: {"a": before, "b": after}[cubin])
    assert SASS_MIX.compare("a", "b", "kernel", "cuobjdump") == {"kernel_a": 0.0, "kernel_b": 0.0}
    assert "2 loops: 2 unchanged" in capsys.readouterr().out
    whole = SASS_MIX.compare("a", "b", "kernel", "cuobjdump", whole=True)
    assert whole == {"kernel_a": 0.0, "kernel_b": 1 / 5}
    out = capsys.readouterr().out
    assert "2 kernels: 1 unchanged" in out and "1 kernels in one build only" in out
    assert SASS_MIX.compare("a", "b", "kernel_b", "cuobjdump", whole=True) == {"kernel_b": 1 / 5}
