#!/usr/bin/python3
"""precision_digits.py — the digits network's test accuracy at every precision.

    examples/precision_digits.py [--ncc build/ncc] [--data DIR] [--epochs 10] [--seed 0]

Trains examples/digits.net in fp32 with `ncc train` (DIR holds x.npy, y.npy,
test_x.npy, test_y.npy: examples/make_digits.py writes them; made here when
missing), then runs the test set through `ncc run` with the trained weights
at fp32, tf32, fp16, bf16 and int8 with each calibration method (calibrated
on the first 300 training images; a layer whose int8 error exceeds
--int8-max-error, 0.05 by default, stays fp32) and prints one table: the
accuracy, its difference from fp32, and the layers int8 left in fp32.
Everything runs under CPU emulation unless a GPU answers.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        sys.exit("precision_digits: `%s` failed (status %d):\n%s" % (" ".join(cmd), p.returncode, p.stderr))
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ncc", default=os.path.join(ROOT, "build", "ncc"))
    ap.add_argument("--data", default=os.path.join(ROOT, "build", "digits"))
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calibration-rows", type=int, default=300)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless fp16 and bf16 are within 0.5%% of fp32's accuracy and int8 (percentile, "
                         "entropy) within 1.5%% (the test suite's bounds)")
    a = ap.parse_args()
    net = os.path.join(HERE, "digits.net")
    d = a.data
    if not os.path.exists(os.path.join(d, "test_y.npy")):
        sh([sys.executable, os.path.join(HERE, "make_digits.py"), d])
    w = os.path.join(d, "digits_fp32.safetensors")
    sh([a.ncc, "train", net, "--data", d, "--epochs", str(a.epochs), "--seed", str(a.seed), "--checkpoint", w])
    x = np.load(os.path.join(d, "x.npy"))
    cal = os.path.join(d, "calibration.npy")
    np.save(cal, x[:a.calibration_rows])
    tx = os.path.join(d, "test_x.npy")
    ty = np.load(os.path.join(d, "test_y.npy"))
    n = len(ty)
    rows = []
    for name, flags in [("fp32", []), ("tf32", ["--precision=tf32"]), ("fp16", ["--precision=fp16"]),
                        ("bf16", ["--precision=bf16"])] + \
                       [("int8 " + m, ["--precision=int8", "--calibrate=" + cal, "--calibration-method=" + m])
                        for m in ("minmax", "percentile", "entropy")]:
        out = os.path.join(d, "logits.npy")
        cmd = [a.ncc, "run", net, "--set", "N=%d" % n, "--weights", w, "--input", "x=" + tx,
               "--output", "logits=" + out] + flags
        sh(cmd)
        acc = 100.0 * float((np.load(out).argmax(1) == ty).mean())
        fell = ""
        if flags and flags[0] == "--precision=int8":
            rep = sh([a.ncc, net, "--set", "N=%d" % n, "--weights", w, "--emit=report"] + flags).stdout
            fell = ", ".join(l.split()[1] for l in rep.splitlines() if l.startswith("#   ") and " fp32 (error" in l)
        rows.append((name, acc, fell))
    base = rows[0][1]
    print("digits.net, %d epochs (seed %d), %d test images; int8 calibrated on %d training images"
          % (a.epochs, a.seed, n, min(a.calibration_rows, len(x))))
    print("%-16s %9s %8s  %s" % ("precision", "accuracy", "vs fp32", "int8 layers left in fp32"))
    for name, acc, fell in rows:
        print("%-16s %8.2f%% %+7.2f%%  %s" % (name, acc, acc - base, fell if name.startswith("int8") else ""))
    if a.check:
        bound = {"fp16": 0.5, "bf16": 0.5, "int8 percentile": 1.5, "int8 entropy": 1.5}
        bad = ["%s %.2f%% (bound %.1f%%)" % (nm, acc - base, bound[nm]) for nm, acc, _ in rows
               if nm in bound and acc < base - bound[nm]]
        if base < 95.0:
            bad.append("fp32 itself reaches only %.2f%%" % base)
        if bad:
            sys.exit("precision_digits: below the bounds: " + "; ".join(bad))
        print("precision_digits: every precision within its bound of fp32")


if __name__ == "__main__":
    main()
