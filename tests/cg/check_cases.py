#!/usr/bin/python3
"""check_cases.py — PyTorch is the truth for codegen's test models.

Usage: check_cases.py DIR CASE
DIR holds what run_case wrote for CASE (in_*.npy, p_*.npy, out_*.npy); the
same model as tests/cg/build_graphs.c builds it is computed here with
torch.nn.functional in float64 and every output compared with
|got - ref| <= atol + rtol * |ref| (llm.c's rule), printing the worst element.
Tolerances: 1e-5 absolute + 1e-5 relative for elementwise and data movement,
1e-4 for reductions and GEMMs (float32 accumulation over up to ~1000 terms).
"""
import glob
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def load(d, prefix):
    out = {}
    for p in glob.glob(os.path.join(d, prefix + "*.npy")):
        name = os.path.basename(p)[len(prefix):-4]
        a = np.load(p)
        out[name] = torch.from_numpy(a.astype(np.float64) if a.dtype == np.float32 else a.astype(np.int64))
    return out


def conv(x, P, name, stride=1, pad=0, dil=1, groups=1):
    return F.conv2d(x, P[name + ".weight"], P.get(name + ".bias"), stride=stride, padding=pad, dilation=dil,
                    groups=groups)


def case_unary(I, P):
    x = I["x"]
    return {"relu": F.relu(x), "relu6": F.relu6(x), "sigmoid": torch.sigmoid(x), "tanh": torch.tanh(x),
            "gelu": F.gelu(x), "silu": F.silu(x), "hardswish": F.hardswish(x),
            "leaky_relu": F.leaky_relu(x, 0.2)}, 1e-5


def case_binary(I, P):
    a, b, c, d = I["a"], I["b"], I["c"], I["d"]
    return {"add": a + b, "sub": c - a, "mul": b * c, "div": a / d, "square": a * a, "scale": a * 2.5,
            "rsub": 2.5 - a}, 1e-5


def case_conv(I, P):
    x = I["x"]
    return {"c3": conv(x, P, "c3", pad=1), "s2": conv(x, P, "s2", stride=2, pad=1),
            "dil": conv(x, P, "dil", pad=2, dil=2), "grp": conv(x, P, "grp", pad=1, groups=2),
            "dw": conv(x, P, "dw", stride=(2, 1), pad=1, groups=8),
            "asym": conv(x, P, "asym", stride=(1, 2), pad=(1, 0)), "pw": conv(x, P, "pw"),
            "big": conv(x, P, "big", pad=2),
            "mix": conv(x, P, "mix", stride=(2, 1), pad=(0, 2), dil=(1, 2), groups=2)}, 1e-4


def case_pool(I, P):
    x = I["x"]
    return {"max2": F.max_pool2d(x, 2), "max3": F.max_pool2d(x, 3, 2, 1), "avg3": F.avg_pool2d(x, 3, 1, 1),
            "avg2": F.avg_pool2d(x, 2), "gavg": F.adaptive_avg_pool2d(x, 1),
            "maxdil": F.max_pool2d(x, (3, 2), (1, 2), (1, 1), dilation=2),
            "avgasym": F.avg_pool2d(x, (3, 2), (2, 1), (1, 0))}, 1e-5


def case_norms(I, P):
    bn = F.batch_norm(I["x"], P["bn.running_mean"], P["bn.running_var"], P["bn.weight"], P["bn.bias"],
                      training=False, eps=1e-5)
    ln = F.layer_norm(I["t"], (300,), P["ln.weight"], P["ln.bias"], eps=1e-6)
    return {"bn": bn, "ln": ln}, 1e-4


def case_softmax(I, P):
    x, w = I["x"], I["w"]
    return {"sm1": F.softmax(x, 1), "sm3": F.softmax(x, 3), "lsm1": F.log_softmax(x, 1),
            "lsm": F.log_softmax(w, 1)}, 1e-5


def case_move(I, P):
    a, b, c = I["a"], I["b"], I["c"]
    return {"cat1": torch.cat([a, b, c], 1), "cat3": torch.cat([a, a], 3), "perm": a.permute(0, 2, 3, 1),
            "perm2": a.permute(3, 1, 0, 2), "cat0": torch.cat([a, I["e"]], 0), "sm_vec": F.softmax(I["t"], 0), "flat": F.relu(a.flatten(1)), "resh": a.reshape(6, -1),
            "drop": torch.sigmoid(a)}, 1e-5


def case_gemm(I, P):
    x = I["x"]
    return {"fc": F.linear(x, P["fc.weight"], P["fc.bias"]), "fcnb": F.linear(x, P["fcnb.weight"]),
            "bmm": torch.matmul(I["a"], I["b"]), "mm": torch.matmul(I["p"], I["q"]),
            "mv": torch.matmul(I["p"], I["v"])}, 1e-4


def case_loss(I, P):
    x, y, t = I["x"], I["y"], I["t"]
    return {"ce": F.cross_entropy(x, y), "nll": F.nll_loss(F.log_softmax(x, 1), y),
            "mse": F.mse_loss(x, t)}, 1e-5


def case_net(I, P):
    h = F.relu(F.max_pool2d(conv(I["x"], P, "conv1"), 2))
    h = conv(h, P, "conv2")
    h = F.relu(F.batch_norm(h, P["bn1.running_mean"], P["bn1.running_var"], P["bn1.weight"], P["bn1.bias"],
                            training=False))
    h = F.max_pool2d(h, 2).flatten(1)
    h = F.relu(F.linear(h, P["fc1.weight"], P["fc1.bias"]))
    logits = F.linear(h, P["fc2.weight"], P["fc2.bias"])
    return {"logits": logits, "prob": F.softmax(logits, 1)}, 1e-4


def case_fused(I, P):
    x = I["x"]
    b = F.batch_norm(x, P["bn.running_mean"], P["bn.running_var"], P["bn.weight"], P["bn.bias"], training=False)
    p = F.max_pool2d(x, 2)
    lin = F.linear(F.avg_pool2d(x, 2).flatten(1), P["fc.weight"], P["fc.bias"])
    return {"cbr": F.relu(conv(x, P, "c1", pad=1)),
            "res": F.relu(conv(x, P, "c2", pad=1) + conv(x, P, "c3")),
            "bnr": F.relu6(b),
            "cbnr": F.relu(F.batch_norm(conv(x, P, "c4", stride=2, pad=1), P["bn2.running_mean"],
                                        P["bn2.running_var"], P["bn2.weight"], P["bn2.bias"], training=False)),
            "dws": F.hardswish(conv(x, P, "dw", pad=1, groups=8) * I["s"]),
            "pool_sig": torch.sigmoid(p), "pool_twice": p + p,
            "fc_gelu": 0.5 * F.gelu(lin), "sm_sub": I["t"] - F.softmax(lin, 1),
            "mm_tanh": torch.tanh(torch.matmul(I["m1"], I["m2"]) + I["mb"]),
            "chain": F.silu(F.leaky_relu(I["u"] - I["w"], 0.01))}, 1e-4


def main():
    d, case = sys.argv[1], sys.argv[2]
    I, P, O = load(d, "in_"), load(d, "p_"), load(d, "out_")
    ref, tol = globals()["case_" + case](I, P)
    bad = 0
    if set(ref) != set(O):
        print(f"{case}: outputs {sorted(O)} but the reference has {sorted(ref)}")
        return 1
    for name, r in ref.items():
        g = O[name]
        if tuple(g.shape) != tuple(r.shape):
            print(f"{case}.{name}: shape {tuple(g.shape)}, reference {tuple(r.shape)}")
            bad += 1
            continue
        err = (g - r).abs()
        lim = tol + tol * r.abs()
        worst = int(torch.argmax((err - lim).flatten()))
        ok = bool((err <= lim).all()) and not bool(torch.isnan(g).any())
        print(f"{case}.{name}: {'ok  ' if ok else 'FAIL'} max |err| {float(err.max()):.3g} "
              f"(tol {tol:g} + {tol:g}|ref|) at {worst}: got {float(g.flatten()[worst]):.7g} "
              f"ref {float(r.flatten()[worst]):.7g}")
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
