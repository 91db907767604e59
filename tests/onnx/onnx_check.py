#!/usr/bin/env python3
"""ONNX import against PyTorch (docs/onnx.md): a torch.nn model exported with
torch.onnx.export (opset 13 unless the case says, eval mode, parameters kept
under their state_dict names), run by `ncc run MODEL.onnx` with the weights
the file carries, compared with PyTorch's output within the oracle's
tolerance 1e-4 * max(1, max|ref|).  `--params` cases check instead that
`ncc MODEL.onnx --emit=report` counts the torch model's parameters; `--bad`
cases that a broken or unsupported file is refused with exit 1 and a message.

  onnx_check.py CASE --ncc PATH/ncc
Exit 0: passed; 1: failed; 77: skipped (no onnx/torch module)."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import onnx  # noqa: F401  (torch.onnx.export needs it)
except ImportError as e:
    print("skipped: %s" % e)
    sys.exit(77)


class Fn(nn.Module):
    def __init__(self, f, **mods):
        super().__init__()
        for k, v in mods.items():
            setattr(self, k, v)
        self.f = f

    def forward(self, x):
        return self.f(self, x)


def small(name):
    """Single-op models: (module, input shape)."""
    N = 2
    if name == "conv":
        return Fn(lambda m, x: m.c(x), c=nn.Conv2d(3, 8, 3, padding=1)), (N, 3, 9, 9)
    if name == "conv_groups_dilation":
        return Fn(lambda m, x: m.c(x), c=nn.Conv2d(8, 16, 3, stride=2, padding=2, dilation=2, groups=4, bias=False)), (N, 8, 11, 11)
    if name == "conv_depthwise":
        return Fn(lambda m, x: m.c(x), c=nn.Conv2d(6, 6, 3, padding=1, groups=6)), (N, 6, 8, 8)
    if name == "gemm":
        return Fn(lambda m, x: m.l(x), l=nn.Linear(20, 7)), (N, 20)
    if name == "matmul":
        return Fn(lambda m, x: m.l(x), l=nn.Linear(6, 5, bias=False)), (N, 4, 6)
    if name == "pools":
        return Fn(lambda m, x: torch.cat([F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 2), F.max_pool2d(x, 2)], 1)), (N, 3, 8, 8)
    if name == "global_pool":
        return Fn(lambda m, x: torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)), (N, 5, 6, 6)
    if name == "add_broadcast":
        return Fn(lambda m, x: (x + m.b) * m.s - x / 2.0, b=nn.Parameter(torch.randn(4, 1, 1)), s=nn.Parameter(torch.randn(1, 5))), (N, 4, 3, 5)
    if name == "concat":
        return Fn(lambda m, x: torch.cat([torch.relu(x), torch.sigmoid(x), torch.tanh(x)], 1)), (N, 3, 4, 4)
    if name == "softmax":
        return Fn(lambda m, x: torch.cat([F.softmax(x, -1), F.log_softmax(x, 1)], 0)), (N, 10)
    if name == "flatten_reshape":
        return Fn(lambda m, x: m.l(x.view(x.size(0), -1)).reshape(-1, 2, 3).transpose(1, 2)), (N, 2, 3, 4)
    if name == "relu6":
        return Fn(lambda m, x: F.relu6(x * 4)), (N, 3, 5, 5)
    if name == "hardswish":
        return Fn(lambda m, x: F.hardswish(x * 4)), (N, 3, 5, 5)
    if name == "leaky_relu":
        return Fn(lambda m, x: F.leaky_relu(x, 0.2)), (N, 3, 5, 5)
    if name in ("gelu_layernorm", "gelu_layernorm17"):   # opset 13: the Erf and ReduceMean patterns; 17: LayerNormalization
        ln = nn.LayerNorm(12)
        with torch.no_grad():
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
        return Fn(lambda m, x: m.ln2(F.gelu(m.ln(F.gelu(x * 3))) + x), ln=ln, ln2=nn.LayerNorm(12, eps=1e-6)), (N, 5, 12)
    if name == "batchnorm":
        bn = nn.BatchNorm2d(4)
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        return Fn(lambda m, x: m.bn(x), bn=bn), (N, 4, 5, 5)
    return None


def build(name):
    torch.manual_seed(0)
    m = small(name)
    if m is not None:
        mod, shape = m
        if name == "flatten_reshape":
            mod.l = nn.Linear(24, 6)
        return mod, shape
    from oracle import build_module
    return build_module(name, num_classes=10, size=32), (1, 3, 32, 32)


def export(mod, shape, path, opset=None, keep_bn=False):
    """TrainingMode.EVAL folds each batchnorm into the conv before it (torch
    1.13 does even with do_constant_folding=False); PRESERVE on a module in
    eval mode keeps BatchNormalization nodes and the state_dict's parameters."""
    if opset is None:
        opset = 17 if os.path.basename(path).split(".")[0].endswith("17") else 13
    x = torch.randn(*shape)
    mode = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL
    with torch.no_grad():
        torch.onnx.export(mod.eval(), x, path, opset_version=opset, do_constant_folding=False,
                          training=mode, input_names=["x"], output_names=["y"])
        y = mod(x)
    return x.numpy(), y.numpy()


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout + p.stderr


def check_run(ncc, name, d, keep_bn=False):
    mod, shape = build(name)
    path = os.path.join(d, name + ".onnx")
    x, ref = export(mod, shape, path, keep_bn=keep_bn)
    np.save(os.path.join(d, "x.npy"), x)
    t = time.time()
    rc, out = run([ncc, "run", path, "--input", "x=" + os.path.join(d, "x.npy"), "--output", "y=" + os.path.join(d, "y.npy")])
    if rc != 0:
        print(out)
        print("FAIL %s: ncc run exited %d" % (name, rc))
        return 1
    got = np.load(os.path.join(d, "y.npy"))
    if got.shape != ref.shape:
        print("FAIL %s: shape %s, PyTorch %s" % (name, got.shape, ref.shape))
        return 1
    err = float(np.max(np.abs(got - ref))) if ref.size else 0.0
    tol = 1e-4 * max(1.0, float(np.max(np.abs(ref))))
    amp = float(np.max(np.abs(ref))) if ref.size else 0.0
    print("%s: max |ncc - torch| = %.3g (tolerance %.3g, max |torch| %.3g), ncc run %.1f s"
          % (name, err, tol, amp, time.time() - t))
    if not amp > 1e-6:   # an all-zero reference would prove nothing
        print("FAIL %s: PyTorch's output is all zeros" % name)
        return 1
    if not err <= tol:
        print("FAIL %s" % name)
        return 1
    return 0


def check_params(ncc, name, d):
    mod, shape = build(name)
    path = os.path.join(d, name + ".onnx")
    export(mod, shape, path, keep_bn=True)
    want = sum(p.numel() for p in mod.parameters())
    rc, out = run([ncc, path, "--emit=report"])
    m = re.search(r"params=(\d+)", out)
    if rc != 0 or not m:
        print(out)
        print("FAIL %s: ncc --emit=report exited %d" % (name, rc))
        return 1
    got = int(m.group(1))
    print("%s: params=%d, torch %d" % (name, got, want))
    if got != want:
        print("FAIL %s" % name)
        return 1
    # -o writes the weights beside the generated source
    cu = os.path.join(d, name + ".cu")
    rc, out = run([ncc, path, "-o", cu])
    st = os.path.join(d, name + ".safetensors")
    if rc != 0 or not os.path.exists(st):
        print(out)
        print("FAIL %s: ncc -o %s exited %d, %s %s" % (name, cu, rc, st, "exists" if os.path.exists(st) else "missing"))
        return 1
    print("%s: -o wrote %s (%d bytes)" % (name, os.path.basename(st), os.path.getsize(st)))
    return 0


def ir_shape_only(text):
    """--emit=ir with the names left out (quoted names, trailing comments):
    what an ONNX model and its .net translation must share."""
    out = []
    for line in text.splitlines():
        line = re.sub(r'"[^"]*"', '""', line.split("  #")[0])
        out.append(re.sub(r"^(output|loss) \S+", r"\1", line))
    return out


def check_net(ncc, name, d, keep_bn=False):
    """--emit=net of the exported model: the .net and the weights written
    beside it compute the same bits as the ONNX model (and PyTorch's result
    within the tolerance), build the same graph but for names, and
    translating the translation changes nothing."""
    mod, shape = build(name)
    path = os.path.join(d, name + ".onnx")
    x, ref = export(mod, shape, path, keep_bn=keep_bn)
    xs = os.path.join(d, "x.npy")
    np.save(xs, x)
    net = os.path.join(d, name + ".net")
    rc, out = run([ncc, path, "--emit=net", "-o", net])
    st = os.path.join(d, name + ".safetensors")
    has_params = bool(run([ncc, path, "--emit=params"])[1].strip())   # a file beside when it has weights
    if rc != 0 or os.path.exists(st) != has_params:
        print(out)
        print("FAIL %s: --emit=net -o exited %d, %s %s" % (name, rc, st, "exists" if os.path.exists(st) else "missing"))
        return 1
    ya, yb = os.path.join(d, "ya.npy"), os.path.join(d, "yb.npy")
    rc1, out1 = run([ncc, "run", path, "--input", "x=" + xs, "--output", "y=" + ya])
    rc2, out2 = run([ncc, "run", net] + (["--weights", st] if has_params else []) +
                    ["--input", "x=" + xs, "--output", "y=" + yb])
    if rc1 != 0 or rc2 != 0:
        print(out1 + out2)
        print("FAIL %s: ncc run exited %d (ONNX), %d (.net)" % (name, rc1, rc2))
        return 1
    a, b = np.load(ya), np.load(yb)
    err = float(np.max(np.abs(b - ref)))
    tol = 1e-4 * max(1.0, float(np.max(np.abs(ref))))
    same = a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))
    print("%s: %d lines of .net; outputs %s the ONNX model's; max |net - torch| = %.3g (tolerance %.3g)"
          % (name, sum(1 for _ in open(net)), "bit-equal to" if same else "DIFFERENT from", err, tol))
    if not same or not err <= tol:
        print("FAIL %s" % name)
        return 1
    rc1, ir1 = run([ncc, path, "--emit=ir"])
    rc2, ir2 = run([ncc, net, "--emit=ir"])
    g1, g2 = ir_shape_only(ir1), ir_shape_only(ir2)
    if rc1 or rc2 or g1 != g2:
        for k, (l1, l2) in enumerate(zip(g1 + [""] * len(g2), g2 + [""] * len(g1))):
            if l1 != l2:
                print("first difference at line %d:\n  ONNX: %s\n  .net: %s" % (k + 1, l1, l2))
                break
        print("FAIL %s: the translation's graph differs from the ONNX model's (names aside)" % name)
        return 1
    rc, again = run([ncc, net, "--emit=net"])
    body = lambda t: [re.sub(r"   # .*$", "", l) for l in t.splitlines() if not l.startswith("#")]
    if rc != 0 or body(again) != body(open(net).read()):
        print(again)
        print("FAIL %s: translating the translation changes it" % name)
        return 1
    print("%s: %d nodes, the same graph; the translation translates to itself" % (name, len(g1)))
    return 0


TRAIN_BLOCK = """
input labels: i32[%d]
loss = cross_entropy(y, labels)

train {
  optimizer sgd(lr=0.05, momentum=0.9)
  minimize loss
}
"""


def check_train(ncc, name, d):
    """Training an imported model (docs/onnx.md, "Training"): `ncc train` on
    the ONNX file says how; its .net translation with a loss and a train
    block added trains from the exported weights.  The first step's loss
    equals PyTorch's on the same weights and batch; the loss falls."""
    torch.manual_seed(0)
    B, F_IN, C = 8, 12, 3
    mod = Fn(lambda m, x: m.l2(torch.relu(m.l1(x))), l1=nn.Linear(F_IN, 16), l2=nn.Linear(16, C))
    path = os.path.join(d, name + ".onnx")
    export(mod, (B, F_IN), path)
    rng = np.random.RandomState(0)
    centers = rng.randn(C, F_IN).astype(np.float32) * 2
    labels = rng.randint(0, C, 64).astype(np.int32)
    xs = (centers[labels] + rng.randn(64, F_IN).astype(np.float32) * 0.5).astype(np.float32)
    data = os.path.join(d, "data")
    os.makedirs(data)
    np.save(os.path.join(data, "x.npy"), xs)
    np.save(os.path.join(data, "y.npy"), labels)
    rc, out = run([ncc, "train", path, "--data", data, "--steps", "2"])
    if rc != 1 or "--emit=net" not in out:
        print(out)
        print("FAIL %s: ncc train MODEL.onnx exited %d without pointing at --emit=net" % (name, rc))
        return 1
    print("%s: ncc train MODEL.onnx: %s" % (name, out.strip().splitlines()[0][:120]))
    net = os.path.join(d, name + ".net")
    rc, out = run([ncc, path, "--emit=net", "-o", net])
    if rc != 0:
        print(out)
        return 1
    with open(net, "a") as f:
        f.write(TRAIN_BLOCK % B)
    log = os.path.join(d, "log.csv")
    rc, out = run([ncc, "train", net, "--data", data, "--weights", os.path.join(d, name + ".safetensors"),
                   "--steps", "16", "--no-shuffle", "--log", log])
    if rc != 0:
        print(out)
        print(open(net).read())
        print("FAIL %s: ncc train MODEL.net exited %d" % (name, rc))
        return 1
    rows = [l.split(",") for l in open(log).read().splitlines()[1:]]
    losses = [float(r[2]) for r in rows]
    with torch.no_grad():
        want = float(F.cross_entropy(mod(torch.from_numpy(xs[:B])), torch.from_numpy(labels[:B]).long()))
    print("%s: trained the translation 16 steps: loss %.5f -> %.5f; step 1 PyTorch %.5f" % (name, losses[0], losses[-1], want))
    if len(losses) != 16 or not abs(losses[0] - want) <= 1e-4 * max(1.0, abs(want)) or not losses[-1] < 0.5 * losses[0]:
        print("FAIL %s" % name)
        return 1
    return 0


def bad_model(kind, d):
    """A file for a --bad case and the message it must give."""
    path = os.path.join(d, kind + ".onnx")
    if kind in ("truncated", "opset99", "unsupported_op", "asym_pads"):
        mod = Fn(lambda m, x: torch.relu(m.c(x)), c=nn.Conv2d(3, 4, 3, padding=1))
        export(mod, (1, 3, 6, 6), path)
        import onnx
        from onnx import helper
        if kind == "truncated":
            data = open(path, "rb").read()
            open(path, "wb").write(data[: len(data) // 2])
            return path, r"not a valid ONNX model: the %d bytes" % (len(data) // 2)
        mp = onnx.load(path)
        if kind == "opset99":
            mp.opset_import[0].version = 99
            onnx.save(mp, path)
            return path, r"opset 99; ncc supports opsets 11 to 17"
        if kind == "unsupported_op":
            node = mp.graph.node[-1]
            n2 = helper.make_node("NonZero", [node.output[0]], ["nz"], name="my_nonzero")
            mp.graph.node.append(n2)
            onnx.save(mp, path)
            return path, r"node 'my_nonzero' \(NonZero\): unsupported operator NonZero"
        if kind == "asym_pads":
            for n in mp.graph.node:
                if n.op_type == "Conv":
                    for a in n.attribute:
                        if a.name == "pads":
                            a.ints[:] = [1, 1, 0, 0]
                    conv = n.name
            onnx.save(mp, path)
            return path, r"node '%s' \(Conv\): asymmetric pads" % re.escape(conv)
    if kind in ("auto_pad_uneven", "ceil_mode", "old_opset_op"):
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        f32 = TensorProto.FLOAT
        w = numpy_helper.from_array(np.ones((2, 2, 2, 2), np.float32), "w")
        if kind == "auto_pad_uneven":   # a 2x2 kernel: SAME pads by 1, unevenly
            nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="same_conv", auto_pad="SAME_UPPER")]
            inits, opset = [w], 13
            want = r"same_conv' \(Conv\): auto_pad SAME_UPPER pads the height by 1, 0 before and 1 after: uneven padding is not supported"
        elif kind == "ceil_mode":       # 6 rows, kernel 3, stride 2: ceil mode gives 3 rows, floor mode 2
            nodes = [helper.make_node("MaxPool", ["x"], ["y"], name="ceil_pool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)]
            inits, opset = [], 13
            want = r"ceil_pool' \(MaxPool\): ceil_mode=1 where it rounds the output height up \(floor mode gives 2\) is not supported"
        else:                           # Add before opset 7 broadcast by attribute
            nodes = [helper.make_node("HardSigmoid", ["x"], ["h"], name="hs"), helper.make_node("Add", ["h", "x"], ["y"], name="old_add")]
            inits, opset = [], 6
            want = r":2:1: .*old_add' \(Add\): Add at opset 6 is not supported: ncc imports Add as defined since opset 7"
        g = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", f32, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info("y", f32, None)], inits)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
        return path, want
    if kind == "garbage":
        open(path, "wb").write(bytes(range(256)) * 3)
        return path, r"not a valid ONNX model: the 768 bytes"
    if kind == "empty":
        open(path, "wb").write(b"")
        return path, r"not a valid ONNX model: the 0 bytes"
    if kind == "dynamic_dim":
        mod = Fn(lambda m, x: torch.relu(x))
        x = torch.randn(2, 3)
        torch.onnx.export(mod.eval(), x, path, opset_version=13, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        return path, r"graph input 'x': dimension 0 is 'batch'; give it with --set batch=N"
    raise SystemExit("unknown bad case " + kind)


def check_fuzz_findings(ncc, d):
    """Every input the fuzzer once crashed the importer with
    (tests/fuzz/onnx_findings/): refused with exit 1 and a message at the file."""
    fd = os.path.join(HERE, "..", "fuzz", "onnx_findings")
    bad = 0
    for f in sorted(os.listdir(fd)):
        path = os.path.join(d, f)
        open(path, "wb").write(open(os.path.join(fd, f), "rb").read())
        cu = os.path.join(d, "out.cu")
        rc, out = run([ncc, path, "-o", cu])
        first = out.strip().splitlines()[0] if out.strip() else "(no message)"
        print("%s: exit %d: %s" % (f, rc, first))
        if rc != 1 or not first.startswith(path + ":") or os.path.exists(cu):
            print(out)
            print("FAIL %s: wanted exit 1 and a message located at the file" % f)
            bad = 1
    return bad


def check_bad(ncc, kind, d):
    if kind == "fuzz_findings":
        return check_fuzz_findings(ncc, d)
    path, want = bad_model(kind, d)
    cu = os.path.join(d, "out.cu")
    rc, out = run([ncc, path, "-o", cu])
    ok = rc == 1 and re.search(want, out) and not os.path.exists(cu) and "Segmentation" not in out
    print("%s: exit %d: %s" % (kind, rc, out.strip().splitlines()[0] if out.strip() else "(no message)"))
    if not ok:
        print(out)
        print("FAIL %s: wanted exit 1, /%s/ and no %s" % (kind, want, cu))
        return 1
    if kind == "dynamic_dim":   # --set closes it, and the result runs
        x = np.random.RandomState(0).randn(3, 3).astype(np.float32)
        np.save(os.path.join(d, "x.npy"), x)
        rc, out = run([ncc, "run", path, "--set", "batch=3", "--input", "x=" + os.path.join(d, "x.npy"),
                       "--output", "y=" + os.path.join(d, "y.npy")])
        if rc != 0 or not np.allclose(np.load(os.path.join(d, "y.npy")), np.maximum(x, 0)):
            print(out)
            print("FAIL dynamic_dim with --set batch=3 (exit %d)" % rc)
            return 1
        print("dynamic_dim: --set batch=3 runs, relu matches")
    return 0


def check_int8(ncc, d):
    """--precision=int8 on an imported model whose layer names hold spaces,
    '%' and a closing '#b' (ONNX node names may): calibration, then the calibration cache written
    (names escaped as %XX) and read back alone give the same bits, close to
    PyTorch's fp32 output."""
    import onnx
    torch.manual_seed(0)
    mod = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 8, 3, padding=1), nn.ReLU(),
                        nn.Flatten(), nn.Linear(8 * 81, 10))
    path = os.path.join(d, "m.onnx")
    x, ref = export(mod, (2, 3, 9, 9), path)
    g = onnx.load(path)
    names = []
    for n in g.graph.node:
        if n.op_type in ("Conv", "Gemm"):
            # the Gemm's name ends in "#b", as a matmul's second operand's entry does
            n.name = "block 1/" + n.name + " at 50%" + ("#b" if n.op_type == "Gemm" else "")
            names.append(n.name)
    onnx.save(g, path)
    xp, cal, cache = os.path.join(d, "x.npy"), os.path.join(d, "cal.npy"), os.path.join(d, "cal.txt")
    np.save(xp, x)
    np.save(cal, torch.randn(32, 3, 9, 9).numpy())
    outs = []
    for extra in (["--calibrate=" + cal], []):
        y = os.path.join(d, "y%d.npy" % len(outs))
        rc, out = run([ncc, "run", path, "--precision=int8", "--calibration-cache=" + cache, "--input", "x=" + xp,
                       "--output", "y=" + y] + extra)
        if rc != 0:
            print(out)
            print("FAIL int8: ncc run %s exited %d" % (" ".join(extra) or "(the cache alone)", rc))
            return 1
        outs.append(np.load(y))
    text = open(cache).read()
    print(text)
    for nm in names:
        esc = nm.replace("%", "%25").replace(" ", "%20")
        if "layer %s absmax" % esc not in text:
            print("FAIL int8: the cache has no line for layer '%s' (escaped '%s')" % (nm, esc))
            return 1
    rp = os.path.join(d, "report.txt")
    rc, rep = run([ncc, path, "--precision=int8", "--calibration-cache=" + cache, "--emit=report", "-o", rp])
    rep += open(rp).read() if rc == 0 else ""
    if rc != 0 or any(nm not in rep for nm in names):
        print(rep)
        print("FAIL int8: the report does not name every int8 layer as the model does")
        return 1
    if "of %d layers fell back" % len(names) not in rep:
        print(rep)
        print("FAIL int8: the report should count %d layers (a layer whose name ends in '#b' is a layer)" % len(names))
        return 1
    same = np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    cos = float(np.dot(outs[0].ravel(), ref.ravel()) / (np.linalg.norm(outs[0]) * np.linalg.norm(ref)))
    print("int8: calibrated and cached runs %s; cosine %.6f against PyTorch's fp32" % ("equal" if same else "DIFFER", cos))
    if not same or not cos >= 0.999:
        print("FAIL int8")
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--ncc", required=True)
    ap.add_argument("--params", action="store_true")
    ap.add_argument("--bad", action="store_true")
    ap.add_argument("--net", action="store_true", help="check --emit=net's translation")
    ap.add_argument("--train", action="store_true", help="train the translation of an imported classifier")
    ap.add_argument("--keep-bn", action="store_true", help="export BatchNormalization nodes (TrainingMode.PRESERVE)")
    ap.add_argument("--int8", action="store_true", help="int8 calibration and its cache on an imported model")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        if a.int8:
            return check_int8(a.ncc, d)
        if a.bad:
            return check_bad(a.ncc, a.case, d)
        if a.params:
            return check_params(a.ncc, a.case, d)
        if a.train:
            return check_train(a.ncc, a.case, d)
        if a.net:
            return check_net(a.ncc, a.case, d, a.keep_bn)
        return check_run(a.ncc, a.case, d, a.keep_bn)


if __name__ == "__main__":
    sys.exit(main())
