"""check_model.py — checks one example model through `ncc --emit=report`
(and `--emit=params`) against figures that do not come from ncc:
torchvision's published parameter counts and multiply-adds, and the
state_dict of torch_models.py's rebuild of the torchvision model.

  check_model.py NCC MODEL.net [--set K=V]... [--params P]
                 [--macs M] [--rel 0.01] [--names TORCHNAME]
                 [--same-per-sample-as K=V]

--params P       the total line's params= must equal P exactly
--macs M         the `multiply-adds:` per_sample figure must be within --rel of M
--names NAME     ncc's parameter names and shapes must equal the state_dict of
                 torch_models.build(NAME) (imports torch)
--same-per-sample-as K=V
                 compile again with K=V added (e.g. N=3) and require the same
                 params and the same multiply-adds per sample
Exit 0 when every check holds; prints what differs otherwise.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

TOTAL = re.compile(r"^total: params=(\d+) flops=(\d+) launches=(\d+) bytes=(\d+) "
                   r"peak_memory=(\d+) naive_memory=(\d+)$")
MACS = re.compile(r"multiply-adds: total=(\d+) per_sample=(\d+)")


def ncc(args, emit, sets):
    cmd = [args.ncc, args.model, "--emit=" + emit]
    for kv in sets:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d\n%s" % (" ".join(cmd), p.returncode, p.stderr))
    return p.stdout


def report(args, sets):
    out = ncc(args, "report", sets)
    lines = out.rstrip("\n").split("\n")
    m = TOTAL.match(lines[-1])
    if not m:
        sys.exit("FAIL: the last line of the report is not the total line:\n%r" % lines[-1])
    r = dict(zip(["params", "flops", "launches", "bytes", "peak", "naive"], map(int, m.groups())))
    mm = MACS.search(out)
    if not mm:
        sys.exit("FAIL: no `multiply-adds:` line in the report")
    r["macs"], r["macs_per_sample"] = int(mm.group(1)), int(mm.group(2))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ncc")
    ap.add_argument("model")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--params", type=int)
    ap.add_argument("--macs", type=float)
    ap.add_argument("--rel", type=float, default=0.01)
    ap.add_argument("--names")
    ap.add_argument("--same-per-sample-as")
    args = ap.parse_args()
    name = os.path.basename(args.model)
    fails = []

    r = report(args, args.sets)
    print("%s: params=%d multiply-adds/sample=%d flops=%d launches=%d peak=%d naive=%d" %
          (name, r["params"], r["macs_per_sample"], r["flops"], r["launches"], r["peak"], r["naive"]))
    # invariants of any sound report
    if not (r["launches"] > 0 and r["bytes"] > 0 and 0 < r["peak"] <= r["naive"]):
        fails.append("implausible totals: %r" % r)
    if r["flops"] < 2 * r["macs"]:
        fails.append("flops=%d is less than 2 x multiply-adds=%d" % (r["flops"], r["macs"]))
    if args.params is not None and r["params"] != args.params:
        fails.append("params=%d, torchvision has %d (off by %d)" % (r["params"], args.params,
                                                                   r["params"] - args.params))
    if args.macs is not None:
        rel = abs(r["macs_per_sample"] - args.macs) / args.macs
        print("%s: multiply-adds per sample %.4g vs published %.4g: %.3f%% off (allowed %.1f%%)" %
              (name, r["macs_per_sample"], args.macs, 100 * rel, 100 * args.rel))
        if rel > args.rel:
            fails.append("multiply-adds per sample %d not within %.1f%% of %.6g" %
                         (r["macs_per_sample"], 100 * args.rel, args.macs))
    if args.same_per_sample_as:
        r2 = report(args, args.sets + [args.same_per_sample_as])
        if r2["params"] != r["params"] or r2["macs_per_sample"] != r["macs_per_sample"]:
            fails.append("with --set %s: params %d, multiply-adds per sample %d; expected %d and %d" %
                         (args.same_per_sample_as, r2["params"], r2["macs_per_sample"], r["params"],
                          r["macs_per_sample"]))
        if r2["macs"] == r["macs"]:
            fails.append("--set %s did not change the total multiply-adds" % args.same_per_sample_as)
    if args.names:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import torch_models
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(ncc(args, "params", args.sets))
        try:
            if torch_models.main(["torch_models.py", "--compare", args.names, f.name]) != 0:
                fails.append("parameter names/shapes differ from torchvision's %s" % args.names)
        finally:
            os.unlink(f.name)
    for msg in fails:
        print("FAIL: %s: %s" % (name, msg))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
