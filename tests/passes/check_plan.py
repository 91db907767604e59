#!/usr/bin/python3
"""check_plan.py — the report's memory figures are those of the generated code.

    check_plan.py NCC MODEL.net WORKDIR

For -O0..-O3: generates MODEL.cu, reads its buffer table (offsets, sizes and
the kind of every buffer, from the comments host.c writes), and checks that
  - the inputs-and-activations region of the arena (its buffers' span,
    rounded up to 256 bytes) is the report's peak_memory;
  - naive_memory is the sum of those buffers, each rounded up to 256 bytes;
  - no parameter, constant, load-time value or workspace lies in the region;
  - planning (-O1 and up) makes the region smaller than naive_memory, and
    without it (-O0) the two are equal.
A model with a train block also holds the training step, whose inputs and
activations ("train-input", "train-activation") share the region: the same
checks hold for them against `--train --emit=report`, and the region is the
larger of the two.
Exit 0 when all hold; the figures are printed either way.  WORKDIR is removed
at the end."""
import os
import re
import shutil
import subprocess
import sys


def up(n):
    return (n + 255) // 256 * 256


def buffers(cu):
    text = open(cu).read()
    offs = re.search(r"_buf_off_\[\w+\] = \{\n(.*?)\};", text, re.S)
    sizes = re.search(r"_buf_size_\[\w+\] = \{(.*?)\};", text, re.S)
    if not offs or not sizes:
        raise SystemExit("%s: no buffer table" % cu)
    # the enum names each buffer and says its kind: `BUF_x = 8, /* input f32[...] */`
    enum = {name: (int(i), kind) for name, i, kind in re.findall(r"\b(BUF_\w+) = (\d+),\s*/\* (\S+) ", text)}
    rows = re.findall(r"(\d+), /\* (BUF_\w+) \*/", offs.group(1))
    size = [int(s) for s in re.sub(r"/\*.*?\*/", "", sizes.group(1)).replace("\n", " ").split(",") if s.strip()]
    if len(rows) != len(size) or len(rows) != len(enum):
        raise SystemExit("%s: %d offsets, %d sizes, %d named buffers" % (cu, len(rows), len(size), len(enum)))
    return [(int(o), size[enum[name][0]], enum[name][1]) for (o, name) in rows]


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    ncc, model, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    name = os.path.splitext(os.path.basename(model))[0]
    fail = 0
    try:
        for o in range(4):
            cu = os.path.join(work, "%s_O%d.cu" % (name, o))
            subprocess.run([ncc, model, "-O%d" % o, "-o", cu], check=True)
            bufs = buffers(cu)
            kinds = {kind for _, _, kind in bufs}
            graphs = [("", ("input", "activation"), [])]
            if "train-activation" in kinds:
                graphs.append((" --train", ("train-input", "train-activation"), ["--train"]))
            every = [k for _, ks, _ in graphs for k in ks]
            others = [(off, sz, kind) for off, sz, kind in bufs if kind not in every]
            lo, hi = None, None
            problems = []
            for label, ks, flags in graphs:
                rep = subprocess.run([ncc, model, "-O%d" % o, "--emit=report"] + flags, check=True,
                                     stdout=subprocess.PIPE, universal_newlines=True).stdout
                m = re.search(r"^total: .* peak_memory=(\d+) naive_memory=(\d+)$", rep, re.M)
                peak, naive = int(m.group(1)), int(m.group(2))
                region = [(off, sz) for off, sz, kind in bufs if kind in ks]
                base = min(off for off, _ in region)
                span = up(max(off + sz for off, sz in region) - base)
                summed = sum(up(sz) for _, sz in region)
                lo = base if lo is None else min(lo, base)
                hi = base + span if hi is None else max(hi, base + span)
                print("%s -O%d%s: region %d bytes (%d buffers) | report peak_memory=%d naive_memory=%d"
                      % (name, o, label, span, len(region), peak, naive))
                if span != peak:
                    problems.append("%s: the generated region is %d bytes, the report's peak_memory %d"
                                    % (label or "inference", span, peak))
                if summed != naive:
                    problems.append("%s: the region's buffers sum to %d bytes, the report's naive_memory is %d"
                                    % (label or "inference", summed, naive))
                if o == 0 and peak != naive:
                    problems.append("%s: -O0 plans no memory, yet peak_memory %d != naive_memory %d"
                                    % (label or "inference", peak, naive))
                if o >= 1 and not peak < naive:
                    problems.append("%s: planned peak_memory %d is not below naive_memory %d"
                                    % (label or "inference", peak, naive))
            if len(graphs) > 1:
                bases = {min(off for off, _, kind in bufs if kind in ks) for _, ks, _ in graphs}
                if len(bases) != 1:
                    problems.append("inference and the training step do not share the region's start: %s" % sorted(bases))
            inside = [kind for off, sz, kind in others if off < hi and lo < off + sz]
            if inside:
                problems.append("%s buffers lie inside the activation region" % ", ".join(sorted(set(inside))))
            for p in problems:
                print("FAIL: %s -O%d: %s" % (name, o, p))
            fail |= bool(problems)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("ok" if not fail else "FAILED")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
