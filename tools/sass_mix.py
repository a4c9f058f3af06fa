"""The instruction mix of a kernel's hottest loop, from its SASS (no GPU needed).

    nvcc -std=c++17 -O3 -cubin -o /tmp/stream.cubin ffi/stream_kernel.cu -I ffi \
        -gencode arch=compute_90,code=sm_90
    python tools/sass_mix.py /tmp/stream.cubin 'stream_gemm_kernelI6__halfLNS_13ZeroPointKindE1ELi1ELi8ELb0E'
    python tools/sass_mix.py --compare /tmp/main.cubin /tmp/variant.cubin [stream_gemm_kernel]

The second argument is a substring of the mangled kernel name (here: fp16, packed zero
points, one n8 tile, groups of 128 or more, the stream-K grid). The loop reported is
the predicated backward branch whose body holds the most HMMA instructions, the smallest
such body on a tie: for the streaming kernel, the step loop with its 32 HMMA. Counted statically,
every path of the body once (the flush of a finished column group included), so compare
builds with it rather than read it as executed instructions; `@!PT` (never-executed,
still issued) instructions are counted apart.

`--compare` pairs the kernels of two builds (by name up to the parameter list, the
anonymous namespace's hash masked) and says how much of each hottest loop moved: the
share of the longer loop outside what a diff of the two keeps in common, registers,
predicates and addresses masked, so a renaming is no change and a rescheduling is.
Whether a change meant to leave the loops alone (code after them, a new parameter) did
shows there, before any GPU run. `--compare-whole` diffs whole kernels the same way:
a kernel at 0.0% is the same code, e.g. to show which instances of a change are the
ones an earlier build already ran (session 43: the walk's 16-row instances against
the build memcheck had checked, every other kernel against `main`).

    python tools/sass_mix.py --compare-whole /tmp/main.cubin /tmp/variant.cubin [name]

Needs `cuobjdump` (CUDA toolkit, or `pip install nvidia-cuda-cuobjdump`; set CUOBJDUMP
to its path).
"""

import collections
import difflib
import os
import re
import statistics
import subprocess
import sys

_LINE = re.compile(r"\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
_BRANCH = re.compile(r"\bBRA\b.*?(0x[0-9a-f]+)")
_MMA = re.compile(r"\bHG?MMA\b")  # mma.sync's HMMA, wgmma's HGMMA


def hottest_loop(code):
    body = _hottest_loop_or_none(code)
    if body is None:
        raise SystemExit("the kernel has no loop")
    return body


def _hottest_loop_or_none(code):
    best = None
    for address, text in code:
        # A loop closes with a predicated backward branch; an unconditional one
        # is the return from an out-of-line retry (a barrier wait's).
        branch = _BRANCH.search(text)
        if not branch or not text.startswith("@") or int(branch.group(1), 16) >= address:
            continue
        body = [(a, t) for a, t in code if int(branch.group(1), 16) <= a <= address]
        key = (sum(bool(_MMA.search(t)) for _, t in body), -len(body))
        if best is None or key > best[0]:
            best = (key, body)
    return None if best is None else best[1]


def opcode(text):
    if text.startswith("@!PT"):
        return "(@!PT) " + text.split()[1].split(".")[0]
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


_ANONYMOUS = re.compile(r"_GLOBAL__N__[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]{8}")  # differs per build
# addresses, registers and predicates (uniform or not): a renaming is no change
_NAMES = re.compile(r"0x[0-9a-f]+|\bU?R[0-9Z]+\b|\bU?P[0-9T]\b")


def functions(listing):
    """{mangled kernel name: its (address, instruction) list} of a `cuobjdump -sass` listing."""
    found, name = {}, None
    for line in listing.splitlines():
        header = re.search(r"Function : (\S+)", line)
        if header:
            name = header.group(1)
            found[name] = []
        elif name and (m := _LINE.match(line)):
            found[name].append((int(m.group(1), 16), m.group(2)))
    return found


def sass_listing(cubin, cuobjdump):
    return subprocess.run([cuobjdump, "-sass", cubin], check=True, capture_output=True,
                          text=True).stdout


def kernels(cubin, cuobjdump):
    """{kernel name up to its parameter list, the anonymous namespace masked: its
    instructions} of every kernel in `cubin`: the names two builds share."""
    return {re.sub(r"EEv.*$", "EE", _ANONYMOUS.sub("ANON", name)): code
            for name, code in functions(sass_listing(cubin, cuobjdump)).items()}


def moved(loop_a, loop_b):
    """How many instructions of the longer loop fall outside what a diff keeps in common
    (registers, predicates and addresses masked): an instruction added, dropped, changed
    or scheduled past its neighbours."""
    a, b = ([_NAMES.sub("_", t) for _, t in loop] for loop in (loop_a, loop_b))
    blocks = difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    return max(len(a), len(b)) - sum(block.size for block in blocks)


def compare(cubin_a, cubin_b, name_part, cuobjdump, whole=False):
    """Prints how much of each kernel's hottest loop (`whole`: of each kernel) moved
    between two builds, a kernel a line, then a summary; returns the shares moved."""
    a, b = kernels(cubin_a, cuobjdump), kernels(cubin_b, cuobjdump)
    part = (lambda code: code) if whole else _hottest_loop_or_none
    what = "kernels" if whole else "loops"
    bodies = {n: (part(a[n]), part(b[n])) for n in sorted(set(a) & set(b)) if name_part in n}
    names = [n for n, (body_a, body_b) in bodies.items() if body_a and body_b]
    if not names:
        raise SystemExit(f"no kernel with {what} containing {name_part!r} in both builds")
    shares = {}
    for name in names:
        body_a, body_b = bodies[name]
        shares[name] = moved(body_a, body_b) / max(len(body_a), len(body_b))
        print(f"{shares[name]:7.1%}  {len(body_a):5d} -> {len(body_b):5d}  {name}")
    values = list(shares.values())
    print(f"{len(names)} {what}: {sum(s == 0 for s in values)} unchanged, a median "
          f"{statistics.median(values):.1%} of their instructions moved, at most "
          f"{max(values):.1%}; {len(set(a) ^ set(b))} kernels in one build only")
    return shares


def main(argv):
    cuobjdump = os.environ.get("CUOBJDUMP", "cuobjdump")
    if len(argv) in (4, 5) and argv[1] in ("--compare", "--compare-whole"):
        compare(argv[2], argv[3], argv[4] if len(argv) == 5 else "", cuobjdump,
                whole=argv[1] == "--compare-whole")
        return
    if len(argv) != 3:
        raise SystemExit(__doc__)
    found = {n: code for n, code in functions(sass_listing(argv[1], cuobjdump)).items()
             if argv[2] in n}
    if not found:
        raise SystemExit(f"no kernel whose name contains {argv[2]!r} in {argv[1]}")
    name, code = next(iter(found.items()))
    body = hottest_loop(code)
    counts = collections.Counter(opcode(t) for _, t in body)
    print(name)
    print(f"loop {body[0][0]:#x}..{body[-1][0]:#x}: {len(body)} instructions, "
          f"{counts['HMMA'] + counts['HGMMA']} HMMA/HGMMA")
    print(" ".join(f"{op}:{n}" for op, n in counts.most_common()))


if __name__ == "__main__":
    main(sys.argv)
