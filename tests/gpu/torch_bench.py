#!/usr/bin/env python3
"""torch_bench.py — PyTorch eager on the GPU for what tests/gpu/gpu_check.sh
times with ncc, as the figures to put ncc's beside (cuDNN and cuBLAS run the
layers):

- inference of ResNet-50, MobileNetV2 and VGG-16 at batch 1 and 32, 224x224,
  in fp32 with TF32 off (ncc's fp32), TF32 on (ncc's --precision=tf32),
  and under autocast to fp16 and bf16 (ncc's --precision=fp16/bf16);
- a training step (forward, cross-entropy, backward, SGD with momentum) of
  VGG-16 and ResNet-18 at batch 32, in fp32, TF32, bf16 autocast and fp16
  autocast with a GradScaler;
- one 4096 x 4096 x 4096 matrix product (torch.matmul on cuBLAS) at each
  precision, with its TFLOP/s.

    python3 tests/gpu/torch_bench.py [--iters 30]

Median milliseconds of --iters runs after 3 warm-up runs, timed by CUDA events;
no torch.compile (its compile time does not fit a short GPU lease)."""
import argparse
import contextlib
import statistics

import torch
import torchvision

PRECS = ("fp32", "tf32", "fp16", "bf16")


def set_prec(p):
    tf32 = p == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    if p == "fp16":
        return torch.autocast("cuda", dtype=torch.float16)
    if p == "bf16":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def time_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def inference(iters):
    models = [("resnet50", torchvision.models.resnet50), ("mobilenet_v2", torchvision.models.mobilenet_v2),
              ("vgg16", torchvision.models.vgg16)]
    print("inference, ms per batch")
    print("%-14s %5s" % ("model", "batch") + "".join("%10s" % p for p in PRECS))
    for name, ctor in models:
        m = ctor().cuda().eval()
        for n in (1, 32):
            x = torch.randn(n, 3, 224, 224, device="cuda")
            res = []
            for p in PRECS:
                ctx = set_prec(p)

                def run():
                    with torch.no_grad(), ctx:
                        m(x)
                res.append(time_ms(run, iters))
            print("%-14s %5d" % (name, n) + "".join("%10.3f" % r for r in res), flush=True)
        del m
        torch.cuda.empty_cache()


def training(iters):
    print("training step (forward, loss, backward, SGD momentum), ms per step")
    print("%-14s %5s" % ("model", "batch") + "".join("%10s" % p for p in PRECS))
    for name, ctor in (("vgg16", torchvision.models.vgg16), ("resnet18", torchvision.models.resnet18)):
        m = ctor().cuda().train()
        opt = torch.optim.SGD(m.parameters(), lr=0.0, momentum=0.9)
        n = 32
        x = torch.randn(n, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (n,), device="cuda")
        res = []
        for p in PRECS:
            ctx = set_prec(p)
            scaler = torch.amp.GradScaler("cuda") if p == "fp16" else None

            def step():
                opt.zero_grad(set_to_none=True)
                with ctx:
                    loss = torch.nn.functional.cross_entropy(m(x), y)
                if scaler:
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss.backward()
                    opt.step()
            res.append(time_ms(step, max(5, iters // 3)))
        print("%-14s %5d" % (name, n) + "".join("%10.3f" % r for r in res), flush=True)
        del m, opt
        torch.cuda.empty_cache()


def gemm(iters):
    n = 4096
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    print("matmul %d^3 (cuBLAS), ms and TFLOP/s" % n)
    for p in PRECS:
        set_prec(p)
        if p in ("fp16", "bf16"):
            dt = torch.float16 if p == "fp16" else torch.bfloat16
            x, w = a.to(dt), b.to(dt)
        else:
            x, w = a, b
        ms = time_ms(lambda: torch.matmul(x, w), iters)
        print("%-6s %10.3f ms %8.1f TFLOP/s" % (p, ms, 2 * n ** 3 / ms / 1e9), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    print("PyTorch %s, %s" % (torch.__version__, torch.cuda.get_device_name()))
    gemm(a.iters)
    inference(a.iters)
    training(a.iters)


if __name__ == "__main__":
    main()
