"""check_train.py — compares what a tests/cg/build_train.c model computed on
the CPU emulation (run_train_case.c's .npy files) with PyTorch's autograd in
float64: every output within 1e-4 * max(1, max|ref|).  Dropout is checked by
its properties: the kept fraction within statistical bounds, kept elements
scaled by 1/(1-p), the same mask for the same key, another for another slot,
seed or step, one value per (n, c) plane for dropout2d.

    check_train.py DIR SPEC.json
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
d, spec = sys.argv[1], json.load(open(sys.argv[2]))
fail = 0


def inp(name):
    return torch.from_numpy(np.load(os.path.join(d, "in_%s.npy" % name)).astype(np.float64 if not name.startswith("labels") else np.int64))


def got(name, prefix="out_"):
    return np.load(os.path.join(d, "%s%s.npy" % (prefix, name))).astype(np.float64)


def check(name, ref):
    global fail
    ref = ref.detach().numpy()
    g = got(name)
    if g.shape != ref.shape:
        print("%s: shape %s, PyTorch %s" % (name, g.shape, ref.shape))
        fail = 1
        return
    tol = 1e-4 * max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
    err = float(np.abs(g - ref).max()) if ref.size else 0.0
    if not err <= tol:
        i = np.unravel_index(int(np.argmax(np.abs(g - ref))), ref.shape)
        print("%s: max error %g > %g (at %s: got %r, PyTorch %r)" % (name, err, tol, i, g[i], ref[i]))
        fail = 1


def expect(cond, what):
    global fail
    if not cond:
        print(what)
        fail = 1


def safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=np.float32).reshape(v["shape"]).astype(np.float64)
    return out


ACT = {
    "relu": F.relu, "relu6": F.relu6, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "gelu": F.gelu,
    "silu": F.silu, "hardswish": F.hardswish, "sqrt": torch.sqrt,
}


def grad(f, xs, dy):
    xs = [x.clone().requires_grad_(True) for x in xs]
    y = f(*xs)
    return torch.autograd.grad(y, xs, dy)


drop = {}
for o in spec:
    name, op, ins = o["out"], o["op"], o["in"]
    kw = dict(stride=tuple(o["stride"]), padding=tuple(o["pad"]), dilation=tuple(o["dilation"]), groups=o["groups"])
    if op == "conv2d_bwd_data":
        dy, w = inp(ins[0]), inp(ins[1])
        x = torch.zeros(o["list"])
        check(name, grad(lambda x: F.conv2d(x, w, **kw), [x], dy)[0])
    elif op == "conv2d_bwd_weight":
        dy, x = inp(ins[0]), inp(ins[1])
        w = torch.zeros(dy.shape[1], x.shape[1] // o["groups"], *o["kernel"])
        check(name, grad(lambda w: F.conv2d(x, w, **kw), [w], dy)[0])
    elif op == "linear_bwd_weight":
        dy, x = inp(ins[0]), inp(ins[1])
        w = torch.zeros(dy.shape[1], x.shape[1])
        check(name, grad(lambda w: F.linear(x, w), [w], dy)[0])
    elif op == "sum_to":
        x = inp(ins[0])
        tgt, ax = o["list"], o["axis"]
        shape = [1] * x.dim()
        for i, t in enumerate(tgt):
            shape[ax + i] = t
        b = torch.zeros(shape)
        # the gradient of broadcasting b to x's shape, viewed as the target
        check(name, grad(lambda b: b.expand_as(x) * 1.0, [b], x)[0].reshape(tgt))
    elif op == "maxpool2d_bwd":
        dy, x = inp(ins[0]), inp(ins[1])
        f = lambda x: F.max_pool2d(x, tuple(o["kernel"]), tuple(o["stride"]), tuple(o["pad"]), tuple(o["dilation"]))
        check(name, grad(f, [x], dy)[0])
    elif op == "avgpool2d_bwd":
        dy = inp(ins[0])
        x = torch.zeros(o["list"])
        f = lambda x: F.avg_pool2d(x, tuple(o["kernel"]), tuple(o["stride"]), tuple(o["pad"]))
        check(name, grad(f, [x], dy)[0])
    elif op == "global_avgpool2d_bwd":
        dy = inp(ins[0])
        x = torch.zeros(o["list"])
        check(name, grad(lambda x: F.adaptive_avg_pool2d(x, 1).flatten(1), [x], dy)[0])
    elif op == "softmax_bwd":
        dy, y = inp(ins[0]), inp(ins[1])
        check(name, torch._softmax_backward_data(dy, y, o["axis"], torch.float64))
    elif op == "log_softmax_bwd":
        dy, y = inp(ins[0]), inp(ins[1])
        check(name, torch._log_softmax_backward_data(dy, y, o["axis"], torch.float64))
    elif op in ("cross_entropy_bwd", "nll_loss_bwd"):
        dl, x, lb = inp(ins[0]), inp(ins[1]), inp(ins[2])
        f = F.cross_entropy if op == "cross_entropy_bwd" else F.nll_loss
        check(name, grad(lambda x: f(x, lb), [x], dl)[0])
    elif op == "mse_loss_bwd":
        dl, a, b = inp(ins[0]), inp(ins[1]), inp(ins[2])
        check(name, grad(lambda a: F.mse_loss(a, b), [a], dl)[0])
    elif op == "layernorm_bwd_data":
        dy, x, w = inp(ins[0]), inp(ins[1]), inp(ins[2])
        check(name, grad(lambda x: F.layer_norm(x, w.shape, w, None, o["eps"]), [x], dy)[0])
    elif op == "layernorm_bwd_weight":
        dy, x = inp(ins[0]), inp(ins[1])
        w = torch.ones(x.shape[-1])
        check(name, grad(lambda w: F.layer_norm(x, w.shape, w, None, o["eps"]), [w], dy)[0])
    elif op == "bn_stats":
        x = inp(ins[0])
        check(name, torch.stack([x.mean((0, 2, 3)), x.var((0, 2, 3), unbiased=False)]))
    elif op == "bn_train":
        x, w, b = inp(ins[0]), inp(ins[1]), inp(ins[2])
        check(name, F.batch_norm(x, None, None, w, b, training=True, eps=o["eps"]))
    elif op == "bn_bwd_data":
        dy, x, w = inp(ins[0]), inp(ins[1]), inp(ins[2])
        check(name, grad(lambda x: F.batch_norm(x, None, None, w, None, training=True, eps=o["eps"]), [x], dy)[0])
    elif op == "bn_bwd_weight":
        dy, x = inp(ins[0]), inp(ins[1])
        w = torch.ones(x.shape[1])
        check(name, grad(lambda w: F.batch_norm(x, None, None, w, None, training=True, eps=o["eps"]), [w], dy)[0])
    elif op == "bn_running":
        # torch's own update on the same batch
        x = inp("x")
        rm = torch.from_numpy(np.load(os.path.join(d, "p_%s.npy" % ins[1])).astype(np.float64))
        rv = torch.from_numpy(np.load(os.path.join(d, "p_%s.npy" % ins[2])).astype(np.float64))
        F.batch_norm(x, rm, rv, None, None, training=True, momentum=o["momentum"])
        after = safetensors(os.path.join(d, "after.safetensors"))
        for k, ref in ((ins[1], rm), (ins[2], rv)):
            err = float(np.abs(after[k] - ref.numpy()).max())
            expect(err <= 1e-5, "%s: %s after the update differs from torch's by %g" % (name, k, err))
    elif op == "act_grad":
        dy, x = inp(ins[0]), inp(ins[1])
        f = ACT.get(o["act"]) or (lambda x: F.leaky_relu(x, o["slope"]))
        check(name, grad(f, [x], dy)[0])
    elif op == "slice":
        x = inp(ins[0])
        a, (s, n) = o["axis"], o["list"]
        check(name, x.narrow(a, s, n))
    elif op == "dropout_apply":
        x, p = inp(ins[0]).numpy(), o["p"]
        y = got(name)
        keep = y != 0
        nz = x != 0
        if p >= 1:
            expect(not keep.any(), "%s: p = 1 kept elements" % name)
            continue
        expect(np.abs(y[keep] - x[keep] / (1 - p)).max() <= 1e-5 * max(1, np.abs(x).max()) if keep.any() else True,
               "%s: kept elements not scaled by 1/(1-p)" % name)
        if o["axis"] == 1:
            planes = keep.reshape(x.shape[0] * x.shape[1], -1)
            expect(((planes.all(1)) | (~planes.any(1))).all(), "%s: dropout2d mask differs within a plane" % name)
            frac, cnt = planes[:, 0].mean(), planes.shape[0]
        else:
            frac, cnt = keep[nz].mean(), int(nz.sum())
        sd = math.sqrt(p * (1 - p) / cnt) if 0 < p < 1 else 0
        expect(abs(frac - (1 - p)) <= 4 * sd + 1e-12, "%s: kept %.4f, expected %.4f +- %.4f" % (name, frac, 1 - p, 4 * sd))
        # the same key, the same mask; any other key, another mask
        drop[name] = keep
        for pre in ("seed_", "step_"):
            other = got(name, pre) != 0
            if 0 < p < 1:
                expect((other != keep).any(), "%s: the mask does not change with the %s" % (name, pre[:-1]))
                expect(abs(other.mean() - keep.mean()) <= 8 * sd + 1e-12, "%s: %s mask keeps a different fraction" % (name, pre[:-1]))
    else:
        print("check_train.py: no reference for %s" % op)
        fail = 1

if "d0" in drop and "d0b" in drop:
    expect((drop["d0"] == drop["d0b"]).all(), "dropout: the same slot gives another mask")
    agree = (drop["d0"] == drop["d1"]).mean()
    # independent masks with p = 0.3 agree on 0.7^2 + 0.3^2 = 0.58 of the elements
    expect(abs(agree - 0.58) < 0.03, "dropout: slots 0 and 1 agree on %.3f of the elements (independent: 0.58)" % agree)
sys.exit(fail)
