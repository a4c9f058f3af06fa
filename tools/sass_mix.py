"""The instruction mix of a kernel's hottest loop, from its SASS (no GPU needed).

    nvcc -std=c++17 -O3 -cubin -o /tmp/stream.cubin ffi/stream_kernel.cu -I ffi \
        -gencode arch=compute_90,code=sm_90
    python tools/sass_mix.py /tmp/stream.cubin 'stream_gemm_kernelI6__halfLNS_13ZeroPointKindE1ELi1ELi8ELb0E'

The second argument is a substring of the mangled kernel name (here: fp16, packed zero
points, one n8 tile, groups of 128 or more, the stream-K grid). The loop reported is
the predicated backward branch whose body holds the most HMMA instructions, the smallest
such body on a tie: for the streaming kernel, the step loop with its 32 HMMA. Counted statically,
every path of the body once (the flush of a finished column group included), so compare
builds with it rather than read it as executed instructions; `@!PT` (never-executed,
still issued) instructions are counted apart. Needs `cuobjdump` (CUDA toolkit, or
`pip install nvidia-cuda-cuobjdump`; set CUOBJDUMP to its path).
"""

import collections
import os
import re
import subprocess
import sys

_LINE = re.compile(r"\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
_BRANCH = re.compile(r"\bBRA\b.*?(0x[0-9a-f]+)")
_MMA = re.compile(r"\bHG?MMA\b")  # mma.sync's HMMA, wgmma's HGMMA


def kernel_sass(cubin, name_part, cuobjdump):
    listing = subprocess.run([cuobjdump, "-sass", cubin], check=True, capture_output=True,
                             text=True).stdout
    names = [n for n in re.findall(r"Function : (\S+)", listing) if name_part in n]
    if not names:
        raise SystemExit(f"no kernel whose name contains {name_part!r} in {cubin}")
    return names[0], subprocess.run([cuobjdump, "-sass", "-fun", names[0], cubin], check=True,
                                    capture_output=True, text=True).stdout


def instructions(sass):
    return [(int(m.group(1), 16), m.group(2)) for m in map(_LINE.match, sass.splitlines()) if m]


def hottest_loop(code):
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
    if best is None:
        raise SystemExit("the kernel has no loop")
    return best[1]


def opcode(text):
    if text.startswith("@!PT"):
        return "(@!PT) " + text.split()[1].split(".")[0]
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    cuobjdump = os.environ.get("CUOBJDUMP", "cuobjdump")
    name, sass = kernel_sass(argv[1], argv[2], cuobjdump)
    body = hottest_loop(instructions(sass))
    counts = collections.Counter(opcode(t) for _, t in body)
    print(name)
    print(f"loop {body[0][0]:#x}..{body[-1][0]:#x}: {len(body)} instructions, "
          f"{counts['HMMA'] + counts['HGMMA']} HMMA/HGMMA")
    print(" ".join(f"{op}:{n}" for op, n in counts.most_common()))


if __name__ == "__main__":
    main(sys.argv)
