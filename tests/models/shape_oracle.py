"""shape_oracle.py — ncc's shape rules (ir/shape.c, reached through the
frontend) against PyTorch's, on random configurations of every op with a
shape rule worth the name.

For each configuration the test runs the op in torch (on tiny tensors) and:
  - if torch accepts it, ncc must produce the same output shape (all valid
    cases go into one .net file as outputs; one ncc --emit=ir run);
  - if torch rejects it, ncc must reject it too: exit status 1 and a
    `file:line:col: error:` diagnostic (one .net file per case).
The random seed is fixed so that a failure reproduces; the failing case is
printed as .net source next to torch's verdict.

  shape_oracle.py NCC [--cases N] [--seed S]
"""
import argparse
import os
import random
import re
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F


def dims(s):
    return "[" + ", ".join(str(d) for d in s) + "]"


def pair(v):
    return v if isinstance(v, int) else "[%d, %d]" % tuple(v)


class Case:
    """inputs: list of (name, shape); expr: .net expression; fn: torch function of the inputs."""

    def __init__(self, inputs, expr, fn):
        self.inputs, self.expr, self.fn = inputs, expr, fn

    def torch_shape(self):
        ts = [torch.zeros(s) for _, s in self.inputs]
        try:
            with torch.no_grad():
                return list(self.fn(*ts).shape)
        except (RuntimeError, ValueError, IndexError):
            return None


def rnd_conv(r):
    n, c = r.randint(1, 2), r.randint(1, 6)
    h, w = r.randint(1, 12), r.randint(1, 12)
    out = r.randint(1, 6)
    k = (r.randint(1, 5), r.randint(1, 5))
    s = (r.randint(1, 3), r.randint(1, 3))
    p = (r.randint(0, 3), r.randint(0, 3))
    d = (r.randint(1, 3), r.randint(1, 3))
    g = r.choice([1, 1, 2, 3, c])
    if r.random() < 0.8 and c % g == 0 and out % g:
        out = g * r.randint(1, 3)   # torch also needs out % groups == 0: keep most cases valid
    x = [n, c, h, w]
    sym = lambda v: v[0] if v[0] == v[1] and r.random() < 0.5 else list(v)
    expr = "conv2d(x, %d, kernel=%s, stride=%s, pad=%s, dilation=%s, groups=%d)" % (
        out, pair(sym(k)), pair(sym(s)), pair(sym(p)), pair(sym(d)), g)
    if c % g or out % g:
        fn = lambda t: (_ for _ in ()).throw(RuntimeError("groups"))
    else:
        fn = lambda t: F.conv2d(t, torch.zeros(out, c // g, *k), torch.zeros(out), s, p, d, g)
    return Case([("x", x)], expr, fn)


def rnd_pool(r):
    x = [r.randint(1, 2), r.randint(1, 3), r.randint(1, 12), r.randint(1, 12)]
    k = (r.randint(1, 4), r.randint(1, 4))
    s = (r.randint(1, 3), r.randint(1, 3))
    p = (r.randint(0, 2), r.randint(0, 2))
    op = r.choice(["maxpool2d", "avgpool2d"])
    expr = "%s(x, %s, stride=%s, pad=%s)" % (op, pair(list(k)), pair(list(s)), pair(list(p)))
    f = F.max_pool2d if op == "maxpool2d" else F.avg_pool2d
    return Case([("x", x)], expr, lambda t: f(t, k, s, p))


def rnd_shape(r, rank):
    return [r.randint(1, 4) for _ in range(rank)]


def rnd_matmul(r):
    a = rnd_shape(r, r.randint(1, 4))
    b = rnd_shape(r, r.randint(1, 4))
    if r.random() < 0.7:   # make the inner dims agree most of the time
        b[max(len(b) - 2, 0)] = a[-1]
    if r.random() < 0.5:   # and the batch dims broadcast
        for i in range(1, min(len(a), len(b)) - 1):
            if r.random() < 0.5:
                b[-2 - i] = a[-2 - i] if r.random() < 0.5 else 1
    return Case([("a", a), ("b", b)], "matmul(a, b)", torch.matmul)


def rnd_binary(r):
    a = rnd_shape(r, r.randint(0, 4))
    b = [d if r.random() < 0.6 else r.choice([1, r.randint(1, 4)]) for d in a[r.randint(0, len(a)):]]
    if r.random() < 0.5:
        a, b = b, a
    op, fn = r.choice([("+", torch.add), ("-", torch.sub), ("*", torch.mul), ("/", torch.div)])
    return Case([("a", a), ("b", b)], "a %s b" % op, fn)


def rnd_concat(r):
    rank = r.randint(1, 4)
    a = rnd_shape(r, rank)
    axis = r.randint(-rank, rank - 1)
    b = list(a)
    b[axis] = r.randint(1, 4)
    if r.random() < 0.3:
        j = r.randint(0, rank - 1)
        b[j] = r.randint(1, 4)
    return Case([("a", a), ("b", b)], "concat(a, b, axis=%d)" % axis, lambda x, y: torch.cat([x, y], axis))


def rnd_reshape(r):
    a = rnd_shape(r, r.randint(1, 4))
    n = 1
    for d in a:
        n *= d
    t = []
    while n > 1 and len(t) < 3:
        f = r.choice([d for d in range(1, n + 1) if n % d == 0])
        t.append(f)
        n //= f
    t.append(n)
    if r.random() < 0.5:
        t[r.randint(0, len(t) - 1)] = -1
    if r.random() < 0.2:
        t[0] += 1
    return Case([("x", a)], "reshape(x, %s)" % dims(t), lambda x: x.reshape(t))


def rnd_transpose(r):
    a = rnd_shape(r, r.randint(1, 4))
    perm = list(range(len(a)))
    r.shuffle(perm)
    if r.random() < 0.2:
        perm[0] = perm[-1]
    return Case([("x", a)], "transpose(x, %s)" % dims(perm), lambda x: x.permute(perm))


def rnd_misc(r):
    kind = r.choice(["flatten", "softmax", "log_softmax", "gavg", "linear", "relu6", "layernorm"])
    a = rnd_shape(r, r.randint(1, 4))
    if kind == "flatten":
        return Case([("x", a)], "flatten(x)", lambda x: torch.flatten(x, 1))
    if kind in ("softmax", "log_softmax"):
        ax = r.randint(-len(a), len(a) - 1)
        f = F.softmax if kind == "softmax" else F.log_softmax
        return Case([("x", a)], "%s(x, axis=%d)" % (kind, ax), lambda x: f(x, ax))
    if kind == "gavg":
        a = rnd_shape(r, r.choice([3, 4, 4]))
        fn = (lambda x: F.adaptive_avg_pool2d(x, 1)) if len(a) == 4 else (lambda x: x.unsqueeze(0)[5])
        return Case([("x", a)], "global_avgpool2d(x)", fn)
    if kind == "linear":
        a = rnd_shape(r, r.choice([1, 2, 2, 3]))
        return Case([("x", a)], "linear(x, 3)", (lambda x: F.linear(x, torch.zeros(3, x.shape[-1])))
                    if len(a) == 2 else (lambda x: x.unsqueeze(0)[5]))
    if kind == "layernorm":
        return Case([("x", a)], "layernorm(x)", lambda x: F.layer_norm(x, x.shape[-1:]))
    return Case([("x", a)], "relu6(x)", F.relu6)


GENS = [rnd_conv, rnd_conv, rnd_conv, rnd_pool, rnd_pool, rnd_matmul, rnd_matmul, rnd_binary, rnd_binary,
        rnd_concat, rnd_reshape, rnd_transpose, rnd_misc, rnd_misc]


def source(cases, indices):
    lines = ["model shapes"]
    outs = []
    for i in indices:
        c = cases[i]
        expr = c.expr
        for name, s in c.inputs:
            lines.append("input c%d_%s: f32%s" % (i, name, dims(s)))
            expr = re.sub(r"\b%s\b" % name, "c%d_%s" % (i, name), expr)
        lines.append("o%d = %s" % (i, expr))
        outs.append("o%d" % i)
    lines.append("output " + ", ".join(outs))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ncc")
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    r = random.Random(args.seed)
    cases = [r.choice(GENS)(r) for _ in range(args.cases)]
    want = [c.torch_shape() for c in cases]
    good = [i for i, w in enumerate(want) if w is not None]
    bad = [i for i, w in enumerate(want) if w is None]
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "shapes.net")
        with open(path, "w") as f:
            f.write(source(cases, good))
        p = subprocess.run([args.ncc, path, "--emit=ir"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=120)
        if p.returncode != 0:
            print("FAIL: ncc rejected cases torch accepts:\n" + p.stderr[:4000])
            return 1
        vals = dict(re.findall(r"^%(\d+) = .* : \w+\[([^\]]*)\]", p.stdout, re.M))
        outs = dict(re.findall(r"^output (o\d+) = %(\d+)", p.stdout, re.M))
        for i in good:
            got = vals.get(outs.get("o%d" % i, ""), None)
            got = [int(x) for x in got.split(",")] if got else ([] if got == "" else None)
            if got != want[i]:
                fails += 1
                print("FAIL: o%d = %s: ncc %s, torch %s\n%s" % (i, cases[i].expr, got, want[i],
                                                                source(cases, [i])))
        for i in bad:
            src = source(cases, [i])
            path = os.path.join(d, "bad%d.net" % i)
            with open(path, "w") as f:
                f.write(src)
            p = subprocess.run([args.ncc, path, "--emit=ir"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=60)
            if p.returncode != 1 or not re.search(r"^%s:\d+:\d+: error: " % re.escape(path), p.stderr, re.M):
                fails += 1
                print("FAIL: torch rejects %s but ncc exits %d:\n%s%s" % (cases[i].expr, p.returncode, src,
                                                                       p.stderr[:2000]))
    print("shape_oracle: %d cases (%d valid, %d rejected by torch), %d failures" %
          (len(cases), len(good), len(bad), fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
