#!/usr/bin/env python3
"""torch_bench.py — PyTorch eager on the GPU for the models ncc bench times, as
the figure to put ncc's beside.  Same batch, same fp32 storage; TF32 off
(ncc's kernels are plain fp32) and on (PyTorch's default for convolutions).

    python3 tests/gpu/torch_bench.py [--iters 30]

Prints one line per model, batch and TF32 setting: median ms per batch."""
import argparse
import statistics

import torch
import torchvision


def lenet():
    import torch.nn as nn
    return nn.Sequential(nn.Conv2d(1, 10, 5), nn.MaxPool2d(2), nn.ReLU(), nn.Conv2d(10, 20, 5),
                         nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(320, 50), nn.ReLU(),
                         nn.Linear(50, 10))


def time_ms(m, x, iters):
    with torch.no_grad():
        for _ in range(3):
            m(x)
        torch.cuda.synchronize()
        ts = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            m(x)
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    models = [("resnet18", torchvision.models.resnet18, 224), ("resnet50", torchvision.models.resnet50, 224),
              ("mobilenet_v2", torchvision.models.mobilenet_v2, 224), ("vgg16", torchvision.models.vgg16, 224),
              ("lenet", lenet, 28)]
    print("%-14s %5s %12s %12s" % ("model", "batch", "fp32 ms", "tf32 ms"))
    for name, ctor, s in models:
        m = ctor().cuda().eval()
        for n in ([64] if name == "lenet" else [1, 32]):
            x = torch.randn(n, 1 if name == "lenet" else 3, s, s, device="cuda")
            res = []
            for tf32 in (False, True):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.backends.cudnn.allow_tf32 = tf32
                res.append(time_ms(m, x, a.iters))
            print("%-14s %5d %12.3f %12.3f" % (name, n, res[0], res[1]), flush=True)


if __name__ == "__main__":
    main()
