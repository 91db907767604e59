#!/usr/bin/python3
"""ptxas_report.py — registers, spills and barriers of every generated kernel.

Usage: ptxas_report.py [--arch sm_90] [--check] -I DIR... FILE.cu...

Compiles each FILE.cu with `nvcc -arch=ARCH -cubin -Xptxas -v` and prints one
row per kernel: registers, spill stores/loads (bytes), shared memory, and
whether ptxas saw a barrier.  With --check it fails when
  - a kernel spills, or
  - the codegen's NCC_KF_BARRIER flag (in the NCC_KERNEL_DESC line) disagrees
    with ptxas's barrier count (docs/emulator.md: a barrier-free kernel runs as a
    plain loop under emulation; a kernel with a barrier flagged 0 would be
    wrong there, one flagged needlessly only slow).

The compile and the parsing of ptxas's report are functions that
sass_report.py (the kernel-quality report from the SASS) shares.
"""
import os
import re
import subprocess
import sys
import tempfile


def kernel_flags(src):
    """{kernel name: its NCC_KERNEL_DESC flags} of a generated MODEL.cu: the
    model's kernels (helpers have no descriptor)."""
    return dict(re.findall(r"NCC_KERNEL_DESC\((\w+), (\w+),", src))


def compile_cubin(nvcc, arch, incs, src, cubin):
    """nvcc -arch=ARCH -cubin -Xptxas -v, warnings as errors: the
    CompletedProcess, ptxas's report in its stderr."""
    return subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "--Werror", "all-warnings", *incs,
                           "-x", "cu", src, "-o", cubin], capture_output=True, text=True)


def parse_ptxas(text):
    """ptxas -v's report -> {function: {regs, st, ld, smem, bar, stack}} (spill
    stores and loads, static shared memory in bytes, barriers, the stack
    frame in bytes: local arrays, e.g. accumulators indexed in a loop nvcc
    did not unroll)."""
    cur = None
    rows = {}
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line) or re.search(r"Function properties for (\w+)", line)
        if m:
            cur = m.group(1)
            rows.setdefault(cur, {"regs": 0, "st": 0, "ld": 0, "smem": 0, "bar": 0, "stack": 0})
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame", line)
        if m:
            rows[cur]["stack"] = int(m.group(1))
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            rows[cur]["st"], rows[cur]["ld"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            rows[cur]["regs"] = int(m.group(1))
        m = re.search(r"used (\d+) barriers", line)
        if m:
            rows[cur]["bar"] = int(m.group(1))
        m = re.search(r"(\d+) bytes smem", line)
        if m:
            rows[cur]["smem"] = int(m.group(1))
    return rows


def main():
    args = sys.argv[1:]
    arch, check, incs, files, nvcc = "sm_90", False, [], [], "nvcc"
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--arch":
            arch = args[i + 1]; i += 2; continue
        if a == "--nvcc":
            nvcc = args[i + 1]; i += 2; continue
        if a == "--check":
            check = True
        elif a == "-I":
            incs += ["-I", args[i + 1]]; i += 2; continue
        else:
            files.append(a)
        i += 1
    bad = 0
    print(f"{'kernel':48} {'regs':>5} {'spill st':>9} {'spill ld':>9} {'smem':>6} barrier flag")
    for f in files:
        flags = kernel_flags(open(f).read())
        with tempfile.TemporaryDirectory() as td:
            r = compile_cubin(nvcc, arch, incs, f, os.path.join(td, "k.cubin"))
        if r.returncode:
            print(f"{f}: nvcc failed\n{r.stderr}")
            bad += 1
            continue
        rows = parse_ptxas(r.stderr)
        for k, v in rows.items():
            flag = flags.get(k)
            if flag is None:   # not a kernel of the model (helpers have no descriptor)
                continue
            wrong = (v["bar"] > 0) != (flag in ("NCC_KF_BARRIER", "NCC_KF_BARRIER_WARP"))
            spill = v["st"] or v["ld"]
            note = ""
            if wrong:
                note = "  <- barrier flag disagrees with ptxas"
            elif spill:
                note = "  <- spills"
            print(f"{k:48} {v['regs']:5} {v['st']:9} {v['ld']:9} {v['smem']:6} {v['bar']:7} {flag}{note}")
            if check and (wrong or spill):
                bad += 1
        missing = set(flags) - set(rows)
        if missing:
            print(f"{f}: ptxas reported nothing for {sorted(missing)}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
