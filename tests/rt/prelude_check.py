#!/usr/bin/env python3
"""prelude_check.py NCC_KERNEL_H DEV_CUDA_C — the jit backend's NVRTC prelude
(NCC_NVRTC_PRELUDE in runtime/dev_cuda.c, what `--jit` and `--emit=ptx` put
in front of the kernels) must define every device helper that ncc_kernel.h
defines for nvcc: a generated kernel that calls one the prelude lacks compiles
with nvcc and under emulation, and fails only at a user's first --jit load.
Names compared: `ncc_*` of a `__device__` function or a `#define` with
arguments, in the header and in the prelude's text.  Exits 1 with the names
that differ."""
import re
import sys


def names(text):
    return set(re.findall(r"(?:__device__[^(\n]*?\b|#define\s+)(ncc_\w+)\s*\(", text))


def main():
    header = open(sys.argv[1]).read()
    src = open(sys.argv[2]).read()
    m = re.search(r"NCC_NVRTC_PRELUDE\[\]\s*=(.*?);\n", src, re.S)
    if not m:
        print("%s: no NCC_NVRTC_PRELUDE" % sys.argv[2])
        return 1
    h, p = names(header), names(m.group(1))
    if len(h) < 20:
        print("%s: only %d helper names found: the pattern no longer matches the header" % (sys.argv[1], len(h)))
        return 1
    bad = 0
    for n in sorted(h - p):
        print("%s defines %s; the NVRTC prelude in %s does not" % (sys.argv[1], n, sys.argv[2]))
        bad = 1
    for n in sorted(p - h):
        print("the NVRTC prelude in %s defines %s; %s does not" % (sys.argv[2], n, sys.argv[1]))
        bad = 1
    if not bad:
        print("ok: %d helpers in both" % len(h))
    return bad


if __name__ == "__main__":
    sys.exit(main())
