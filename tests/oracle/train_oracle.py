#!/usr/bin/python3
"""train_oracle.py — numeric tests of `ncc train` against PyTorch, one case per invocation.

    train_oracle.py --list [--labels]         # the case names (no torch import: CMake calls this)
    train_oracle.py CASE --ncc PATH --work DIR # run one case; exit 0 pass, 1 fail, 77 skipped
    train_oracle.py --torch-only CASE|all [--ncc PATH]
                                              # only the PyTorch side (and, with --ncc, check that
                                              # ncc parses the model and names the same parameters)
    train_oracle.py CASE --self-test [--work DIR]
                                              # CASE against a stand-in for `ncc train` written
                                              # with PyTorch in float32: checks the harness and
                                              # that a float32 computation meets the tolerances

The conventions are tests/oracle/oracle.py's (whose helpers this file uses):
a passing case removes its working directory unless NCC_KEEP_WORK=1, a case
that cannot run here exits 77.

Every case writes a small .net model with a train block, random initial
parameters under PyTorch state_dict names (W0.safetensors), a data set
(x.npy float32; y.npy int32 labels, or float32 targets for mse_loss), runs

    ncc train MODEL.net --data D --steps K --no-shuffle --weights W0 --checkpoint C
              --log L.csv --save-grads G --device emu

and repeats the same training in PyTorch in float64: the same initial
parameters (rounded to float32 first, so that both start from the same
values), the same batches in file order (step i reads batch i mod steps per
epoch), torch.optim.SGD/Adam/AdamW with the train block's hyper-parameters,
batchnorm in training mode (batch statistics, running statistics updated with
torch's unbiased variance), the lr schedule (StepLR, CosineAnnealingLR)
stepped once per epoch.  The model text and the PyTorch computation are built
by the same calls (class Net), so that they cannot drift apart.

What is compared:
  grad_*   K=1: every parameter's gradient in G against torch's,
           max|ncc - ref| <= 1e-4 * max(1, max|ref|) per parameter; the loss of
           the step (CSV) within 1e-3 relative; batchnorm's running statistics
           in C after the step.
  opt_*    K=5..20 on a small CNN with batchnorm: the CSV's loss and lr columns
           per step, the final parameters, running statistics and optimizer
           state (momentum_buffer, exp_avg, exp_avg_sq) in C, and its counters
           (__step__, __epoch__, __lr__), within 1e-3 relative
           (max|ncc - ref| <= 1e-3 * max|ref| per tensor).
  resume_* k steps, then m more with --resume, against k+m unbroken: the
           checkpoints hold the same tensors with the same bytes.
  dropout_* with p>0 the mask is ncc's own generator's: runs with one seed
           give the same bytes, another seed another mask; the mask is read
           back from the gradient's zero pattern, must drop about p of the
           units, and PyTorch with that mask must give ncc's gradients.
  ex_*     every example model (examples/*.net; a train block and labels are
           appended where missing, dropout set to p=0), small sizes via --set:
           one step's loss and all gradients (and running statistics); where
           PyTorch's own float32 gradients miss 1e-4 (deep batchnorm networks
           at initialisation: f32_floor), up to 8x PyTorch float32's error.
"""
import copy
import csv
import json
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle as O   # noqa: E402  (helpers only; importing it does not import torch)

EXAMPLES = O.EXAMPLES
Failure, Skip = O.Failure, O.Skip

GRAD_RTOL = 1e-4     # gradients: the inference oracle's tolerance
TRAIN_RTOL = 1e-3    # after several steps: losses, weights, optimizer state
LR_RTOL = 1e-5       # the lr column is a printed float

CASES = {}      # name -> (function(ctx) or None, spec builder or None, labels)


def case(name, labels=()):
    def deco(f):
        CASES[name] = (f, tuple(labels))
        return f
    return deco


# ---------------------------------------------------------------- files
ST_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4", "BF16": None}


def read_safetensors(path):
    """name -> (numpy array, raw bytes).  8-byte little-endian header length,
    a JSON header (name -> dtype, shape, data_offsets), the raw data."""
    import numpy as np
    if not os.path.exists(path):
        raise Failure("%s was not written" % path)
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise Failure("%s: %d bytes, no header" % (path, len(data)))
    n = struct.unpack("<Q", data[:8])[0]
    if 8 + n > len(data):
        raise Failure("%s: header of %d bytes in a file of %d" % (path, n, len(data)))
    try:
        hdr = json.loads(data[8:8 + n].decode("utf-8"))
    except ValueError as e:
        raise Failure("%s: header is not JSON: %s" % (path, e))
    base, out = 8 + n, {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        dt = ST_DTYPES.get(v.get("dtype"))
        if dt is None:
            raise Failure("%s: tensor %s has dtype %r" % (path, k, v.get("dtype")))
        a, b = v["data_offsets"]
        raw = data[base + a:base + b]
        shape = tuple(v["shape"])
        cnt = 1
        for d in shape:
            cnt *= d
        if len(raw) != cnt * np.dtype(dt).itemsize:
            raise Failure("%s: tensor %s: %d bytes for shape %s" % (path, k, len(raw), shape))
        out[k] = (np.frombuffer(raw, dtype=dt).reshape(shape), raw)
    return out


def read_log(path):
    """The --log CSV: one row per step (step, epoch, loss, lr)."""
    if not os.path.exists(path):
        raise Failure("%s was not written" % path)
    with open(path) as f:
        rows = [r for r in csv.DictReader(f)]
    if not rows or "loss" not in rows[0]:
        raise Failure("%s: no loss column (header %s)" % (path, list(rows[0].keys()) if rows else "empty"))
    return [r for r in rows if (r.get("loss") or "").strip() != ""]


def net_number(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


# ---------------------------------------------------------------- optimizers
class Opt:
    """The train block's optimizer and schedule, rendered as .net text and
    built as torch.optim objects from the same numbers."""

    def __init__(self, kind="sgd", schedule=None, **hp):
        self.kind, self.schedule, self.hp = kind, schedule, hp
        if kind == "sgd":
            hp.setdefault("lr", 0.1)
        else:
            hp.setdefault("lr", 1e-3)

    def block(self, loss):
        args = ", ".join("%s=%s" % (k, net_number(v)) for k, v in self.hp.items())
        s = "train {\n  optimizer %s(%s)\n" % (self.kind, args)
        if self.schedule:
            k, a = self.schedule
            s += "  schedule %s(%s)\n" % (k, ", ".join("%s=%s" % (n, net_number(v)) for n, v in a.items()))
        return s + "  minimize %s\n}\n" % loss

    def torch(self, params):
        import torch
        h = self.hp
        if self.kind == "sgd":
            opt = torch.optim.SGD(params, lr=h["lr"], momentum=h.get("momentum", 0.0),
                                  weight_decay=h.get("weight_decay", 0.0), nesterov=h.get("nesterov", False))
        else:
            cls = torch.optim.Adam if self.kind == "adam" else torch.optim.AdamW
            wd = h.get("weight_decay", 0.0 if self.kind == "adam" else 0.01)
            opt = cls(params, lr=h["lr"], betas=(h.get("beta1", 0.9), h.get("beta2", 0.999)),
                      eps=h.get("eps", 1e-8), weight_decay=wd)
        sched = None
        if self.schedule:
            k, a = self.schedule
            if k == "step":
                sched = torch.optim.lr_scheduler.StepLR(opt, step_size=a["every"], gamma=a.get("gamma", 0.1))
            elif k == "cosine":
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=a["total"])
            else:
                raise ValueError(k)
        return opt, sched


# ---------------------------------------------------------------- the model builder
class Var:
    def __init__(self, name, val):
        self.name, self.val = name, val     # val: the value on the first batch (for shapes)

    @property
    def shape(self):
        return tuple(self.val.shape)


class Net:
    """Writes a .net model and its PyTorch twin with the same calls.

    Every method appends one line `vK = EXPR` to the model and one step to
    the PyTorch forward, and evaluates it at once on the first batch (so
    that later layers know their input shapes).  Parameters are created
    random (float64 values that are exactly float32), under the names the
    model gives them."""

    def __init__(self, batch, x_shape, samples=None, classes=5, y_float=None, seed=1, x_lo=-2.0, x_hi=2.0,
                 partial=False):
        import torch
        O.seed(seed)
        self.batch = batch
        self.samples = samples or batch
        if self.samples % batch and not partial:   # partial: --keep-last's cases
            raise ValueError("samples must be a multiple of the batch")
        self.x_all = O.as64(O.rand(self.samples, *x_shape, lo=x_lo, hi=x_hi))
        if y_float is not None:
            self.y_all = O.as64(O.rand(self.samples, *y_float))
            self.y_decl = "f32[%s]" % O.dims((batch,) + tuple(y_float))
        else:
            self.y_all = torch.randint(0, classes, (self.samples,))
            self.y_decl = "i32[%d]" % batch
        self.x_decl = "f32[%s]" % O.dims((batch,) + tuple(x_shape))
        self.lines, self.steps = [], []
        self.params, self.trainable = {}, []
        self.pe = {}                                # parameters for the evaluation at build time
        self.x = Var("x", self.x_all[:batch])
        self.y = Var("y", self.y_all[:batch])
        self.loss = self.out = None
        self.opt = Opt()

    # parameters
    def param(self, name, t, trainable=True):
        t = O.as64(t)
        self.params[name] = t
        self.pe[name] = t.clone()
        if trainable:
            self.trainable.append(name)
        return name

    def op(self, text, fn, *args):
        v = "v%d" % len(self.steps)
        vars_ = [a for a in args if isinstance(a, Var)]
        self.lines.append("%s = %s" % (v, text.format(*[a.name for a in vars_])))
        self.steps.append((v, fn, [a.name for a in vars_]))
        return Var(v, fn(self.pe, *[a.val for a in vars_]))

    def forward(self, P, xb, yb):
        env = {"x": xb, "y": yb}
        for v, fn, names in self.steps:
            env[v] = fn(P, *[env[n] for n in names])
        return env[self.loss.name]

    def text(self, model):
        s = "# %s: written by tests/oracle/train_oracle.py\nmodel %s\n" % (model, model)
        s += "input x: %s\ninput y: %s\n" % (self.x_decl, self.y_decl)
        s += "\n".join(self.lines) + "\n"
        s += "output %s\n" % (self.out or self.loss).name
        return s + self.opt.block(self.loss.name)

    # layers with parameters
    def conv2d(self, h, out, kernel, stride=1, pad=0, dilation=1, groups=1, bias=True, name=None, gain=2.0):
        import torch.nn.functional as F
        C = h.shape[1]
        kh, kw = kernel if isinstance(kernel, (tuple, list)) else (kernel, kernel)
        fan = C // groups * kh * kw
        w = self.param(name + ".weight", O.rand(out, C // groups, kh, kw) * gain / fan ** 0.5)
        b = self.param(name + ".bias", O.rand(out, lo=-0.5, hi=0.5)) if bias else None
        st = tuple(stride) if isinstance(stride, (tuple, list)) else stride
        pd = tuple(pad) if isinstance(pad, (tuple, list)) else pad
        text = ("conv2d({0}, %d, kernel=%s, stride=%s, pad=%s, dilation=%d, groups=%d, bias=%s, name=\"%s\")"
                % (out, O.pair(kernel), O.pair(stride), O.pair(pad), dilation, groups,
                   "true" if bias else "false", name))
        return self.op(text, lambda P, a: F.conv2d(a, P[w], P[b] if b else None, st, pd, dilation, groups), h)

    def linear(self, h, out, bias=True, name=None, gain=2.0):
        import torch.nn.functional as F
        I = h.shape[-1]
        w = self.param(name + ".weight", O.rand(out, I) * gain / I ** 0.5)
        b = self.param(name + ".bias", O.rand(out, lo=-0.5, hi=0.5)) if bias else None
        text = "linear({0}, %d, bias=%s, name=\"%s\")" % (out, "true" if bias else "false", name)
        return self.op(text, lambda P, a: F.linear(a, P[w], P[b] if b else None), h)

    def batchnorm2d(self, h, eps=None, momentum=None, name=None):
        import torch
        import torch.nn.functional as F
        C = h.shape[1]
        w = self.param(name + ".weight", O.rand(C, lo=0.5, hi=1.5))
        b = self.param(name + ".bias", O.rand(C, lo=-0.3, hi=0.3))
        rm = self.param(name + ".running_mean", O.rand(C, lo=-0.5, hi=0.5), trainable=False)
        rv = self.param(name + ".running_var", O.rand(C, lo=0.5, hi=2.0), trainable=False)
        self.params[name + ".num_batches_tracked"] = torch.tensor(0, dtype=torch.int64)
        e = 1e-5 if eps is None else eps
        m = 0.1 if momentum is None else momentum
        extra = ("" if eps is None else ", eps=%s" % net_number(eps)) + \
                ("" if momentum is None else ", momentum=%s" % net_number(momentum))
        return self.op("batchnorm2d({0}%s, name=\"%s\")" % (extra, name),
                       lambda P, a: F.batch_norm(a, P[rm], P[rv], P[w], P[b], training=True, momentum=m, eps=e), h)

    def layernorm(self, h, eps=None, name=None):
        import torch.nn.functional as F
        D = h.shape[-1]
        w = self.param(name + ".weight", O.rand(D, lo=0.5, hi=1.5))
        b = self.param(name + ".bias", O.rand(D, lo=-0.3, hi=0.3))
        e = 1e-5 if eps is None else eps
        extra = "" if eps is None else ", eps=%s" % net_number(eps)
        return self.op("layernorm({0}%s, name=\"%s\")" % (extra, name),
                       lambda P, a: F.layer_norm(a, (D,), P[w], P[b], e), h)

    # no parameters
    def act(self, kind, h, slope=None):
        import torch.nn.functional as F
        fns = {"relu": F.relu, "relu6": F.relu6, "sigmoid": lambda a: a.sigmoid(), "tanh": lambda a: a.tanh(),
               "gelu": F.gelu, "silu": F.silu, "hardswish": F.hardswish}
        if kind == "leaky_relu":
            s = 0.01 if slope is None else slope
            text = "leaky_relu({0}%s)" % ("" if slope is None else ", slope=%s" % net_number(slope))
            return self.op(text, lambda P, a: F.leaky_relu(a, s), h)
        return self.op("%s({0})" % kind, lambda P, a: fns[kind](a), h)

    def pool(self, kind, h, k, s=None, p=None, d=None):
        import torch.nn.functional as F
        extra = ("" if s is None else ", stride=%s" % O.pair(s)) + ("" if p is None else ", pad=%s" % O.pair(p))
        extra += "" if d is None else ", dilation=%s" % O.pair(d)
        st = k if s is None else s
        pd = 0 if p is None else p
        if kind == "maxpool2d":
            return self.op("maxpool2d({0}, %s%s)" % (O.pair(k), extra),
                           lambda P, a: F.max_pool2d(a, k, st, pd, 1 if d is None else d), h)
        return self.op("avgpool2d({0}, %s%s)" % (O.pair(k), extra),
                       lambda P, a: F.avg_pool2d(a, k, st, pd, count_include_pad=True), h)

    def gap(self, h):
        return self.op("global_avgpool2d({0})", lambda P, a: a.mean(dim=(2, 3), keepdim=True), h)

    def binop(self, op, a, b):
        """op: + - * /; a or b may be a number."""
        fn = {"+": lambda u, v: u + v, "-": lambda u, v: u - v, "*": lambda u, v: u * v, "/": lambda u, v: u / v}[op]
        if not isinstance(a, Var):
            return self.op("%s %s {0}" % (net_number(a), op), lambda P, v: fn(a, v), b)
        if not isinstance(b, Var):
            return self.op("{0} %s %s" % (op, net_number(b)), lambda P, u: fn(u, b), a)
        return self.op("{0} %s {1}" % op, lambda P, u, v: fn(u, v), a, b)

    def call2(self, name, a, b):
        """add(a, b), sub, mul, div by name."""
        fn = {"add": lambda u, v: u + v, "sub": lambda u, v: u - v, "mul": lambda u, v: u * v,
              "div": lambda u, v: u / v}[name]
        return self.op("%s({0}, {1})" % name, lambda P, u, v: fn(u, v), a, b)

    def concat(self, hs, axis):
        import torch
        text = "concat(%s, axis=%d)" % (", ".join("{%d}" % i for i in range(len(hs))), axis)
        return self.op(text, lambda P, *xs: torch.cat(xs, axis), *hs)

    def flatten(self, h):
        return self.op("flatten({0})", lambda P, a: a.flatten(1), h)

    def reshape(self, h, shape):
        return self.op("reshape({0}, [%s])" % O.dims(shape), lambda P, a: a.reshape(*shape), h)

    def transpose(self, h, perm):
        return self.op("transpose({0}, [%s])" % O.dims(perm), lambda P, a: a.permute(*perm), h)

    def matmul(self, a, b):
        import torch
        return self.op("matmul({0}, {1})", lambda P, u, v: torch.matmul(u, v), a, b)

    def softmax(self, kind, h, axis=None):
        import torch
        ax = -1 if axis is None else axis
        fn = torch.softmax if kind == "softmax" else torch.log_softmax
        return self.op("%s({0}%s)" % (kind, "" if axis is None else ", axis=%d" % axis),
                       lambda P, a: fn(a, ax), h)

    def dropout(self, h, p, two_d=False):
        """p = 0 only: the torch side is the identity."""
        if p != 0:
            raise ValueError("Net.dropout: p must be 0 (the mask is ncc's own)")
        return self.op("%s({0}, 0.0)" % ("dropout2d" if two_d else "dropout"), lambda P, a: a, h)

    def cross_entropy(self, logits):
        import torch.nn.functional as F
        self.out = logits
        return self.op("cross_entropy({0}, {1})", lambda P, a, y: F.cross_entropy(a, y), logits, self.y)

    def nll_loss(self, logp):
        import torch.nn.functional as F
        self.out = logp
        return self.op("nll_loss({0}, {1})", lambda P, a, y: F.nll_loss(a, y), logp, self.y)

    def mse_loss(self, a, b):
        import torch.nn.functional as F
        self.out = a
        return self.op("mse_loss({0}, {1})", lambda P, u, v: F.mse_loss(u, v), a, b)

    def head(self, h, classes=5, name="fc"):
        """flatten (if needed), a linear layer to the classes, cross_entropy: the loss."""
        if len(h.shape) > 2:
            h = self.flatten(h)
        self.loss = self.cross_entropy(self.linear(h, classes, name=name, gain=1.0))
        return self.loss


# ---------------------------------------------------------------- a training problem
class Spec:
    """What a case trains: the model text, the initial parameters, the data,
    the PyTorch forward (P, xb, yb) -> loss, the optimizer."""

    def __init__(self, model, text, params, trainable, forward, x_all, y_all, batch, opt):
        self.model, self.text, self.params, self.trainable = model, text, params, trainable
        self.forward, self.x_all, self.y_all, self.batch, self.opt = forward, x_all, y_all, batch, opt
        self.keep_last = False   # ncc train --keep-last: the last partial batch is a step (drop_last=False)
        self.prec = None         # ncc train --precision=tf32|fp16|bf16: the GEMMs' operands rounded (rounding())
        self.loss_scale = None   # fp16: --loss-scale (the scaler's initial scale; None: GradScaler's 65536)
        self.tile = None         # --gemm-tile: every tensor-core GEMM of the step at that tile (None: the model's)
        self.gemm = []           # more --gemm-* flags (--gemm-stages=N, --gemm-pipeline=off)
        self.opt_level = None    # -O0 ... -O3 (None: ncc's default)

    @property
    def steps_per_epoch(self):
        n = self.x_all.shape[0]
        return -(-n // self.batch) if self.keep_last else n // self.batch


def spec_of(model, net):
    s = Spec(model, net.text(model), net.params, net.trainable, net.forward, net.x_all, net.y_all,
             net.batch, net.opt)
    s.net = net
    return s


# ---------------------------------------------------------------- rounded GEMMs (--precision=tf32|bf16)
def rounded_gemm(fn, a, b, R, J=None):
    """fn(a, b) for a bilinear fn (conv2d or linear without bias, matmul) with
    both operands rounded by R, forward and backward, as ncc's kernels at
    tf32/bf16 round them: each gradient's GEMM takes R(dy) and the rounded
    other operand (conv2d_bwd_data: dy and the weight; conv2d_bwd_weight and
    linear_bwd_weight: dy and the input; a linear's input gradient, a matmul:
    dy and the weight).  The products of rounded values are exact in float64,
    so the reference differs from ncc by float32 summation alone.  J: each
    GEMM's result jittered (order_jitter), forward and backward."""
    import torch

    class Rounded(torch.autograd.Function):
        @staticmethod
        def forward(ctx, u, v):
            ur, vr = R(u.detach()).to(u.dtype), R(v.detach()).to(v.dtype)
            ctx.save_for_backward(ur, vr)
            y = fn(ur, vr)
            return J(y, fn(ur.abs(), vr.abs())) if J else y

        @staticmethod
        def backward(ctx, gy):
            ur, vr = ctx.saved_tensors
            g = R(gy.detach()).to(gy.dtype)
            with torch.enable_grad():
                u2, v2 = ur.detach().requires_grad_(), vr.detach().requires_grad_()
                gu, gv = torch.autograd.grad(fn(u2, v2), (u2, v2), g)
                if J:   # the sums of the products' magnitudes: the same GEMMs of |operands|
                    ua, va = ur.abs().requires_grad_(), vr.abs().requires_grad_()
                    mu, mv = torch.autograd.grad(fn(ua, va), (ua, va), g.abs())
                    gu, gv = J(gu, mu), J(gv, mv)
            return gu, gv
    return Rounded.apply(a, b)


# (relative size, seed) of the jitter rounding(prec) adds to each GEMM's
# result (order_sensitivity); 0: none
ORDER_JITTER = [0.0, 0]


def order_jitter(eps, seed):
    """J(y, m): y plus eps times m (the sum of the magnitudes of the products
    y sums) with a sign drawn per element: what another summation order may
    change.  A y that float32 holds exactly (a few products of rounded
    operands) is left as it is: the GPU's sum holds it exactly too."""
    import torch
    g = torch.Generator().manual_seed(seed)

    def J(y, m):
        s = torch.randint(0, 2, y.shape, generator=g).to(y.dtype) * 2 - 1
        s = torch.where(y.float().to(y.dtype) == y, torch.zeros_like(s), s)
        return y + eps * m * s
    return J


class rounding:
    """with rounding(prec): F.conv2d, F.linear and torch.matmul (what Net's
    steps and the example modules call) round their operands to prec as
    rounded_gemm does; biases are added in float64 after the GEMM, as ncc's
    epilogue adds them in float32.  prec None: nothing changes."""

    def __init__(self, prec):
        self.prec = prec

    def __enter__(self):
        if not self.prec:
            return self
        import torch
        import torch.nn.functional as F
        R = O.ROUND[self.prec]
        J = order_jitter(*ORDER_JITTER) if ORDER_JITTER[0] else None
        conv, lin, mm = self.saved = F.conv2d, F.linear, torch.matmul

        def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
            y = rounded_gemm(lambda u, v: conv(u, v, None, stride, padding, dilation, groups), x, w, R, J)
            return y if b is None else y + b.view(1, -1, 1, 1)

        def linear(x, w, b=None):
            y = rounded_gemm(lambda u, v: lin(u, v), x, w, R, J)
            return y if b is None else y + b

        F.conv2d, F.linear, torch.matmul = conv2d, linear, lambda u, v: rounded_gemm(mm, u, v, R, J)
        return self

    def __exit__(self, *exc):
        if self.prec:
            import torch
            import torch.nn.functional as F
            F.conv2d, F.linear, torch.matmul = self.saved
        return False


def torch_train(spec, K, autocast=None):
    """K steps as `ncc train --no-shuffle` takes them (autocast: a dtype,
    torch.bfloat16 or torch.float16: under PyTorch's CPU autocast to it
    instead of rounding(spec.prec)).  Returns a dict:
    losses, lrs (per step), grads (the last step's), params (after the
    last step; buffers included), state (optimizer state by parameter
    name), lr (the next step's), epoch."""
    import torch
    P = {k: v.clone() for k, v in spec.params.items()}
    for k in spec.trainable:
        P[k].requires_grad_(True)
    opt, sched = spec.opt.torch([P[k] for k in spec.trainable])
    spe, B = spec.steps_per_epoch, spec.batch
    losses, lrs, grads = [], [], {}
    # fp16: torch.cuda.amp.GradScaler's algorithm (its CUDA kernels have no
    # CPU build in this PyTorch): the loss times the scale S seeds the
    # backward; the gradients are multiplied by 1/S; a step with an Inf or
    # NaN among them skips opt.step() and halves S; 2000 good steps in a row
    # double it (init_scale 65536, backoff 0.5, growth 2, interval 2000).
    scaler = None
    if spec.prec == "fp16" or autocast == torch.float16:
        scaler = {"scale": float(spec.loss_scale or 65536.0), "tracker": 0, "opt_step": 0, "skipped": 0}
    for step in range(K):
        i = step % spe
        xb, yb = spec.x_all[i * B:(i + 1) * B], spec.y_all[i * B:(i + 1) * B]
        opt.zero_grad()
        with torch.autocast("cpu", dtype=autocast) if autocast else rounding(spec.prec):
            loss = spec.forward(P, xb, yb)
            (loss * scaler["scale"] if scaler else loss).backward()
        losses.append(float(loss))
        lrs.append(float(opt.param_groups[0]["lr"]))
        found = False
        if scaler:
            for k in spec.trainable:
                if P[k].grad is not None:
                    found |= not bool(torch.isfinite(P[k].grad).all())
                    P[k].grad.mul_(1.0 / scaler["scale"])
        grads = {k: (P[k].grad.detach().clone() if P[k].grad is not None else torch.zeros_like(P[k]))
                 for k in spec.trainable}
        if found:
            scaler["scale"] *= 0.5
            scaler["tracker"] = 0
            scaler["skipped"] += 1
        else:
            opt.step()
            if scaler:
                scaler["opt_step"] += 1
                scaler["tracker"] += 1
                if scaler["tracker"] == 2000:
                    scaler["scale"] *= 2.0
                    scaler["tracker"] = 0
        if (step + 1) % spe == 0 and sched is not None:
            sched.step()
    state = {}
    for k in spec.trainable:
        st = opt.state.get(P[k], {})
        for sk in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
            if st.get(sk) is not None:
                state["%s.%s" % (k, sk)] = st[sk].detach().clone()
    return {"losses": losses, "lrs": lrs, "grads": grads,
            "params": {k: v.detach().clone() for k, v in P.items()}, "state": state,
            "lr": float(opt.param_groups[0]["lr"]), "epoch": K // spe, "scaler": scaler}


# ---------------------------------------------------------------- running ncc train
def write_inputs(ctx, spec, sub=""):
    import numpy as np
    d = ctx.path("data" + sub)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), spec.x_all.numpy().astype(np.float32))
    y = spec.y_all.numpy()
    np.save(os.path.join(d, "y.npy"), y.astype(np.float32) if y.dtype.kind == "f" else y.astype(np.int32))
    net = ctx.path(spec.model + ".net")
    with open(net, "w") as f:
        f.write(spec.text)
    w0 = ctx.path("W0.safetensors")
    O.write_safetensors(w0, spec.params)
    return net, d, w0


def device_flags():
    dev = O.oracle_device()
    return ["--device", "cuda", "--jit"] if dev == "jit" else ["--device", dev]


def run_train(ctx, net, data, steps, weights=None, checkpoint=None, log=None, grads=None,
              resume=False, extra=(), timeout=1800):
    cmd = [ctx.ncc, "train", net, "--data", data, "--steps", str(steps), "--no-shuffle"]
    if weights:
        cmd += ["--weights", weights]
    if checkpoint:
        cmd += ["--checkpoint", checkpoint]
    if resume:
        cmd += ["--resume"]
    if log:
        cmd += ["--log", log]
    if grads:
        cmd += ["--save-grads", grads]
    # the variants of the gradient cases (tests/oracle.cmake): extra flags
    # (--cublas), and the emulator's checked mode and fiber order from the
    # environment, which the device line must confirm
    cmd += device_flags() + list(extra) + os.environ.get("NCC_TRAIN_ORACLE_FLAGS", "").split()
    for f in (log, grads) + (() if resume else (checkpoint,)):
        if f and os.path.exists(f):
            os.unlink(f)
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       universal_newlines=True, errors="replace")
    out = (p.stdout + p.stderr).rstrip()
    if len(out) > 4000:
        out = out[:2000] + "\n...\n" + out[-2000:]
    if out:
        print(out)
    if p.returncode < 0:
        raise Failure("ncc train was killed by signal %d" % -p.returncode)
    if p.returncode != 0:
        raise Failure("ncc train exited with status %d" % p.returncode)
    if O.oracle_device() == "emu":
        if os.environ.get("NCC_CHECK") == "1" and "checked" not in out:
            raise Failure("NCC_CHECK=1, but ncc train's device line does not say checked")
        if os.environ.get("NCC_FIBER_ORDER") == "reverse" and "reverse fiber order" not in out:
            raise Failure("NCC_FIBER_ORDER=reverse, but ncc train's device line does not say so")
        so = O.STREAM_ORDERS.get(os.environ.get("NCC_STREAM_ORDER", ""))
        if so and so not in out:
            raise Failure("NCC_STREAM_ORDER=%s, but ncc train's device line does not say so" % os.environ["NCC_STREAM_ORDER"])
    return p


# ---------------------------------------------------------------- comparisons
def check_grad(name, got, ref, rtol=GRAD_RTOL, floor=0.0):
    """The inference oracle's rule: max|err| <= rtol * max(1, max|ref|)
    (or floor where that is larger: see f32_floor)."""
    import numpy as np
    ref = ref.detach().numpy() if hasattr(ref, "detach") else np.asarray(ref)
    if tuple(got.shape) != tuple(ref.shape):
        raise Failure("%s: shape %s, PyTorch's is %s" % (name, tuple(got.shape), tuple(ref.shape)))
    g = got.astype(np.float64)
    if not np.all(np.isfinite(g)):
        raise Failure("%s: %d non-finite values" % (name, int(np.sum(~np.isfinite(g)))))
    err = np.abs(g - ref)
    scale = max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
    tol = max(rtol * scale, floor)
    m = float(err.max()) if err.size else 0.0
    print("  %-40s %-16s max|err| %.3g  tol %.3g  (max|ref| %.4g%s)"
          % (name, tuple(ref.shape), m, tol, float(np.abs(ref).max()) if ref.size else 0.0,
             ", float32 PyTorch's own error x%d" % F32_FACTOR if floor > rtol * scale else ""))
    if m > tol:
        for i in np.argwhere(err > tol)[:5]:
            i = tuple(int(k) for k in i)
            print("    at %s: ncc %.7g, PyTorch %.7g" % (i, g[i], ref[i]))
        return "%s (max|err| %.3g > %.3g)" % (name, m, tol)
    return None


def check_rel(name, got, ref, rtol=TRAIN_RTOL):
    """Within rtol of the tensor's scale: max|err| <= rtol * max|ref|."""
    import numpy as np
    ref = ref.detach().numpy() if hasattr(ref, "detach") else np.asarray(ref, dtype=np.float64)
    if tuple(got.shape) != tuple(ref.shape):
        return "%s: shape %s, PyTorch's is %s" % (name, tuple(got.shape), tuple(ref.shape))
    g = got.astype(np.float64)
    if not np.all(np.isfinite(g)):
        return "%s: %d non-finite values" % (name, int(np.sum(~np.isfinite(g))))
    err = np.abs(g - ref)
    scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-12)
    m = float(err.max()) if err.size else 0.0
    print("  %-40s %-16s max|err| %.3g  tol %.3g" % (name, tuple(ref.shape), m, rtol * scale))
    if m > rtol * scale:
        for i in np.argwhere(err > rtol * scale)[:3]:
            i = tuple(int(k) for k in i)
            print("    at %s: ncc %.7g, PyTorch %.7g" % (i, g[i], ref[i]))
        return "%s (max|err| %.3g > %.3g)" % (name, m, rtol * scale)
    return None


def check_log(log, ref, K):
    rows = read_log(log)
    if len(rows) != K:
        raise Failure("%s: %d rows with a loss, expected %d (one per step)" % (log, len(rows), K))
    bad = []
    for i, r in enumerate(rows):
        loss = float(r["loss"])
        lr = float(r["lr"]) if (r.get("lr") or "").strip() else None
        rl, rr = ref["losses"][i], ref["lrs"][i]
        ok = abs(loss - rl) <= TRAIN_RTOL * max(abs(rl), 1e-6)
        ok_lr = lr is None or abs(lr - rr) <= LR_RTOL * abs(rr)
        print("  step %2d: loss %.7g (PyTorch %.7g)%s  lr %s (PyTorch %.7g)%s"
              % (i + 1, loss, rl, "" if ok else "  <-- differs", r.get("lr"), rr, "" if ok_lr else "  <-- differs"))
        if lr is None:
            bad.append("step %d: no lr" % (i + 1))
        if not ok:
            bad.append("step %d loss %.7g != %.7g" % (i + 1, loss, rl))
        if not ok_lr:
            bad.append("step %d lr %s != %.7g" % (i + 1, r.get("lr"), rr))
    return bad


def check_grads(gfile, spec, ref, floors=None):
    G = read_safetensors(gfile)
    bad = []
    print("gradients (%s) against PyTorch:" % os.path.basename(gfile))
    for k in spec.trainable:
        if k not in G:
            bad.append("%s: no gradient in %s" % (k, gfile))
            continue
        e = check_grad(k, G[k][0], ref["grads"][k], floor=(floors or {}).get(k, 0.0))
        if e:
            bad.append(e)
    extra = sorted(set(G) - set(spec.trainable))
    if extra:
        bad.append("%s holds tensors that are not trainable parameters: %s" % (gfile, ", ".join(extra[:5])))
    return bad


def check_checkpoint(cfile, spec, ref, K, weights=True, opt_state=True, counters=True):
    C = read_safetensors(cfile)
    bad = []
    print("checkpoint %s against PyTorch after %d steps:" % (os.path.basename(cfile), K))
    for k, v in ref["params"].items():
        if k.endswith("num_batches_tracked"):
            if k in C:
                print("  %-40s %s (PyTorch's modules would count %d)" % (k, C[k][0], int(v) + K))
            continue
        if not weights and k in spec.trainable:
            continue
        if k not in C:
            bad.append("%s: missing from the checkpoint" % k)
            continue
        e = check_rel(k, C[k][0], v)
        if e:
            bad.append(e)
    if opt_state:
        for k, v in ref["state"].items():
            if k not in C:
                bad.append("%s: optimizer state missing from the checkpoint" % k)
                continue
            e = check_rel(k, C[k][0], v)
            if e:
                bad.append(e)
    if counters:
        for k, want in (("__step__", K), ("__epoch__", ref["epoch"])):
            if k not in C:
                bad.append("%s missing from the checkpoint" % k)
            elif int(C[k][0].reshape(-1)[0]) != want:
                bad.append("%s = %d, expected %d" % (k, int(C[k][0].reshape(-1)[0]), want))
            else:
                print("  %-40s %d" % (k, want))
        if "__lr__" not in C:
            bad.append("__lr__ missing from the checkpoint")
        else:
            lr = float(C["__lr__"][0].reshape(-1)[0])
            ok = abs(lr - ref["lr"]) <= LR_RTOL * abs(ref["lr"])
            print("  %-40s %.9g (PyTorch %.9g)" % ("__lr__", lr, ref["lr"]))
            if not ok:
                bad.append("__lr__ %.9g != PyTorch's %.9g" % (lr, ref["lr"]))
        sc = ref.get("scaler")
        if sc:   # fp16: the scaler's state, exactly (powers of two)
            for k, want in (("__loss_scale__", sc["scale"]), ("__growth_tracker__", sc["tracker"]),
                            ("__optimizer_step__", sc["opt_step"])):
                if k not in C:
                    bad.append("%s missing from the checkpoint" % k)
                elif float(C[k][0].reshape(-1)[0]) != want:
                    bad.append("%s = %s, GradScaler's algorithm says %s" % (k, C[k][0].reshape(-1)[0], want))
                else:
                    print("  %-40s %g" % (k, want))
    return bad


def finish(bad):
    if bad:
        for b in bad:
            print("MISMATCH " + b)
        raise Failure("%d mismatch%s with PyTorch: %s" % (len(bad), "es" if len(bad) > 1 else "", bad[0]))


# ---------------------------------------------------------------- the case kinds
def prec_flags(spec):
    f = ["--precision=" + spec.prec] if spec.prec else []
    f += ["--gemm-tile=" + spec.tile] if spec.tile else []
    f += spec.gemm
    f += ["-O%d" % spec.opt_level] if spec.opt_level is not None else []
    return f + (["--loss-scale=%r" % float(spec.loss_scale)] if spec.loss_scale else [])


def grad_run(ctx, spec, check_running=True):
    """One step: the loss and every gradient against PyTorch."""
    ref = torch_train(spec, 1)
    net, data, w0 = write_inputs(ctx, spec)
    require_split(ctx, spec, net)
    require_marks(ctx, spec, net)
    G, C, L = ctx.path("G.safetensors"), ctx.path("C.safetensors"), ctx.path("log.csv")
    run_train(ctx, net, data, 1, weights=w0, checkpoint=C, log=L, grads=G, extra=prec_flags(spec))
    bad = check_log(L, ref, 1)
    bad += check_grads(G, spec, ref)
    if check_running and any(k.endswith("running_mean") for k in spec.params):
        bad += check_checkpoint(C, spec, ref, 1, weights=False, opt_state=False, counters=False)
    finish(bad)


# A max pooling whose two largest inputs in a window are this close (relative
# to the larger) is a near-tie.  A GPU's tensor cores sum a convolution in
# their own order, not the emulator's: on the H100 that moved a value by
# 2.2e-5 of it, flipped such a window's argmax and sent the whole gradient to
# its neighbour (fp16_opt_adam and tf32_opt_adam at step 8 with seed 30).  The
# comparison after that step tests the data, not ncc.  At fp32 the GPU runs
# the emulator's order, and only fused multiply-adds differ (a few ulps).
ARGMAX_MARGIN = {"tf32": 1e-4, "fp16": 1e-4, "bf16": 1e-4, None: 1e-6}


def maxpool_near_ties(spec, K):
    """(step, window, relative gap) of every near-tie among the positive
    windows of every max pooling of PyTorch's K steps."""
    import torch.nn.functional as F
    seen, ties, margin = [], [], ARGMAX_MARGIN.get(spec.prec, 1e-4)
    orig = F.max_pool2d

    def mp(x, *a, **k):
        seen.append(x.detach().clone())
        return orig(x, *a, **k)
    F.max_pool2d = mp
    try:
        torch_train(spec, K)
    finally:
        F.max_pool2d = orig
    per_step = max(1, len(seen) // K)
    for i, x in enumerate(seen):
        k = 2   # the pools of these cases: maxpool2d(h, 2)
        n, c, h, w = x.shape
        if h % k or w % k:
            continue
        win = x.reshape(n, c, h // k, k, w // k, k).permute(0, 1, 2, 4, 3, 5).reshape(n, c, h // k, w // k, k * k)
        top = win.topk(2, dim=-1).values
        rel = (top[..., 0] - top[..., 1]) / top[..., 0].abs().clamp_min(1e-30)
        for j in ((rel < margin) & (top[..., 0] > 0) & (top[..., 1] > 0)).nonzero().tolist():
            ties.append((i // per_step + 1, tuple(j), float(rel[tuple(j)])))
    return ties


def require_clear_argmax(spec, K):
    ties = maxpool_near_ties(spec, K)
    if ties:
        s, j, r = ties[0]
        raise Failure("the case's data holds %d max-pooling near-ties (first: step %d, window %s, the two largest "
                      "%.2g apart relative, under %g): a GPU's summation order can flip one; choose another seed"
                      % (len(ties), s, j, r, ARGMAX_MARGIN.get(spec.prec, 1e-4)))


def train_run(ctx, spec, K):
    """K steps: losses and lrs per step, the final checkpoint."""
    require_clear_argmax(spec, K)
    ref = torch_train(spec, K)
    net, data, w0 = write_inputs(ctx, spec)
    require_split(ctx, spec, net)
    C, L = ctx.path("C.safetensors"), ctx.path("log.csv")
    run_train(ctx, net, data, K, weights=w0, checkpoint=C, log=L,
              extra=(["--keep-last"] if spec.keep_last else []) + prec_flags(spec))
    bad = check_log(L, ref, K)
    bad += check_checkpoint(C, spec, ref, K)
    finish(bad)


def resume_run(ctx, spec, k, m):
    """k steps and m more from the checkpoint: bytes equal to k+m unbroken."""
    import shutil
    net, data, w0 = write_inputs(ctx, spec)
    C1, C2, L1, L2 = (ctx.path(f) for f in ("C_split.safetensors", "C_whole.safetensors", "split1.csv", "split2.csv"))
    Lw = ctx.path("whole.csv")
    pf = prec_flags(spec)
    run_train(ctx, net, data, k, weights=w0, checkpoint=C1, log=L1, extra=pf)
    shutil.copyfile(C1, ctx.path("C_after_%d.safetensors" % k))
    # --steps counts from the start of the run (the same command line plus
    # --resume finishes an interrupted run): k + m in all, m of them now
    run_train(ctx, net, data, k + m, checkpoint=C1, log=L2, resume=True, extra=pf)
    run_train(ctx, net, data, k + m, weights=w0, checkpoint=C2, log=Lw, extra=pf)
    a, b = read_safetensors(C1), read_safetensors(C2)
    bad = []
    if set(a) != set(b):
        bad.append("the checkpoints hold different tensors: only resumed %s, only unbroken %s"
                   % (sorted(set(a) - set(b))[:5], sorted(set(b) - set(a))[:5]))
    for n in sorted(set(a) & set(b)):
        if a[n][1] != b[n][1] or a[n][0].dtype != b[n][0].dtype or a[n][0].shape != b[n][0].shape:
            import numpy as np
            d = np.abs(a[n][0].astype(np.float64) - b[n][0].astype(np.float64)).max() if a[n][0].shape == b[n][0].shape else -1
            bad.append("%s differs (max|diff| %.3g)" % (n, d))
    print("resumed and unbroken checkpoints: %d tensors, %d differ" % (len(set(a) & set(b)), len(bad)))
    # the resumed run's losses are the unbroken run's last m (the same batches, the same weights)
    r1, r2, rw = read_log(L1), read_log(L2), read_log(Lw)
    if len(r1) != k or len(r2) != m or len(rw) != k + m:
        bad.append("log rows: %d + %d resumed, %d unbroken; expected %d + %d, %d" % (len(r1), len(r2), len(rw), k, m, k + m))
    else:
        for i, (p, q) in enumerate(zip(r1 + r2, rw)):
            if float(p["loss"]) != float(q["loss"]):
                bad.append("step %d: loss %s resumed, %s unbroken" % (i + 1, p["loss"], q["loss"]))
    # and the unbroken run is PyTorch's
    ref = torch_train(spec, k + m)
    bad += check_log(Lw, ref, k + m)
    bad += check_checkpoint(C2, spec, ref, k + m)
    finish(bad)


# ---------------------------------------------------------------- gradient cases: one per op family
GRAD = {}   # name -> function() -> Spec


def grad_case(name, labels=()):
    def deco(f):
        GRAD[name] = f
        CASES[name] = (lambda ctx: grad_run(ctx, f()), ("grad",) + tuple(labels))
        return f
    return deco


# (N, C, H, W, out, kernel, stride, pad, dilation, groups, bias); a 1x1 conv before
# the tested one makes its data gradient (conv2d_bwd_data) count
CONVS = {
    "k3":        (2, 3, 8, 8, 8, 3, 1, 0, 1, 1, True),
    "s2_p1":     (2, 3, 9, 9, 6, 3, 2, 1, 1, 1, True),
    "k5_p2":     (2, 2, 7, 7, 4, 5, 1, 2, 1, 1, True),
    "k1_s2":     (2, 4, 6, 6, 8, 1, 2, 0, 1, 1, False),
    "dil2":      (2, 3, 11, 11, 4, 3, 1, 2, 2, 1, True),
    "groups2":   (2, 4, 7, 7, 8, 3, 1, 1, 1, 2, True),
    "depthwise": (2, 6, 8, 8, 6, 3, 1, 1, 1, 6, False),
    "dw_s2_mult2": (2, 4, 9, 9, 8, 3, 2, 1, 1, 4, True),
    "asym":      (2, 3, 9, 10, 5, (3, 1), (2, 1), (1, 0), 1, 1, True),
    "nobias":    (2, 5, 6, 6, 7, 3, 1, 1, 1, 1, False),
    "wide":      (2, 8, 6, 6, 32, 3, 1, 1, 1, 1, True),
    # 8 and more channels a group: the gradients run as tiled GEMMs
    # (ir_grad_gemm: conv2d_bwd_data's M is the input channels of a group,
    # conv2d_bwd_weight's the output channels), each attribute once
    "s2_p1_c16": (2, 16, 9, 9, 16, 3, 2, 1, 1, 1, True),
    "k1_s2_c8":  (2, 8, 6, 6, 8, 1, 2, 0, 1, 1, False),
    "dil2_c8":   (2, 8, 11, 11, 8, 3, 1, 2, 2, 1, True),
    "groups2_c16": (2, 16, 7, 7, 16, 3, 1, 1, 1, 2, True),
    "asym_c8":   (2, 8, 9, 10, 12, (3, 1), (2, 1), (1, 0), 1, 1, True),
    # the weight gradients' K (images x output pixels) 4 x 64 x 64 = 16384:
    # long enough to be split (IR_GRAD_SPLIT_MIN_K), 128 ranges (IR_GRAD_SPLITK_MAX)
    "long_k":    (4, 8, 64, 64, 8, 3, 1, 1, 1, 1, True),
}
# At tf32, fp16 and bf16 (PREC_CASES below), stride 1, 8 and more input
# channels, groups 1: the data gradient is a conv2d of dy by the weight with
# in and out swapped and its taps reversed (autodiff's dgrad_as_conv),
# tap-major when the output channels are a multiple of 16, the weight as it
# is at 1x1; padding 0 (the new conv pads by 2), dilation, a kernel of one
# column, 8 and 12 input channels (the new conv's M, less than a tile), 1x1
DGRAD_CONVS = {
    "k3_p0_c16": (2, 16, 8, 8, 16, 3, 1, 0, 1, 1, False),
    "dil2_c16":  (2, 16, 11, 11, 16, 3, 1, 2, 2, 1, True),
    "asym_s1_c16": (2, 12, 9, 10, 16, (3, 1), 1, (1, 0), 1, 1, True),
    "k1_c16":    (2, 16, 6, 6, 24, 1, 1, 0, 1, 1, False),
}


# Gradients a tap a tile.  Weight gradients with tap-major columns
# (ir_wgrad_tap_cols: the tile's BN columns divide the input channels of a
# group, BN 64 by default, fp32's CUDA-core tile too): each tile one tap's
# channels, the padding tested once a K tile.  Data gradients with a
# tap-major K (ir_dgrad_tap_k: more than one tap, and output channels a
# group a multiple of 16; at tf32/fp16/bf16 a stride-1, ungrouped one is a
# conv2d instead): each K tile one tap's channels, the element of dy under it
# found once a tile.  With the padding test and a partial last K tile (K =
# 72); grouped (z), strided and dilated; a kernel of one column without
# padding (no test); a strided 1x1; each with the report's [taps] rows at
# fp32: the weight gradients' (the tested conv's and the 1x1 "pre"'s, C to
# C channels, one tap, the same order) and the data gradient's
TAP_CONVS = {
    "taps_c64":        ((2, 64, 6, 6, 16, 3, 1, 1, 1, 1, True), 2, 1),
    "taps_g2_s2_dil2": ((2, 128, 9, 9, 32, 3, 2, 2, 2, 2, False), 2, 1),
    "taps_k31_p0":     ((2, 64, 8, 7, 16, (3, 1), 1, 0, 1, 1, True), 2, 1),
    # 32 channels: a 64-column tile would hold two taps, so the columns stay
    # (ci, tap) but at a 32-column tile (--gemm-tile=32x32; PREC_CASES); the
    # pre's N, 32 columns, takes a 32-column tile anyway
    "taps_c32":        ((2, 32, 6, 6, 16, 3, 1, 1, 1, 1, True), 1, 1),
    "taps_c128":       ((2, 128, 5, 5, 16, 3, 1, 1, 1, 1, False), 2, 1),
    # a strided 1x1: its weight gradients a tap a tile, its data gradient
    # by phases (ir_dgrad_phases: 8 x 8, 16 output channels), one of 4 with
    # a tap, a K tile a tap's channels
    "taps_k1_s2":      ((2, 32, 8, 8, 16, 1, 2, 0, 1, 1, False), 2, 1),
    # a strided 3x3 of 64 channels to 32: at fp16 and bf16 its data
    # gradient reads the weight transposed once a step (Attrs.wtap), a
    # transpose row more in the report (PREC_CASES); at tf32 it does not
    "taps_s2_c64":     ((2, 64, 9, 9, 32, 3, 2, 1, 1, 1, False), 2, 1),
}
# Strided data gradients by phases (ir_dgrad_phases: dilation 1, output
# channels a group a multiple of 16, 8 or more input channels a group):
# grid axis z runs dx's phases (h % sh, w % sw), each block a GEMM over the
# taps that reach its phase.  A 3x3 at stride 2 (phases of 1, 2, 2 and 4 taps);
# a 2x2 (one tap each, each another); a 5x5 (up to 3 x 3 taps, a phase's
# tap from its index by the multiply-shift); a (3, 1) kernel at stride
# (2, 1) and a (1, 3) at (1, 2) (2 phases, taps in a column, in a row); K
# long enough to split (4 taps of 1024 channels: 64 ranges of 64, those
# past a phase's K empty, their partial sums zeros); odd sides; groups.  (spec,
# weight gradients' [taps] rows, data gradients' [taps] rows, data
# gradients' [phases] rows)
PHASE_CONVS = {
    "phases_s2_c64":   ((2, 64, 8, 8, 32, 3, 2, 1, 1, 1, False), 2, 1, 1),
    "phases_k2_s2":    ((2, 16, 8, 8, 16, 2, 2, 0, 1, 1, True), 1, 1, 1),
    "phases_k5_s2":    ((2, 16, 8, 8, 16, 5, 2, 2, 1, 1, True), 1, 1, 1),
    "phases_k31_s21":  ((2, 16, 8, 6, 16, (3, 1), (2, 1), (1, 0), 1, 1, True), 1, 1, 1),
    "phases_k13_s12":  ((2, 16, 6, 8, 16, (1, 3), (1, 2), (0, 1), 1, 1, False), 1, 1, 1),
    "phases_split":    ((2, 16, 4, 4, 1024, 3, 2, 1, 1, 1, False), 1, 1, 1),
    # sides the stride does not divide: the later phases' last row or
    # column stands for no pixel (stores nothing); 7 x 9, and a 1x1 on 7 x 8
    "phases_odd":      ((2, 16, 7, 9, 16, 3, 2, 1, 1, 1, True), 1, 1, 1),
    "phases_k1_odd":   ((2, 32, 7, 8, 16, 1, 2, 0, 1, 1, False), 2, 1, 1),
    # two groups of 16 channels to 16: grid axis z the groups' phases
    "phases_g2":       ((2, 32, 8, 7, 32, 3, 2, 1, 1, 2, True), 1, 1, 1),
    # stride 3 (9 phases, a 5x5's of 1 to 4 taps), and strides (2, 3) on a
    # (3, 2) kernel (6 phases, two of them with no tap)
    "phases_s3":       ((2, 16, 5, 9, 48, 5, 3, (2, 0), 1, 1, True), 1, 1, 1),
    "phases_s23":      ((2, 16, 5, 10, 32, (3, 2), (2, 3), (2, 0), 1, 1, True), 1, 1, 1),
}


def conv_spec(v, seed=2, gap=False):
    if v in TAP_CONVS:
        N, C, H, W, out, k, s, p, d, g, bias = TAP_CONVS[v][0]
    elif v in PHASE_CONVS:
        N, C, H, W, out, k, s, p, d, g, bias = PHASE_CONVS[v][0]
    else:
        N, C, H, W, out, k, s, p, d, g, bias = CONVS[v] if v in CONVS else DGRAD_CONVS[v]
    net = Net(N, (C, H, W), seed=seed)
    h = net.conv2d(net.x, C, 1, name="pre")
    h = net.conv2d(h, out, k, s, p, d, g, bias, name="conv")
    net.head(net.gap(h) if gap else h)
    spec = spec_of("grad_conv_" + v, net)
    if v in TAP_CONVS:
        spec.marks = (("conv2d_bwd_weight", "taps", TAP_CONVS[v][1]), ("conv2d_bwd_data", "taps", TAP_CONVS[v][2]))
    if v in PHASE_CONVS:
        _, nw, nd, npd = PHASE_CONVS[v]
        spec.marks = (("conv2d_bwd_weight", "taps", nw), ("conv2d_bwd_data", "taps", nd),
                      ("conv2d_bwd_data", "phases", npd))
    return spec


def wtap_at(spec, n):
    """spec (taps_s2_c64) at tf32, fp16 or bf16: the [taps] rows of fp32, and
    n transposes a step: at fp16 and bf16 two, the strided data gradient's
    weight (Attrs.wtap: [ci, kh, kw, co]) and the forward's tap-major copy;
    at tf32 none"""
    spec.marks = spec.marks + (("transpose", None, n),)
    return spec


def phases_at(spec, nw):
    """spec (PHASE_CONVS) with nw weight gradients' [taps] rows (at another
    precision than fp32's), its data gradient's [taps] and [phases] rows as
    they were"""
    spec.marks = (("conv2d_bwd_weight", "taps", nw),) + spec.marks[1:]
    return spec


def taps_at(spec, nw, nd):
    """spec's [taps] rows: nw weight gradients', nd data gradients' (at
    another precision or tile than fp32's default)"""
    spec.marks = (("conv2d_bwd_weight", "taps", nw), ("conv2d_bwd_data", "taps", nd))
    return spec


for _v in list(CONVS) + list(TAP_CONVS) + list(PHASE_CONVS):
    grad_case("grad_conv_" + _v, ["conv"])(lambda v=_v: conv_spec(v))


# Split reductions (ir_reduce_split): 4 channels of 127 x 127 at batch 2, a
# sum of 32 258 elements an output, few outputs.  The bias gradients
# (sum_to) and the depthwise and 1x1 weight gradients (no GEMM: fewer than
# 8 channels) split into 3 ranges of 10 753, the last one element shorter.
@grad_case("grad_conv_split_sums", ["conv"])
def _split_sums():
    net = Net(2, (4, 127, 127), seed=8)
    h = net.conv2d(net.x, 4, 1, name="pre")
    h = net.conv2d(h, 4, 3, 1, 1, 1, 4, True, name="conv")
    net.head(net.gap(h))
    return split_at_least(spec_of("grad_conv_split_sums", net), 3, ("sum_to@pre", "sum_to@conv", "conv2d_bwd_weight"))


# The same with a batchnorm at -O0: bn_bwd_weight in a kernel of its own
# (its final scale, acc * rstd, applied to each range's sum), not a side
# node of bn_bwd_data
@grad_case("grad_batchnorm2d_split_o0", ["bn"])
def _bn_split():
    net = Net(2, (3, 127, 127), seed=9)
    h = net.batchnorm2d(net.conv2d(net.x, 4, 3, pad=1, name="conv"), name="bn")
    net.head(net.gap(net.act("relu", h)))
    spec = spec_of("grad_batchnorm2d_split_o0", net)
    spec.opt_level = 0
    return split_at_least(spec, 3, ("sum_to@conv", "bn_bwd_weight", "conv2d_bwd_weight", "bn_stats",
                                    "bn_bwd_data"))


# The batchnorm's own kernels split (ir_bn_split): bn_stats's ranges
# combined by Chan's formula, bn_bwd_data's sums added in every block, the
# weight and bias gradients (side nodes at the default -O) written by the
# first range's block.
@grad_case("grad_batchnorm2d_split", ["bn"])
def _bn_split_o2():
    net = Net(2, (3, 127, 127), seed=10)
    net.x_all[1] += 3.0   # the images' means apart: the ranges' means differ, Chan's correction matters
    h = net.batchnorm2d(net.conv2d(net.x, 4, 3, pad=1, bias=False, name="conv"), name="bn")
    net.head(net.gap(net.act("relu", h)))
    return split_at_least(spec_of("grad_batchnorm2d_split", net), 3, ("bn_stats", "bn_bwd_data"))


@grad_case("grad_linear")
def _linear():
    net = Net(4, (12,), seed=3)
    h = net.linear(net.x, 16, name="fc1")
    h = net.linear(h, 10, bias=False, name="fc2")
    net.head(h)
    return spec_of("grad_linear", net)


@grad_case("grad_linear_image")
def _linear_image():
    # flatten of an image into a linear layer (lenet's pattern)
    net = Net(3, (2, 4, 4), seed=3)
    net.head(net.linear(net.flatten(net.x), 9, name="fc1"))
    return spec_of("grad_linear_image", net)


def param_tensor(net, shape, tag):
    """A parameter-derived tensor of any shape, with no batch axis:
    linear over the batch of a linear of the input (the language has no bare
    parameters), so that a gradient reaches the smaller side of a broadcast."""
    n = 1
    for d in shape:
        n *= d
    h = net.linear(net.flatten(net.x) if len(net.x.shape) > 2 else net.x, n, name=tag + "a")   # [N, n]
    h = net.linear(net.transpose(h, (1, 0)), 1, name=tag + "b", gain=1.0)                       # [n, 1]
    return net.reshape(h, shape)


MATMULS = {
    "2d": ((4, 6), (6, 5)),
    "batched": ((4, 3, 6), (4, 6, 5)),
    "bcast_2d": ((4, 3, 6), (6, 5)),
    "bcast_batch": ((4, 1, 3, 6), (2, 6, 5)),
}


def matmul_spec(v):
    sa, sb = MATMULS[v]
    net = Net(4, (10,), seed=4)

    def operand(shape, tag):
        if shape[0] == 4:       # the batch axis: from the input
            n = 1
            for d in shape[1:]:
                n *= d
            return net.reshape(net.linear(net.x, n, name=tag), shape)
        return param_tensor(net, shape, tag)
    h = net.matmul(operand(sa, "qa"), operand(sb, "kb"))
    net.head(net.reshape(h, (4, -1)))
    return spec_of("grad_matmul_" + v, net)


for _v in MATMULS:
    grad_case("grad_matmul_" + _v, ["matmul"])(lambda v=_v: matmul_spec(v))


@grad_case("grad_batchnorm2d", ["bn"])
def _bn():
    net = Net(4, (3, 6, 6), seed=5)
    h = net.conv2d(net.x, 6, 3, pad=1, name="conv")
    h = net.batchnorm2d(h, name="bn")
    net.head(net.act("relu", h))
    return spec_of("grad_batchnorm2d", net)


@grad_case("grad_batchnorm2d_eps_momentum", ["bn"])
def _bn2():
    net = Net(3, (2, 5, 4), seed=5)
    h = net.conv2d(net.x, 5, 1, bias=False, name="conv")
    h = net.batchnorm2d(h, eps=1e-2, momentum=0.3, name="bn")
    h = net.batchnorm2d(net.conv2d(h, 4, 3, pad=1, bias=False, name="conv2"), name="bn2")
    net.head(h)
    return spec_of("grad_batchnorm2d_eps_momentum", net)


@grad_case("grad_layernorm", ["norm"])
def _ln():
    net = Net(4, (12,), seed=6)
    h = net.layernorm(net.linear(net.x, 16, name="fc0"), name="ln")
    net.head(h)
    return spec_of("grad_layernorm", net)


@grad_case("grad_layernorm_3d", ["norm"])
def _ln3():
    net = Net(2, (12,), seed=6)
    h = net.reshape(net.linear(net.x, 24, name="fc0"), (2, 3, 8))
    h = net.layernorm(h, eps=1e-3, name="ln")
    net.head(h)
    return spec_of("grad_layernorm_3d", net)


# 16 384 rows of 4: layernorm_bwd_weight's rows' statistics (a first
# kernel, a block a row) and its sums split into 2 ranges
# (ir_reduce_split), both in the workspace
@grad_case("grad_layernorm_rows", ["norm"])
def _ln_rows():
    net = Net(2, (8192, 4), seed=6)
    h = net.layernorm(net.x, name="ln")
    net.head(net.flatten(h))
    return split_at_least(spec_of("grad_layernorm_rows", net), 2, ("layernorm_bwd_weight",))


ACTS = {"relu": 2.0, "relu6": 12.0, "sigmoid": 2.0, "tanh": 2.0, "gelu": 2.0, "silu": 2.0, "hardswish": 6.0,
        "leaky_relu": 2.0}


def act_spec(name, a, slope=None):
    net = Net(2, (3, 5, 5), seed=7)
    h = net.conv2d(net.x, 6, 3, pad=1, name="conv", gain=ACTS[a])
    h = net.act(a, h, slope)
    net.head(h)
    return spec_of(name, net)


for _a in ACTS:
    grad_case("grad_act_" + _a, ["act"])(lambda a=_a: act_spec("grad_act_" + a, a))
grad_case("grad_act_leaky_relu_slope", ["act"])(lambda: act_spec("grad_act_leaky_relu_slope", "leaky_relu", 0.2))


POOLS = {   # kind, (k, stride, pad)
    "maxpool2d_k2": ("maxpool2d", (2, None, None)),
    "maxpool2d_k3_s2_p1": ("maxpool2d", (3, 2, 1)),
    "maxpool2d_k3_s1": ("maxpool2d", (3, 1, None)),
    "maxpool2d_k3_d2": ("maxpool2d", (3, 1, 1, 2)),
    "avgpool2d_k2": ("avgpool2d", (2, None, None)),
    "avgpool2d_k3_s2_p1": ("avgpool2d", (3, 2, 1)),
    "avgpool2d_asym": ("avgpool2d", ((2, 3), (2, 1), (1, 1))),
}


def pool_spec(v):
    kind, args = POOLS[v]
    net = Net(2, (3, 9, 9), seed=8)
    h = net.conv2d(net.x, 4, 3, pad=1, name="conv")
    net.head(net.pool(kind, h, *args))
    spec = spec_of("grad_" + v, net)
    if kind == "maxpool2d":   # no window tiling 9 x 9: a block a band of rows (ir_pool_band_rows)
        spec.marks = (("maxpool2d_bwd", "per-band", 1),)
    return spec


for _v in POOLS:
    grad_case("grad_" + _v, ["pool"])(lambda v=_v: pool_spec(v))


# Windows that tile the input (ir_pool_tiles): the gradient a thread a
# window.  2 x 2 on 8 x 12 after a relu (its gradient fused into the
# kernel), then 2 x 3 of stride (2, 3) on 4 x 6; the 9 x 9 cases above run
# a block a band of rows.  The report must mark both [per-window].
@grad_case("grad_maxpool2d_tiles", ["pool"])
def _pool_tiles():
    net = Net(2, (3, 8, 12), seed=8)
    h = net.pool("maxpool2d", net.act("relu", net.conv2d(net.x, 4, 3, pad=1, name="conv")), 2)
    h = net.pool("maxpool2d", net.conv2d(h, 4, 3, pad=1, name="conv2"), (2, 3), (2, 3))
    net.head(h)
    spec = spec_of("grad_maxpool2d_tiles", net)
    spec.marks = (("maxpool2d_bwd", "per-window", 2),)
    return spec


@grad_case("grad_global_avgpool2d", ["pool"])
def _gap():
    net = Net(2, (3, 7, 6), seed=8)
    net.head(net.gap(net.conv2d(net.x, 8, 3, pad=1, name="conv")))
    return spec_of("grad_global_avgpool2d", net)


def bcast_spec(name, build):
    net = Net(2, (3, 4, 5), seed=9)
    net.head(build(net))
    return spec_of(name, net)


def A(n):
    return n.conv2d(n.x, 4, 3, pad=1, name="ca")       # [2, 4, 4, 5]


def positive(net, t):
    """1.5 + sigmoid(t): a denominator in (1.5, 2.5)."""
    return net.binop("+", 1.5, net.act("sigmoid", t))


BINOPS = {
    # residual add: the same shapes
    "add_same": lambda n: n.call2("add", A(n), n.conv2d(n.x, 4, 1, name="cb")),
    # [2,4,4,5] op [4,1,1]: the per-channel side sums over N, H, W
    "add_bcast_channel": lambda n: n.call2("add", A(n), param_tensor(n, (4, 1, 1), "b")),
    "sub_bcast_last": lambda n: n.call2("sub", A(n), param_tensor(n, (5,), "b")),
    "mul_bcast_channel": lambda n: n.call2("mul", A(n), param_tensor(n, (1, 4, 1, 1), "b")),
    "mul_bcast_nc11": lambda n: n.call2("mul", A(n), n.gap(n.conv2d(n.x, 4, 1, name="cb"))),
    "div_bcast": lambda n: n.call2("div", A(n), positive(n, param_tensor(n, (4, 1, 5), "b"))),
    "div_same": lambda n: n.call2("div", positive(n, n.conv2d(n.x, 4, 1, name="cb")), positive(n, A(n))),
    # both sides broadcast: [2,1,4,5] op [4,1,1] -> [2,4,4,5]
    "add_bcast_both": lambda n: n.call2("add", n.conv2d(n.x, 1, 3, pad=1, name="cb"), param_tensor(n, (4, 1, 1), "b")),
    "mul_bcast_both": lambda n: n.call2("mul", n.conv2d(n.x, 1, 3, pad=1, name="cb"), param_tensor(n, (4, 1, 5), "b")),
    # numbers on either side, and the operators
    "scalars": lambda n: n.binop("-", 1.0, n.binop("/", n.binop("*", n.binop("+", A(n), 0.5), 3.0), 4.0)),
    "ops": lambda n: ops_expr(n, A(n)),
}


def ops_expr(n, a):
    """(a - b) * a / (1.5 + sigmoid(c)): a value used twice, operators between tensors."""
    return n.binop("/", n.binop("*", n.binop("-", a, param_tensor(n, (4, 1, 1), "b")), a),
                   positive(n, n.conv2d(n.x, 4, 1, name="cb")))
for _v in BINOPS:
    grad_case("grad_" + _v, ["binary"])(lambda v=_v: bcast_spec("grad_" + v, BINOPS[v]))


def concat_spec(name, axis, sizes):
    net = Net(2, (3, 6, 6), seed=10)
    hs = []
    for i, c in enumerate(sizes):
        hs.append(net.conv2d(net.x, c, 3, pad=1, name="c%d" % i))
    net.head(net.concat(hs, axis))
    return spec_of(name, net)


grad_case("grad_concat_axis1", ["move"])(lambda: concat_spec("grad_concat_axis1", 1, (3, 5)))
grad_case("grad_concat_axis2_three", ["move"])(lambda: concat_spec("grad_concat_axis2_three", 2, (2, 2, 2)))
grad_case("grad_concat_axis_last", ["move"])(lambda: concat_spec("grad_concat_axis_last", -1, (4, 4)))


@grad_case("grad_shape_ops", ["shape"])
def _shape():
    # reshape, transpose (4-D and 2-D perms), flatten between parameter layers
    net = Net(2, (3, 4, 5), seed=11)
    h = net.conv2d(net.x, 6, 3, pad=1, name="conv")              # [2, 6, 4, 5]
    h = net.transpose(h, (0, 2, 3, 1))                           # [2, 4, 5, 6]
    h = net.reshape(h, (2, 20, 6))
    h = net.linear(net.reshape(h, (40, 6)), 7, name="mid")       # [40, 7]
    h = net.transpose(net.reshape(h, (2, 20, 7)), (0, 2, 1))     # [2, 7, 20]
    net.head(net.flatten(h))
    return spec_of("grad_shape_ops", net)


@grad_case("grad_softmax", ["softmax"])
def _softmax():
    net = Net(4, (10,), seed=12)
    h = net.softmax("softmax", net.linear(net.x, 8, name="fc0", gain=4.0))
    net.head(h)
    return spec_of("grad_softmax", net)


@grad_case("grad_softmax_axis1", ["softmax"])
def _softmax1():
    net = Net(2, (3, 4, 4), seed=12)
    h = net.softmax("softmax", net.conv2d(net.x, 5, 3, pad=1, name="conv", gain=4.0), axis=1)
    net.head(h)
    return spec_of("grad_softmax_axis1", net)


@grad_case("grad_log_softmax_nll", ["softmax", "loss"])
def _logsoftmax():
    net = Net(4, (10,), seed=13)
    h = net.linear(net.x, 12, name="fc0")
    logp = net.softmax("log_softmax", net.linear(h, 6, name="fc", gain=1.0))
    net.loss = net.nll_loss(logp)
    return spec_of("grad_log_softmax_nll", net)


@grad_case("grad_log_softmax_axis1", ["softmax"])
def _logsoftmax1():
    net = Net(2, (3, 4, 4), seed=13)
    h = net.softmax("log_softmax", net.conv2d(net.x, 5, 3, pad=1, name="conv", gain=4.0), axis=1)
    net.head(h)
    return spec_of("grad_log_softmax_axis1", net)


@grad_case("grad_cross_entropy", ["loss"])
def _ce():
    net = Net(6, (10,), classes=20, seed=14)
    net.loss = net.cross_entropy(net.linear(net.x, 20, name="fc", gain=4.0))
    return spec_of("grad_cross_entropy", net)


@grad_case("grad_mse_loss", ["loss"])
def _mse():
    net = Net(4, (8,), y_float=(3,), seed=15)
    h = net.linear(net.act("tanh", net.linear(net.x, 6, name="fc0")), 3, name="fc1")
    net.loss = net.mse_loss(h, net.y)
    return spec_of("grad_mse_loss", net)


@grad_case("grad_loss_sum", ["loss"])
def _loss_sum():
    # minimize a sum of losses: ce + 0.5 * mse (the mse against the input)
    net = Net(4, (6,), classes=6, seed=16)
    logits = net.linear(net.act("gelu", net.linear(net.x, 8, name="fc0")), 6, name="fc1")
    ce = net.cross_entropy(logits)
    mse = net.mse_loss(logits, net.x)
    net.loss = net.binop("+", ce, net.binop("*", mse, 0.5))
    return spec_of("grad_loss_sum", net)


@grad_case("grad_dropout_p0", ["dropout"])
def _dropout0():
    net = Net(2, (3, 5, 5), seed=17)
    h = net.dropout(net.conv2d(net.x, 4, 3, pad=1, name="conv"), 0.0, two_d=True)
    h = net.dropout(net.act("relu", net.linear(net.flatten(h), 12, name="fc1")), 0.0)
    net.head(h)
    return spec_of("grad_dropout_p0", net)


@grad_case("grad_tour", ["model"])
def _tour():
    # docs/language.md's tour model, every family at once (without the mse branch)
    net = Net(2, (4, 8, 8), classes=6, seed=18)
    c = net.conv2d(net.x, 8, (3, 1), stride=(2, 1), pad=(1, 0), groups=2, bias=False, name="conv")
    c = net.act("hardswish", net.batchnorm2d(c, eps=1e-3, name="bn"))
    p = net.pool("maxpool2d", c, 2, 1)
    g = net.gap(net.concat([net.pool("avgpool2d", p, 2), net.pool("avgpool2d", p, 2)], 1))
    f = net.layernorm(net.flatten(g), name="ln")
    q = net.reshape(f, (2, 4, -1))
    att = net.softmax("softmax", net.binop("/", net.matmul(q, net.transpose(q, (0, 2, 1))), 2.0))
    mix = net.flatten(net.matmul(att, q))
    net.loss = net.cross_entropy(net.linear(net.act("gelu", mix), 6, name="head", gain=1.0))
    return spec_of("grad_tour", net)


# ---------------------------------------------------------------- optimizer cases
def small_cnn(name, opt, samples=12, batch=4, seed=30, partial=False):
    """conv-bn-relu-pool, conv-bn-relu, global pool, linear: 3 steps per epoch.
    The convolutions before batchnorm have no bias: its gradient is zero up
    to rounding, and Adam would turn rounding noise into full-size steps."""
    net = Net(batch, (3, 8, 8), samples=samples, seed=seed, partial=partial)
    h = net.act("relu", net.batchnorm2d(net.conv2d(net.x, 8, 3, pad=1, bias=False, name="conv1"), name="bn1"))
    h = net.pool("maxpool2d", h, 2)
    h = net.act("relu", net.batchnorm2d(net.conv2d(h, 12, 3, pad=1, bias=False, name="conv2"), name="bn2"))
    h = net.linear(net.flatten(net.gap(h)), 16, name="fc1")
    net.head(net.act("relu", h), name="fc2")
    net.opt = opt
    return spec_of(name, net)


OPTS = {   # name: (Opt, K)
    "opt_sgd": (Opt("sgd", lr=0.1), 6),
    "opt_sgd_momentum": (Opt("sgd", lr=0.05, momentum=0.9), 8),
    "opt_sgd_nesterov_wd": (Opt("sgd", lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True), 8),
    "opt_sgd_step": (Opt("sgd", ("step", {"every": 2, "gamma": 0.5}), lr=0.1, momentum=0.5), 15),
    "opt_sgd_cosine": (Opt("sgd", ("cosine", {"total": 5}), lr=0.1, momentum=0.9, weight_decay=1e-3), 15),
    "opt_adam": (Opt("adam", lr=2e-3), 8),
    "opt_adam_wd": (Opt("adam", lr=2e-3, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.01), 8),
    "opt_adam_cosine": (Opt("adam", ("cosine", {"total": 6}), lr=3e-3), 18),
    "opt_adamw": (Opt("adamw", lr=2e-3, weight_decay=0.05), 8),
    "opt_adamw_step": (Opt("adamw", ("step", {"every": 1, "gamma": 0.7}), lr=3e-3, weight_decay=0.1), 12),
}
TRAIN = {}     # name -> (function() -> Spec, K)
for _n, (_o, _k) in OPTS.items():
    TRAIN[_n] = (lambda n=_n, o=_o: small_cnn(n, o), _k)
    CASES[_n] = (lambda ctx, n=_n: train_run(ctx, TRAIN[n][0](), TRAIN[n][1]), ("optim",))


# ---------------------------------------------------------------- the last, partial batch
# --keep-last: 10 samples in batches of 4 are steps of 4, 4 and 2 rows (the
# model compiled for 4; M_train_step_io_batch on 2).  Batchnorm's statistics
# (and the running variance's n / (n - 1)), the loss's mean and every
# gradient cover the step's rows alone, as in PyTorch with drop_last=False.
def keep_last_spec(name, opt):
    s = small_cnn(name, opt, samples=10, batch=4, seed=31, partial=True)
    s.keep_last = True
    return s


# The same with the batchnorm's kernels split into 3 ranges of 10 753 of
# a channel's 2 x 127 x 127 elements: the last step's one image is 16 129,
# so its second range ends early and its third is empty
def keep_last_split_spec(name, opt):
    net = Net(2, (3, 127, 127), samples=3, seed=32, partial=True)
    net.x_all[1] += 3.0
    h = net.batchnorm2d(net.conv2d(net.x, 4, 3, pad=1, bias=False, name="conv"), name="bn")
    net.head(net.gap(net.act("relu", h)))
    net.opt = opt
    s = split_at_least(spec_of(name, net), 3, ("bn_stats", "bn_bwd_data"))
    s.keep_last = True
    return s


TRAIN["keep_last_split"] = (lambda: keep_last_split_spec("keep_last_split", Opt("sgd", lr=0.1, momentum=0.9)), 4)
CASES["keep_last_split"] = (lambda ctx: train_run(ctx, TRAIN["keep_last_split"][0](), 4), ("optim", "batch", "bn"))

for _n, _o, _k in (("keep_last_sgd", Opt("sgd", lr=0.1, momentum=0.9), 6),
                   ("keep_last_adam", Opt("adam", ("step", {"every": 1, "gamma": 0.5}), lr=2e-3), 6)):
    TRAIN[_n] = (lambda n=_n, o=_o: keep_last_spec(n, o), _k)
    CASES[_n] = (lambda ctx, n=_n: train_run(ctx, TRAIN[n][0](), TRAIN[n][1]), ("optim", "batch"))


# ---------------------------------------------------------------- resume
RESUME = {   # name: (Opt, k, m)
    "resume_sgd_epoch": (Opt("sgd", ("step", {"every": 2, "gamma": 0.5}), lr=0.1, momentum=0.9,
                             weight_decay=1e-3), 6, 5),
    "resume_adam_midepoch": (Opt("adam", ("cosine", {"total": 5}), lr=3e-3), 4, 7),
    "resume_adamw_midepoch": (Opt("adamw", lr=2e-3, weight_decay=0.05), 2, 4),
}
for _n, (_o, _k, _m) in RESUME.items():
    TRAIN[_n] = (lambda n=_n, o=_o: small_cnn(n, o), _k + _m)
    CASES[_n] = (lambda ctx, n=_n: resume_run(ctx, TRAIN[n][0](), RESUME[n][1], RESUME[n][2]), ("resume",))


# ---------------------------------------------------------------- dropout with p > 0
def dropout_spec(two_d, p):
    """A model whose last layer's weight gradient shows the dropout mask: with
    batch 1, a column (dropout) or a channel's columns (dropout2d) of the
    gradient of fc.weight is zero exactly where the unit was dropped."""
    if two_d:
        net = Net(1, (3, 5, 5), seed=40)
        h = net.conv2d(net.x, 64, 3, pad=1, name="conv")
        mark = len(net.steps)
        h = net.dropout(h, 0.0, two_d=True)
    else:
        net = Net(1, (16,), seed=40)
        h = net.linear(net.x, 256, name="fc0")
        mark = len(net.steps)
        h = net.dropout(h, 0.0)
    net.head(h)
    name = "dropout2d_mask" if two_d else "dropout_mask"
    # the text says p; the torch side gets the mask later (masked_spec)
    net.lines[mark] = net.lines[mark].replace("0.0)", "%s)" % net_number(p))
    return spec_of(name, net), mark


def masked_spec(spec, mark, mask, p):
    """spec with the dropout step of the forward replaced by mask/(1-p)."""
    import torch
    m = torch.as_tensor(mask, dtype=torch.float64)
    owner = spec.net
    steps = list(owner.steps)
    v, _, names = steps[mark]
    if m.dim() == 1 and len(owner.x.shape) == 4:    # dropout2d: one value per (n, c)
        m = m.reshape(1, -1, 1, 1)
    steps[mark] = (v, lambda P, a: a * m.to(a.dtype) / (1 - p), names)

    def forward(P, xb, yb):
        env = {"x": xb, "y": yb}
        for vv, fn, nn in steps:
            env[vv] = fn(P, *[env[n] for n in nn])
        return env[owner.loss.name]
    s = copy.copy(spec)
    s.forward = forward
    return s


def dropout_run(ctx, two_d, p):
    import numpy as np
    spec, mark = dropout_spec(two_d, p)
    net, data, w0 = write_inputs(ctx, spec)
    runs = {}
    for tag, seed_ in (("a", 1), ("b", 1), ("c", 2)):
        G, L = ctx.path("G_%s.safetensors" % tag), ctx.path("log_%s.csv" % tag)
        run_train(ctx, net, data, 1, weights=w0, log=L, grads=G, extra=["--seed", str(seed_)])
        runs[tag] = (read_safetensors(G), read_log(L))
    bad = []
    ga, gb, gc = runs["a"][0], runs["b"][0], runs["c"][0]
    same = all(ga[k][1] == gb[k][1] for k in ga) and set(ga) == set(gb)
    print("same seed twice: gradients %s" % ("bit-identical" if same else "DIFFER"))
    if not same:
        bad.append("two runs with --seed 1 gave different gradients")
    if "fc.weight" not in ga or "fc.weight" not in gc:
        finish(bad + ["no fc.weight gradient"])
    G = ga["fc.weight"][0]                     # [classes, units (x H*W)]
    units = 64 if two_d else 256
    cols = np.abs(G).reshape(G.shape[0], units, -1)
    mask = (cols.max(axis=(0, 2)) > 0).astype(np.float64)
    Gc = gc["fc.weight"][0]
    mask_c = (np.abs(Gc).reshape(Gc.shape[0], units, -1).max(axis=(0, 2)) > 0)
    kept = mask.mean()
    print("mask read from the gradient: %d of %d units kept (%.3f; expected %.3f); seed 2 keeps %d, "
          "%d units differ from seed 1" % (mask.sum(), units, kept, 1 - p, mask_c.sum(), int((mask_c != (mask > 0)).sum())))
    if (mask_c == (mask > 0)).all():
        bad.append("--seed 2 gave the same mask as --seed 1")
    # binomial(units, 1-p): 5 standard deviations
    sd = (p * (1 - p) / units) ** 0.5
    if abs(kept - (1 - p)) > 5 * sd:
        bad.append("kept %.3f of the units, expected %.3f +- %.3f" % (kept, 1 - p, 5 * sd))
    ref = torch_train(masked_spec(spec, mark, mask, p), 1)
    bad += check_log(ctx.path("log_a.csv"), ref, 1)
    print("gradients against PyTorch with that mask:")
    for k in spec.trainable:
        e = check_grad(k, ga[k][0], ref["grads"][k]) if k in ga else "%s: no gradient" % k
        if e:
            bad.append(e)
    finish(bad)


CASES["dropout_mask"] = (lambda ctx: dropout_run(ctx, False, 0.5), ("dropout",))
CASES["dropout2d_mask"] = (lambda ctx: dropout_run(ctx, True, 0.3), ("dropout",))


# ---------------------------------------------------------------- example models
def example_text(kind, opt, model):
    """examples/KIND.net renamed MODEL, with its train block replaced by
    opt's, labels and a loss added where the file has none, and every
    dropout's p set to 0."""
    path = os.path.join(EXAMPLES, kind + ".net")
    if not os.path.exists(path):
        raise Failure("%s does not exist" % path)
    src = open(path).read()
    src = re.sub(r"^train\s*\{.*?^\}\s*$", "", src, flags=re.S | re.M)
    src = re.sub(r"^model\s+\S+", "model " + model, src, count=1, flags=re.M)
    lines = []
    for ln in src.split("\n"):
        if "dropout" in ln and not ln.lstrip().startswith("#"):
            ln = re.sub(r",\s*(p\s*=\s*)?0?\.[0-9]+\)", ", 0.0)", ln)     # p < 1: not a pool's 2
        lines.append(ln)
    src = "\n".join(lines).rstrip() + "\n"
    if not re.search(r"^input\s+y\s*:", src, re.M):
        src += "input y: i32[N]\n"
    if not re.search(r"^loss\s*=", src, re.M):
        src += "loss = cross_entropy(logits, y)\n"
    return src + opt.block("loss")


def example_spec(name, kind, batch, size, in_ch=3, samples=None, opt=None, seed=20, scale_logits=True):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    O.seed(seed)
    m = O.build_module(kind, size=size)
    O.randomize_bn(m)
    for mod in m.modules():
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
    samples = samples or batch
    classes = [mod for mod in m.modules() if isinstance(mod, nn.Linear)][-1].out_features
    x_all = O.as64(O.rand(samples, in_ch, size, size))
    y_all = torch.randint(0, classes, (samples,))
    # logits of about 4 at most (as the inference oracle does): gradients of a
    # size the tolerance means something for
    last = [mod for mod in m.modules() if isinstance(mod, nn.Linear)][-1]
    if scale_logits:
        with torch.no_grad():
            k = 4.0 / float(copy.deepcopy(m).double().train()(x_all[:batch]).abs().max())
            last.weight.mul_(k)
            last.bias.mul_(k)
    sd = {k: (O.as64(v) if v.is_floating_point() else v.clone()) for k, v in m.state_dict().items()}
    md = m.double().train()
    trainable = [k for k, _ in md.named_parameters()]

    def forward(P, xb, yb):
        from torch.nn.utils import stateless
        return F.cross_entropy(stateless.functional_call(md, P, (xb,)), yb)
    opt = opt or Opt("sgd", lr=0.01)
    text = example_text(kind, opt, name)
    return Spec(name, text, sd, trainable, forward, x_all, y_all, batch, opt)


EXAMPLE_CASES = {   # name: (kind, batch, size, in_ch, sets, labels)
    "ex_lenet": ("lenet", 4, 28, 1, ["N=4"], ["model"]),
    "ex_mlp": ("mlp", 4, 28, 1, ["N=4"], ["model"]),
    "ex_resnet18": ("resnet18", 4, 32, 3, ["N=4", "S=32"], ["model"]),
    "ex_mobilenet_v2": ("mobilenet_v2", 4, 64, 3, ["N=4", "S=64"], ["model"]),
    "ex_vgg11": ("vgg11", 2, 32, 3, ["N=2", "S=32"], ["model"]),
    "ex_resnet50": ("resnet50", 2, 64, 3, ["N=2", "S=64"], ["model", "slow"]),
    "ex_vgg16": ("vgg16", 2, 32, 3, ["N=2", "S=32"], ["model", "slow"]),
    "ex_vgg19": ("vgg19", 2, 32, 3, ["N=2", "S=32"], ["model", "slow"]),
}


F32_FACTOR = 8


def f32_floor(spec, ref):
    """Deep networks with batchnorm in training mode at random initialisation
    (MobileNetV2, ResNet-50: batch statistics over a few values per channel)
    amplify rounding so much that PyTorch itself, in float32, is up to 1e-2
    away from its float64 gradients: no float32 computation meets 1e-4 there.
    The example cases therefore run PyTorch in float32 too and accept, per
    parameter, up to F32_FACTOR times PyTorch float32's own error, where that
    is more than the 1e-4 rule (lenet, mlp and vgg stay at 1e-4 throughout)."""
    s32 = copy.copy(spec)
    s32.params = {k: (v.float() if v.is_floating_point() else v) for k, v in spec.params.items()}
    s32.x_all = spec.x_all.float()
    r32 = torch_train(s32, 1)
    return {k: F32_FACTOR * float((r32["grads"][k].double() - g).abs().max()) for k, g in ref["grads"].items()}


def example_grad_run(ctx, name, prec=None):
    kind, batch, size, in_ch, sets, _ = EXAMPLE_CASES[name]
    spec = example_spec(name, kind, batch, size, in_ch)
    if prec:
        spec.prec = prec
        require_rounding_matters(spec, 1)
    ref = torch_train(spec, 1)
    net, data, w0 = write_inputs(ctx, spec)
    G, C, L = ctx.path("G.safetensors"), ctx.path("C.safetensors"), ctx.path("log.csv")
    extra = []
    for s in sets:
        extra += ["--set", s]
    run_train(ctx, net, data, 1, weights=w0, checkpoint=C, log=L, grads=G, extra=extra + prec_flags(spec))
    bad = check_log(L, ref, 1)
    bad += check_grads(G, spec, ref, f32_floor(spec, ref))
    bad += check_checkpoint(C, spec, ref, 1, weights=False, opt_state=False, counters=False)
    finish(bad)


for _n, _e in EXAMPLE_CASES.items():
    CASES[_n] = (lambda ctx, n=_n: example_grad_run(ctx, n), tuple(_e[5]))
# one step of whole examples at bf16 (every GEMM of the step rounded; PyTorch
# rounds the same operands: rounding()).  Not the deep ones: at the sizes the
# emulator affords (batch 2-4, maps of 1x1 to 2x2 at the end) their
# gradients at initialisation are so ill-conditioned (f32_floor) that a
# float32 value landing on the other side of a BF16 rounding boundary from
# its float64 twin moves a gradient by a large part of the largest one
# (measured, the worst parameter: VGG-11 0.19, ResNet-18 0.81, MobileNetV2
# 2.4): no float32 computation can be held to a float64 reference there.
for _n in ("ex_lenet", "ex_mlp"):
    CASES["bf16_" + _n] = (lambda ctx, n=_n: example_grad_run(ctx, n, "bf16"), tuple(EXAMPLE_CASES[_n][5]) + ("bf16",))

# several optimizer steps on whole examples.  Not ResNet-18 and deeper: at
# the small sizes the emulator affords (batch 4, 1x1 maps in layer4) their
# training is chaotic, and PyTorch float32 itself leaves float64 by 1e-2 in
# three steps (train_oracle.py --self-test shows it).
EXAMPLE_TRAIN = {   # name: (kind, batch, size, in_ch, sets, samples, Opt, K, labels)
    "ex_lenet_sgd_steps": ("lenet", 4, 28, 1, ["N=4"], 12, Opt("sgd", lr=0.01, momentum=0.5), 6, ["model", "optim"]),
    "ex_mlp_adam_steps": ("mlp", 4, 28, 1, ["N=4"], 8, Opt("adam", lr=1e-4), 6, ["model", "optim"]),
}


def example_train_run(ctx, name):
    kind, batch, size, in_ch, sets, samples, opt, K, _ = EXAMPLE_TRAIN[name]
    spec = example_spec(name, kind, batch, size, in_ch, samples=samples, opt=opt)
    ref = torch_train(spec, K)
    net, data, w0 = write_inputs(ctx, spec)
    C, L = ctx.path("C.safetensors"), ctx.path("log.csv")
    extra = []
    for s in sets:
        extra += ["--set", s]
    run_train(ctx, net, data, K, weights=w0, checkpoint=C, log=L, extra=extra)
    bad = check_log(L, ref, K)
    bad += check_checkpoint(C, spec, ref, K)
    finish(bad)


for _n, _e in EXAMPLE_TRAIN.items():
    CASES[_n] = (lambda ctx, n=_n: example_train_run(ctx, n), tuple(_e[8]))


# ---------------------------------------------------------------- training at tf32 / bf16
# `ncc train --precision=P`: every GEMM of the step, forward and gradients,
# rounds both operands to P (float32 accumulation, float32 storage, float32
# parameters and optimizer).  PyTorch runs the same step in float64 with the
# operands rounded the same way (rounding()), and is held to the float32
# tolerances; each case also checks that the rounding matters, i.e. that
# PyTorch without it is further from the rounded reference than the
# tolerance, or the case would prove nothing.
PREC_CASES = {   # name: (spec builder, precision, K, labels)
    "bf16_grad_conv_k3": (lambda: conv_spec("k3", 3), "bf16", 1, ["grad", "conv"]),
    "bf16_grad_conv_s2_p1": (lambda: conv_spec("s2_p1"), "bf16", 1, ["grad", "conv"]),
    "bf16_grad_conv_groups2": (lambda: conv_spec("groups2"), "bf16", 1, ["grad", "conv"]),
    "bf16_grad_conv_depthwise": (lambda: conv_spec("depthwise"), "bf16", 1, ["grad", "conv"]),
    "bf16_grad_linear": (lambda: GRAD["grad_linear"](), "bf16", 1, ["grad"]),
    "bf16_grad_matmul_batched": (lambda: GRAD["grad_matmul_batched"](), "bf16", 1, ["grad", "matmul"]),
    "tf32_grad_conv_s2_p1": (lambda: conv_spec("s2_p1"), "tf32", 1, ["grad", "conv"]),
    # the gradients' tiled GEMMs on tensor cores (ir_grad_gemm, ir_gemm_mma)
    "bf16_grad_conv_s2_p1_c16": (lambda: conv_spec("s2_p1_c16", 3), "bf16", 1, ["grad", "conv"]),
    "tf32_grad_conv_groups2_c16": (lambda: conv_spec("groups2_c16", 7), "tf32", 1, ["grad", "conv"]),
    "tf32_grad_linear": (lambda: GRAD["grad_linear"](), "tf32", 1, ["grad"]),
    # the data gradient as a conv2d (autodiff's dgrad_as_conv) on tensor cores
    "tf32_grad_conv_dil2_c16": (lambda: conv_spec("dil2_c16", 44), "tf32", 1, ["grad", "conv"]),
    "bf16_grad_conv_k1_c16": (lambda: conv_spec("k1_c16"), "bf16", 1, ["grad", "conv"]),
    "fp16_grad_conv_k3_p0_c16": (lambda: conv_spec("k3_p0_c16", 43), "fp16", 1, ["grad", "conv"]),
    "fp16_grad_conv_asym_s1_c16": (lambda: conv_spec("asym_s1_c16", 6), "fp16", 1, ["grad", "conv"]),
    # a weight gradient of long K (16384) and two 64 x 64 tiles, split into
    # IR_GRAD_SPLITK_MAX ranges (128) on the tensor cores; the head averages
    # the map first (a linear over 32768 rounded features put some near a
    # rounding boundary with every seed tried: require_order_insensitive)
    "fp16_grad_conv_long_k": (lambda: split_at_least(conv_spec("long_k", 5, gap=True), 128), "fp16", 1,
                              ["grad", "conv", "splitk"]),
    "tf32_grad_conv_long_k": (lambda: split_at_least(conv_spec("long_k", 5, gap=True), 128), "tf32", 1,
                              ["grad", "conv", "splitk"]),
    "tf32_grad_conv_wide": (lambda: conv_spec("wide", 21), "tf32", 1, ["grad", "conv"]),
    # ... and at the larger tiles (--gemm-tile; ir/tile.c), forward and gradients alike
    "tf32_grad_conv_groups2_c16_tile128x128": (lambda: tiled(conv_spec("groups2_c16", 7), "128x128"), "tf32", 1,
                                               ["grad", "conv", "tile"]),
    "bf16_grad_linear_tile128x64": (lambda: tiled(GRAD["grad_linear"](), "128x64"), "bf16", 1, ["grad", "tile"]),
    # gradients a tap a tile (TAP_CONVS) on the tensor cores: 128 threads
    # of 64 x 64; 256 of 128 x 128 (128 columns, so only the 128 channels'
    # two); 32 x 32 (32 channels' columns a tap, the pre's 1x1 too).  The
    # strided data gradients stay conv2d_bwd_data (a tap-major K); the
    # stride-1 ones are conv2d.  At fp16 the head averages the map first: a
    # linear over 64 or more channels' rounded features put a value near a
    # rounding boundary with every seed tried (require_order_insensitive),
    # as for long_k
    "fp16_grad_conv_taps_c64": (lambda: taps_at(conv_spec("taps_c64", 1, gap=True), 2, 0), "fp16", 1, ["grad", "conv"]),
    "bf16_grad_conv_taps_g2_s2_dil2": (lambda: taps_at(conv_spec("taps_g2_s2_dil2", 23), 2, 1), "bf16", 1,
                                       ["grad", "conv"]),
    "tf32_grad_conv_taps_k31_p0": (lambda: taps_at(conv_spec("taps_k31_p0", 41), 2, 0), "tf32", 1, ["grad", "conv"]),
    "fp16_grad_conv_taps_k1_s2": (lambda: taps_at(conv_spec("taps_k1_s2", 1, gap=True), 2, 1), "fp16", 1,
                                  ["grad", "conv"]),
    "fp16_grad_conv_taps_c128_tile128x128": (lambda: taps_at(tiled(conv_spec("taps_c128", 1, gap=True), "128x128"), 2, 0),
                                             "fp16", 1, ["grad", "conv", "tile"]),
    "tf32_grad_conv_taps_c32_tile32x32": (lambda: taps_at(tiled(conv_spec("taps_c32", 10), "32x32"), 2, 0), "tf32", 1,
                                          ["grad", "conv", "tile"]),
    # the strided data gradient's weight transposed once a step (wtap_at)
    "fp16_grad_conv_taps_s2_c64": (lambda: wtap_at(conv_spec("taps_s2_c64", 1, gap=True), 2), "fp16", 1,
                                   ["grad", "conv"]),
    "bf16_grad_conv_taps_s2_c64": (lambda: wtap_at(conv_spec("taps_s2_c64", 1, gap=True), 2), "bf16", 1, ["grad", "conv"]),
    "tf32_grad_conv_taps_s2_c64": (lambda: wtap_at(conv_spec("taps_s2_c64", 1, gap=True), 0), "tf32", 1, ["grad", "conv"]),
    # strided data gradients by phases (PHASE_CONVS): at fp16 and bf16 the
    # weight transposed a step, read a phase's tap at a time by cp.async;
    # at tf32 gathered; the others' 16 input channels take no tap-major
    # weight gradient on the tensor cores (phases_at)
    "fp16_grad_conv_phases_s2_c64": (lambda: wtap_at(conv_spec("phases_s2_c64", 2, gap=True), 2), "fp16", 1,
                                     ["grad", "conv"]),
    "bf16_grad_conv_phases_s2_c64": (lambda: wtap_at(conv_spec("phases_s2_c64", 1, gap=True), 2), "bf16", 1,
                                     ["grad", "conv"]),
    "tf32_grad_conv_phases_s2_c64": (lambda: wtap_at(conv_spec("phases_s2_c64", 2, gap=True), 0), "tf32", 1,
                                     ["grad", "conv"]),
    # ... the copies ahead of a phase's K (which may be none) at 4 stages,
    # and with no pipeline
    "fp16_grad_conv_phases_s2_c64_stages4": (lambda: gemm_flags(wtap_at(conv_spec("phases_s2_c64", 2, gap=True), 2),
                                                                "--gemm-stages=4"), "fp16", 1, ["grad", "conv", "gemm"]),
    "bf16_grad_conv_phases_s2_c64_nopipe": (lambda: gemm_flags(wtap_at(conv_spec("phases_s2_c64", 1, gap=True), 2),
                                                               "--gemm-pipeline=off"), "bf16", 1,
                                            ["grad", "conv", "gemm"]),
    "bf16_grad_conv_phases_g2": (lambda: phases_at(conv_spec("phases_g2", 1), 1), "bf16", 1, ["grad", "conv"]),
    "fp16_grad_conv_phases_odd": (lambda: phases_at(conv_spec("phases_odd", 2), 0), "fp16", 1, ["grad", "conv"]),
    # ... at a forced tile: 256 threads of 128 x 128 (the weight gradients'
    # 128 columns hold two taps of 64 channels: none tap-major), 32 x 32
    "fp16_grad_conv_phases_s2_c64_tile128x128": (lambda: tiled(phases_at(wtap_at(conv_spec("phases_s2_c64", 2, gap=True),
                                                                                  2), 0), "128x128"), "fp16", 1,
                                                 ["grad", "conv", "tile"]),
    "tf32_grad_conv_phases_s2_c64_tile32x32": (lambda: tiled(wtap_at(conv_spec("phases_s2_c64", 2, gap=True), 0), "32x32"),
                                               "tf32", 1, ["grad", "conv", "tile"]),
    "fp16_grad_conv_phases_k5_s2": (lambda: phases_at(conv_spec("phases_k5_s2", 1, gap=True), 0), "fp16", 1,
                                    ["grad", "conv"]),
    "tf32_grad_conv_phases_k31_s21": (lambda: phases_at(conv_spec("phases_k31_s21", 1), 0), "tf32", 1, ["grad", "conv"]),
    "fp16_grad_conv_phases_split": (lambda: phases_at(conv_spec("phases_split", 5, gap=True), 0), "fp16", 1,
                                    ["grad", "conv"]),
    "bf16_opt_sgd_momentum": (lambda: small_cnn("bf16_opt_sgd_momentum", OPTS["opt_sgd_momentum"][0]), "bf16", 8,
                              ["optim"]),
    "bf16_opt_adamw": (lambda: small_cnn("bf16_opt_adamw", OPTS["opt_adamw"][0]), "bf16", 8, ["optim"]),
    "tf32_opt_adam": (lambda: small_cnn("tf32_opt_adam", OPTS["opt_adam"][0], seed=31), "tf32", 8, ["optim"]),
    # fp16: the same rounding, and the loss scaled as GradScaler scales it
    "fp16_grad_conv_s2_p1": (lambda: conv_spec("s2_p1"), "fp16", 1, ["grad", "conv"]),
    "fp16_grad_linear": (lambda: GRAD["grad_linear"](), "fp16", 1, ["grad"]),
    "fp16_opt_adamw": (lambda: small_cnn("fp16_opt_adamw", OPTS["opt_adamw"][0]), "fp16", 8, ["optim"]),
    "fp16_opt_adam": (lambda: small_cnn("fp16_opt_adam", OPTS["opt_adam"][0], seed=31), "fp16", 8, ["optim"]),
    # a scale too big for fp16 (2^26): the first steps' gradients overflow,
    # those steps are skipped and halve the scale until it fits
    "fp16_overflow_adam": (lambda: scaled(small_cnn("fp16_overflow_adam", OPTS["opt_adam"][0]), 2.0 ** 26), "fp16",
                           12, ["optim"]),
}


def split_at_least(spec, s, ops=("conv2d_bwd_weight",)):
    spec.split_min, spec.split_ops = s, ops
    return spec


def require_split(ctx, spec, net):
    """In ncc's report of the training step, every row of a kernel that is
    one of spec.split_ops ("op": the weight gradients' GEMMs, the split
    reductions of ir_reduce_split; "op@layer": that op of that layer alone)
    shows a split of spec.split_min or more, and each entry has such a row
    (none checked where spec.split_min is not set)."""
    want = getattr(spec, "split_min", 0)
    if not want:
        return
    p = subprocess.run([ctx.ncc, net, "--train", "--emit=report"] + prec_flags(spec), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    for entry in spec.split_ops:
        op, _, layer = entry.partition("@")
        got = []
        for ln in p.stdout.split("\n"):
            m = re.match(r"\s*\d+\s+%s[+:\w]*(?: \[([^\]]*)\])?\s+(\S+)" % re.escape(op), ln)
            if m and (not layer or m.group(2) == layer):
                k = re.search(r"split-K (\d+)", m.group(1) or "")
                got.append(int(k.group(1)) if k else 1)
        print("%s's split-K: %s" % (entry, got or "no row"))
        if p.returncode != 0 or not got or min(got) < want:
            raise Failure("%s's split-K: %s, %d or more wanted" % (entry, got or "no row", want))


def has_mark(row, mark):
    """Does the report row's [...] after its ops hold mark (a part of
    "[mma 64x64, taps, split-K 2]", or the start of one)?  None: any row."""
    if mark is None:
        return True
    m = re.search(r"\[([^\]]*)\]", row)
    return bool(m) and any(part.strip().startswith(mark) for part in m.group(1).split(","))


def require_marks(ctx, spec, net):
    """spec.marks: (op, mark, n): n rows of the training step's report whose
    kernel is op carry [mark] (the kernel form codegen chose)."""
    for op, mark, want in getattr(spec, "marks", ()):
        p = subprocess.run([ctx.ncc, net, "--train", "--emit=report"] + prec_flags(spec), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        rows = [ln for ln in p.stdout.split("\n") if re.match(r"\s*\d+\s+%s[+:\w]* " % re.escape(op), ln)]
        got = sum(has_mark(ln, mark) for ln in rows)
        what = "%s rows" % op + (" marked [%s]" % mark if mark is not None else "")
        print("%s: %d of %d" % (what, got, len(rows)))
        if p.returncode != 0 or got != want:
            raise Failure("%s: %d, %d wanted" % (what, got, want))


def tiled(spec, t):
    spec.tile = t
    return spec


def gemm_flags(spec, *flags):
    spec.gemm = list(flags)
    return spec


def scaled(spec, s):
    spec.loss_scale = s
    return spec


def tolerances_apart(spec, K, r, p):
    """How far torch_train's result p is from r, in the tolerances the case
    holds ncc to: the gradients' after one step, else the losses' and the
    weights' after K."""
    worst = 0.0
    if K == 1:
        for k in spec.trainable:
            g = r["grads"][k]
            worst = max(worst, float((g - p["grads"][k]).abs().max()) / (GRAD_RTOL * max(1.0, float(g.abs().max()))))
    else:
        for a, b in zip(r["losses"], p["losses"]):
            worst = max(worst, abs(a - b) / (TRAIN_RTOL * max(abs(a), 1e-6)))
        for k in spec.trainable:
            w = r["params"][k]
            worst = max(worst, float((w - p["params"][k]).abs().max()) / (TRAIN_RTOL * float(w.abs().max())))
    return worst


def rounding_matters(spec, K):
    """The largest difference between PyTorch with and without the rounding,
    relative to the tolerance the case holds ncc to (> 1: the rounding shows)."""
    plain = copy.copy(spec)
    plain.prec = None
    return tolerances_apart(spec, K, torch_train(spec, K), torch_train(plain, K))


# A GEMM's result that the GPU sums in its own order (the tensor cores', a
# split-K's) differs from PyTorch's float64 one by some float32 units in the
# last place of the sum of its products' magnitudes (the emulator's k order
# too).  Where such a result lies that close to a rounding boundary of the
# precision, the next GEMM's operand rounds to the neighbouring
# fp16/bf16/tf32 value, and a product with a large other operand can carry
# that one unit past the tolerance.  fp16_grad_conv_asym_s1_c16 with seed 2
# failed so on the H200 (one weight-gradient element 1.03x the tolerance),
# tf32_grad_conv_dil2_c16 with seed 17 under emulation (1.71x): a jitter of
# ORDER_EPS times the magnitudes' sum, one float32 unit, moves PyTorch's own
# gradients 1.03x and 1.71x there.  Such data test the rounding boundary,
# not ncc: a one-step case whose gradients the jitter moves past the
# tolerance is refused (another seed then), and the cases' seeds are ones
# it moves less (half where one of the first 80 seeds does).
ORDER_EPS = 2.0 ** -24


def order_sensitivity(spec, K):
    """How far PyTorch's own result moves, relative to the tolerance the case
    holds ncc to, when each GEMM's result, forward and backward, is jittered
    by ORDER_EPS times its products' magnitudes (twice, opposite signs: a
    value that near a boundary crosses it in one of the two)."""
    base = torch_train(spec, K)
    worst = 0.0
    for sign in (1, -1):
        ORDER_JITTER[:] = [sign * ORDER_EPS, 7]
        try:
            worst = max(worst, tolerances_apart(spec, K, base, torch_train(spec, K)))
        finally:
            ORDER_JITTER[:] = [0.0, 0]
    return worst


def require_order_insensitive(spec, K):
    m = order_sensitivity(spec, K)
    print("PyTorch with each GEMM's result jittered by %g of its magnitudes (another summation order) moves %.2fx "
          "the tolerance" % (ORDER_EPS, m))
    if m > 1.0:
        raise Failure("the case's data put a value so near a %s rounding boundary that another summation order "
                      "moves the gradients %.2fx the tolerance: choose another seed" % (spec.prec, m))


def require_rounding_matters(spec, K):
    m = rounding_matters(spec, K)
    print("PyTorch without the %s rounding is %.1fx the tolerance away from PyTorch with it" % (spec.prec, m))
    if m <= 1.0:
        raise Failure("the %s rounding changes PyTorch's result by less than the tolerance: the case proves nothing"
                      % spec.prec)


# ncc's losses against PyTorch's own autocast: a little over one unit
# roundoff of the type (BF16 2^-8, FP16 2^-11), 1.28 of it
AUTOCAST_RTOL = {"bf16": 5e-3, "fp16": 6.25e-4}


def autocast_dtype(prec):
    """PyTorch's CPU autocast dtype for prec, or None where this PyTorch has
    none: before 2.x its CPU autocast knows BF16 only (1.13 refuses FP16;
    a version that warns and computes float32 instead is caught too)."""
    import torch
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[prec]
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast("cpu", dtype=dt):
                y = torch.nn.functional.linear(torch.ones(2, 2), torch.ones(2, 2))
    except RuntimeError:   # 1.13: "AutocastCPU only support Bfloat16"
        return None
    return dt if y.dtype == dt else None


def autocast_losses(spec, K, dt):
    """The K losses of PyTorch's CPU autocast to dt (float32 parameters and
    data; conv2d, linear and matmul in dt, outputs stored in dt too; at
    FP16 the loss scaled as GradScaler scales it, skipped steps included)."""
    s32 = copy.copy(spec)
    s32.prec = None
    s32.params = {k: (v.float() if v.is_floating_point() else v) for k, v in spec.params.items()}
    s32.x_all = spec.x_all.float()
    s32.y_all = spec.y_all.float() if spec.y_all.is_floating_point() else spec.y_all
    return torch_train(s32, K, autocast=dt)["losses"]


def prec_run(ctx, name):
    build, prec, K, _ = PREC_CASES[name]
    spec = build()
    spec.model, spec.prec = name, prec
    spec.text = re.sub(r"^model\s+\S+", "model " + name, spec.text, count=1, flags=re.M)
    require_rounding_matters(spec, K)
    if K == 1:
        require_order_insensitive(spec, K)
    if spec.loss_scale:   # the scale is meant to overflow: some steps, not all, are skipped
        sc = torch_train(spec, K)["scaler"]
        print("GradScaler's algorithm: %d of %d steps skipped, the scale %g -> %g"
              % (sc["skipped"], K, spec.loss_scale, sc["scale"]))
        if not 0 < sc["skipped"] < K - 2:
            raise Failure("the forced overflow skips %d of %d steps: the case proves nothing" % (sc["skipped"], K))
    if K == 1:
        grad_run(ctx, spec)
        return
    train_run(ctx, spec, K)
    # and the loss curve follows PyTorch's own autocast, which rounds the
    # GEMMs' outputs to the low type as well (ncc keeps them float32)
    if prec not in AUTOCAST_RTOL:
        return
    if spec.loss_scale:
        # autocast stores the GEMMs' outputs in fp16 too, so its gradients
        # overflow at other steps than ncc's (or rounding(fp16)'s): the skipped
        # steps differ, and the curves part for a reason that is no error
        print("the comparison with PyTorch's autocast: not made, the forced overflow skips other steps there")
        return
    import torch
    dt = autocast_dtype(prec)
    if dt is None:
        print("the comparison with PyTorch's autocast at %s: not made, PyTorch %s has no CPU autocast to %s"
              % (prec, torch.__version__, prec))
        return
    ac, rows = autocast_losses(spec, K, dt), read_log(ctx.path("log.csv"))
    worst, bound = 0.0, AUTOCAST_RTOL[prec]
    for i, (r, a) in enumerate(zip(rows, ac)):
        d = abs(float(r["loss"]) - a) / abs(a)
        worst = max(worst, d)
        print("  step %2d: loss %.7g, PyTorch autocast %s %.7g (relative %.2g)" % (i + 1, float(r["loss"]), prec, a, d))
    print("loss curve against PyTorch autocast %s: at most %.2g relative (bound %g)" % (prec, worst, bound))
    if worst > bound:
        raise Failure("the %s loss curve leaves PyTorch autocast's by %.3g relative (> %g)" % (prec, worst, bound))


for _n, _e in PREC_CASES.items():
    CASES[_n] = (lambda ctx, n=_n: prec_run(ctx, n), tuple(_e[3]) + (_e[1],))


def digits_autocast_run(ctx, prec, K=12):
    """Mixed-precision training of the digits network (examples/digits.net)
    on the real digits (scikit-learn's, scaled as examples/make_digits.py
    scales them; the first 256 in make_digits.py's order, batch 32) follows
    PyTorch's own autocast: the K losses of `ncc train --precision=PREC`
    within AUTOCAST_RTOL[prec] of those of PyTorch's CPU autocast to PREC
    (float32 parameters; at fp16 with GradScaler's loss scaling), from the
    same initial weights.  SGD with momentum, and the first 12 steps: later
    (or with Adam, whose normalized steps turn a near-zero gradient's
    rounding into a full step) one max pooling's argmax or one ReLU that
    autocast's 16-bit outputs flip moves the curves apart by more than any
    rounding bound, in PyTorch against itself too (its float64 steps with the
    GEMM operands rounded to bf16, as ncc rounds them, against its autocast
    bf16: 0.16 relative by step 48 at this learning rate).  Skipped where
    PyTorch's CPU autocast lacks the type (Debian's 1.13: fp16)."""
    import numpy as np
    import torch
    dt = autocast_dtype(prec)
    if dt is None:
        raise Skip("PyTorch %s has no CPU autocast to %s" % (torch.__version__, prec))
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise Skip("scikit-learn (python3-sklearn) is missing: no digits data")
    d = load_digits()
    x = (d.images.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    perm = np.random.RandomState(0).permutation(len(d.target))
    n = 256
    spec = example_spec("digits_autocast_" + prec, "digits", 32, 8, 1, samples=n,
                        opt=Opt("sgd", lr=0.1, momentum=0.9), scale_logits=False)
    spec.x_all = torch.from_numpy(np.ascontiguousarray(x[perm][:n])).double()
    spec.y_all = torch.from_numpy(d.target[perm][:n].astype(np.int64))
    spec.prec = prec
    net, data, w0 = write_inputs(ctx, spec)
    L = ctx.path("log.csv")
    run_train(ctx, net, data, K, weights=w0, log=L, extra=["--set", "N=32"] + prec_flags(spec))
    rows, ac = read_log(L), autocast_losses(spec, K, dt)
    if len(rows) != K:
        raise Failure("ncc train logged %d steps of %d" % (len(rows), K))
    plain = copy.copy(spec)
    plain.prec = None
    f64 = torch_train(plain, K)["losses"]
    worst, bound = 0.0, AUTOCAST_RTOL[prec]
    for i, (r, a) in enumerate(zip(rows, ac)):
        dd = abs(float(r["loss"]) - a) / abs(a)
        worst = max(worst, dd)
        print("  step %2d: loss %.7g, PyTorch autocast %s %.7g (relative %.2g)" % (i + 1, float(r["loss"]), prec, a, dd))
    far = max(abs(f - a) / abs(a) for f, a in zip(f64, ac))
    print("digits, %d steps at %s: the loss %.4f -> %.4f; against PyTorch autocast at most %.2g relative (bound %g; "
          "PyTorch in float64 is %.2g from its autocast)" % (K, prec, float(rows[0]["loss"]), float(rows[-1]["loss"]),
                                                             worst, bound, far))
    if worst > bound:
        raise Failure("the %s loss curve leaves PyTorch autocast's by %.3g relative (> %g)" % (prec, worst, bound))


for _p in ("bf16", "fp16"):
    CASES["digits_autocast_" + _p] = (lambda ctx, p=_p: digits_autocast_run(ctx, p), ("model", "optim", _p))


def fp16_resume_spec():
    s = scaled(small_cnn("fp16_resume_overflow", OPTS["opt_adam"][0]), 2.0 ** 26)
    s.prec = "fp16"
    return s


def fp16_growth_run(ctx):
    """GradScaler's growth: 2000 steps in a row without an overflow double
    the scale.  2003 steps of a small linear network at fp16 from a scale
    of 2^10: the checkpoint's scaler state must be GradScaler's after them
    (the scale 2^11, the tracker 3, 2003 updates), and the losses PyTorch's
    at the steps around the doubling."""
    spec = GRAD["grad_linear"]()
    spec.model, spec.prec, spec.loss_scale = "fp16_growth", "fp16", 1024.0
    spec.text = re.sub(r"^model\s+\S+", "model fp16_growth", spec.text, count=1, flags=re.M)
    K = 2003
    ref = torch_train(spec, K)
    sc = ref["scaler"]
    print("GradScaler's algorithm after %d steps: scale %g, tracker %d, %d updates, %d skipped"
          % (K, sc["scale"], sc["tracker"], sc["opt_step"], sc["skipped"]))
    if sc["skipped"] or sc["scale"] != 2048.0:
        raise Failure("the reference should double the scale once and skip nothing: the case proves nothing")
    net, data, w0 = write_inputs(ctx, spec)
    C, L = ctx.path("C.safetensors"), ctx.path("log.csv")
    run_train(ctx, net, data, K, weights=w0, checkpoint=C, log=L, extra=prec_flags(spec))
    bad = check_checkpoint(C, spec, ref, K)
    rows = read_log(L)
    for i in (0, 1998, 1999, 2000, 2001, 2002):   # around the doubling (after step 2000)
        a, b = float(rows[i]["loss"]), ref["losses"][i]
        print("  step %4d: loss %.7g (PyTorch %.7g)" % (i + 1, a, b))
        if abs(a - b) > TRAIN_RTOL * max(abs(b), 1e-3):
            bad.append("step %d: loss %.7g, PyTorch %.7g" % (i + 1, a, b))
    finish(bad)


CASES["fp16_growth"] = (fp16_growth_run, ("optim", "fp16"))


# fp16 resumed in the middle of the skipped steps (5 of 8 skipped): the
# checkpoint carries the scaler (__loss_scale__, __growth_tracker__) and
# Adam's own step count (__optimizer_step__), so the resumed run is the
# unbroken one, byte for byte
CASES["fp16_resume_overflow"] = (lambda ctx: resume_run(ctx, fp16_resume_spec(), 5, 7), ("resume", "fp16"))


# ---------------------------------------------------------------- the PyTorch side alone
def spec_for(name, seed=0):
    """(spec, K, sets) of a case, for --torch-only and --self-test (seed:
    the dropout mask's there)."""
    if name in GRAD:
        return GRAD[name](), 1, []
    if name in TRAIN:
        return TRAIN[name][0](), TRAIN[name][1], []
    if name in ("dropout_mask", "dropout2d_mask"):
        two_d = name == "dropout2d_mask"
        p = 0.3 if two_d else 0.5
        spec, mark = dropout_spec(two_d, p)
        import numpy as np
        rng = np.random.RandomState(seed)
        units = 64 if two_d else 256
        return masked_spec(spec, mark, (rng.rand(units) > p).astype(np.float64), p), 1, []
    if name in EXAMPLE_CASES or (name.startswith("bf16_") and name[5:] in EXAMPLE_CASES):
        base = name[5:] if name.startswith("bf16_") else name
        kind, batch, size, in_ch, sets, _ = EXAMPLE_CASES[base]
        s = example_spec(base, kind, batch, size, in_ch)
        s.prec = "bf16" if base != name else None
        return s, 1, sets
    if name == "fp16_resume_overflow":
        return fp16_resume_spec(), 12, []
    if name in PREC_CASES:
        build, prec, K, _ = PREC_CASES[name]
        s = build()
        s.prec = prec
        return s, K, []
    if name in EXAMPLE_TRAIN:
        kind, batch, size, in_ch, sets, samples, opt, K, _ = EXAMPLE_TRAIN[name]
        s = example_spec(name, kind, batch, size, in_ch, samples=samples, opt=opt)
        return s, K, sets
    raise KeyError(name)


def torch_only(name, ncc=None, work=None):
    """Runs a case's PyTorch computation (a script bug shows here, before ncc
    can train) and, given ncc, checks that ncc reads the model and names the
    same parameters with the same shapes (`ncc MODEL.net --emit=params`)."""
    import math
    import tempfile
    spec, K, sets = spec_for(name)
    ref = torch_train(spec, K)
    for k, g in ref["grads"].items():
        if not bool(g.isfinite().all()):
            raise Failure("%s: PyTorch's gradient of %s is not finite" % (name, k))
    zero = [k for k, g in ref["grads"].items() if float(g.abs().max()) == 0.0]
    if zero:
        raise Failure("%s: PyTorch's gradient of %s is zero: the case tests nothing there" % (name, ", ".join(zero)))
    if not all(math.isfinite(v) for v in ref["losses"]):
        raise Failure("%s: PyTorch's loss is not finite" % name)
    gmax = max(float(g.abs().max()) for g in ref["grads"].values())
    print("%-32s K=%-2d params %-3d loss %.5g -> %.5g  max|grad| %.3g  lr %.4g -> %.4g"
          % (name, K, len(spec.trainable), ref["losses"][0], ref["losses"][-1], gmax, ref["lrs"][0], ref["lr"]))
    if ncc:
        d = work or tempfile.mkdtemp(prefix="train-oracle-")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, spec.model + ".net")
        with open(path, "w") as f:
            f.write(spec.text)
        cmd = [ncc, path, "--emit=params"]
        for s in sets:
            cmd += ["--set", s]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if p.returncode != 0:
            print(spec.text)
            raise Failure("%s: %s failed:\n%s" % (name, " ".join(cmd), p.stderr))
        got = {}
        for ln in p.stdout.split("\n"):
            if ln.strip():
                n, t = ln.split(None, 1)
                got[n] = tuple(int(v) for v in re.findall(r"\d+", t.split("[", 1)[1])) if "[" in t else ()
        want = {k: tuple(v.shape) for k, v in spec.params.items() if not k.endswith("num_batches_tracked")}
        if got != want:
            raise Failure("%s: ncc's parameters differ from the PyTorch twin's: ncc only %s; torch only %s; "
                          "shapes %s" % (name, sorted(set(got) - set(want)), sorted(set(want) - set(got)),
                                         [(k, got[k], want[k]) for k in set(got) & set(want) if got[k] != want[k]]))


# ---------------------------------------------------------------- a stand-in for `ncc train`
# --self-test CASE runs the case against a trainer written with PyTorch in
# float32 (this file called with --as-ncc): it checks the harness (files,
# comparisons, resume, the mask read-back) and that the tolerances hold for
# a float32 computation, before ncc can train.
def fake_ncc(argv):
    import numpy as np
    import torch
    a = {"--set": []}
    flags = ("--no-shuffle", "--resume")
    i = 0
    if not argv or argv[0] != "train":
        print("fake ncc: only `train`", file=sys.stderr)
        return 1
    net = argv[1]
    i = 2
    while i < len(argv):
        k = argv[i]
        if k in flags:
            a[k] = True
            i += 1
        elif k == "--set":
            a["--set"].append(argv[i + 1])
            i += 2
        else:
            a[k] = argv[i + 1]
            i += 2
    model = re.search(r"^model\s+(\S+)", open(net).read(), re.M).group(1)
    spec, _, _ = spec_for(model, seed=int(a.get("--seed", "0")))
    d = a["--data"]
    X = torch.from_numpy(np.load(os.path.join(d, "x.npy")))
    Y = np.load(os.path.join(d, "y.npy"))
    Y = torch.from_numpy(Y) if Y.dtype.kind == "f" else torch.from_numpy(Y.astype(np.int64))
    src = a["--checkpoint"] if a.get("--resume") else a.get("--weights")
    T = {k: v[0] for k, v in read_safetensors(src).items()}
    P = {k: torch.tensor(np.array(T[k])) for k in spec.params}
    for k in spec.trainable:
        P[k].requires_grad_(True)
    params = [P[k] for k in spec.trainable]
    opt, sched = spec.opt.torch(params)
    step0 = int(T["__step__"].reshape(-1)[0]) if a.get("--resume") else 0
    epoch0 = int(T["__epoch__"].reshape(-1)[0]) if a.get("--resume") else 0
    if a.get("--resume"):
        for k in spec.trainable:
            st = {}
            for sk in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
                if "%s.%s" % (k, sk) in T:
                    st[sk] = torch.tensor(np.array(T["%s.%s" % (k, sk)]))
            if "exp_avg" in st:
                st["step"] = torch.tensor(float(step0))
            if st:
                opt.state[P[k]] = st
        for _ in range(epoch0):
            sched.step()
    B, K = spec.batch, int(a["--steps"])
    spe = X.shape[0] // B
    rows = []
    for s in range(step0, step0 + K):
        j = s % spe
        opt.zero_grad()
        loss = spec.forward(P, X[j * B:(j + 1) * B], Y[j * B:(j + 1) * B])
        loss.backward()
        rows.append("%d,%d,%.9g,%.9g" % (s + 1, s // spe, float(loss), opt.param_groups[0]["lr"]))
        grads = {k: P[k].grad.detach().clone() for k in spec.trainable}
        opt.step()
        if (s + 1) % spe == 0 and sched is not None:
            sched.step()
        for k, v in P.items():
            if k.endswith("num_batches_tracked"):
                v += 1
    if a.get("--log"):
        with open(a["--log"], "w") as f:
            f.write("step,epoch,loss,lr\n" + "\n".join(rows) + "\n")
    if a.get("--save-grads"):
        O.write_safetensors(a["--save-grads"], grads)
    if a.get("--checkpoint"):
        out = {k: v.detach() for k, v in P.items()}
        for k in spec.trainable:
            for sk, v in opt.state.get(P[k], {}).items():
                if sk != "step" and v is not None:
                    out["%s.%s" % (k, sk)] = v
        out["__step__"] = torch.tensor([step0 + K], dtype=torch.int64)
        out["__epoch__"] = torch.tensor([(step0 + K) // spe], dtype=torch.int64)
        out["__lr__"] = torch.tensor([opt.param_groups[0]["lr"]], dtype=torch.float32)
        O.write_safetensors(a["--checkpoint"], out)
    print("device: emu (fake: PyTorch float32)")
    return 0


def self_test(name, work):
    w = os.path.abspath(work or os.path.join(os.getcwd(), "train-oracle-selftest", name))
    os.makedirs(w, exist_ok=True)
    fake = os.path.join(w, "fake-ncc")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\nexec %s %s --as-ncc \"$@\"\n" % (sys.executable, os.path.abspath(__file__)))
    os.chmod(fake, 0o755)
    return fake, w


# ---------------------------------------------------------------- main
def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("case", nargs="?")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--labels", action="store_true", help="with --list: NAME LABELS per line")
    ap.add_argument("--torch-only", metavar="CASE", help="run only the PyTorch side of CASE (or all)")
    ap.add_argument("--self-test", action="store_true",
                    help="run CASE against a float32 PyTorch stand-in for `ncc train`")
    ap.add_argument("--ncc")
    ap.add_argument("--work", default=None)
    if len(sys.argv) > 1 and sys.argv[1] == "--as-ncc":
        return fake_ncc(sys.argv[2:])
    a = ap.parse_args()
    if a.list:
        for n, (f, labels) in CASES.items():
            print("%s %s" % (n, ",".join(("train",) + labels)) if a.labels else n)
        return 0
    if a.torch_only:
        names = [a.torch_only]
        if a.torch_only == "all":     # the slow ones too with NCC_SLOW=1
            names = [n for n in CASES if os.environ.get("NCC_SLOW") == "1" or "slow" not in CASES[n][1]]
        rc = 0
        for n in names:
            if n not in CASES:
                print("unknown case %r" % n, file=sys.stderr)
                return 2
            try:
                torch_only(n, os.path.abspath(a.ncc) if a.ncc else None, a.work)
            except Failure as e:
                print("FAIL %s" % e)
                rc = 1
        return rc
    if a.case not in CASES:
        print("unknown case %r" % a.case, file=sys.stderr)
        return 2
    if a.self_test:
        a.ncc, a.work = self_test(a.case, a.work)
    if not a.ncc:
        print("--ncc PATH is required", file=sys.stderr)
        return 2
    work = a.work or os.path.join(os.getcwd(), "train-oracle-work", a.case)
    ctx = O.Ctx(a.case, os.path.abspath(a.ncc), work)
    try:
        CASES[a.case][0](ctx)
    except Failure as e:
        print("FAIL %s: %s" % (a.case, e))
        return 1
    except subprocess.TimeoutExpired as e:
        print("FAIL %s: timed out: %s" % (a.case, e))
        return 1
    except Skip as e:
        print("SKIP %s: %s" % (a.case, e))
        ctx.cleanup()
        return 77
    print("PASS %s" % a.case)
    ctx.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
