#!/usr/bin/env python3
"""bench_import.py — how long ncc takes to import ResNet-50 from ONNX
(docs/onnx.md "Import time").  Exports ResNet-50 with random weights
(torchvision's resnet50(weights=None) when torchvision is installed, else the
oracle's plain torch.nn rebuild of it, which has torchvision's module and
parameter names: tests/oracle/oracle.py build_module) at 1x3x224x224, opset
13, eval mode, then times, as wall clock of the whole process:

  ncc resnet50.onnx -o r.cu         (r.cu and r.safetensors, 25.6 M weights)
  ncc resnet50.onnx --emit=ir       (to /dev/null)

each --repeat times, and prints the fastest and the median of each.  It
fails when a command fails or a median exceeds --bound seconds (5 by default:
a sanity bound, far above the figure, not a timing test).

  bench_import.py --ncc PATH/ncc [--repeat 3] [--bound 5]
Exit 0: passed; 1: failed; 77: skipped (no torch/onnx module)."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import torch
    import onnx  # noqa: F401  (torch.onnx.export needs it)
except ImportError as e:
    print("skipped: %s" % e)
    sys.exit(77)


def resnet50():
    try:
        import torchvision
        return torchvision.models.resnet50(weights=None), "torchvision %s" % torchvision.__version__
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
        from oracle import build_module
        return build_module("resnet50", num_classes=1000, size=224), "tests/oracle rebuild (no torchvision)"


def timed(cmd, out=None):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=out or subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        print(p.stderr)
        raise SystemExit("FAIL: %s exited %d" % (" ".join(cmd), p.returncode))
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncc", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bound", type=float, default=5.0)
    a = ap.parse_args()
    torch.manual_seed(0)
    model, src = resnet50()
    nparams = sum(p.numel() for p in model.parameters())
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "resnet50.onnx")
        t = time.perf_counter()
        with torch.no_grad():
            torch.onnx.export(model.eval(), torch.randn(1, 3, 224, 224), path, opset_version=13,
                              training=torch.onnx.TrainingMode.EVAL, input_names=["x"], output_names=["y"])
        print("resnet50 (%s, %d parameters): %s, %.1f MB, exported in %.1f s; %d CPUs"
              % (src, nparams, os.path.basename(path), os.path.getsize(path) / 1e6, time.perf_counter() - t, os.cpu_count()))
        cu = os.path.join(d, "r.cu")
        runs = {"-o r.cu": [], "--emit=ir": []}
        with open(os.devnull, "w") as null:
            for _ in range(a.repeat):
                runs["-o r.cu"].append(timed([a.ncc, path, "-o", cu]))
                runs["--emit=ir"].append(timed([a.ncc, path, "--emit=ir"], out=null))
        print("r.cu %d bytes, r.safetensors %.1f MB" % (os.path.getsize(cu), os.path.getsize(os.path.join(d, "r.safetensors")) / 1e6))
        bad = 0
        for what, ts in runs.items():
            med = statistics.median(ts)
            print("ncc resnet50.onnx %-9s: fastest %.3f s, median %.3f s of %d (bound %.1f s)"
                  % (what, min(ts), med, len(ts), a.bound))
            if med > a.bound:
                print("FAIL: the median exceeds the bound")
                bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
