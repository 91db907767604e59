#!/usr/bin/python3
"""check_autodiff.py — the autodiff pass's gradients against PyTorch's autograd.

    check_autodiff.py NCC MODEL.net [--set N=V ...]

Runs `ncc MODEL.net --emit=ir --train --passes=autodiff` and evaluates the
listing node by node in float64 with PyTorch, each training op by the meaning
ir/ops.def gives it (independently of the code generator): random inputs,
parameters and labels; dropout_apply with one fixed random mask per slot.
The same forward nodes are then evaluated again with autograd, and
loss.backward() gives every trainable parameter's gradient, which must equal
the optimizer's input for that parameter (its inputs are the gradients in
parameter graph order).  Checks the wiring of every gradient rule: operands,
axes, broadcasting sums, accumulation of several contributions.
Exit 0 when every gradient agrees to 1e-9 (relative to its largest element,
or to 1e-6 when that is smaller), 1 otherwise.
"""
import re
import subprocess
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)

LINE = re.compile(r"^%(\d+) = (.*?) : (\w+)\[([^\]]*)\](?:  # .*)?$")
CALL = re.compile(r"^(\w+)\(([^)]*)\)(.*)$")


def attrs(text):
    out = {}
    for k, v in re.findall(r"(\w+)=(\[[^\]]*\]|\S+)", text):
        if v.startswith("["):
            out[k] = [int(t) for t in v[1:-1].split(",") if t]
        else:
            try:
                out[k] = int(v)
            except ValueError:
                try:
                    out[k] = float(v)
                except ValueError:
                    out[k] = v
    if "per-channel" in text:
        out["per_channel"] = True
    return out


def parse(listing):
    nodes, minimize = [], None
    for line in listing.splitlines():
        m = LINE.match(line)
        if m:
            vid, body, dt, dims = int(m[1]), m[2], m[3], m[4]
            shape = [int(d) for d in dims.split(",") if d.strip()]
            if body.startswith("input "):
                nodes.append(dict(id=vid, op="input", name=body[7:-1], dtype=dt, shape=shape))
            elif body.startswith("param "):
                nodes.append(dict(id=vid, op="param", name=body[7:-1], dtype=dt, shape=shape))
            elif body.startswith("const "):
                nodes.append(dict(id=vid, op="const", val=float(body[6:]), dtype=dt, shape=shape))
            else:
                c = CALL.match(body)
                ins = [int(t.strip()[1:]) for t in c[2].split(",") if t.strip()]
                nodes.append(dict(id=vid, op=c[1], ins=ins, a=attrs(c[3]), dtype=dt, shape=shape))
        mm = re.search(r"minimize=%(\d+)", line)
        if line.startswith("train ") and mm:
            minimize = int(mm[1])
    return nodes, minimize


ACTS = {
    "relu": F.relu, "relu6": F.relu6, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "gelu": F.gelu,
    "silu": F.silu, "hardswish": F.hardswish, "sqrt": torch.sqrt,
}


def act(name, x, a):
    if name == "leaky_relu":
        return F.leaky_relu(x, a.get("slope", 0.01))
    return ACTS[name](x)


def vjp(f, x, dy):
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        y = f(x)
        (g,) = torch.autograd.grad(y, x, dy)
    return g


def bn_train(x, w, b, stats, eps):
    mean, var = stats[0].view(1, -1, 1, 1), stats[1].view(1, -1, 1, 1)
    return (x - mean) / torch.sqrt(var + eps) * w.view(1, -1, 1, 1) + b.view(1, -1, 1, 1)


def bn_stats(x):
    return torch.stack([x.mean(dim=(0, 2, 3)), x.var(dim=(0, 2, 3), unbiased=False)])


def sum_to(x, target, axis):
    r = len(target)
    lead = list(range(axis)) + list(range(axis + r, x.dim()))
    if lead:
        x = x.sum(dim=lead)
    for i, t in enumerate(target):
        if t == 1 and x.shape[i] != 1:
            x = x.sum(dim=i, keepdim=True)
    return x.reshape(target)


def evaluate(nodes, env, masks, forward_only=False):
    """Evaluates nodes into env (id -> tensor); returns the optimizer's inputs."""
    grads = None
    by_id = {n["id"]: n for n in nodes}
    for n in nodes:
        op, a, sh = n["op"], n.get("a", {}), n["shape"]
        if n["id"] in env:
            continue
        x = [env[i] for i in n.get("ins", [])]
        if op == "const":
            y = torch.tensor(n["val"])
        elif op == "conv2d":
            w = x[1]
            if a.get("weight") == "tap-major":   # [out, kh, kw, in/groups]
                w = w.permute(0, 3, 1, 2)
            y = F.conv2d(x[0], w, x[2] if len(x) > 2 else None, a["stride"], a["pad"], a["dilation"], a["groups"])
        elif op == "linear":
            y = F.linear(*x)
        elif op == "matmul":
            y = torch.matmul(x[0], x[1])
        elif op == "layernorm":
            y = F.layer_norm(x[0], [x[0].shape[-1]], x[1], x[2], a["eps"])
        elif op in ACTS or op == "leaky_relu":
            y = act(op, x[0], a)
        elif op in ("add", "sub", "mul", "div"):
            y = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](x[0], x[1])
        elif op == "maxpool2d":
            y = F.max_pool2d(x[0], a["kernel"], a["stride"], a["pad"])
        elif op == "avgpool2d":
            y = F.avg_pool2d(x[0], a["kernel"], a["stride"], a["pad"], count_include_pad=True)
        elif op == "global_avgpool2d":
            y = x[0].mean(dim=(2, 3), keepdim=True)
        elif op == "softmax":
            y = torch.softmax(x[0], a["axis"])
        elif op == "log_softmax":
            y = torch.log_softmax(x[0], a["axis"])
        elif op == "concat":
            y = torch.cat(x, a["axis"])
        elif op in ("flatten", "reshape"):
            y = x[0].reshape(sh)
        elif op == "transpose":
            y = x[0].permute(a["perm"])
            if a.get("reversed"):   # autodiff's reversed taps: these output axes run backwards
                y = y.flip(a["reversed"])
        elif op == "cross_entropy":
            y = F.cross_entropy(x[0], x[1].long())
        elif op == "nll_loss":
            y = F.nll_loss(x[0], x[1].long())
        elif op == "mse_loss":
            y = F.mse_loss(x[0], x[1])
        elif op == "bn_stats":
            y = bn_stats(x[0])
        elif op == "bn_train":
            y = bn_train(*x, a["eps"])
        elif op in ("bn_running",):
            y = torch.tensor(0.0)
        elif op == "dropout_apply":
            key = (a["slot"], tuple(x[0].shape))
            if key not in masks:
                p = a["p"]
                ms = list(x[0].shape[:2]) + [1] * (x[0].dim() - 2) if a.get("per_channel") else list(x[0].shape)
                masks[key] = (torch.rand(ms) >= p).to(x[0].dtype) / (1 - p)
            y = x[0] * masks[key]
        elif forward_only:
            break   # the backward graph starts here
        elif op == "act_grad":
            xin = x[1]
            if a.get("from") == "output":
                # the operand is the activation's output: the derivative is taken at its input
                prod = by_id[n["ins"][1]]
                if prod["op"] != a["of"]:
                    raise SystemExit(f"check_autodiff: %{n['id']} = act_grad from=output of={a['of']} reads a {prod['op']}")
                xin = env[prod["ins"][0]]
            y = vjp(lambda t: act(a["of"], t, a), xin, x[0])
        elif op == "conv2d_bwd_data":
            w = x[1]
            if a.get("weight") == "in,kh,kw,out":   # transposed once a step: [in, kh, kw, out]
                w = w.permute(3, 0, 1, 2)
            y = torch.nn.grad.conv2d_input(sh, w, x[0], a["stride"], a["pad"], a["dilation"], a["groups"])
        elif op == "conv2d_bwd_weight":
            y = torch.nn.grad.conv2d_weight(x[1], sh, x[0], a["stride"], a["pad"], a["dilation"], a["groups"])
        elif op == "linear_bwd_weight":
            y = x[0].t() @ x[1]
        elif op == "sum_to":
            y = sum_to(x[0], a["shape"], a["at"])
        elif op == "maxpool2d_bwd":
            y = vjp(lambda t: F.max_pool2d(t, a["kernel"], a["stride"], a["pad"]), x[1], x[0])
        elif op == "avgpool2d_bwd":
            y = vjp(lambda t: F.avg_pool2d(t, a["kernel"], a["stride"], a["pad"], count_include_pad=True),
                    torch.zeros(sh), x[0])
        elif op == "global_avgpool2d_bwd":
            y = x[0].reshape(sh[0], sh[1], 1, 1).expand(sh) / (sh[2] * sh[3])
        elif op == "softmax_bwd":
            dy, yv = x
            y = yv * (dy - (dy * yv).sum(a["axis"], keepdim=True))
        elif op == "log_softmax_bwd":
            dy, yv = x
            y = dy - torch.exp(yv) * dy.sum(a["axis"], keepdim=True)
        elif op == "cross_entropy_bwd":
            dl, lg, lb = x
            y = (torch.softmax(lg, 1) - F.one_hot(lb.long(), lg.shape[1])) / lg.shape[0] * dl
        elif op == "nll_loss_bwd":
            dl, lp, lb = x
            y = -F.one_hot(lb.long(), lp.shape[1]).to(lp.dtype) / lp.shape[0] * dl
        elif op == "mse_loss_bwd":
            dl, p, t = x
            y = 2 * (p - t) / p.numel() * dl
        elif op == "layernorm_bwd_data":
            dy, xv, w = x
            y = vjp(lambda t: F.layer_norm(t, [t.shape[-1]], w, None, a["eps"]), xv, dy)
        elif op == "layernorm_bwd_weight":
            dy, xv = x
            xh = F.layer_norm(xv, [xv.shape[-1]], None, None, a["eps"])
            y = (dy * xh).reshape(-1, xv.shape[-1]).sum(0)
        elif op == "bn_bwd_data":
            dy, xv, w, _ = x
            y = vjp(lambda t: bn_train(t, w, torch.zeros_like(w), bn_stats(t), a["eps"]), xv, dy)
        elif op == "bn_bwd_weight":
            dy, xv, st = x
            xh = bn_train(xv, torch.ones(xv.shape[1]), torch.zeros(xv.shape[1]), st, a["eps"])
            y = (dy * xh).sum(dim=(0, 2, 3))
        elif op == "slice":
            y = x[0].narrow(a["axis"], a["start"], a["len"])
        elif op == "optimizer":
            grads = x
            y = torch.tensor(0.0)
        else:
            raise SystemExit(f"check_autodiff: no evaluation for {op}")
        if list(y.shape) != sh:
            raise SystemExit(f"check_autodiff: %{n['id']} = {op}: evaluated {list(y.shape)}, listed {sh}")
        env[n["id"]] = y
    return grads


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    ncc, model, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    r = subprocess.run([ncc, model, "--emit=ir", "--train", "--passes=autodiff"] + extra, capture_output=True,
                       text=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return 1
    nodes, minimize = parse(r.stdout)
    leaves = {}
    params = []
    for n in nodes:
        if n["op"] == "input":
            if n["dtype"] == "i32":
                shape_of = {m["id"]: m["shape"] for m in nodes}
                loss = next(m for m in nodes if m["op"] in ("cross_entropy", "nll_loss") and m["ins"][1] == n["id"])
                classes = shape_of[loss["ins"][0]][1]
                leaves[n["id"]] = torch.randint(0, classes, n["shape"]).to(torch.int32)
            else:
                leaves[n["id"]] = torch.randn(n["shape"])
        elif n["op"] == "param":
            if n["name"].endswith("running_var"):
                leaves[n["id"]] = torch.rand(n["shape"]) + 0.5
            else:
                leaves[n["id"]] = torch.randn(n["shape"]) * 0.5
                if not n["name"].endswith("running_mean"):
                    params.append(n)
    masks = {}
    grads = evaluate(nodes, dict(leaves), masks)
    if grads is None or len(grads) != len(params):
        print(f"check_autodiff: the optimizer has {None if grads is None else len(grads)} inputs, "
              f"{len(params)} trainable parameters", file=sys.stderr)
        return 1
    env = {k: (v.clone().requires_grad_(True) if any(p["id"] == k for p in params) else v) for k, v in leaves.items()}
    fwd = [n for n in nodes if n["op"] != "optimizer"]
    evaluate(fwd, env, masks, forward_only=True)
    env[minimize].backward()
    bad = 0
    for p, g in zip(params, grads):
        ref = env[p["id"]].grad
        # a bias before batchnorm has the gradient 0 up to rounding: an absolute floor
        err = (g - ref).abs().max().item() / max(ref.abs().max().item(), 1e-6)
        ok = err < 1e-9
        bad += not ok
        print(f"{'ok  ' if ok else 'BAD '} {p['name']:12s} {str(p['shape']):16s} rel.err {err:.2e}")
    print(f"{model}: {len(params) - bad}/{len(params)} gradients agree with autograd")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
