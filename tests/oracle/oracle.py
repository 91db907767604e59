#!/usr/bin/python3
"""oracle.py — numeric tests of ncc against PyTorch, one case per invocation.

    oracle.py --list                      # the case names (no torch import: CMake calls this)
    oracle.py CASE --ncc PATH --work DIR  # run one case; exit 0 pass, 1 fail, 77 skipped

A case that passes removes its working directory (models, weights, inputs and
outputs: the 224x224 VGGs alone write 1.6 GB); a failing one keeps it for
debugging, and NCC_KEEP_WORK=1 keeps every one.  A case whose tool is missing
(or that cannot apply on this machine) raises Skip and exits 77, which ctest
counts as skipped (SKIP_RETURN_CODE), not passed.

Every case writes a tiny .net model (or uses one of examples/), random
parameters under PyTorch state_dict names in a safetensors file, random inputs
as .npy, computes the reference with PyTorch (float64, eval mode), runs
`ncc run --device emu` and compares:

    TOLERANCE: max|ncc - ref| <= 1e-4 * max(1, max|ref|)   (per output)

The reference is computed in float64 so that it is the exact result up to
float64 rounding; ncc computes in float32.  Bad-input cases check that
`ncc run` exits with status 1, says what is wrong, and leaves no output file.
Only torch and numpy are used; safetensors files are written by the small
writer below (8-byte little-endian header length, JSON header, raw data).
"""
import json
import re
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "examples")

RTOL = 1e-4
CASES = {}      # name -> (function, labels)


# the emulator's stream orders (NCC_STREAM_ORDER) as the device line reports them
STREAM_ORDERS = {"side-last": "side stream last", "main-last": "stream 0 last"}


def case(name, labels=()):
    def deco(f):
        CASES[name] = (f, tuple(labels))
        return f
    return deco


# ---------------------------------------------------------------- file writers
def write_safetensors(path, tensors, float_dtype="F32"):
    """tensors: dict name -> torch tensor (floats stored as float_dtype, F32
    or F16; int64 as I64)."""
    import numpy as np
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        a = t.detach().cpu().numpy()
        if a.dtype in (np.float64, np.float32) and float_dtype == "F16":
            a, dt = a.astype("<f2"), "F16"
        elif a.dtype in (np.float64, np.float32):
            a, dt = a.astype("<f4"), "F32"
        elif a.dtype == np.int64:
            a, dt = a.astype("<i8"), "I64"
        elif a.dtype == np.int32:
            a, dt = a.astype("<i4"), "I32"
        else:
            raise ValueError("dtype %s" % a.dtype)
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def save_npy(path, a):
    import numpy as np
    np.save(path, a)


# ---------------------------------------------------------------- running ncc
class Ctx:
    def __init__(self, name, ncc, work):
        self.name, self.ncc, self.work = name, ncc, work
        os.makedirs(work, exist_ok=True)

    def path(self, f):
        return os.path.join(self.work, f)

    def cleanup(self):
        """After a pass: the working directory goes, unless NCC_KEEP_WORK=1."""
        import shutil
        if os.environ.get("NCC_KEEP_WORK") != "1":
            shutil.rmtree(self.work, ignore_errors=True)

    def run_ncc(self, args, env=None, timeout=900):
        e = dict(os.environ)
        e.update(env or {})
        cmd = [self.ncc, "run"] + args
        print("$", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, universal_newlines=True, errors="replace")
        if p.stdout:
            print(p.stdout.rstrip())
        if p.stderr:
            print(p.stderr.rstrip())
        if p.returncode < 0:
            raise Failure("ncc was killed by signal %d" % -p.returncode)
        return p


class Failure(Exception):
    pass


class Skip(Exception):
    """The case cannot run here (a tool is missing, or the machine makes it
    moot); main() exits 77, ctest's SKIP_RETURN_CODE."""


def check_close(name, got, ref):
    import numpy as np
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        raise Failure("output %s: shape %s, PyTorch's is %s" % (name, got.shape, ref.shape))
    if got.dtype != np.float32:
        raise Failure("output %s: dtype %s, expected float32" % (name, got.dtype))
    if not np.all(np.isfinite(got)):
        raise Failure("output %s: %d non-finite values" % (name, int(np.sum(~np.isfinite(got)))))
    err = np.abs(got.astype(np.float64) - ref)
    scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    tol = RTOL * scale
    m = float(err.max()) if err.size else 0.0
    print("output %s %s: max|err| = %.3g, tolerance %.3g (= %g * max(1, max|ref| = %.4g))"
          % (name, tuple(ref.shape), m, tol, RTOL, scale))
    if m > tol:
        idx = np.argwhere(err > tol)[:5]
        for i in idx:
            i = tuple(int(k) for k in i)
            print("  at %s: ncc %.7g, PyTorch %.7g" % (i, got[i], ref[i]))
        raise Failure("output %s differs from PyTorch: max|err| %.3g > %.3g (%d of %d elements)"
                      % (name, m, tol, int(np.sum(err > tol)), err.size))


def check_nonfinite(name, got, ref):
    """check_close for outputs that may hold NaN and infinities: NaN exactly
    where PyTorch has NaN, the same infinity where PyTorch has one, and the
    usual tolerance (scaled by the largest finite reference value) elsewhere,
    where a non-finite value from ncc is an error like any other."""
    import numpy as np
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        raise Failure("output %s: shape %s, PyTorch's is %s" % (name, got.shape, ref.shape))
    if got.dtype != np.float32:
        raise Failure("output %s: dtype %s, expected float32" % (name, got.dtype))
    g = got.astype(np.float64)
    rnan, rinf, fin = np.isnan(ref), np.isinf(ref), np.isfinite(ref)
    print("output %s %s: PyTorch has %d NaN, %d +inf, %d -inf, %d finite; ncc %d NaN, %d +inf, %d -inf"
          % (name, tuple(ref.shape), int(rnan.sum()), int((ref == np.inf).sum()), int((ref == -np.inf).sum()),
             int(fin.sum()), int(np.isnan(g).sum()), int((g == np.inf).sum()), int((g == -np.inf).sum())))

    def show(mask, what):
        for i in np.argwhere(mask)[:5]:
            i = tuple(int(k) for k in i)
            print("  at %s: ncc %.7g, PyTorch %.7g" % (i, got[i], ref[i]))
        raise Failure("output %s: %s at %d of %d elements" % (name, what, int(mask.sum()), mask.size))

    if np.any(rnan != np.isnan(g)):
        show(rnan != np.isnan(g), "NaN where PyTorch has none or a value where PyTorch has NaN")
    if np.any(rinf & (g != ref)):
        show(rinf & (g != ref), "not PyTorch's infinity")
    scale = max(1.0, float(np.max(np.abs(ref[fin]))) if fin.any() else 1.0)
    tol = RTOL * scale
    err = np.where(fin, np.abs(g - np.where(fin, ref, 0.0)), 0.0)
    err[fin & ~np.isfinite(g)] = np.inf
    m = float(err.max()) if err.size else 0.0
    print("  finite elements: max|err| = %.3g, tolerance %.3g" % (m, tol))
    if m > tol:
        show(err > tol, "differs from PyTorch by more than %.3g" % tol)


def run_and_compare(ctx, net_text, params, inputs, refs, flags=(), env=None, net_path=None, compare=None):
    """net_text: the model (written to ctx.work) unless net_path names one.
    params: state_dict-named tensors (None: no --weights); inputs: name -> numpy;
    refs: output name -> numpy reference; compare: check_close unless given."""
    import numpy as np
    if net_path is None:
        net_path = ctx.path(ctx.name + ".net")
        with open(net_path, "w") as f:
            f.write(net_text)
    dev = oracle_device()
    args = [net_path] + (["--device", "cuda", "--jit"] if dev == "jit" else ["--device", dev])
    if params is not None:
        wpath = ctx.path("weights.safetensors")
        write_safetensors(wpath, params)
        args += ["--weights", wpath]
    for k, v in inputs.items():
        p = ctx.path("in_%s.npy" % k)
        save_npy(p, v)
        args += ["--input", "%s=%s" % (k, p)]
    outs = {}
    for k in refs:
        p = ctx.path("out_%s.npy" % k)
        if os.path.exists(p):
            os.unlink(p)
        outs[k] = p
        args += ["--output", "%s=%s" % (k, p)]
    args += list(flags)
    p = ctx.run_ncc(args, env=env)
    if p.returncode != 0:
        raise Failure("ncc run exited with status %d" % p.returncode)
    want = "device: emu" if dev == "emu" else "device: cuda"
    if want not in p.stdout:
        raise Failure("ncc run did not say '%s' (stdout: %r)" % (want, p.stdout))
    env = env or {}
    if dev != "emu":
        pass    # checked mode and fiber order are the emulator's; on a GPU the case just runs there
    elif ("--check" in flags or env.get("NCC_CHECK") == "1") and "checked" not in p.stdout:
        raise Failure("checked mode was asked for but the emulator is not in it")
    elif env.get("NCC_FIBER_ORDER") == "reverse" and "reverse fiber order" not in p.stdout:
        raise Failure("reverse fiber order was asked for but not reported")
    elif env.get("NCC_STREAM_ORDER") in STREAM_ORDERS and STREAM_ORDERS[env["NCC_STREAM_ORDER"]] not in p.stdout:
        raise Failure("NCC_STREAM_ORDER=%s was asked for but not reported" % env["NCC_STREAM_ORDER"])
    for k, path in outs.items():
        if not os.path.exists(path):
            raise Failure("ncc run wrote no %s" % path)
        (compare or check_close)(k, np.load(path), refs[k])


# ---------------------------------------------------------------- helpers
def oracle_device():
    """NCC_ORACLE_DEVICE=cuda (or jit: kernels by NVRTC) runs the numeric cases
    on a GPU instead of the emulator; the default, and CI's, is emu."""
    d = os.environ.get("NCC_ORACLE_DEVICE", "emu")
    if d not in ("emu", "cuda", "jit"):
        raise Failure("NCC_ORACLE_DEVICE must be emu, cuda or jit, got %r" % d)
    return d


def seed(s):
    import torch
    torch.manual_seed(s)


def rand(*shape, lo=-1.0, hi=1.0):
    import torch
    return torch.rand(*shape, dtype=torch.float64) * (hi - lo) + lo


def f32np(t):
    return t.detach().numpy().astype("float32")


def as64(t):
    """The float32 value ncc will see, in float64 for the reference."""
    import torch
    return t.to(torch.float32).to(torch.float64)


def dims(shape):
    return ", ".join(str(d) for d in shape)


def pair(v):
    return "[%d, %d]" % tuple(v) if isinstance(v, (tuple, list)) else str(v)


# ---------------------------------------------------------------- op cases
# Out channels per group >= 8 take the GEMM paths (tiled kernel by default,
# ncc_sgemm with --cublas); fewer (small_out, depthwise) the direct kernel.
CONV_VARIANTS = {
    # name: (N, C, H, W, out, kernel, stride, pad, dilation, groups, bias)
    "k3":        (2, 3, 8, 8, 16, 3, 1, 0, 1, 1, True),
    "k3_s2_p1":  (2, 3, 9, 9, 12, 3, 2, 1, 1, 1, True),
    "k5_p2":     (1, 2, 7, 7, 8, 5, 1, 2, 1, 1, True),
    "k1":        (2, 8, 5, 5, 16, 1, 1, 0, 1, 1, True),
    "k1_s2":     (2, 8, 6, 6, 12, 1, 2, 0, 1, 1, False),
    "k1_p1":     (1, 5, 4, 4, 9, 1, 1, 1, 1, 1, True),
    "dil2":      (1, 3, 11, 11, 8, 3, 1, 2, 2, 1, True),
    "groups2":   (2, 4, 7, 7, 16, 3, 1, 1, 1, 2, True),
    "groups4":   (1, 16, 6, 6, 40, 3, 2, 1, 1, 4, False),
    "depthwise": (2, 6, 8, 8, 6, 3, 1, 1, 1, 6, False),
    "dw_s2":     (1, 8, 9, 9, 8, 3, 2, 1, 1, 8, True),
    "dw_mult2":  (1, 4, 7, 7, 8, 3, 1, 1, 1, 4, True),
    "asym_k":    (2, 3, 9, 10, 8, (3, 1), 1, (1, 0), 1, 1, True),
    "asym_all":  (1, 3, 11, 13, 10, (3, 5), (2, 3), (1, 2), 1, 1, True),
    "nobias":    (2, 5, 6, 6, 9, 3, 1, 1, 1, 1, False),
    # split-K (ir_gemm_split_k): few output tiles, a long K
    "splitk":    (1, 64, 9, 9, 48, 3, 1, 1, 1, 1, True),
    "splitk_groups2": (2, 64, 6, 6, 32, 3, 1, 1, 1, 2, True),
    "odd":       (3, 5, 13, 7, 9, 3, 2, 0, 1, 1, True),
    "small_out": (2, 3, 8, 8, 4, 3, 1, 1, 1, 1, True),
    "wide":      (1, 16, 10, 10, 72, 3, 1, 1, 1, 1, True),
    # the larger tensor-core tiles (--gemm-tile=128x64, 64x128, 128x128): more
    # than 128 output channels and columns, neither a multiple of the tile
    "tile_big":  (2, 12, 9, 9, 130, 3, 1, 1, 1, 1, True),
    "tile_big_g2": (2, 12, 9, 9, 140, 3, 1, 1, 1, 2, True),
    # in/groups a multiple of 16 (ir_conv_tap_major_ok): the weight reordered tap-major at load, a K
    # tile one tap's channels; with stride, dilation and padding, one axis of taps, no padding, groups
    "tap_s2_d2":  (2, 32, 11, 10, 24, 3, 2, 2, 2, 1, True),
    "tap_k3x1":   (2, 16, 7, 8, 16, (3, 1), 1, (1, 0), 1, 1, False),
    "tap_k1x3":   (1, 16, 6, 7, 20, (1, 3), 1, (0, 1), 1, 1, True),
    "tap_nopad_g2": (2, 32, 6, 6, 32, 3, 1, 0, 1, 2, True),
    "tap_big":    (2, 32, 9, 9, 130, 3, 1, 1, 1, 1, True),
    # split-K with index digits (in/groups not a multiple of 16; K 216, no whole number of K tiles)
    "splitk_digits": (1, 24, 9, 9, 48, 3, 1, 1, 1, 1, True),
    # 64 or more output channels and columns: the float32 tiles double-buffered (ir_fp32_pipe_ok), their B
    # fetched a K tile ahead from the rows' table (a 7 x 7 stem), by index digits (K past the table, split-K),
    # a 1 x 1's channels (K 20, no whole K tile), tap-major channels with split-K
    "pipe_stem":   (2, 3, 12, 12, 64, 7, 2, 3, 1, 1, True),
    "pipe_digits": (1, 60, 9, 9, 66, 3, 1, 1, 1, 1, True),
    "pipe_k1":     (2, 20, 8, 8, 72, 1, 1, 0, 1, 1, True),
    "pipe_tap_splitk": (1, 96, 9, 9, 64, 3, 1, 1, 1, 1, False),
}
# The tensor-core cases' own (tc_conv_case alone, not the float32 conv cases): 1x1, stride 1, no padding,
# pixels a multiple of 8 (with a relu before it, the image stored narrow at fp16/bf16: B by cp.async and
# ldmatrix.trans, GemmSpec.b_nvec); N and K fit no tile; groups; one image; pixels a multiple of 4, not
# of 8 (8-byte copies)
TC_CONV_VARIANTS = {
    "k1_nvec":    (2, 24, 8, 10, 40, 1, 1, 0, 1, 1, True),
    "k1_nvec_g2": (2, 48, 4, 6, 36, 1, 1, 0, 1, 2, False),
    "k1_nvec_1img": (1, 20, 8, 8, 24, 1, 1, 0, 1, 1, True),
    "k1_nvec_big": (2, 40, 12, 12, 130, 1, 1, 0, 1, 1, True),
    "k1_nvec4":   (2, 16, 6, 6, 24, 1, 1, 0, 1, 1, True),
}


def gemm_path_check(ctx, net_path, cublas, must_gemm):
    """The generated code must take the path the test means (conv, linear,
    matmul): no ncc_sgemm on
    the default (tiled) path; ncc_sgemm with --cublas where the conv is wide
    enough for a GEMM (out channels per group >= 16; codegen sends narrower
    ones to its direct kernel)."""
    cu = ctx.path("gen.cu")
    cmd = [ctx.ncc, net_path, "-o", cu] + (["--cublas"] if cublas else [])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise Failure("%s failed: %s" % (" ".join(cmd), p.stderr))
    uses = "ncc_sgemm(" in open(cu).read()
    if not cublas and uses:
        raise Failure("the default path calls ncc_sgemm; it should use the tiled kernels")
    if cublas and must_gemm and not uses:
        raise Failure("--cublas did not route this convolution through ncc_sgemm")
    print("generated code %s ncc_sgemm" % ("calls" if uses else "does not call"))


def conv_case(ctx, variant, cublas=False, env=None, flags=()):
    import torch.nn.functional as F
    N, C, H, W, O, k, s, p, d, g, bias = {**CONV_VARIANTS, **CONV_VARIANTS_CUBLAS_ONLY}[variant]
    kh, kw = k if isinstance(k, tuple) else (k, k)
    seed(1)
    x = as64(rand(N, C, H, W))
    w = as64(rand(O, C // g, kh, kw) / (C // g * kh * kw) ** 0.5)
    b = as64(rand(O)) if bias else None
    net = ("model %s\ninput x: f32[%s]\n"
           "y = conv2d(x, %d, kernel=%s, stride=%s, pad=%s, dilation=%d, groups=%d, bias=%s, name=\"conv\")\n"
           "output y\n" % (ctx.name, dims((N, C, H, W)), O, pair(k), pair(s), pair(p), d, g,
                           "true" if bias else "false"))
    ref = F.conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=g)
    params = {"conv.weight": w}
    if bias:
        params["conv.bias"] = b
    run_and_compare(ctx, net, params, {"x": f32np(x)}, {"y": ref.numpy()},
                    flags=(["--cublas"] if cublas else []) + list(flags), env=env)
    gemm_path_check(ctx, ctx.path(ctx.name + ".net"), cublas, O // g >= 16)


for _v in CONV_VARIANTS:
    case("conv_" + _v, ["op", "conv"])(lambda ctx, v=_v: conv_case(ctx, v))
    if _v.startswith("tap_") or _v == "splitk_digits":
        continue   # shapes for the tiled kernels' loads; the cuBLAS path takes the weight as declared
    case("conv_" + _v + "_cublas", ["op", "conv", "cublas"])(lambda ctx, v=_v: conv_case(ctx, v, cublas=True))
# cuBLAS path with more im2col columns than one 64 MiB chunk holds (37.7 MB
# an image): the images go through the workspace in two chunks
CONV_VARIANTS_CUBLAS_ONLY = {"chunks": (2, 64, 130, 130, 16, 3, 1, 0, 1, 1, True)}
case("conv_chunks_cublas", ["op", "conv", "cublas"])(lambda ctx: conv_case(ctx, "chunks", cublas=True))
case("conv_k3_s2_p1_reverse", ["op", "conv", "fiber"])(
    lambda ctx: conv_case(ctx, "k3_s2_p1", env={"NCC_FIBER_ORDER": "reverse"}))
case("conv_wide_check", ["op", "conv", "check"])(
    lambda ctx: conv_case(ctx, "wide", env={"NCC_CHECK": "1"}))
case("conv_tap_s2_d2_checked_reverse", ["op", "conv", "check", "fiber"])(
    lambda ctx: conv_case(ctx, "tap_s2_d2", env=CHECKED_REVERSE))


def linear_case(ctx, n, i, o, bias, cublas=False, env=None, flags=()):
    import torch.nn.functional as F
    seed(2)
    x = as64(rand(n, i))
    w = as64(rand(o, i) / i ** 0.5)
    b = as64(rand(o)) if bias else None
    net = ("model %s\ninput x: f32[%d, %d]\ny = linear(x, %d, bias=%s, name=\"fc\")\noutput y\n"
           % (ctx.name, n, i, o, "true" if bias else "false"))
    params = {"fc.weight": w}
    if bias:
        params["fc.bias"] = b
    run_and_compare(ctx, net, params, {"x": f32np(x)}, {"y": F.linear(x, w, b).numpy()},
                    flags=(["--cublas"] if cublas else []) + list(flags), env=env)
    gemm_path_check(ctx, ctx.path(ctx.name + ".net"), cublas, True)


case("linear", ["op"])(lambda ctx: linear_case(ctx, 4, 20, 7, True))
case("linear_nobias", ["op"])(lambda ctx: linear_case(ctx, 3, 33, 5, False))
case("linear_big", ["op"])(lambda ctx: linear_case(ctx, 8, 130, 70, True))
case("linear_cublas", ["op", "cublas"])(lambda ctx: linear_case(ctx, 8, 130, 70, True, cublas=True))


# GEMV (ir_gemm_gemv: linear and matmul with at most 8 rows; docs/gpu.md
# "GEMV"): 1, 2 and 3 rows, K not a multiple of the 32 slices nor of the four
# slices a step, output columns not a multiple of a block's, with and without
# bias and epilogues (an activation, a residual add reading a second input);
# a build for 8 rows (two row blocks) run at 8, 5 and 1 rows (the row grid
# follows the batch) in checked mode; the row counts just past the GEMV
# (9 and 20 rows: the tiled GEMM) for contrast.  gemv_path_check: the kernel
# the case means.
def gemv_path_check(ctx, net_path, gemv):
    cu = ctx.path("gemv.cu")
    p = subprocess.run([ctx.ncc, net_path, "-o", cu], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise Failure("ncc %s failed: %s" % (net_path, p.stderr))
    has = "_gemv" in open(cu).read()
    if has != gemv:
        raise Failure("the generated code %s a GEMV kernel; this case means %s" %
                      ("has" if has else "has no", "a GEMV" if gemv else "the tiled GEMM"))


def gemv_linear_case(ctx, rows, i, o, bias, act, compiled=None, residual=False, env=None, flags=()):
    import torch
    import torch.nn.functional as F
    seed(11)
    x = as64(rand(rows, i))
    w = as64(rand(o, i) / i ** 0.5)
    b = as64(rand(o)) if bias else None
    r = as64(rand(rows, o)) if residual else None
    n = compiled or rows
    h = "linear(x, %d, bias=%s, name=\"fc\")" % (o, "true" if bias else "false")
    if residual:
        h = "(%s + r)" % h
    net = ("model %s\ninput x: f32[%d, %d]\n%sy = %s\noutput y\n"
           % (ctx.name, n, i, "input r: f32[%d, %d]\n" % (n, o) if residual else "", "%s(%s)" % (act, h) if act else h))
    ref = F.linear(x, w, b)
    if residual:
        ref = ref + r
    if act:
        ref = {"relu": F.relu, "gelu": F.gelu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}[act](ref)
    params = {"fc.weight": w}
    if bias:
        params["fc.bias"] = b
    inputs = {"x": f32np(x)}
    if residual:
        inputs["r"] = f32np(r)
    run_and_compare(ctx, net, params, inputs, {"y": ref.numpy()}, flags=flags, env=env)
    gemv_path_check(ctx, ctx.path(ctx.name + ".net"), n <= 8)


def gemv_matmul_case(ctx, sa, sb, act=None):
    import torch
    seed(12)
    a, b = as64(rand(*sa)), as64(rand(*sb) / sb[-2] ** 0.5)
    y = "matmul(a, b)"
    net = ("model %s\ninput a: f32[%s]\ninput b: f32[%s]\ny = %s\noutput y\n"
           % (ctx.name, dims(sa), dims(sb), "%s(%s)" % (act, y) if act else y))
    ref = torch.matmul(a, b)
    if act:
        ref = {"relu": torch.relu, "tanh": torch.tanh}[act](ref)
    run_and_compare(ctx, net, None, {"a": f32np(a), "b": f32np(b)}, {"y": ref.numpy()})
    m = sa[-2] if len(sa) > 1 else 1
    gemv_path_check(ctx, ctx.path(ctx.name + ".net"), m <= 8)


for _rows in (1, 2, 3):
    case("gemv_linear_r%d" % _rows, ["op", "gemv"])(
        lambda ctx, r=_rows: gemv_linear_case(ctx, r, 203, 37, True, None))
    case("gemv_linear_r%d_nobias" % _rows, ["op", "gemv"])(
        lambda ctx, r=_rows: gemv_linear_case(ctx, r, 96, 16, False, None))
    case("gemv_linear_r%d_relu" % _rows, ["op", "gemv", "fusion"])(
        lambda ctx, r=_rows: gemv_linear_case(ctx, r, 130, 70, True, "relu"))
    case("gemv_linear_r%d_add_gelu" % _rows, ["op", "gemv", "fusion"])(
        lambda ctx, r=_rows: gemv_linear_case(ctx, r, 75, 9, False, "gelu", residual=True))
    case("gemv_matmul_r%d" % _rows, ["op", "gemv"])(
        lambda ctx, r=_rows: gemv_matmul_case(ctx, (r, 150), (150, 45)))
    case("gemv_matmul_r%d_tanh" % _rows, ["op", "gemv", "fusion"])(
        lambda ctx, r=_rows: gemv_matmul_case(ctx, (r, 33), (33, 70), "tanh"))
case("gemv_matmul_vec", ["op", "gemv"])(lambda ctx: gemv_matmul_case(ctx, (140,), (140, 20)))
case("gemv_matmul_batched", ["op", "gemv"])(lambda ctx: gemv_matmul_case(ctx, (2, 3, 2, 40), (2, 3, 40, 33), "relu"))
case("gemv_linear_r8", ["op", "gemv"])(lambda ctx: gemv_linear_case(ctx, 8, 300, 50, True, "sigmoid"))
case("gemv_linear_r6_reverse", ["op", "gemv", "fiber"])(
    lambda ctx: gemv_linear_case(ctx, 6, 300, 50, True, "relu", env={"NCC_FIBER_ORDER": "reverse"}))
for _b in (8, 5, 1):
    case("gemv_linear_n8_b%d" % _b, ["op", "gemv", "batch", "check"])(
        lambda ctx, b=_b: gemv_linear_case(ctx, b, 517, 1000, True, "relu", compiled=8, residual=True,
                                           flags=["--check"]))
case("gemv_linear_r9_tiled", ["op", "gemv"])(lambda ctx: gemv_linear_case(ctx, 9, 130, 70, True, "relu"))
case("gemv_matmul_r20_tiled", ["op", "gemv"])(lambda ctx: gemv_matmul_case(ctx, (20, 33), (33, 70), "tanh"))


def matmul_case(ctx, sa, sb, cublas=False, env=None, flags=()):
    import torch
    seed(3)
    a, b = as64(rand(*sa)), as64(rand(*sb))
    net = ("model %s\ninput a: f32[%s]\ninput b: f32[%s]\ny = matmul(a, b)\noutput y\n"
           % (ctx.name, dims(sa), dims(sb)))
    run_and_compare(ctx, net, None, {"a": f32np(a), "b": f32np(b)}, {"y": torch.matmul(a, b).numpy()},
                    flags=(["--cublas"] if cublas else []) + list(flags), env=env)
    gemm_path_check(ctx, ctx.path(ctx.name + ".net"), cublas, cublas)


case("matmul_2d", ["op"])(lambda ctx: matmul_case(ctx, (5, 7), (7, 3)))
case("matmul_batched", ["op"])(lambda ctx: matmul_case(ctx, (2, 3, 4, 6), (2, 3, 6, 5)))
case("matmul_broadcast", ["op"])(lambda ctx: matmul_case(ctx, (2, 1, 4, 6), (3, 6, 5)))
case("matmul_broadcast_2d", ["op"])(lambda ctx: matmul_case(ctx, (3, 4, 6), (6, 5)))
case("matmul_batched_cublas", ["op", "cublas"])(lambda ctx: matmul_case(ctx, (2, 3, 4, 6), (2, 3, 6, 5), cublas=True))


@case("batchnorm2d", ["op"])
def _bn(ctx, eps=None, shape=(2, 5, 6, 7), env=None):
    import torch.nn.functional as F
    seed(4)
    C = shape[1]
    x = as64(rand(*shape, lo=-2, hi=2))
    w, b = as64(rand(C, lo=0.5, hi=1.5)), as64(rand(C))
    rm, rv = as64(rand(C, lo=-0.5, hi=0.5)), as64(rand(C, lo=0.3, hi=2.0))
    e = 1e-5 if eps is None else eps
    net = ("model %s\ninput x: f32[%s]\ny = batchnorm2d(x%s, name=\"bn\")\noutput y\n"
           % (ctx.name, dims(shape), "" if eps is None else ", eps=%g" % eps))
    import torch
    params = {"bn.weight": w, "bn.bias": b, "bn.running_mean": rm, "bn.running_var": rv,
              "bn.num_batches_tracked": torch.tensor(7, dtype=torch.int64)}
    ref = F.batch_norm(x, rm, rv, w, b, training=False, eps=e)
    run_and_compare(ctx, net, params, {"x": f32np(x)}, {"y": ref.numpy()}, env=env)


case("batchnorm2d_eps", ["op"])(lambda ctx: _bn(ctx, eps=0.1, shape=(1, 3, 4, 5)))


def layernorm_case(ctx, shape, eps=None, env=None):
    import torch.nn.functional as F
    seed(5)
    D = shape[-1]
    x = as64(rand(*shape, lo=-3, hi=3))
    w, b = as64(rand(D, lo=0.5, hi=1.5)), as64(rand(D))
    e = 1e-5 if eps is None else eps
    net = ("model %s\ninput x: f32[%s]\ny = layernorm(x%s, name=\"ln\")\noutput y\n"
           % (ctx.name, dims(shape), "" if eps is None else ", eps=%g" % eps))
    ref = F.layer_norm(x, (D,), w, b, eps=e)
    run_and_compare(ctx, net, {"ln.weight": w, "ln.bias": b}, {"x": f32np(x)}, {"y": ref.numpy()}, env=env)


case("layernorm", ["op"])(lambda ctx: layernorm_case(ctx, (2, 5, 16)))
case("layernorm_2d_eps", ["op"])(lambda ctx: layernorm_case(ctx, (3, 300), eps=1e-3))
case("layernorm_reverse", ["op", "fiber"])(
    lambda ctx: layernorm_case(ctx, (4, 130), env={"NCC_FIBER_ORDER": "reverse"}))

ACTIVATIONS = {
    "relu": lambda F, x: F.relu(x),
    "relu6": lambda F, x: F.relu6(x),
    "sigmoid": lambda F, x: F.sigmoid(x),
    "tanh": lambda F, x: F.tanh(x),
    "gelu": lambda F, x: F.gelu(x),
    "silu": lambda F, x: F.silu(x),
    "hardswish": lambda F, x: F.hardswish(x),
    "leaky_relu": lambda F, x: F.leaky_relu(x, 0.01),
}


def act_case(ctx, act, call=None, ref=None):
    import torch.nn.functional as F
    seed(6)
    shape = (2, 3, 5, 7)
    x = as64(rand(*shape, lo=-8, hi=8))
    call = call or "%s(x)" % act
    net = "model %s\ninput x: f32[%s]\ny = %s\noutput y\n" % (ctx.name, dims(shape), call)
    r = (ref or ACTIVATIONS[act])(F, x)
    run_and_compare(ctx, net, None, {"x": f32np(x)}, {"y": r.numpy()})


for _a in ACTIVATIONS:
    case("act_" + _a, ["op", "act"])(lambda ctx, a=_a: act_case(ctx, a))
case("act_leaky_relu_slope", ["op", "act"])(
    lambda ctx: act_case(ctx, None, "leaky_relu(x, slope=0.2)", lambda F, x: F.leaky_relu(x, 0.2)))
case("act_chain", ["op", "act"])(
    lambda ctx: act_case(ctx, None, "hardswish(tanh(relu6(x) - 3.0) * 4.0) + sigmoid(x)",
                         lambda F, x: F.hardswish(F.tanh(F.relu6(x) - 3.0) * 4.0) + F.sigmoid(x)))
case("dropout_identity", ["op"])(
    lambda ctx: act_case(ctx, None, "dropout2d(dropout(x, 0.5), 0.3)", lambda F, x: x))


def pool_case(ctx, kind, shape, k, s=None, p=None, env=None, lo=-2.0, hi=2.0, d=None):
    import torch.nn.functional as F
    seed(7)
    x = as64(rand(*shape, lo=lo, hi=hi))
    extra = ""
    if s is not None:
        extra += ", stride=%s" % pair(s)
    if p is not None:
        extra += ", pad=%s" % pair(p)
    if d is not None:
        extra += ", dilation=%s" % pair(d)
    net = ("model %s\ninput x: f32[%s]\ny = %s(x, %s%s)\noutput y\n"
           % (ctx.name, dims(shape), kind, pair(k), extra))
    stride = k if s is None else s
    pad = 0 if p is None else p
    if kind == "maxpool2d":
        ref = F.max_pool2d(x, k, stride, pad, 1 if d is None else d)
    else:   # PyTorch's default count_include_pad=True: padding zeros count in the mean
        ref = F.avg_pool2d(x, k, stride, pad)
    run_and_compare(ctx, net, None, {"x": f32np(x)}, {"y": ref.numpy()}, env=env)


POOLS = {
    "k2": ((2, 3, 8, 8), 2, None, None),
    "k3_s2_p1": ((2, 4, 9, 9), 3, 2, 1),
    "k3_s1": ((1, 2, 7, 6), 3, 1, None),
    "k2_odd": ((2, 3, 7, 9), 2, None, None),
    "k3_s2_odd": ((1, 3, 10, 11), 3, 2, None),
    "asym": ((1, 2, 8, 9), (2, 3), (2, 1), (1, 1)),
}
for _k in ("maxpool2d", "avgpool2d"):
    for _v in POOLS:
        case("%s_%s" % (_k, _v), ["op", "pool"])(
            lambda ctx, k=_k, v=_v: pool_case(ctx, k, *POOLS[v]))


# dilated max pooling (nn.MaxPool2d's dilation)
case("maxpool2d_dil2", ["op", "pool"])(lambda ctx: pool_case(ctx, "maxpool2d", (2, 3, 9, 10), 3, 1, 1, d=2))
case("maxpool2d_dil_asym", ["op", "pool"])(
    lambda ctx: pool_case(ctx, "maxpool2d", (1, 2, 11, 9), (2, 3), (2, 1), (1, 1), d=(3, 2)))

# all inputs negative: padding must not take part in a max (PyTorch pads with -inf)
case("maxpool2d_negative_pad", ["op", "pool"])(
    lambda ctx: pool_case(ctx, "maxpool2d", (1, 2, 6, 7), 3, 2, 1, lo=-3.0, hi=-0.5))


@case("global_avgpool2d", ["op", "pool"])
def _gap(ctx, shape=(2, 5, 7, 6), env=None):
    seed(8)
    x = as64(rand(*shape))
    net = "model %s\ninput x: f32[%s]\ny = global_avgpool2d(x)\noutput y\n" % (ctx.name, dims(shape))
    ref = x.mean(dim=(2, 3), keepdim=True)
    run_and_compare(ctx, net, None, {"x": f32np(x)}, {"y": ref.numpy()}, env=env)


case("global_avgpool2d_big_reverse", ["op", "pool", "fiber"])(
    lambda ctx: _gap(ctx, (2, 3, 31, 33), env={"NCC_FIBER_ORDER": "reverse"}))


def binary_case(ctx, expr, sa, sb, fn):
    seed(9)
    a = as64(rand(*sa, lo=-2, hi=2))
    # denominators away from zero: |b| in [0.5, 2]
    b = rand(*sb, lo=0.5, hi=2.0)
    b = as64(b * (rand(*sb) > 0).to(b.dtype).mul(2).sub(1))
    net = ("model %s\ninput a: f32[%s]\ninput b: f32[%s]\ny = %s\noutput y\n"
           % (ctx.name, dims(sa), dims(sb), expr))
    run_and_compare(ctx, net, None, {"a": f32np(a), "b": f32np(b)}, {"y": fn(a, b).numpy()})


BINARY = {
    "add": ("add(a, b)", lambda a, b: a + b),
    "sub": ("sub(a, b)", lambda a, b: a - b),
    "mul": ("mul(a, b)", lambda a, b: a * b),
    "div": ("div(a, b)", lambda a, b: a / b),
    "ops": ("(a + b) * a - a / b", lambda a, b: (a + b) * a - a / b),
}
BSHAPES = {
    "same": ((2, 3, 4, 5), (2, 3, 4, 5)),
    "bcast": ((2, 3, 4, 5), (3, 1, 5)),
    "bcast_both": ((2, 1, 4, 1), (1, 3, 1, 5)),
    "bcast_channel": ((2, 6, 3, 3), (1, 6, 1, 1)),
}
for _o in BINARY:
    for _s in BSHAPES:
        if _o != "ops" and _s == "bcast_both" and _o not in ("add", "div"):
            continue
        case("%s_%s" % (_o, _s), ["op", "binary"])(
            lambda ctx, o=_o, s=_s: binary_case(ctx, BINARY[o][0], *BSHAPES[s], BINARY[o][1]))
case("scalar_arith", ["op", "binary"])(
    lambda ctx: act_case(ctx, None, "x * 0.5 + 1.0 - x / 4.0", lambda F, x: x * 0.5 + 1.0 - x / 4.0))


def concat_case(ctx, shapes, axis):
    import torch
    seed(10)
    xs = [as64(rand(*s)) for s in shapes]
    names = ["x%d" % i for i in range(len(xs))]
    net = "model %s\n" % ctx.name
    for n, s in zip(names, shapes):
        net += "input %s: f32[%s]\n" % (n, dims(s))
    net += "y = concat(%s, axis=%d)\noutput y\n" % (", ".join(names), axis)
    run_and_compare(ctx, net, None, {n: f32np(x) for n, x in zip(names, xs)},
                    {"y": torch.cat(xs, dim=axis).numpy()})


case("concat_axis1", ["op", "move"])(lambda ctx: concat_case(ctx, [(2, 3, 4, 4), (2, 5, 4, 4)], 1))
case("concat_axis0", ["op", "move"])(lambda ctx: concat_case(ctx, [(1, 3, 2), (3, 3, 2)], 0))
case("concat_axis_last", ["op", "move"])(
    lambda ctx: concat_case(ctx, [(2, 3, 4), (2, 3, 1), (2, 3, 6)], -1))
case("concat_axis2_three", ["op", "move"])(
    lambda ctx: concat_case(ctx, [(2, 2, 3, 5), (2, 2, 1, 5), (2, 2, 4, 5)], 2))


def shape_case(ctx, shape, expr, fn):
    seed(11)
    x = as64(rand(*shape))
    # `+ 0.0`-free: a shape-only op as the output must still be materialised
    net = "model %s\ninput x: f32[%s]\ny = %s\noutput y\n" % (ctx.name, dims(shape), expr)
    run_and_compare(ctx, net, None, {"x": f32np(x)}, {"y": fn(x).numpy()})


case("flatten", ["op", "shape"])(lambda ctx: shape_case(ctx, (2, 3, 4, 5), "flatten(x)", lambda x: x.flatten(1)))
case("reshape", ["op", "shape"])(
    lambda ctx: shape_case(ctx, (2, 3, 4, 5), "reshape(x, [6, -1, 2])", lambda x: x.reshape(6, -1, 2)))
case("transpose_nhwc", ["op", "shape"])(
    lambda ctx: shape_case(ctx, (2, 3, 4, 5), "transpose(x, [0, 2, 3, 1])", lambda x: x.permute(0, 2, 3, 1)))
case("transpose_2d", ["op", "shape"])(
    lambda ctx: shape_case(ctx, (7, 13), "transpose(x, [1, 0])", lambda x: x.t()))
case("transpose_relu_reshape", ["op", "shape"])(
    lambda ctx: shape_case(ctx, (2, 3, 4), "reshape(relu(transpose(x, [2, 0, 1])), [8, 3])",
                           lambda x: x.permute(2, 0, 1).relu().reshape(8, 3)))


def softmax_case(ctx, kind, shape, axis, env=None):
    import torch
    seed(12)
    x = as64(rand(*shape, lo=-6, hi=6))
    net = ("model %s\ninput x: f32[%s]\ny = %s(x%s)\noutput y\n"
           % (ctx.name, dims(shape), kind, "" if axis is None else ", axis=%d" % axis))
    a = -1 if axis is None else axis
    ref = torch.softmax(x, a) if kind == "softmax" else torch.log_softmax(x, a)
    run_and_compare(ctx, net, None, {"x": f32np(x)}, {"y": ref.numpy()}, env=env)


for _k in ("softmax", "log_softmax"):
    case(_k, ["op", "softmax"])(lambda ctx, k=_k: softmax_case(ctx, k, (4, 10), None))
    case(_k + "_axis1", ["op", "softmax"])(lambda ctx, k=_k: softmax_case(ctx, k, (2, 5, 3, 4), 1))
    case(_k + "_axis0", ["op", "softmax"])(lambda ctx, k=_k: softmax_case(ctx, k, (3, 4, 5), 0))
    case(_k + "_wide", ["op", "softmax"])(lambda ctx, k=_k: softmax_case(ctx, k, (3, 1000), -1))
    case(_k + "_wide_reverse", ["op", "softmax", "fiber"])(
        lambda ctx, k=_k: softmax_case(ctx, k, (3, 1000), -1, env={"NCC_FIBER_ORDER": "reverse"}))


def loss_case(ctx, kind):
    import torch
    import torch.nn.functional as F
    seed(13)
    N, C = 6, 5
    a = as64(rand(N, C, lo=-3, hi=3))
    y = torch.randint(0, C, (N,))
    if kind == "mse_loss":
        b = as64(rand(N, C))
        net = ("model %s\ninput a: f32[%d, %d]\ninput b: f32[%d, %d]\nloss = mse_loss(a, b)\noutput loss\n"
               % (ctx.name, N, C, N, C))
        ref = F.mse_loss(a, b)
        inputs = {"a": f32np(a), "b": f32np(b)}
    else:
        net = ("model %s\ninput a: f32[%d, %d]\ninput y: i32[%d]\nloss = %s(a, y)\noutput loss\n"
               % (ctx.name, N, C, N, kind))
        if kind == "nll_loss":
            a = torch.log_softmax(a, 1)
            ref = F.nll_loss(a, y)
        else:
            ref = F.cross_entropy(a, y)
        inputs = {"a": f32np(a), "y": y.numpy().astype("int32")}
    run_and_compare(ctx, net, None, inputs, {"loss": ref.reshape(tuple(ref.shape)).numpy()})


for _k in ("cross_entropy", "nll_loss", "mse_loss"):
    case("loss_" + _k, ["op", "loss"])(lambda ctx, k=_k: loss_case(ctx, k))


@case("multi_output", ["op"])
def _multi(ctx):
    import torch
    import torch.nn.functional as F
    seed(14)
    x = as64(rand(2, 3, 6, 6))
    w = as64(rand(4, 3, 3, 3) / 27 ** 0.5)
    net = ("model %s\ninput x: f32[2, 3, 6, 6]\n"
           "h = conv2d(x, 4, kernel=3, pad=1, bias=false, name=\"c\")\n"
           "p = maxpool2d(relu(h), 2)\nq = softmax(flatten(p))\noutput p, q\n" % ctx.name)
    p = F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2)
    q = torch.softmax(p.flatten(1), -1)
    run_and_compare(ctx, net, {"c.weight": w}, {"x": f32np(x)}, {"p": p.numpy(), "q": q.numpy()})


# ---------------------------------------------------------------- fusion shapes
# Graph patterns a fusion pass groups (elementwise chains, conv/GEMM
# epilogues, BN+ReLU, softmax after a GEMM, values used twice), each at -O0
# (no fusion, no memory plan), -O1 (memory plan: shared and in-place buffers)
# and -O3 (fusion, recompute); the results must not depend on the grouping or
# the placement.
def fusion_case(ctx, which, opt):
    import torch
    import torch.nn.functional as F
    seed(50)
    inputs, params, refs = {}, {}, {}
    if which == "conv_bn_relu_add":
        x, r = as64(rand(2, 4, 7, 7)), as64(rand(2, 16, 7, 7))
        w = as64(rand(16, 4, 3, 3) / 6.0)
        g, b = as64(rand(16, lo=0.5, hi=1.5)), as64(rand(16))
        rm, rv = as64(rand(16, lo=-0.2, hi=0.2)), as64(rand(16, lo=0.5, hi=1.5))
        net = ("input x: f32[2, 4, 7, 7]\ninput r: f32[2, 16, 7, 7]\n"
               "h = batchnorm2d(conv2d(x, 16, kernel=3, pad=1, bias=false, name=\"c\"), name=\"bn\")\n"
               "y = relu(h + r)\noutput y\n")
        params = {"c.weight": w, "bn.weight": g, "bn.bias": b, "bn.running_mean": rm, "bn.running_var": rv}
        inputs = {"x": x, "r": r}
        refs["y"] = F.relu(F.batch_norm(F.conv2d(x, w, padding=1), rm, rv, g, b, False, 0.0, 1e-5) + r)
    elif which == "fanout":
        x = as64(rand(2, 3, 6, 6))
        w = as64(rand(8, 3, 3, 3) / 5.0)
        net = ("input x: f32[2, 3, 6, 6]\nh = conv2d(x, 8, kernel=3, pad=1, bias=false, name=\"c\")\n"
               "a = relu(h)\nb = h * 2.0 - a\nm = maxpool2d(h, 2)\noutput a, b, m\n")
        params, inputs = {"c.weight": w}, {"x": x}
        h = F.conv2d(x, w, padding=1)
        refs = {"a": F.relu(h), "b": h * 2.0 - F.relu(h), "m": F.max_pool2d(h, 2)}
    elif which == "affine_bcast":
        x, sc, sh = as64(rand(2, 5, 4, 3)), as64(rand(1, 5, 1, 1)), as64(rand(5, 1, 1))
        net = ("input x: f32[2, 5, 4, 3]\ninput s: f32[1, 5, 1, 1]\ninput t: f32[5, 1, 1]\n"
               "y = sigmoid(x * s + t) * x\noutput y\n")
        inputs = {"x": x, "s": sc, "t": sh}
        refs["y"] = torch.sigmoid(x * sc + sh) * x
    elif which == "gated_linear":
        x = as64(rand(4, 24))
        w1, b1, w2 = as64(rand(32, 24) / 5.0), as64(rand(32)), as64(rand(32, 24) / 5.0)
        net = ("input x: f32[4, 24]\ny = gelu(linear(x, 32, name=\"a\")) * sigmoid(linear(x, 32, bias=false, name=\"b\"))\n"
               "output y\n")
        params, inputs = {"a.weight": w1, "a.bias": b1, "b.weight": w2}, {"x": x}
        refs["y"] = F.gelu(F.linear(x, w1, b1)) * torch.sigmoid(F.linear(x, w2))
    elif which == "attention":
        q, k, v = as64(rand(2, 6, 8)), as64(rand(2, 6, 8)), as64(rand(2, 6, 8))
        net = ("input q: f32[2, 6, 8]\ninput k: f32[2, 6, 8]\ninput v: f32[2, 6, 8]\n"
               "s = softmax(matmul(q, transpose(k, [0, 2, 1])) / 2.0)\ny = matmul(s, v)\noutput y\n")
        inputs = {"q": q, "k": k, "v": v}
        refs["y"] = torch.matmul(torch.softmax(torch.matmul(q, k.transpose(1, 2)) / 2.0, -1), v)
    elif which == "residual_layernorm":
        a, b = as64(rand(3, 4, 16)), as64(rand(3, 4, 16))
        g, bb = as64(rand(16, lo=0.5, hi=1.5)), as64(rand(16))
        net = ("input a: f32[3, 4, 16]\ninput b: f32[3, 4, 16]\n"
               "y = relu(layernorm(a + b, name=\"ln\")) + a\noutput y\n")
        params, inputs = {"ln.weight": g, "ln.bias": bb}, {"a": a, "b": b}
        refs["y"] = F.relu(F.layer_norm(a + b, (16,), g, bb)) + a
    elif which == "concat_branches":
        x = as64(rand(1, 4, 6, 6))
        w1, w2 = as64(rand(8, 4, 1, 1) / 2.0), as64(rand(8, 4, 3, 3) / 6.0)
        net = ("input x: f32[1, 4, 6, 6]\n"
               "a = relu6(conv2d(x, 8, kernel=1, bias=false, name=\"p\"))\n"
               "b = hardswish(conv2d(x, 8, kernel=3, pad=1, bias=false, name=\"q\"))\n"
               "y = global_avgpool2d(concat(a, b, maxpool2d(x, 3, stride=1, pad=1), axis=1))\noutput y\n")
        params, inputs = {"p.weight": w1, "q.weight": w2}, {"x": x}
        a = F.relu6(F.conv2d(x, w1))
        b = F.hardswish(F.conv2d(x, w2, padding=1))
        refs["y"] = torch.cat([a, b, F.max_pool2d(x, 3, 1, 1)], 1).mean((2, 3), keepdim=True)
    elif which == "recompute":
        # -O3 copies the pool and the add+tanh chain into each of their
        # readers; -O1 writes relu(x + r), sigmoid and s + b in place
        x, r, bb = as64(rand(2, 3, 8, 8)), as64(rand(2, 3, 8, 8)), as64(rand(1, 3, 1, 1))
        net = ("input x: f32[2, 3, 8, 8]\ninput r: f32[2, 3, 8, 8]\ninput b: f32[1, 3, 1, 1]\n"
               "p = maxpool2d(x, 2)\na = sigmoid(p) + p * 2.0\n"
               "h = tanh(x + 1.0)\nc = relu(h) - h * 0.5\n"
               "t = sigmoid(relu(x + r)) + b\noutput a, c, t\n")
        inputs = {"x": x, "r": r, "b": bb}
        p = F.max_pool2d(x, 2)
        h = torch.tanh(x + 1.0)
        refs = {"a": torch.sigmoid(p) + p * 2.0, "c": F.relu(h) - h * 0.5,
                "t": torch.sigmoid(F.relu(x + r)) + bb}
    net = "model %s\n" % ctx.name + net
    run_and_compare(ctx, net, params or None, {k: f32np(v) for k, v in inputs.items()},
                    {k: v.numpy() for k, v in refs.items()}, flags=["-O%d" % opt])


def pair_epilogue_case(ctx, prec, opt, cin, env=None):
    """A tensor-core convolution whose output takes two columns a store
    (out_pair in codegen/gemm.c).  With 8 input channels (K 72, no split)
    the fused epilogue does so: an operand of the output's shape (r, read a
    pair a load), one that varies along the columns alone (the per-pixel
    gate g, at each column's own index), and a bias.  With 16 (K 144: split-K
    in 2 ranges) the partial sums go to the workspace a pair a store, the
    epilogue in the sum kernel.  The values are multiples of 1/16 in [-1, 1],
    exact at tf32 and fp16, so every product is exact and the float32 sums
    meet the tolerance; a pair stored swapped, or a column read at its
    neighbour's index, does not."""
    import torch
    import torch.nn.functional as F
    seed(51)
    q = lambda t: torch.round(t * 16.0) / 16.0
    x, w, b = as64(q(rand(2, cin, 6, 6))), as64(q(rand(16, cin, 3, 3))), as64(q(rand(16)))
    g, r = as64(q(rand(2, 1, 6, 6))), as64(q(rand(2, 16, 6, 6)))
    net = ("model %s\ninput x: f32[2, %d, 6, 6]\ninput g: f32[2, 1, 6, 6]\ninput r: f32[2, 16, 6, 6]\n"
           "y = relu(conv2d(x, 16, kernel=3, pad=1, name=\"c\") * g + r)\noutput y\n" % (ctx.name, cin))
    flags = ["-O%d" % opt, "--precision=%s" % prec]
    run_and_compare(ctx, net, {"c.weight": w, "c.bias": b}, {"x": f32np(x), "g": f32np(g), "r": f32np(r)},
                    {"y": F.relu(F.conv2d(x, w, b, padding=1) * g + r).numpy()}, flags=flags, env=env)
    # the kernel is the tensor-core one and stores pairs: its source says so
    src = ctx.path(ctx.name + ".cu")
    p = subprocess.run([ctx.ncc, ctx.path(ctx.name + ".net"), "-o", src] + flags,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise Failure("ncc could not write %s: %s" % (src, p.stderr))
    text = open(src).read()
    wants = ["conv2d_mma"]
    if cin == 8:
        wants += ["ncc_st2f(&y[op], yv[0], yv[1])", "ncc_ld2f(ep0, &add_b[op])", "int o = op + e;"]
    else:
        wants += ["ncc_st2f(&partial[sk * 1152 + op], acc[i][j][2 * h], acc[i][j][2 * h + 1])"]
    for want in wants:
        if want not in text:
            raise Failure("%s: no %r in the generated code" % (src, want))


for _p in ("tf32", "fp16"):
    for _o in (2, 3):
        case("fuse_pair_epilogue_%s_O%d" % (_p, _o), ["op", "fusion", _p])(
            lambda ctx, p=_p, o=_o: pair_epilogue_case(ctx, p, o, 8))
    case("fuse_pair_splitk_%s" % _p, ["op", "fusion", _p])(lambda ctx, p=_p: pair_epilogue_case(ctx, p, 1, 16))
# checked mode (each buffer ends at a guard page: a pair read or written past the output faults) in reverse fiber order
case("fuse_pair_epilogue_fp16_O2_checked_reverse", ["op", "fusion", "fp16", "check", "fiber"])(
    lambda ctx: pair_epilogue_case(ctx, "fp16", 2, 8, env={"NCC_CHECK": "1", "NCC_FIBER_ORDER": "reverse"}))
case("fuse_pair_splitk_tf32_checked_reverse", ["op", "fusion", "tf32", "check", "fiber"])(
    lambda ctx: pair_epilogue_case(ctx, "tf32", 1, 16, env={"NCC_CHECK": "1", "NCC_FIBER_ORDER": "reverse"}))


for _w in ("conv_bn_relu_add", "fanout", "affine_bcast", "gated_linear", "attention", "residual_layernorm",
           "concat_branches", "recompute"):
    for _o in (0, 1, 3):
        case("fuse_%s_O%d" % (_w, _o), ["op", "fusion"])(lambda ctx, w=_w, o=_o: fusion_case(ctx, w, o))


# ---------------------------------------------------------------- example models
# Plain torch.nn re-implementations of torchvision's models: module names as in
# torchvision, so that state_dict keys are the ones the .net files use.
def build_module(kind, num_classes=1000, size=224):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class LeNet(nn.Module):         # the PyTorch MNIST example
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 10, 5)
            self.conv2 = nn.Conv2d(10, 20, 5)
            self.fc1 = nn.Linear(320, 50)
            self.fc2 = nn.Linear(50, 10)

        def forward(self, x):
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2(x), 2))
            return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, cin, c, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.downsample = None
            if stride != 1 or cin != c:
                self.downsample = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            h = F.relu(self.bn1(self.conv1(x)))
            h = self.bn2(self.conv2(h))
            return F.relu(h + (self.downsample(x) if self.downsample is not None else x))

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, c, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, c, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.conv3 = nn.Conv2d(c, c * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(c * 4)
            self.downsample = None
            if stride != 1 or cin != c * 4:
                self.downsample = nn.Sequential(nn.Conv2d(cin, c * 4, 1, stride, bias=False),
                                                nn.BatchNorm2d(c * 4))

        def forward(self, x):
            h = F.relu(self.bn1(self.conv1(x)))
            h = F.relu(self.bn2(self.conv2(h)))
            h = self.bn3(self.conv3(h))
            return F.relu(h + (self.downsample(x) if self.downsample is not None else x))

    class ResNet(nn.Module):
        def __init__(self, block, layers):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            cin = 64
            for i, (c, n) in enumerate(zip((64, 128, 256, 512), layers)):
                blocks = []
                for j in range(n):
                    blocks.append(block(cin, c, 2 if (j == 0 and i > 0) else 1))
                    cin = c * block.expansion
                setattr(self, "layer%d" % (i + 1), nn.Sequential(*blocks))
            self.fc = nn.Linear(512 * block.expansion, num_classes)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
            for i in range(4):
                x = getattr(self, "layer%d" % (i + 1))(x)
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    class ConvBNReLU(nn.Sequential):
        def __init__(self, cin, cout, k=3, stride=1, groups=1):
            super().__init__(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU6())

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, t):
            super().__init__()
            hid = cin * t
            self.use_res = stride == 1 and cin == cout
            layers = []
            if t != 1:
                layers.append(ConvBNReLU(cin, hid, 1))
            layers += [ConvBNReLU(hid, hid, 3, stride, groups=hid),
                       nn.Conv2d(hid, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res else self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            cfg = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                   [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
            feats = [ConvBNReLU(3, 32, 3, 2)]
            cin = 32
            for t, c, n, s in cfg:
                for i in range(n):
                    feats.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                    cin = c
            feats.append(ConvBNReLU(cin, 1280, 1))
            self.features = nn.Sequential(*feats)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

        def forward(self, x):
            x = F.adaptive_avg_pool2d(self.features(x), 1)
            return self.classifier(torch.flatten(x, 1))

    VGG_CFG = {
        "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
        "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
        "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
                  512, 512, 512, 512, "M"],
    }

    class MLP(nn.Module):           # examples/mlp.net
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 256)
            self.fc2 = nn.Linear(256, 128)
            self.fc3 = nn.Linear(128, 10)

        def forward(self, x):
            x = torch.flatten(x, 1)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    class VGG(nn.Module):
        # torchvision's AdaptiveAvgPool2d((7, 7)) is the identity at 224x224
        # and examples/vgg*.net leave it out; at another size S the
        # classifier takes 512*(S/32)^2 inputs, as in the .net files.
        def __init__(self, cfg):
            super().__init__()
            layers, cin = [], 3
            for v in cfg:
                if v == "M":
                    layers.append(nn.MaxPool2d(2, 2))
                else:
                    layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU(True)]
                    cin = v
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Sequential(nn.Linear(512 * (size // 32) ** 2, 4096), nn.ReLU(True), nn.Dropout(),
                                            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(),
                                            nn.Linear(4096, num_classes))

        def forward(self, x):
            return self.classifier(torch.flatten(self.features(x), 1))

    if kind == "lenet":
        return LeNet()
    if kind == "mlp":
        return MLP()
    if kind == "digits":   # examples/digits.net: its PyTorch twin in tests/data/digits_torch.py
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data"))
        from digits_torch import Digits
        return Digits()
    if kind == "resnet18":
        return ResNet(BasicBlock, [2, 2, 2, 2])
    if kind == "resnet50":
        return ResNet(Bottleneck, [3, 4, 6, 3])
    if kind == "mobilenet_v2":
        return MobileNetV2()
    if kind in VGG_CFG:
        return VGG(VGG_CFG[kind])
    raise KeyError(kind)


def randomize_bn(m):
    """Gives every BatchNorm random affine parameters and running statistics,
    so that eval-mode BN is not the identity and its folding is really tested."""
    import torch
    import torch.nn as nn
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                c = mod.num_features
                mod.weight.copy_(torch.rand(c) * 0.5 + 0.75)
                mod.bias.copy_(torch.rand(c) * 0.2 - 0.1)
                mod.running_mean.copy_(torch.rand(c) * 0.2 - 0.1)
                mod.running_var.copy_(torch.rand(c) * 0.5 + 0.75)
                mod.num_batches_tracked.fill_(100)


def read_safetensors(path):
    """name -> numpy array (F32, I8), as the file stores it."""
    import json
    import numpy as np
    with open(path, "rb") as f:
        b = f.read()
    n = int.from_bytes(b[:8], "little")
    hdr = json.loads(b[8:8 + n])
    dt = {"F32": np.float32, "I8": np.int8, "I32": np.int32, "I64": np.int64, "F64": np.float64}
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, e = v["data_offsets"]
        out[k] = np.frombuffer(b[8 + n + a:8 + n + e], dtype=dt[v["dtype"]]).reshape(v["shape"])
    return out


def quantize_weights(ctx, sd):
    """`ncc quantize` on the float32 state_dict sd: checks the file (every
    tensor of rank >= 2 int8 with its per-row scale, exactly as computed here
    in numpy; the rest unchanged; no more bytes than that takes, plus a
    header; at most 0.26x the original where the weights are 99% of it: the
    biases and batchnorm parameters stay float32, 2% of MobileNetV2's bytes)
    and returns the quantized file and the dequantized state_dict."""
    import numpy as np
    import torch
    w, wq = ctx.path("fp32.safetensors"), ctx.path("int8.safetensors")
    write_safetensors(w, sd)
    cmd = [ctx.ncc, "quantize", w, "-o", wq]
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    print(p.stdout.rstrip())
    if p.returncode != 0:
        raise Failure("ncc quantize exited with status %d" % p.returncode)
    ratio = os.path.getsize(wq) / os.path.getsize(w)
    big = sum(v.numel() for v in sd.values() if v.dim() >= 2)
    rows = sum(v.shape[0] for v in sd.values() if v.dim() >= 2)
    rest = sum(4 * v.numel() for v in sd.values() if v.dim() < 2)
    frac = 4 * big / (4 * big + rest)
    print("int8 file: %.4f of the fp32 file's bytes (the weights of rank >= 2 were %.4f of them)" % (ratio, frac))
    # the JSON header: about 100 bytes an entry (name, dtype, shape, offsets)
    header = 4096 + 160 * (len(sd) + sum(1 for v in sd.values() if v.dim() >= 2))
    if os.path.getsize(wq) > big + 4 * rows + rest + header:
        raise Failure("the quantized file has %d bytes, more than its tensors need (%d) and a header of %d"
                      % (os.path.getsize(wq), big + 4 * rows + rest, header))
    if frac >= 0.99 and 4 * big >= 1 << 20 and ratio > 0.26:   # (a header is a few KB)
        raise Failure("the quantized file is %.3f of the original (at most 0.26)" % ratio)
    got = read_safetensors(wq)
    deq = {}
    for k, v in sd.items():
        a = v.numpy().astype(np.float32)
        if a.ndim < 2:
            if k not in got or not np.array_equal(got[k], a):
                raise Failure("%s should be carried over unchanged" % k)
            deq[k] = v
            continue
        rows = a.reshape(a.shape[0], -1)
        scale = (np.abs(rows).max(axis=1) / np.float32(127)).astype(np.float32)
        safe = np.where(scale > 0, scale, np.float32(1))
        q = np.where(scale[:, None] > 0, np.clip(np.rint(rows / safe[:, None]), -127, 127), 0).astype(np.int8)
        if got[k].dtype != np.int8 or not np.array_equal(got[k].reshape(q.shape), q):
            raise Failure("%s: the int8 values differ from round-to-even(w / scale)" % k)
        if not np.array_equal(got[k + ".__scale__"], scale):
            raise Failure("%s: the scales differ from max|w| / 127 per row" % k)
        deq[k] = torch.from_numpy((q.astype(np.float32) * scale[:, None]).reshape(a.shape))
    return wq, deq


def int8_close(fp32_ref):
    """Against the dequantized weights: check_close; against fp32: cosine."""
    def cmp(name, got, ref):
        import numpy as np
        check_close(name, got, ref)
        g, r = got.astype(np.float64).ravel(), np.asarray(fp32_ref, dtype=np.float64).ravel()
        cos = float(g @ r / (np.linalg.norm(g) * np.linalg.norm(r)))
        print("output %s: cosine %.6f against the fp32 weights' result" % (name, cos))
        if cos < 0.999:
            raise Failure("output %s: int8 weights move the result too far from fp32 (cosine %.6f)" % (name, cos))
    return cmp


def model_case(ctx, kind, batch, size, sets=(), flags=(), env=None, in_ch=3, net_file=None, poison=None,
               compare=None, quantize=False, calibrate=0):
    """poison: a function that plants NaN/inf in the input (after the last
    layer's scale is chosen on the clean input); the outputs are then compared
    with check_nonfinite.  calibrate: that many rows of the input's
    distribution, drawn after it, to --calibrate (--precision=int8)."""
    import torch
    seed(20)
    m = build_module(kind, size=size).eval()
    randomize_bn(m)
    x = as64(rand(batch, in_ch, size, size))
    if calibrate:
        cal = ctx.path("cal.npy")
        save_npy(cal, f32np(rand(calibrate, in_ch, size, size)))
        flags = list(flags) + ["--calibrate=" + cal, "--calibration-cache=" + ctx.path("cal.txt")]
    # With default init the logits are small (|logit| << 1), where the
    # tolerance 1e-4 * max(1, max|ref|) would be loose relative to them:
    # scale the last linear layer so that max|logit| is about 4.
    import torch.nn as nn
    last = [mod for mod in m.modules() if isinstance(mod, nn.Linear)][-1]
    with torch.no_grad():
        k = 4.0 / float(m.double()(x).abs().max())
        m.float()
        last.weight.mul_(k)
        last.bias.mul_(k)
    if poison:
        x = poison(x)
    # round parameters to float32 first: the reference sees what ncc sees
    sd = {k: v.to(torch.float32) if v.is_floating_point() else v for k, v in m.state_dict().items()}
    m = m.double()
    m.load_state_dict({k: v.to(torch.float64) if v.is_floating_point() else v for k, v in sd.items()})
    with torch.no_grad():
        ref = m(x)
    net = os.path.join(EXAMPLES, (net_file or kind) + ".net")
    if not os.path.exists(net):
        raise Failure("%s does not exist (examples are written by the ir engineer)" % net)
    setflags = []
    for s in sets:
        setflags += ["--set", s]
    params = sd
    if quantize:   # the weights through `ncc quantize`; the reference on the dequantized ones
        wq, deq = quantize_weights(ctx, sd)
        m.load_state_dict({k: v.to(torch.float64) if v.is_floating_point() else v for k, v in deq.items()})
        with torch.no_grad():
            ref, fp32_ref = m(x), ref
        params, flags, compare = None, list(flags) + ["--weights", wq], int8_close(fp32_ref.numpy())
    run_and_compare(ctx, None, params, {"x": f32np(x)}, {"logits": ref.numpy()},
                    flags=setflags + list(flags), env=env, net_path=net,
                    compare=check_nonfinite if poison else compare)
    if calibrate:   # the cache's layers: int8 where the error alone is within the default bound
        with open(ctx.path("cal.txt")) as f:
            errs = [float(ln.split()[-1]) for ln in f if ln.startswith("layer ")]
        n8 = sum(e <= 0.05 for e in errs)
        print("int8: %d of %d layers (the others above --int8-max-error 0.05: fp32)" % (n8, len(errs)))
        if n8 * 2 < len(errs):
            raise Failure("only %d of %d layers at int8" % (n8, len(errs)))


# Consts of the example models (see examples/*.net): batch N, spatial size S.
# The small spatial sizes keep CPU time low; torchvision's models are fully
# convolutional up to the global pooling, so any size the strides allow works.
case("model_lenet", ["model"])(lambda ctx: model_case(ctx, "lenet", 4, 28, ["N=4"], in_ch=1))
case("model_lenet_check", ["model", "check"])(
    lambda ctx: model_case(ctx, "lenet", 2, 28, ["N=2"], flags=["--check"], in_ch=1))
case("model_lenet_reverse", ["model", "fiber"])(
    lambda ctx: model_case(ctx, "lenet", 2, 28, ["N=2"], env={"NCC_FIBER_ORDER": "reverse"}, in_ch=1))
case("model_lenet_cublas", ["model", "cublas"])(
    lambda ctx: model_case(ctx, "lenet", 3, 28, ["N=3"], flags=["--cublas"], in_ch=1))
case("model_resnet18", ["model"])(lambda ctx: model_case(ctx, "resnet18", 2, 32, ["N=2", "S=32"]))
case("model_resnet18_cublas", ["model", "cublas"])(
    lambda ctx: model_case(ctx, "resnet18", 2, 32, ["N=2", "S=32"], flags=["--cublas"]))
case("model_resnet18_check", ["model", "check"])(
    lambda ctx: model_case(ctx, "resnet18", 1, 32, ["N=1", "S=32"], flags=["--check"]))
case("model_resnet18_reverse", ["model", "fiber"])(
    lambda ctx: model_case(ctx, "resnet18", 1, 32, ["N=1", "S=32"], env={"NCC_FIBER_ORDER": "reverse"}))
# the downsampling convolutions on the side stream (the streams pass), the
# emulator holding one stream's work back until the other waits for it
case("model_resnet18_side_last", ["model", "streams"])(
    lambda ctx: model_case(ctx, "resnet18", 2, 32, ["N=2", "S=32"], env={"NCC_STREAM_ORDER": "side-last"}))
case("model_resnet18_main_last", ["model", "streams"])(
    lambda ctx: model_case(ctx, "resnet18", 2, 32, ["N=2", "S=32"], env={"NCC_STREAM_ORDER": "main-last"}))
case("model_resnet18_O0", ["model"])(lambda ctx: model_case(ctx, "resnet18", 1, 32, ["N=1", "S=32"], flags=["-O0"]))
case("model_resnet18_O3", ["model"])(lambda ctx: model_case(ctx, "resnet18", 1, 32, ["N=1", "S=32"], flags=["-O3"]))
case("model_mobilenet_v2", ["model"])(lambda ctx: model_case(ctx, "mobilenet_v2", 2, 32, ["N=2", "S=32"]))
case("model_mobilenet_v2_check", ["model", "check"])(
    lambda ctx: model_case(ctx, "mobilenet_v2", 1, 32, ["N=1", "S=32"], flags=["--check"]))
case("model_resnet50_small", ["model"])(lambda ctx: model_case(ctx, "resnet50", 1, 32, ["N=1", "S=32"]))
case("model_resnet50", ["model", "slow"])(lambda ctx: model_case(ctx, "resnet50", 1, 224, ["N=1", "S=224"]))
case("model_mobilenet_v2_224", ["model", "slow"])(
    lambda ctx: model_case(ctx, "mobilenet_v2", 1, 224, ["N=1", "S=224"]))
for _v in ("vgg11", "vgg16", "vgg19"):
    case("model_" + _v, ["model", "slow"])(lambda ctx, v=_v: model_case(ctx, v, 1, 224, ["N=1", "S=224"]))
case("model_vgg11_small", ["model"])(lambda ctx: model_case(ctx, "vgg11", 1, 32, ["N=1", "S=32"]))


case("model_mlp", ["model"])(lambda ctx: model_case(ctx, "mlp", 4, 28, ["N=4"], in_ch=1))

# Every -O level gives the same outputs (the default -O2 runs above): the
# small example models at -O0, -O1 and -O3 (ResNet-18 at -O0/-O3 above).
for _o in (0, 1, 3):
    case("model_lenet_O%d" % _o, ["model", "levels"])(
        lambda ctx, o=_o: model_case(ctx, "lenet", 2, 28, ["N=2"], flags=["-O%d" % o], in_ch=1))
    case("model_mlp_O%d" % _o, ["model", "levels"])(
        lambda ctx, o=_o: model_case(ctx, "mlp", 2, 28, ["N=2"], flags=["-O%d" % o], in_ch=1))
    case("model_mobilenet_v2_O%d" % _o, ["model", "levels"])(
        lambda ctx, o=_o: model_case(ctx, "mobilenet_v2", 1, 32, ["N=1", "S=32"], flags=["-O%d" % o]))
    case("model_vgg11_small_O%d" % _o, ["model", "levels"])(
        lambda ctx, o=_o: model_case(ctx, "vgg11", 1, 32, ["N=1", "S=32"], flags=["-O%d" % o]))
case("model_resnet18_O1", ["model", "levels"])(
    lambda ctx: model_case(ctx, "resnet18", 1, 32, ["N=1", "S=32"], flags=["-O1"]))
case("model_resnet50_small_O0", ["model", "levels"])(
    lambda ctx: model_case(ctx, "resnet50", 1, 32, ["N=1", "S=32"], flags=["-O0"]))
case("model_resnet50_small_O3", ["model", "levels"])(
    lambda ctx: model_case(ctx, "resnet50", 1, 32, ["N=1", "S=32"], flags=["-O3"]))


# The matrix: every example at every -O level on both GEMM paths, against
# PyTorch: the tiled kernels in checked mode (guarded buffers: an access out of
# bounds fails) in reverse fiber order, cuBLAS (OpenBLAS under emulation) in
# checked mode in forward order.  Label matrix (the sanitizer stage leaves it
# out: run_all.sh); the small sizes keep it to a few minutes on 2 cores.
_MATRIX = {   # batch, spatial size, --set, input channels
    "digits": (2, 8, ["N=2"], 1),
    "lenet": (2, 28, ["N=2"], 1),
    "mlp": (2, 28, ["N=2"], 1),
    "mobilenet_v2": (1, 32, ["N=1", "S=32"], 3),
    "resnet18": (1, 32, ["N=1", "S=32"], 3),
    "resnet50": (1, 32, ["N=1", "S=32"], 3),
    "vgg11": (1, 32, ["N=1", "S=32"], 3),
    "vgg16": (1, 32, ["N=1", "S=32"], 3),
    "vgg19": (1, 32, ["N=1", "S=32"], 3),
}
for _k, (_b, _s, _sets, _ch) in _MATRIX.items():
    for _o in range(4):
        case("matrix_%s_O%d" % (_k, _o), ["model", "matrix"])(
            lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch, o=_o: model_case(
                ctx, k, b, sz, st, flags=["-O%d" % o, "--check"], env={"NCC_FIBER_ORDER": "reverse"}, in_ch=ch))
        case("matrix_%s_O%d_cublas" % (_k, _o), ["model", "matrix", "cublas"])(
            lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch, o=_o: model_case(
                ctx, k, b, sz, st, flags=["-O%d" % o, "--check", "--cublas"], in_ch=ch))


# Batches 1..N from one build (the batch pass; docs/generated-code.md "Batches
# 1..N"): every example compiled for N runs batches of 1, 2 and N-1 rows,
# which `ncc run` passes to M_infer_io_batch, against PyTorch on the same
# rows.  The kernels launch only the blocks those rows need; the cases in
# checked mode catch any access that assumed a full batch.  One build per
# model and flags serves its three batches (the compile cache).
_BATCH = {   # N, spatial size, --set, input channels
    "digits": (5, 8, ["N=5"], 1),
    "lenet": (5, 28, ["N=5"], 1),
    "mlp": (5, 28, ["N=5"], 1),
    "mobilenet_v2": (3, 32, ["N=3", "S=32"], 3),
    "resnet18": (3, 32, ["N=3", "S=32"], 3),
    "resnet50": (3, 32, ["N=3", "S=32"], 3),
    "vgg11": (3, 32, ["N=3", "S=32"], 3),
    "vgg16": (3, 32, ["N=3", "S=32"], 3),
    "vgg19": (3, 32, ["N=3", "S=32"], 3),
}
for _k, (_n, _s, _sets, _ch) in _BATCH.items():
    for _b in sorted({1, 2, _n - 1}):
        case("batch_%s_b%d" % (_k, _b), ["model", "batch"])(
            lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch: model_case(ctx, k, b, sz, st, flags=["--check"], in_ch=ch))
    case("batch_%s_b1_cublas" % _k, ["model", "batch", "cublas"])(
        lambda ctx, k=_k, sz=_s, st=_sets, ch=_ch: model_case(ctx, k, 1, sz, st, flags=["--cublas", "--check"], in_ch=ch))
case("batch_resnet18_b2_O0", ["model", "batch"])(
    lambda ctx: model_case(ctx, "resnet18", 2, 32, ["N=3", "S=32"], flags=["-O0", "--check"]))
case("batch_lenet_b3_O3_cublas", ["model", "batch", "cublas"])(
    lambda ctx: model_case(ctx, "lenet", 3, 28, ["N=5"], flags=["-O3", "--cublas"], in_ch=1))


# ---------------------------------------------------------------- --precision=tf32
# The GEMM-like ops round both operands to TF32 (10 mantissa bits, to
# nearest, ties away: ncc_kernel.h's ncc_tf32) and accumulate in float32.
# Single ops: PyTorch in float64 on operands rounded the same way (here, in
# numpy), to the usual tolerance; and the output must differ from the
# unrounded result by more than that tolerance, or the case would prove
# nothing.  Whole models: close to PyTorch's float32 (fp64) logits within a
# TF32-sized tolerance (relative 1e-2), cosine >= 0.9999.
def tf32(t):
    """A float64 torch tensor whose float32 values are rounded to TF32."""
    import numpy as np
    import torch
    u = t.numpy().astype(np.float32).view(np.uint32).astype(np.uint64)
    finite = (u & 0x7F800000) != 0x7F800000
    r = np.where(finite, (u + 0x1000) & 0xFFFFE000, u).astype(np.uint32).view(np.float32)
    return torch.from_numpy(r.astype(np.float64))


def fp16(t):
    """A float64 torch tensor whose float32 values are rounded to FP16 by PyTorch (.half())."""
    return t.float().half().double()


def bf16(t):
    """The same, rounded to BF16 by PyTorch (.bfloat16())."""
    return t.float().bfloat16().double()


ROUND = {"tf32": tf32, "fp16": fp16, "bf16": bf16}


def tf32_case(ctx, net, params, inputs, rounded, plain, prec="tf32", cublas=False, env=None):
    """rounded/plain: {output: reference} with and without the operands' rounding to prec.
    cublas: through ncc_gemm_ex (cuBLAS's reduced-precision compute type; the
    emulation rounds the operands before the CPU BLAS), which the generated
    code must call."""
    import numpy as np
    got = {}

    def keep(name, out, ref):
        got[name] = out
        check_close(name, out, ref)
    flags = ["--precision=" + prec] + (["--cublas"] if cublas else [])
    if cublas:
        net_path = ctx.path("gemm_ex.net")
        with open(net_path, "w") as f:
            f.write(net)
        cu = ctx.path("gemm_ex.cu")
        p = subprocess.run([ctx.ncc, net_path, "-o", cu] + flags, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if p.returncode != 0:
            raise Failure("ncc %s failed: %s" % (" ".join(flags), p.stderr))
        if "ncc_gemm_ex(m->dev, NCC_GEMM_%s, " % prec.upper() not in open(cu).read():
            raise Failure("--cublas --precision=%s: the generated code does not call ncc_gemm_ex at %s" % (prec, prec))
    run_and_compare(ctx, net, params, inputs, rounded, flags=flags, compare=keep, env=env)
    for k, ref in plain.items():
        d = float(np.abs(got[k].astype(np.float64) - np.asarray(ref)).max())
        tol = RTOL * max(1.0, float(np.abs(np.asarray(ref)).max()))
        print("output %s: %.3g from the unrounded result (tolerance %.3g)" % (k, d, tol))
        if d <= tol:
            raise Failure("output %s is within tolerance of the fp32 result: were the operands rounded?" % k)


def tf32_conv(ctx, variant, prec="tf32", cublas=False, env=None):
    import torch.nn.functional as F
    N, C, H, W, O, k, s, p, d, g, bias = CONV_VARIANTS[variant]
    kh, kw = k if isinstance(k, tuple) else (k, k)
    seed(1)
    x = as64(rand(N, C, H, W)) * 8
    w = as64(rand(O, C // g, kh, kw))
    b = as64(rand(O)) if bias else None
    net = ("model %s\ninput x: f32[%s]\n"
           "y = conv2d(x, %d, kernel=%s, stride=%s, pad=%s, dilation=%d, groups=%d, bias=%s, name=\"conv\")\n"
           "output y\n" % (ctx.name, dims((N, C, H, W)), O, pair(k), pair(s), pair(p), d, g,
                           "true" if bias else "false"))
    params = {"conv.weight": w}
    if bias:
        params["conv.bias"] = b

    def conv(xx, ww):
        return F.conv2d(xx, ww, b, stride=s, padding=p, dilation=d, groups=g).numpy()
    r = ROUND[prec]
    tf32_case(ctx, net, params, {"x": f32np(x)}, {"y": conv(r(x), r(w))}, {"y": conv(x, w)}, prec, cublas, env)


case("tf32_conv_k3", ["op", "tf32"])(lambda ctx: tf32_conv(ctx, "k3"))
case("tf32_conv_groups2", ["op", "tf32"])(lambda ctx: tf32_conv(ctx, "groups2"))
case("tf32_conv_depthwise", ["op", "tf32"])(lambda ctx: tf32_conv(ctx, "depthwise"))   # the direct kernel


def tf32_linear(ctx, prec, M=8, cublas=False, env=None):
    import torch.nn.functional as F
    seed(2)
    x, w, b = as64(rand(M, 130)) * 8, as64(rand(70, 130)), as64(rand(70))
    net = "model %s\ninput x: f32[%d, 130]\ny = linear(x, 70, name=\"fc\")\noutput y\n" % (ctx.name, M)
    r = ROUND[prec]
    tf32_case(ctx, net, {"fc.weight": w, "fc.bias": b}, {"x": f32np(x)},
              {"y": F.linear(r(x), r(w), b).numpy()}, {"y": F.linear(x, w, b).numpy()}, prec, cublas, env)


def tf32_matmul(ctx, prec, cublas=False):
    import torch
    seed(3)
    a, b = as64(rand(2, 3, 4, 60)) * 8, as64(rand(2, 3, 60, 5))
    net = "model %s\ninput a: f32[2, 3, 4, 60]\ninput b: f32[2, 3, 60, 5]\ny = matmul(a, b)\noutput y\n" % ctx.name
    r = ROUND[prec]
    tf32_case(ctx, net, None, {"a": f32np(a), "b": f32np(b)}, {"y": torch.matmul(r(a), r(b)).numpy()},
              {"y": torch.matmul(a, b).numpy()}, prec, cublas)


case("tf32_linear", ["op", "tf32"])(lambda ctx: tf32_linear(ctx, "tf32"))   # M = 8: the GEMV
case("tf32_matmul_batched", ["op", "tf32"])(lambda ctx: tf32_matmul(ctx, "tf32"))

# --precision=fp16|bf16: the same rounding of the GEMM operands, to PyTorch's
# float16 (.half()) and bfloat16 (.bfloat16()), accumulated in float32: every
# kernel kind (tiled on tensor cores, GEMV, direct depthwise, split-K)
for _p in ("fp16", "bf16"):
    for _v in ("k3", "groups2", "depthwise", "splitk"):
        case("%s_conv_%s" % (_p, _v), ["op", _p])(lambda ctx, v=_v, p=_p: tf32_conv(ctx, v, p))
    case("%s_linear_gemv" % _p, ["op", _p])(lambda ctx, p=_p: tf32_linear(ctx, p))
    case("%s_linear" % _p, ["op", _p])(lambda ctx, p=_p: tf32_linear(ctx, p, M=40))
    case("%s_matmul_batched" % _p, ["op", _p])(lambda ctx, p=_p: tf32_matmul(ctx, p))
    # the direct (depthwise), GEMV and split-K kernels checked, in reverse fiber order
    for _v in ("depthwise", "splitk"):
        case("%s_conv_%s_checked_reverse" % (_p, _v), ["op", _p, "check", "fiber"])(
            lambda ctx, v=_v, p=_p: tf32_conv(ctx, v, p, env=CHECKED_REVERSE))
    case("%s_linear_gemv_checked_reverse" % _p, ["op", _p, "check", "fiber"])(
        lambda ctx, p=_p: tf32_linear(ctx, p, env=CHECKED_REVERSE))
# and through cuBLAS (--cublas): ncc_gemm_ex with the precision's compute type
# (conv: im2col and one GEMM per image and group; 1x1: no im2col)
for _p in ("tf32", "fp16", "bf16"):
    for _v in ("k3", "groups2", "k1"):
        case("%s_conv_%s_cublas" % (_p, _v), ["op", _p, "cublas"])(
            lambda ctx, v=_v, p=_p: tf32_conv(ctx, v, p, cublas=True))
    case("%s_linear_cublas" % _p, ["op", _p, "cublas"])(lambda ctx, p=_p: tf32_linear(ctx, p, M=40, cublas=True))
    case("%s_matmul_batched_cublas" % _p, ["op", _p, "cublas"])(
        lambda ctx, p=_p: tf32_matmul(ctx, p, cublas=True))


def low_close(prec, rel, min_cos):
    """Whole-model logits at a rounded precision against PyTorch's fp32 (fp64):
    max|err| <= rel * max|ref| (rel at least 1) and cosine >= min_cos."""
    def close(name, got, ref):
        import numpy as np
        ref = np.asarray(ref, dtype=np.float64)
        g = got.astype(np.float64)
        err = float(np.abs(g - ref).max())
        tol = rel * max(1.0, float(np.abs(ref).max()))
        cos = float((g * ref).sum() / (np.linalg.norm(g) * np.linalg.norm(ref)))
        print("output %s: max|err| = %.3g against fp32 (tolerance %.3g), cosine %.7f (at least %g)"
              % (name, err, tol, cos, min_cos))
        if err > tol or cos < min_cos:
            raise Failure("output %s at %s is too far from fp32: max|err| %.3g, cosine %.7f" % (name, prec, err, cos))
    return close


tf32_close = low_close("tf32", 1e-2, 0.9999)


# Every example model at every precision, at the matrix's sizes (_MATRIX):
# tf32 at -O3 (and -O2 for the digits network, ResNet-18 and VGG-11) within
# 1% of the largest logit and cosine >= 0.9999 against fp32; fp16 and bf16
# (docs/precision.md): cosine >= 0.999 (fp16) and >= 0.995 (bf16);
# max|err| within 1e-2 (fp16: TF32's mantissa) and 5e-2 (bf16: 3 bits
# fewer) of the largest logit; int8 below (int8_model_close)
for _k, (_b, _s, _sets, _ch) in _MATRIX.items():
    for _o in ((2, 3) if _k in ("digits", "resnet18", "vgg11") else (3,)):
        case("tf32_model_%s_O%d" % (_k, _o), ["model", "tf32"])(
            lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch, o=_o: model_case(
                ctx, k, b, sz, st, flags=["--precision=tf32", "-O%d" % o], in_ch=ch, compare=tf32_close))
    for _p, _rel, _cos in (("fp16", 1e-2, 0.999), ("bf16", 5e-2, 0.995)):
        case("%s_model_%s" % (_p, _k), ["model", _p])(
            lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch, p=_p, r=_rel, c=_cos: model_case(
                ctx, k, b, sz, st, flags=["--precision=" + p, "-O3"], in_ch=ch, compare=low_close(p, r, c)))


def int8_model_close(rel, min_cos):
    """int8 logits against PyTorch's fp32 (fp64): low_close's bounds, and
    further from fp32 than fp32's own tolerance (RTOL), or nothing was
    quantized"""
    near = low_close("int8", rel, min_cos)

    def close(name, got, ref):
        import numpy as np
        near(name, got, ref)
        ref = np.asarray(ref, dtype=np.float64)
        err = float(np.abs(got.astype(np.float64) - ref).max())
        if err <= RTOL * max(1.0, float(np.abs(ref).max())):
            raise Failure("output %s at int8 is within fp32's tolerance of fp32: was anything quantized?" % name)
    return close


# --precision=int8, calibrated (entropy, the default) on 8 other rows of the
# input's distribution; every layer whose error alone is above
# --int8-max-error (0.05) stays fp32.  int8's 127 levels a sign are about
# bf16's 8 bits of mantissa: bf16's bound on max|err| (5e-2 of the largest
# logit), and onnx.int8's cosine (0.999)
for _k, (_b, _s, _sets, _ch) in _MATRIX.items():
    case("int8_model_%s" % _k, ["model", "int8"])(
        lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch: model_case(
            ctx, k, b, sz, st, flags=["--precision=int8", "-O3"], in_ch=ch, calibrate=8,
            compare=int8_model_close(5e-2, 0.999)))
# a whole model through cuBLAS at each rounded precision (ncc_gemm_ex)
for _p, _rel, _cos in (("tf32", 1e-2, 0.9999), ("fp16", 1e-2, 0.999), ("bf16", 5e-2, 0.995)):
    case("%s_model_resnet18_cublas" % _p, ["model", _p, "cublas"])(
        lambda ctx, p=_p, r=_rel, c=_cos: model_case(ctx, "resnet18", 1, 32, ["N=1", "S=32"],
                                                    flags=["--precision=" + p, "--cublas"], in_ch=3,
                                                    compare=low_close(p, r, c)))


# ---------------------------------------------------------------- tensor cores: exact bits
# At --precision=tf32 the tiled GEMMs run on tensor cores (mma.sync.m16n8k8,
# ir_gemm_mma).  The emulator defines each MMA as C plus the 8 products added
# in k order by float32 fused multiply-adds (docs/emulator.md, "Tensor
# cores"); a product of two TF32 numbers is exact in float32, so the whole
# GEMM is float32 additions of exact products in k order.  numpy does exactly
# that (a float32 product here is exact, each addition rounds once), with no
# code of ncc's: the output must match it bit for bit.  A fragment-layout
# mistake (a wrong row, column or k of any lane) changes values, not just
# bits; shapes that fit no tile (odd M, N, K) check the edges.
def tf32_np32(a):
    """float32 numpy array rounded to TF32 as ncc_tf32 does."""
    import numpy as np
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    finite = (u & 0x7F800000) != 0x7F800000
    return np.where(finite, (u + 0x1000) & 0xFFFFE000, u).astype(np.uint32).view(np.float32)


def fp16_np32(a):
    """float32 numpy array rounded to FP16 by numpy (to nearest even, subnormals, Inf)."""
    import numpy as np
    return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float32)


def bf16_np32(a):
    """float32 numpy array rounded to BF16 by PyTorch."""
    import numpy as np
    import torch
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).bfloat16().float().numpy()


ROUND_NP = {"tf32": tf32_np32, "fp16": fp16_np32, "bf16": bf16_np32}


def tc_operand(t, prec):
    """A float32 operand for the exact-bit cases; at fp16 every third element
    is scaled by 2^-20, into FP16's subnormals, and at both fp16 and bf16
    some are ties (halfway between two neighbours), so the rounding's edges
    are in the sums (a TF32 rounding instead would differ there)."""
    import numpy as np
    a = f32np(t)
    if prec == "tf32":
        return a
    flat = a.reshape(-1)
    if prec == "fp16":
        flat[::3] *= np.float32(2.0 ** -20)
        flat[1::7] = (np.round(flat[1::7] * 1024) + 0.5).astype(np.float32) / np.float32(1024)   # ties at 2^-11 steps
    else:
        flat[1::7] = (np.round(flat[1::7] * 128) + 0.5).astype(np.float32) / np.float32(128)     # ties at 2^-8 steps
    return a


def tc_gemm32(A, B, S=1):
    """A [Z, M, K], B [Z, K, N] float32 (TF32 values): float32 sums of exact
    products in k order; with split-K (S ranges of K, each a whole number of
    16-wide K tiles, docs/gpu.md), each range's sum from 0, then the ranges'
    sums added in order."""
    import numpy as np
    K = A.shape[2]
    tiles = (K + 15) // 16
    span = (tiles + S - 1) // S * 16
    total = None
    for k0 in range(0, K, span):
        acc = np.zeros((A.shape[0], A.shape[1], B.shape[2]), np.float32)
        for k in range(k0, min(k0 + span, K)):
            acc = acc + A[:, :, k:k + 1] * B[:, k:k + 1, :]
        total = acc if total is None else total + acc
    return total


def split_k_of(ctx, net_text, flags):
    """The split-K of the model's one GEMM-like layer, from ncc's report ("[..., split-K S]"), 1 for none."""
    path = ctx.path(ctx.name + "_report.net")
    with open(path, "w") as f:
        f.write(net_text)
    p = subprocess.run([ctx.ncc, path, "--emit=report"] + list(flags), capture_output=True, text=True)
    if p.returncode != 0:
        raise Failure("ncc --emit=report failed: %s" % p.stderr)
    m = re.findall(r"split-K (\d+)\]", p.stdout)
    print("split-K: %s" % (m[0] if m else "none"))
    for f in flags:   # a forced tile (--gemm-tile) must be the one the kernel got
        if f.startswith("--gemm-tile="):
            tiles = re.findall(r"\[mma (\d+x\d+)", p.stdout)
            print("tiles: %s" % tiles)
            if not tiles or any(t != f.split("=")[1] for t in tiles):
                raise Failure("%s: the report's tensor-core tiles are %s" % (f, tiles))
    return int(m[0]) if m else 1


def check_bits(name, got, ref, what="TF32"):
    import numpy as np
    if oracle_device() != "emu":
        # a GPU's tensor cores add the products in their own order and precision
        # (docs/emulator.md, "Tensor cores"): there the sums are only close
        return check_close(name, got, ref)
    ref = np.asarray(ref, dtype=np.float32)
    if got.shape != ref.shape or got.dtype != np.float32:
        raise Failure("output %s: %s %s, expected float32 %s" % (name, got.dtype, got.shape, ref.shape))
    bad = np.flatnonzero(got.view(np.uint32) != ref.view(np.uint32))
    print("output %s: %d of %d elements differ in their bits from float32 k-order sums of %s products"
          % (name, bad.size, got.size, what))
    if bad.size:
        i = np.unravel_index(bad[0], got.shape)
        raise Failure("output %s: element %s is %r, the k-order float32 sum is %r (%d elements differ)"
                      % (name, tuple(int(j) for j in i), float(got[i]), float(ref[i]), bad.size))


def bits_of(prec):
    return lambda name, got, ref: check_bits(name, got, ref, prec.upper())


def pipe_flag(pipe, stages=None):
    """--gemm-pipeline: None leaves the default (on), True and False ask for on and off; --gemm-stages"""
    return ([] if pipe is None else ["--gemm-pipeline=" + ("on" if pipe else "off")]) + \
        (["--gemm-stages=%d" % stages] if stages else [])


def src_check(ctx, flags, want):
    """The generated kernels of the case's model contain `want`: they take the path the case is for"""
    cu = ctx.path("src.cu")
    p = subprocess.run([ctx.ncc, ctx.path(ctx.name + ".net"), "-o", cu] + flags, capture_output=True, text=True)
    if p.returncode != 0 or want not in open(cu).read():
        raise Failure("the kernel should contain %r (ncc: %s)" % (want, p.stderr.strip()))
    print("kernel contains %r" % want)


def tc_linear_case(ctx, M, K, N, act, env=None, prec="tf32", tile=None, pipe=None, src_has=None, stages=None):
    import numpy as np
    seed(40 + M)
    x, w, b = tc_operand(rand(M, K) * 8, prec), tc_operand(rand(N, K), prec), f32np(rand(N))
    net = ("model %s\ninput x: f32[%d, %d]\nh = linear(x, %d, name=\"fc\")\ny = %s(h)\noutput y\n"
           % (ctx.name, M, K, N, act))
    flags = ["--precision=" + prec] + (["--gemm-tile=" + tile] if tile else []) + pipe_flag(pipe, stages)
    S = split_k_of(ctx, net, flags)
    r = ROUND_NP[prec]
    y = tc_gemm32(r(x)[None], r(w).T[None].copy(), S)[0] + b[None, :]
    y = np.maximum(y, np.float32(0)) if act == "relu" else y
    import torch
    run_and_compare(ctx, net, {"fc.weight": torch.from_numpy(w), "fc.bias": torch.from_numpy(b)}, {"x": x},
                    {"y": y}, flags=flags, env=env, compare=bits_of(prec))
    if src_has:   # the generated kernel takes the path the case is for
        src_check(ctx, flags, src_has)


def tc_conv_case(ctx, variant, env=None, prec="tf32", tile=None, pipe=False, stages=None, src_has=None, pre=False):
    """pre: a relu before the convolution, so that (at fp16/bf16) the image it reads is stored narrow"""
    import numpy as np
    import torch
    import torch.nn.functional as F
    N, C, H, W, O, k, s, p, d, g, bias = CONV_VARIANTS[variant] if variant in CONV_VARIANTS else TC_CONV_VARIANTS[variant]
    kh, kw = k if isinstance(k, tuple) else (k, k)
    seed(7)
    x, w = tc_operand(rand(N, C, H, W) * 8, prec), tc_operand(rand(O, C // g, kh, kw), prec)
    b = f32np(rand(O)) if bias else None
    r, flags = ROUND_NP[prec], ["--precision=" + prec] + (["--gemm-tile=" + tile] if tile else [])
    flags += pipe_flag(pipe, stages)
    net = ("model %s\ninput x: f32[%s]\n%s"
           "y = conv2d(%s, %d, kernel=%s, stride=%s, pad=%s, dilation=%d, groups=%d, bias=%s, name=\"conv\")\n"
           "output y\n" % (ctx.name, dims((N, C, H, W)), "h = relu(x)\n" if pre else "", "h" if pre else "x", O,
                           pair(k), pair(s), pair(p), d, g, "true" if bias else "false"))
    xr = np.maximum(x, np.float32(0)) if pre else x
    # im2col: rows k = (channel, kh, kw) of the group, as the implicit GEMM orders them
    cols = F.unfold(torch.from_numpy(r(xr)), (kh, kw), dilation=d, padding=p, stride=s).numpy()
    OH = (H + 2 * pair_of(p)[0] - d * (kh - 1) - 1) // pair_of(s)[0] + 1
    OW = (W + 2 * pair_of(p)[1] - d * (kw - 1) - 1) // pair_of(s)[1] + 1
    Kg, Mg = C // g * kh * kw, O // g
    wt = r(w).reshape(g, Mg, Kg)
    # in/groups a multiple of 16 and more than one tap: the fold pass reorders the weight tap-major
    # (ir_conv_tap_major_ok), rows k = (kh, kw, channel), and the sums run in that order
    tap = (C // g) % 16 == 0 and kh * kw > 1
    if tap:
        Cg, KK = C // g, kh * kw
        cols = np.ascontiguousarray(cols.reshape(N, g, Cg, KK, -1).transpose(0, 1, 3, 2, 4).reshape(N, g * Kg, -1))
        wt = np.ascontiguousarray(wt.reshape(g, Mg, Cg, KK).transpose(0, 1, 3, 2).reshape(g, Mg, Kg))
    S = split_k_of(ctx, net, flags)
    y = np.zeros((N, O, OH * OW), np.float32)
    for n in range(N):
        for gi in range(g):
            y[n, gi * Mg:(gi + 1) * Mg] = tc_gemm32(wt[gi][None], cols[n, gi * Kg:(gi + 1) * Kg][None], S)[0]
    if bias:
        y = y + b[None, :, None]
    params = {"conv.weight": torch.from_numpy(w)}
    if bias:
        params["conv.bias"] = torch.from_numpy(b)
    run_and_compare(ctx, net, params, {"x": x}, {"y": y.reshape(N, O, OH, OW)}, flags=flags, env=env,
                    compare=bits_of(prec))
    tap_major_check(ctx, flags, tap)
    # the B elements through registers, the next K tile's loaded during the MMAs, unless --gemm-pipeline=off
    src = open(ctx.path("tap.cu")).read()
    if pre and pipe:   # B by cp.async instead (src_has says how)
        pass
    elif ("the next K tile's B elements, in flight during the MMAs" in src or
          "the next K tile's B pieces, in flight during the MMAs" in src) != bool(pipe):
        raise Failure("--gemm-pipeline=%s: the conv kernel %s its B elements" % (
            "on" if pipe else "off", "does not prefetch" if pipe else "prefetches"))
    else:
        print("B tile prefetched through registers" if pipe else "B tile loaded, then multiplied (--gemm-pipeline=off)")
    if src_has:
        src_check(ctx, flags, src_has)


def tap_major_check(ctx, flags, tap):
    """The generated conv kernel loads its B tile tap-major exactly when the test's reference sums so"""
    cu = ctx.path("tap.cu")
    p = subprocess.run([ctx.ncc, ctx.path(ctx.name + ".net"), "-o", cu] + flags, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise Failure("ncc failed: %s" % p.stderr)
    got = "one tap a K tile" in open(cu).read()
    if got != tap:
        raise Failure("the conv kernel %s its weight tap-major; the reference expects %s"
                      % ("takes" if got else "does not take", "it" if tap else "the declared order"))
    print("weight %s" % ("tap-major" if tap else "as declared"))


def pair_of(v):
    return v if isinstance(v, tuple) else (v, v)


def tc_matmul_case(ctx, ash, bsh, env=None, prec="tf32", tile=None, pre=False, stages=None, src_has=None, pipe=None):
    """pre: b through a relu first, so that (at fp16/bf16) the matmul's b is stored narrow"""
    import numpy as np
    seed(9)
    a, b = tc_operand(rand(*ash) * 8, prec), tc_operand(rand(*bsh), prec)
    r, flags = ROUND_NP[prec], ["--precision=" + prec] + (["--gemm-tile=" + tile] if tile else [])
    flags += pipe_flag(pipe, stages)
    net = ("model %s\ninput a: f32[%s]\ninput b: f32[%s]\n%sy = matmul(a, %s)\noutput y\n"
           % (ctx.name, dims(ash), dims(bsh), "c = relu(b)\n" if pre else "", "c" if pre else "b"))
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    br = np.maximum(b, np.float32(0)) if pre else b
    A = np.broadcast_to(r(a), batch + a.shape[-2:]).reshape(-1, *a.shape[-2:])
    B = np.broadcast_to(r(br), batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
    S = split_k_of(ctx, net, flags)
    y = tc_gemm32(np.ascontiguousarray(A), np.ascontiguousarray(B), S).reshape(batch + (a.shape[-2], b.shape[-1]))
    run_and_compare(ctx, net, None, {"a": a, "b": b}, {"y": y}, flags=flags, env=env,
                    compare=bits_of(prec))
    if src_has:   # the generated kernel takes the path the case is for
        src_check(ctx, flags, src_has)


# split-K on ncc's CUDA-core kernels (float32 against PyTorch); the conv_splitk*
# variants above run through conv_case on both paths
def linear_splitk_case(ctx, M, K, N, env=None):
    import torch.nn.functional as F
    seed(11)
    x, w, b = as64(rand(M, K)), as64(rand(N, K) / K ** 0.5), as64(rand(N))
    net = "model %s\ninput x: f32[%d, %d]\ny = relu(linear(x, %d, name=\"fc\"))\noutput y\n" % (ctx.name, M, K, N)
    if split_k_of(ctx, net, []) < 2:
        raise Failure("the case was meant to split K")
    run_and_compare(ctx, net, {"fc.weight": w, "fc.bias": b}, {"x": f32np(x)}, {"y": F.relu(F.linear(x, w, b)).numpy()},
                    env=env)


def matmul_splitk_case(ctx, M, K, N):
    import torch
    seed(12)
    a, b = as64(rand(M, K)), as64(rand(K, N) / K ** 0.5)
    net = "model %s\ninput a: f32[%d, %d]\ninput b: f32[%d, %d]\ny = matmul(a, b)\noutput y\n" % (ctx.name, M, K, K, N)
    if split_k_of(ctx, net, []) < 2:
        raise Failure("the case was meant to split K")
    run_and_compare(ctx, net, None, {"a": f32np(a), "b": f32np(b)}, {"y": torch.matmul(a, b).numpy()})


CHECKED_REVERSE = {"NCC_CHECK": "1", "NCC_FIBER_ORDER": "reverse"}
case("splitk_linear", ["op", "splitk"])(lambda ctx: linear_splitk_case(ctx, 20, 1000, 40))
case("splitk_linear_checked_reverse", ["op", "splitk", "check", "fiber"])(
    lambda ctx: linear_splitk_case(ctx, 9, 777, 70, env=CHECKED_REVERSE))
case("splitk_matmul", ["op", "splitk"])(lambda ctx: matmul_splitk_case(ctx, 24, 900, 30))
case("splitk_conv_checked_reverse", ["op", "conv", "splitk", "check", "fiber"])(
    lambda ctx: conv_case(ctx, "splitk_groups2", env=CHECKED_REVERSE))
case("tc_bits_linear_splitk", ["op", "tf32", "mma", "splitk"])(lambda ctx: tc_linear_case(ctx, 20, 1000, 40, "relu"))
case("tc_bits_conv_splitk_groups2_checked_reverse", ["op", "conv", "tf32", "mma", "splitk", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "splitk_groups2", env=CHECKED_REVERSE))
for _m in (9, 16, 33, 70):   # tiles of 16, 16, 32 and 64 rows; K and N fit no tile
    case("tc_bits_linear_m%d" % _m, ["op", "tf32", "mma"])(lambda ctx, m=_m: tc_linear_case(ctx, m, 131, 37, "relu"))
case("tc_bits_linear_m70_checked_reverse", ["op", "tf32", "mma", "check", "fiber"])(
    lambda ctx: tc_linear_case(ctx, 70, 45, 70, "relu", env=CHECKED_REVERSE))
for _v in ("k3", "k3_s2_p1", "k1_p1", "dil2", "groups2", "groups4", "asym_all", "nobias", "splitk"):
    case("tc_bits_conv_%s" % _v, ["op", "conv", "tf32", "mma"])(lambda ctx, v=_v: tc_conv_case(ctx, v))
case("tc_bits_conv_k5_p2_checked_reverse", ["op", "conv", "tf32", "mma", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "k5_p2", env=CHECKED_REVERSE))
case("tc_bits_matmul_bcast", ["op", "tf32", "mma"])(lambda ctx: tc_matmul_case(ctx, (2, 3, 20, 45), (45, 37)))
case("tc_bits_matmul_batched_checked_reverse", ["op", "tf32", "mma", "check", "fiber"])(
    lambda ctx: tc_matmul_case(ctx, (2, 1, 33, 19), (1, 3, 19, 66), env=CHECKED_REVERSE))
# fp16 and bf16 operands on the same tensor cores (ir_gemm_mma): the rounding
# by numpy (float16) and PyTorch (bfloat16), the sums as above
for _p in ("fp16", "bf16"):
    # the A tile by cp.async and ldmatrix (the default, --gemm-pipeline=on) in the others; here without
    case("tc_bits_%s_linear_m70" % _p, ["op", _p, "mma"])(
        lambda ctx, p=_p: tc_linear_case(ctx, 70, 131, 37, "relu", prec=p, pipe=False))
    case("tc_bits_%s_linear_splitk" % _p, ["op", _p, "mma", "splitk"])(
        lambda ctx, p=_p: tc_linear_case(ctx, 20, 1000, 40, "relu", prec=p))
    case("tc_bits_%s_conv_k3_s2_p1" % _p, ["op", "conv", _p, "mma"])(lambda ctx, p=_p: tc_conv_case(ctx, "k3_s2_p1", prec=p))
    case("tc_bits_%s_conv_groups2_checked_reverse" % _p, ["op", "conv", _p, "mma", "check", "fiber"])(
        lambda ctx, p=_p: tc_conv_case(ctx, "groups2", env=CHECKED_REVERSE, prec=p))
    case("tc_bits_%s_matmul_bcast" % _p, ["op", _p, "mma"])(
        lambda ctx, p=_p: tc_matmul_case(ctx, (2, 3, 20, 45), (45, 37), prec=p))

# The larger tiles the tile model may choose (ir_mma_tiles; --gemm-tile forces
# one): the same bits, on shapes that fit no tile, with 4 and 8 warps
for _p, _t in (("tf32", "128x64"), ("fp16", "64x128"), ("bf16", "128x128"), ("tf32", "128x128")):
    case("tc_bits_%s_tile%s_linear" % (_p, _t), ["op", _p, "mma", "tile"])(
        lambda ctx, p=_p, t=_t: tc_linear_case(ctx, 150, 77, 133, "relu", prec=p, tile=t))
    case("tc_bits_%s_tile%s_conv" % (_p, _t), ["op", "conv", _p, "mma", "tile"])(
        lambda ctx, p=_p, t=_t: tc_conv_case(ctx, "tile_big", prec=p, tile=t))
    # the same checked, in reverse fiber order
    case("tc_bits_%s_tile%s_linear_checked_reverse" % (_p, _t), ["op", _p, "mma", "tile", "check", "fiber"])(
        lambda ctx, p=_p, t=_t: tc_linear_case(ctx, 150, 77, 133, "relu", env=CHECKED_REVERSE, prec=p, tile=t))
    case("tc_bits_%s_tile%s_conv_checked_reverse" % (_p, _t), ["op", "conv", _p, "mma", "tile", "check", "fiber"])(
        lambda ctx, p=_p, t=_t: tc_conv_case(ctx, "tile_big", env=CHECKED_REVERSE, prec=p, tile=t))
# tap-major weights (the fold pass): the sums in (kh, kw, channel) order, bit for bit
for _p, _v, _t in (("tf32", "tap_s2_d2", None), ("fp16", "tap_k3x1", None), ("bf16", "tap_k1x3", None),
                   ("tf32", "tap_nopad_g2", "128x64")):
    case("tc_bits_%s_conv_%s" % (_p, _v), ["op", "conv", _p, "mma"])(
        lambda ctx, p=_p, v=_v, t=_t: tc_conv_case(ctx, v, prec=p, tile=t))
# --gemm-pipeline=on: the B tile through registers (fp16/bf16: A by cp.async), the same sums: tap-major
# and digits, split-K (the first tile at kb), a K with no whole number of tiles, 128x128
for _p, _v, _t in (("tf32", "splitk_groups2", None), ("fp16", "k5_p2", None), ("bf16", "splitk_digits", None),
                   ("fp16", "tap_big", "128x128"), ("tf32", "tap_s2_d2", "128x64")):
    case("tc_bits_%s_conv_%s_pipeline_checked_reverse" % (_p, _v), ["op", "conv", _p, "mma", "check", "fiber"])(
        lambda ctx, p=_p, v=_v, t=_t: tc_conv_case(ctx, v, env=CHECKED_REVERSE, prec=p, tile=t, pipe=True))
case("tc_bits_fp16_tile128x128_conv_tap_checked_reverse", ["op", "conv", "fp16", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "tap_big", env=CHECKED_REVERSE, prec="fp16", tile="128x128"))
case("tc_bits_fp16_tile128x128_conv_g2_checked_reverse", ["op", "conv", "fp16", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "tile_big_g2", env=CHECKED_REVERSE, prec="fp16", tile="128x128"))
case("tc_bits_tf32_tile128x64_matmul_batched_checked_reverse", ["op", "tf32", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_matmul_case(ctx, (2, 1, 133, 19), (1, 3, 19, 150), env=CHECKED_REVERSE, tile="128x64"))
case("tc_bits_bf16_tile64x128_linear_splitk", ["op", "bf16", "mma", "tile", "splitk"])(
    lambda ctx: tc_linear_case(ctx, 20, 1000, 40, "relu", prec="bf16", tile="64x128"))
# the pipelined tiles with a linear's weight (converted at load, k-contiguous) as B: both operands by
# cp.async and ldmatrix, a K with no whole number of tiles, N past the tile; x4 (two 8-column blocks a
# load) and, at 16x32 (one block a warp), x2
case("tc_bits_fp16_linear_bpipe_checked_reverse", ["op", "fp16", "mma", "check", "fiber"])(
    lambda ctx: tc_linear_case(ctx, 70, 136, 72, "relu", env=CHECKED_REVERSE, prec="fp16",
                               src_has="ncc_ldmatrix_x4(q, &Bs[st][lb + j * 192])"))
case("tc_bits_bf16_tile16x32_linear_bpipe_checked_reverse", ["op", "bf16", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_linear_case(ctx, 40, 200, 37, "relu", env=CHECKED_REVERSE, prec="bf16", tile="16x32",
                               src_has="ncc_ldmatrix_x2(bh[j], &Bs[st][lb + j * 192])"))
# --gemm-stages: the copies of two or three K tiles in flight (checked mode fills a copy's destination
# with 0xff until its group is waited for, so a read too early shows): a K with no whole number of
# tiles; split-K (the prologue's tiles from kb, a range's end); a K of two tiles, fewer than the stages
# (empty groups); a 128x128 convolution, whose four stages pass the shared memory the pass allows: three
case("tc_bits_fp16_linear_stages3_checked_reverse", ["op", "fp16", "mma", "check", "fiber"])(
    lambda ctx: tc_linear_case(ctx, 70, 136, 72, "relu", env=CHECKED_REVERSE, prec="fp16", stages=3,
                               src_has="ncc_cp_async_wait(2);"))
case("tc_bits_bf16_linear_splitk_stages4_checked", ["op", "bf16", "mma", "splitk", "check"])(
    lambda ctx: tc_linear_case(ctx, 20, 1000, 40, "relu", env={"NCC_CHECK": "1"}, prec="bf16", stages=4,
                               src_has="ncc_cp_async_wait(3);"))
case("tc_bits_fp16_linear_shortk_stages4_checked_reverse", ["op", "fp16", "mma", "check", "fiber"])(
    lambda ctx: tc_linear_case(ctx, 40, 24, 37, "relu", env=CHECKED_REVERSE, prec="fp16", stages=4,
                               src_has="ncc_cp_async_commit();   /* (empty: K has no such tile) */"))
case("tc_bits_fp16_tile128x128_conv_tap_stages4_checked_reverse",
     ["op", "conv", "fp16", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "tap_big", env=CHECKED_REVERSE, prec="fp16", tile="128x128", pipe=True, stages=4,
                             src_has="As[3][3072]"))
# tf32's float32 operands k-contiguous in 16-byte pieces (a weight, a linear's x): copied as they are by
# cp.async into rows of 20 floats, their fragments by ldmatrix (x4; a linear's B x2 at 16x32) and rounded as
# loaded, the same bits: stages 3 and 4, N and K past the tile
case("tc_bits_tf32_linear_pipe_stages3_checked_reverse", ["op", "tf32", "mma", "check", "fiber"])(
    lambda ctx: tc_linear_case(ctx, 70, 136, 72, "relu", env=CHECKED_REVERSE, prec="tf32", stages=3,
                               src_has="ncc_ldmatrix_x4(q, &Bs[st][lb + j * 160 + ks * 8]);"))
case("tc_bits_tf32_tile16x32_linear_pipe_checked_reverse", ["op", "tf32", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_linear_case(ctx, 40, 200, 37, "relu", env=CHECKED_REVERSE, prec="tf32", tile="16x32",
                               src_has="ncc_ldmatrix_x2(q, &Bs[st][lb + ks * 8]);"))
case("tc_bits_tf32_conv_wide_pipe_stages4_checked_reverse", ["op", "conv", "tf32", "mma", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "wide", env=CHECKED_REVERSE, prec="tf32", pipe=True, stages=4,
                             src_has="ncc_ldmatrix_x4(q, &As[st][lo + i * 320 + ks * 8]);"))
# B n-contiguous and stored narrow (a matmul's b, a 1x1 convolution's image, after a relu): copied k-major by
# cp.async, read by ldmatrix.trans (x4: two 8-column blocks a load; x2 at 16x32), the same bits: N and K
# that fit no tile, a broadcast batch, split-K, groups, one image, three stages, 128x128; rows of n a
# multiple of 4 values, not of 8: 8-byte copies
TRANS_X4 = "ncc_ldmatrix_x4_trans(q, &Bs[st][lb + j * 8])"
case("tc_bits_fp16_matmul_nvec_checked_reverse", ["op", "fp16", "mma", "check", "fiber"])(
    lambda ctx: tc_matmul_case(ctx, (2, 3, 40, 45), (45, 40), env=CHECKED_REVERSE, prec="fp16", pre=True,
                               src_has=TRANS_X4))
case("tc_bits_bf16_tile16x32_matmul_nvec_stages3_checked_reverse", ["op", "bf16", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_matmul_case(ctx, (40, 200), (200, 24), env=CHECKED_REVERSE, prec="bf16", tile="16x32", pre=True,
                               stages=3, src_has="ncc_ldmatrix_x2_trans(bh[0], &Bs[st][lb])"))
case("tc_bits_fp16_matmul_nvec_splitk", ["op", "fp16", "mma", "splitk"])(
    lambda ctx: tc_matmul_case(ctx, (20, 1000), (1000, 40), prec="fp16", pre=True,
                               src_has="ncc_cp_async16(dst, &b[k * 40 + n])"))
case("tc_bits_fp16_matmul_nvec4_checked_reverse", ["op", "fp16", "mma", "check", "fiber"])(
    lambda ctx: tc_matmul_case(ctx, (30, 44), (44, 36), env=CHECKED_REVERSE, prec="fp16", pre=True,
                               src_has="ncc_cp_async8(dst, &b[k * 36 + n])"))
case("tc_bits_bf16_conv_k1_nvec4_checked_reverse", ["op", "conv", "bf16", "mma", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "k1_nvec4", env=CHECKED_REVERSE, prec="bf16", pipe=True, pre=True,
                             src_has="ncc_cp_async8(dst, &x[(n / 36 * 16 + k) * 36 + n % 36])"))
# a float32 B with rows of 4n floats (a matmul's input): 4 of n a 128-bit load, rounded into the same k-major
# tile (vec32n_tile): x4.trans, and x2.trans at 16x32, N past the tile, a K with no whole number of tiles
case("tc_bits_fp16_matmul_f4n_checked_reverse", ["op", "fp16", "mma", "check", "fiber"])(
    lambda ctx: tc_matmul_case(ctx, (2, 3, 40, 45), (45, 36), env=CHECKED_REVERSE, prec="fp16",
                               src_has="ncc_ldg128f(bf4[q], &b[k * 36 + n]);"))
case("tc_bits_bf16_tile16x32_matmul_f4n_checked_reverse", ["op", "bf16", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_matmul_case(ctx, (2, 1, 33, 19), (1, 3, 19, 44), env=CHECKED_REVERSE, prec="bf16", tile="16x32",
                               src_has="ncc_ldmatrix_x2_trans(bh[0], &Bs[lb]);"))
# the same unpipelined (each K tile's pieces loaded at the top of its iteration) and with split-K (the
# first pieces from kb)
case("tc_bits_fp16_matmul_f4n_unpipelined", ["op", "fp16", "mma"])(
    lambda ctx: tc_matmul_case(ctx, (40, 45), (45, 72), prec="fp16", pipe=False,
                               src_has="ncc_ldg128f(bf4[q], &b[k * 72 + n]);"))
case("tc_bits_bf16_matmul_f4n_splitk", ["op", "bf16", "mma", "splitk"])(
    lambda ctx: tc_matmul_case(ctx, (20, 1000), (1000, 40), prec="bf16", src_has="int k = kb + kk, n = n0 + nv;"))
# a float32 A k-contiguous (a matmul's input) at a 128x128 tile (256 threads: Node.pipe_r): the next K tile's
# pieces fetched into registers after the barrier, stored at the top of the next iteration; M past the tile,
# a K with no whole number of tiles, and split-K (the first pieces from kb)
case("tc_bits_fp16_tile128x128_matmul_f4a_checked_reverse", ["op", "fp16", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_matmul_case(ctx, (130, 44), (44, 72), env=CHECKED_REVERSE, prec="fp16", tile="128x128",
                               src_has="the next K tile's A pieces, in flight during the MMAs"))
case("tc_bits_bf16_tile128x128_matmul_f4a_splitk", ["op", "bf16", "mma", "tile", "splitk"])(
    lambda ctx: tc_matmul_case(ctx, (20, 2000), (2000, 40), prec="bf16", tile="128x128",
                               src_has="int m = m0 + rr, k = kb + kv;"))
# a 1x1 convolution of a float32 image (no relu before it: an input), pixels of 4n: the same pieces,
# fetched during the MMAs in place of the gathered B; groups; 8-byte pixels rows of 4n
case("tc_bits_fp16_conv_k1_f4n_checked_reverse", ["op", "conv", "fp16", "mma", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "k1_nvec", env=CHECKED_REVERSE, prec="fp16", pipe=True,
                             src_has="ncc_ldg128f(bf4[q], &x[(n / 80 * 24 + k) * 80 + n % 80]);"))
case("tc_bits_bf16_conv_k1_f4n_g2", ["op", "conv", "bf16", "mma"])(
    lambda ctx: tc_conv_case(ctx, "k1_nvec_g2", prec="bf16", pipe=True,
                             src_has="ncc_ldg128f(bf4[q], &x[(n / 24 * 48 + z * 24 + k) * 24 + n % 24]);"))
case("tc_bits_fp16_conv_k1_nvec_checked_reverse", ["op", "conv", "fp16", "mma", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "k1_nvec", env=CHECKED_REVERSE, prec="fp16", pipe=True, pre=True, src_has=TRANS_X4))
case("tc_bits_bf16_conv_k1_nvec_g2_checked_reverse", ["op", "conv", "bf16", "mma", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "k1_nvec_g2", env=CHECKED_REVERSE, prec="bf16", pipe=True, pre=True,
                             src_has="ncc_cp_async16(dst, &x[(n / 24 * 48 + z * 24 + k) * 24 + n % 24])"))
case("tc_bits_fp16_conv_k1_nvec_1img", ["op", "conv", "fp16", "mma"])(
    lambda ctx: tc_conv_case(ctx, "k1_nvec_1img", prec="fp16", pipe=True, pre=True,
                             src_has="ncc_cp_async16(dst, &x[k * 64 + n])"))
case("tc_bits_bf16_tile128x128_conv_k1_nvec_stages3_checked_reverse",
     ["op", "conv", "bf16", "mma", "tile", "check", "fiber"])(
    lambda ctx: tc_conv_case(ctx, "k1_nvec_big", env=CHECKED_REVERSE, prec="bf16", tile="128x128", pipe=True,
                             pre=True, stages=3, src_has="Bs[3][2176]"))


# ---------------------------------------------------------------- float32: the wide tile
# --gemm-tile=128x128 at fp32 (ir_fp32_wide; docs/gpu.md, "The float32 GEMM's
# wide tile"): 8 x 8 outputs a thread, read from shared memory four floats a
# load.  Each case runs the GEMM with the default 64 x 64 tile, then with the
# wide one in checked mode in reverse fiber order: both within the float32
# tolerance of PyTorch, and equal bit for bit (a thread sums its outputs over
# k in the same order either way, split-K's ranges too); the generated
# kernel must read its tiles four floats a load.
WIDE = ["--gemm-tile=128x128"]
WIDE_SRC = "ncc_lds4(bf + 4, &Bs[st][kk][64 + 4 * tx]);"


W64 = ["--gemm-tile=64x128"]
W64_SRC = "ncc_lds4(bf + 4, &Bs[kk][64 + 4 * tx]);"   # 4 x 8 a thread, one stage


def fp32_wide_case(ctx, run, flags=WIDE, src=WIDE_SRC):
    """run(env, flags): one of conv_case, linear_case, matmul_case with its shape; flags: the wider tile
    (WIDE, W64) and src a line of its kernel"""
    import numpy as np
    out = ctx.path("out_y.npy")
    run(None, [])
    base = np.load(out)
    run(CHECKED_REVERSE, flags)
    wide = np.load(out)
    if not np.array_equal(base, wide):
        d = np.abs(base.astype(np.float64) - wide)
        raise Failure("the %s tile's output differs from the 64x64 tile's: %d elements, max %.3g"
                      % (flags[0].split("=")[1], int(np.sum(d > 0)), float(d.max())))
    print("%s tile: the 64x64 tile's bits" % flags[0].split("=")[1])
    src_check(ctx, flags, src)


# channels and columns past the tile, groups, tap-major weights, split-K, index digits, a 1 x 1, strides,
# asymmetric windows, dilation
for _v in ("tile_big", "tile_big_g2", "tap_big", "splitk", "splitk_digits", "odd", "k1", "k3_s2_p1", "asym_all",
           "dil2"):
    case("fp32_wide_conv_" + _v, ["op", "conv", "tile", "check", "fiber"])(
        lambda ctx, v=_v: fp32_wide_case(ctx, lambda env, fl: conv_case(ctx, v, env=env, flags=fl)))
case("fp32_wide_linear", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_wide_case(ctx, lambda env, fl: linear_case(ctx, 150, 70, 140, True, env=env, flags=fl)))
case("fp32_wide_linear_nobias", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_wide_case(ctx, lambda env, fl: linear_case(ctx, 130, 33, 129, False, env=env, flags=fl)))
case("fp32_wide_matmul_batched", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_wide_case(ctx, lambda env, fl: matmul_case(ctx, (2, 3, 130, 20), (2, 3, 20, 135), env=env,
                                                                flags=fl)))
case("fp32_wide_matmul_broadcast", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_wide_case(ctx, lambda env, fl: matmul_case(ctx, (2, 1, 129, 40), (3, 40, 131), env=env,
                                                                flags=fl)))
# the 64 x 128 tile (4 x 8 a thread) forced the same way: the stem's 64 rows, index digits with split-K, a 1 x 1,
# tap-major channels, channels and pixels past the tile, groups; a linear layer, a broadcast matmul
for _v in ("pipe_stem", "pipe_digits", "pipe_k1", "tap_big", "tile_big_g2", "asym_all"):
    case("fp32_w64_conv_" + _v, ["op", "conv", "tile", "check", "fiber"])(
        lambda ctx, v=_v: fp32_wide_case(ctx, lambda env, fl: conv_case(ctx, v, env=env, flags=fl), W64, W64_SRC))
case("fp32_w64_linear", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_wide_case(ctx, lambda env, fl: linear_case(ctx, 150, 70, 140, True, env=env, flags=fl), W64,
                               W64_SRC))
case("fp32_w64_matmul_broadcast", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_wide_case(ctx, lambda env, fl: matmul_case(ctx, (2, 1, 129, 40), (3, 40, 131), env=env,
                                                                flags=fl), W64, W64_SRC))
# whole models at the wide tile, checked, reverse fiber order: their epilogues (bias, batchnorm folded,
# residual adds, relu), a pooling prologue (VGG-11 at -O3)
for _k, _o in (("resnet18", 2), ("vgg11", 3)):
    _b, _s, _sets, _ch = _MATRIX[_k]
    case("fp32_w64_model_%s_O%d" % (_k, _o), ["model", "tile", "check", "fiber"])(
        lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch, o=_o: model_case(
            ctx, k, b, sz, st, flags=W64 + ["-O%d" % o, "--check"], env={"NCC_FIBER_ORDER": "reverse"}, in_ch=ch))
for _k, _o in (("resnet18", 2), ("vgg11", 3), ("mobilenet_v2", 2)):
    _b, _s, _sets, _ch = _MATRIX[_k]
    case("fp32_wide_model_%s_O%d" % (_k, _o), ["model", "tile", "check", "fiber"])(
        lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch, o=_o: model_case(
            ctx, k, b, sz, st, flags=WIDE + ["-O%d" % o, "--check"], env={"NCC_FIBER_ORDER": "reverse"}, in_ch=ch))


# ---------------------------------------------------------------- float32: two stages
# Double-buffered float32 tiles (ir_fp32_pipe_ok; docs/gpu.md, "The float32
# GEMM double-buffered"): the wide tile's two stages (the default with
# --gemm-pipeline=on), the 64 x 64 tile's with --gemm-stages=2; the next K
# tile's elements loaded into registers during the FMAs.  Each case runs the
# GEMM single-staged (--gemm-pipeline=off), then double-buffered in checked
# mode in reverse fiber order: both within the float32 tolerance of PyTorch,
# and equal bit for bit (the same sums in the same order); the generated
# kernel must be the double-buffered one.
PIPE_OFF = ["--gemm-pipeline=off"]
PIPE_SRC = "int nx = st ^ 1;"
STAGES2 = ["--gemm-stages=2"]


def fp32_pipe_case(ctx, run, wide=False, quads=False, w64=False):
    """run(env, flags): one of conv_case, linear_case, matmul_case with its shape; wide: the 128 x 128 tile
    (w64: 64 x 128); quads: the output's columns come in fours (out_quad), stored four a store (ncc_st4f)"""
    import numpy as np
    out = ctx.path("out_y.npy")
    tile, two = (WIDE, []) if wide else (W64, STAGES2) if w64 else ([], STAGES2)
    run(None, tile + PIPE_OFF)
    base = np.load(out)
    run(CHECKED_REVERSE, tile + two)
    both = np.load(out)
    if not np.array_equal(base, both):
        d = np.abs(base.astype(np.float64) - both)
        raise Failure("double-buffered, the output differs from one stage's: %d elements, max %.3g"
                      % (int(np.sum(d > 0)), float(d.max())))
    print("two stages: one stage's bits")
    src_check(ctx, tile + two, PIPE_SRC)
    if quads:
        src_check(ctx, tile + two, "ncc_st4f(&")


QUADS = ("pipe_stem", "pipe_k1", "wide")   # pixels a multiple of 4 (36, 64, 100); the stem split along K


for _v in ("pipe_stem", "pipe_digits", "pipe_k1", "pipe_tap_splitk", "tile_big", "tile_big_g2", "tap_big", "wide"):
    case("fp32_pipe_conv_" + _v, ["op", "conv", "tile", "check", "fiber"])(
        lambda ctx, v=_v: fp32_pipe_case(ctx, lambda env, fl: conv_case(ctx, v, env=env, flags=fl), quads=v in QUADS))
for _v in ("pipe_digits", "tap_big", "tile_big_g2"):
    case("fp32_pipe_wide_conv_" + _v, ["op", "conv", "tile", "check", "fiber"])(
        lambda ctx, v=_v: fp32_pipe_case(ctx, lambda env, fl: conv_case(ctx, v, env=env, flags=fl), wide=True))
for _v in ("pipe_stem", "pipe_digits", "tap_big"):
    case("fp32_pipe_w64_conv_" + _v, ["op", "conv", "tile", "check", "fiber"])(
        lambda ctx, v=_v: fp32_pipe_case(ctx, lambda env, fl: conv_case(ctx, v, env=env, flags=fl), w64=True,
                                         quads=v in QUADS))
case("fp32_pipe_linear", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_pipe_case(ctx, lambda env, fl: linear_case(ctx, 150, 70, 140, True, env=env, flags=fl),
                               quads=True))
case("fp32_pipe_wide_matmul_quads", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_pipe_case(ctx, lambda env, fl: matmul_case(ctx, (2, 130, 24), (2, 24, 132), env=env, flags=fl),
                               wide=True, quads=True))
case("fp32_pipe_wide_linear_nobias", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_pipe_case(ctx, lambda env, fl: linear_case(ctx, 130, 33, 129, False, env=env, flags=fl),
                               wide=True))
case("fp32_pipe_matmul_broadcast", ["op", "tile", "check", "fiber"])(
    lambda ctx: fp32_pipe_case(ctx, lambda env, fl: matmul_case(ctx, (2, 1, 129, 40), (3, 40, 131), env=env,
                                                                flags=fl)))
# whole models with every float4 tile double-buffered, checked, reverse fiber order: their epilogues, a
# pooling prologue (VGG-11 at -O3)
for _k, _o in (("resnet18", 2), ("vgg11", 3)):
    _b, _s, _sets, _ch = _MATRIX[_k]
    case("fp32_pipe_model_%s_O%d" % (_k, _o), ["model", "tile", "check", "fiber"])(
        lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch, o=_o: model_case(
            ctx, k, b, sz, st, flags=STAGES2 + ["-O%d" % o, "--check"], env={"NCC_FIBER_ORDER": "reverse"}, in_ch=ch))


# ---------------------------------------------------------------- int8 weights (`ncc quantize`)
# The example models' weights through `ncc quantize`, loaded by `ncc run`
# (dequantized at load): equal to PyTorch on the dequantized weights, close
# to the fp32 weights' result (cosine >= 0.999); the file at most 0.26x.
for _k, _b, _s, _sets, _ch in (("lenet", 2, 28, ["N=2"], 1), ("resnet18", 1, 32, ["N=1", "S=32"], 3),
                               ("mobilenet_v2", 1, 32, ["N=1", "S=32"], 3)):
    case("int8_weights_%s" % _k, ["model", "int8"])(
        lambda ctx, k=_k, b=_b, sz=_s, st=_sets, ch=_ch: model_case(ctx, k, b, sz, st, in_ch=ch, quantize=True))


# ---------------------------------------------------------------- --precision=int8 (calibrated)
# `ncc run --precision=int8 --calibrate=CAL.npy`: every conv2d and linear with
# weights whose error on the calibration data is at most --int8-max-error
# takes int8 operands and int32 sums (docs/precision.md, "INT8"):
#   q_x   = clamp(rint(x * inv), -127, 127), inv = float32(1 / float32(s)), s the
#           layer's activation scale (the calibration cache's), x * inv in float32
#   sw[c] = float32(max_k |W[c, k]|) / 127 (float32; 1 for a zero row),
#   Wq    = clamp(rint(W / sw[c]), -127, 127) (float32 division)
#   y     = float32(sum_k q_x Wq) * float32(sw[c] * float32(s)) + b
# rint rounds half to even (numpy's, torch.round).  The reference computes that
# in float64, where the integer sums are exact; only the float32 roundings of
# the dequantization (a few ulps) separate it from ncc:
#   INT8 TOLERANCE: max|ncc - ref| <= 1e-5 * max|ref| for each layer's output,
# while one integer step of a sum moves an output by sw * s * |Wq|, about 1e-3
# of its range; and the output must differ from the layer's fp32 result on the
# same input by more than the tolerance (or nothing was quantized).  Every
# layer's output is an output of the model and each layer is checked on ncc's
# own input to it: a float32 rounding upstream (1e-7) would otherwise move an
# activation across a rounding boundary of q_x now and then, one integer step.
# A layer that falls back (the cache's error above the bound) is checked
# against fp32 at the usual tolerance (RTOL).  The calibration (the cache's
# absmax and scale of each layer) is recomputed here in numpy from PyTorch's
# float32 activations of the calibration rows: amax = max |x| over a layer's
# input; minmax s = amax / 127; percentile and entropy from a 2048-bin
# histogram of |x| over [0, amax] (driver/calibrate.c), within one bin.
Q8_RTOL = 1e-5
Q8_BINS = 2048


def q8_net(name, in_shape, layers):
    """A chain of conv2d/linear layers (dicts: kind conv|linear, name, out,
    k, stride, pad, dil, groups, bias, relu; pool: a maxpool2d(pool) before the
    layer; bn: a batchnorm2d NAME_bn after the conv2d); each layer's output an
    output of the model (h1, h2, ..., y)."""
    lines = ["model %s" % name, "input x: f32[%s]" % dims(in_shape)]
    prev, rank, outs = "x", len(in_shape), []
    for i, L in enumerate(layers):
        o = "y" if i == len(layers) - 1 else "h%d" % (i + 1)
        a = prev
        if L.get("pool"):
            a = "maxpool2d(%s, %d)" % (a, L["pool"])
        bias = "true" if L.get("bias", True) else "false"
        if L["kind"] == "conv":
            e = ("conv2d(%s, %d, kernel=%d, stride=%d, pad=%d, dilation=%d, groups=%d, bias=%s, name=\"%s\")"
                 % (a, L["out"], L["k"], L.get("stride", 1), L.get("pad", 0), L.get("dil", 1), L.get("groups", 1),
                    bias, L["name"]))
        else:
            if rank > 2:
                a, rank = "flatten(%s)" % a, 2
            e = "linear(%s, %d, bias=%s, name=\"%s\")" % (a, L["out"], bias, L["name"])
        if L.get("bn"):
            e = "batchnorm2d(%s, name=\"%s_bn\")" % (e, L["name"])
        if L.get("relu"):
            e = "relu(%s)" % e
        lines.append("%s = %s" % (o, e))
        outs.append(o)
        prev = o
    lines.append("output " + ", ".join(outs))
    return "\n".join(lines) + "\n", outs


def q8_input(L, h):
    """The layer's operand from the previous layer's output: the pooling, the flatten."""
    import torch.nn.functional as F
    if L.get("pool"):
        h = F.max_pool2d(h, L["pool"])
    if L["kind"] == "linear" and h.dim() > 2:
        h = h.flatten(1)
    return h


def q8_op(L, x, w, b):
    import torch.nn.functional as F
    if L["kind"] == "conv":
        return F.conv2d(x, w, b, stride=L.get("stride", 1), padding=L.get("pad", 0), dilation=L.get("dil", 1),
                        groups=L.get("groups", 1))
    return F.linear(x, w, b)


def q8_fp32(L, x, P):
    """The layer in floating point, in x's dtype (float64: the exact result);
    its batchnorm (bn: inference, PyTorch's eps) and relu."""
    import torch.nn.functional as F
    n = L["name"]
    w, b = P[n + ".weight"].to(x.dtype), P.get(n + ".bias")
    y = q8_op(L, x, w, None if b is None else b.to(x.dtype))
    if L.get("bn"):
        bn = [P[n + "_bn." + k].to(x.dtype) for k in ("running_mean", "running_var", "weight", "bias")]
        y = F.batch_norm(y, *bn, False, 0.0, 1e-5)
    return F.relu(y) if L.get("relu") else y


def q8_folded(L, P):
    """The layer's weight and bias with its batchnorm folded in (as -O1 and up
    do before the precision pass): W * k, (b - mean) * k + beta per output
    channel, k = gamma / sqrt(var + eps), rounded to float32."""
    import torch
    n = L["name"]
    w, b = P[n + ".weight"], P.get(n + ".bias")
    if not L.get("bn"):
        return w, b
    mean, var, gamma, beta = (P[n + "_bn." + k] for k in ("running_mean", "running_var", "weight", "bias"))
    k = gamma / torch.sqrt(var + 1e-5)
    if not bool((k > 0).all()):
        raise Failure("layer %s: the case means gamma / sqrt(var + eps) > 0" % n)
    return as64(w * k.view(-1, *([1] * (w.dim() - 1)))), as64(((b if b is not None else 0) - mean) * k + beta)


def q8_params(in_shape, layers, scale_bias=0.2):
    """Random weights (uniform, / sqrt(fan in)) and biases, rounded to float32."""
    import torch
    P = {}
    h = torch.zeros((1,) + tuple(in_shape[1:]), dtype=torch.float64)
    for L in layers:
        h = q8_input(L, h)
        if L["kind"] == "conv":
            g, k = L.get("groups", 1), L["k"]
            fan = h.shape[1] // g * k * k
            w = as64(rand(L["out"], h.shape[1] // g, k, k) / fan ** 0.5)
        else:
            w = as64(rand(L["out"], h.shape[1]) / h.shape[1] ** 0.5)
        b = as64(rand(L["out"], lo=-scale_bias, hi=scale_bias)) if L.get("bias", True) else None
        P[L["name"] + ".weight"] = w
        if b is not None:
            P[L["name"] + ".bias"] = b
        if L.get("bn"):
            P.update(bn_params(L["out"], L["name"] + "_bn")[0])
        h = q8_fp32(L, h, P)
    return P


def q8_forward(layers, P, x):
    """The whole chain in x's dtype: (the output, each layer's input)."""
    taps = []
    h = x
    for L in layers:
        h = q8_input(L, h)
        taps.append(h)
        h = q8_fp32(L, h, P)
    return h, taps


def q8_activation(x, s):
    """clamp(rint(x * float32(1 / float32(s))), -127, 127), the product in
    float32: x's int8 integers (a float64 tensor)."""
    import numpy as np
    import torch
    inv = np.float32(1.0) / np.float32(s)
    v = x.numpy().astype(np.float32) * inv
    assert v.dtype == np.float32
    return torch.from_numpy(np.clip(np.rint(v), -127, 127).astype(np.float64))


def q8_weight(w):
    """Per output channel (dim 0): the integers (float64 tensor) and sw (float32 numpy)."""
    import numpy as np
    import torch
    a = w.numpy().astype(np.float32)
    r = a.reshape(a.shape[0], -1)
    m = np.abs(r).max(axis=1)
    sw = np.where(m > 0, m / np.float32(127), np.float32(1)).astype(np.float32)
    q = np.clip(np.rint(r / sw[:, None]), -127, 127)
    assert (r / sw[:, None]).dtype == np.float32
    return torch.from_numpy(q.reshape(a.shape).astype(np.float64)), sw


def q8_int8(L, x, P, s):
    """The layer at int8 (the exact semantics above; its batchnorm folded into
    the weight first) on its input x, and its relu."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    w, b = q8_folded(L, P)
    qx = q8_activation(x, s)
    wq, sw = q8_weight(w)
    acc = q8_op(L, qx, wq, None)   # integers: exact in float64
    if float(acc.abs().max()) >= 2 ** 24:
        raise Failure("layer %s: an int32 sum of %g is not exact in float32; this case means smaller sums"
                      % (L["name"], float(acc.abs().max())))
    sc = (sw * np.float32(s)).astype(np.float32)   # the float32 product, as the load-time mul
    view = (1, -1, 1, 1) if L["kind"] == "conv" else (1, -1)
    y = acc * torch.from_numpy(sc.astype(np.float64)).view(view)
    if b is not None:
        y = y + b.view(view)
    return F.relu(y) if L.get("relu") else y


def check_int8(name, got, ref, fp32):
    """ncc's int8 output against the exact int8 reference (INT8 TOLERANCE),
    and away from the fp32 result on the same input."""
    import numpy as np
    ref, fp32 = np.asarray(ref, dtype=np.float64), np.asarray(fp32, dtype=np.float64)
    if got.shape != ref.shape:
        raise Failure("output %s: shape %s, the reference's is %s" % (name, got.shape, ref.shape))
    if got.dtype != np.float32:
        raise Failure("output %s: dtype %s, expected float32" % (name, got.dtype))
    if not np.all(np.isfinite(got)):
        raise Failure("output %s: %d non-finite values" % (name, int(np.sum(~np.isfinite(got)))))
    g = got.astype(np.float64)
    err = np.abs(g - ref)
    tol = Q8_RTOL * float(np.abs(ref).max())
    m = float(err.max())
    d = float(np.abs(g - fp32).max())
    print("output %s %s: max|err| = %.3g against the int8 reference, tolerance %.3g (= %g * max|ref| = %.4g); "
          "%.3g from fp32" % (name, tuple(ref.shape), m, tol, Q8_RTOL, float(np.abs(ref).max()), d))
    if m > tol:
        for i in np.argwhere(err > tol)[:5]:
            i = tuple(int(k) for k in i)
            print("  at %s: ncc %.9g, int8 reference %.9g, fp32 %.9g" % (i, got[i], ref[i], fp32[i]))
        raise Failure("output %s differs from the int8 reference: max|err| %.3g > %.3g (%d of %d elements)"
                      % (name, m, tol, int(np.sum(err > tol)), err.size))
    if d <= tol:
        raise Failure("output %s is within the int8 tolerance of the fp32 result: was the layer quantized?" % name)


def cosine(a, b):
    import numpy as np
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def read_calibration_cache(path):
    """method, percentile, samples and layers: name -> {absmax, scale, error} (in file order)."""
    c = {"layers": {}}
    with open(path) as f:
        lines = f.read().split("\n")
    if lines[0] != "ncc-int8-calibration 1":
        raise Failure("%s: not a calibration cache (first line %r)" % (path, lines[0]))
    for line in lines[1:]:
        w = line.split()
        if not w or w[0].startswith("#"):
            continue
        if w[0] == "layer":
            if len(w) != 8 or w[2::2] != ["absmax", "scale", "error"]:
                raise Failure("%s: unexpected line %r" % (path, line))
            c["layers"][w[1]] = {"absmax": float(w[3]), "scale": float(w[5]), "error": float(w[7])}
        elif w[0] in ("method", "model_key", "weights_key"):
            c[w[0]] = w[1]
        elif w[0] == "percentile":
            c["percentile"] = float(w[1])
        elif w[0] == "samples":
            c["samples"] = int(w[1])
        else:
            raise Failure("%s: unexpected line %r" % (path, line))
    print("calibration cache %s: method %s, %s samples; %s" % (
        path, c.get("method"), c.get("samples"),
        ", ".join("%s absmax %.6g scale %.6g error %.4g" % (k, v["absmax"], v["scale"], v["error"])
                  for k, v in c["layers"].items())))
    return c


class Q8:
    """An int8 case's files: the model, its weights, the input and the calibration rows."""

    def __init__(self, ctx, in_shape, layers, rows=64, data="uniform", params=None, seed_=60):
        import torch
        self.ctx, self.layers, self.in_shape = ctx, layers, tuple(in_shape)
        seed(seed_)
        self.P = params(in_shape, layers) if params else q8_params(in_shape, layers)
        shape = (rows,) + self.in_shape[1:]
        if data == "normal":   # a bell with tails: the percentile and entropy thresholds clip them
            cal, x = torch.randn(*shape, dtype=torch.float64), torch.randn(*in_shape, dtype=torch.float64)
        else:
            cal, x = rand(*shape), rand(*in_shape)
        self.cal, self.x = as64(cal), as64(x)
        self.net, self.outs = q8_net(ctx.name, in_shape, layers)
        self.net_path, self.wpath = ctx.path(ctx.name + ".net"), ctx.path("weights.safetensors")
        self.xpath, self.calpath = ctx.path("in_x.npy"), ctx.path("cal.npy")
        with open(self.net_path, "w") as f:
            f.write(self.net)
        print(self.net.rstrip())
        write_safetensors(self.wpath, self.P)
        save_npy(self.xpath, f32np(self.x))
        save_npy(self.calpath, f32np(self.cal))

    def run(self, flags, cache="calib.txt", tag="int8", env=None):
        """`ncc run --precision=int8` (-v): the outputs, the cache, the int8 and
        fallback counts of the precision pass's last line, the log.  env:
        CHECKED_REVERSE runs the model (the calibration's builds too) in
        checked mode, in reverse fiber order."""
        import numpy as np
        ctx = self.ctx
        dev = oracle_device()
        args = [self.net_path] + (["--device", "cuda", "--jit"] if dev == "jit" else ["--device", dev])
        args += ["--weights", self.wpath, "--input", "x=" + self.xpath, "--precision=int8",
                 "--calibrate=" + self.calpath, "--calibration-cache=" + ctx.path(cache), "-v"]
        outs = {}
        for k in self.outs:
            outs[k] = ctx.path("%s_%s.npy" % (tag, k))
            if os.path.exists(outs[k]):
                os.unlink(outs[k])
            args += ["--output", "%s=%s" % (k, outs[k])]
        p = ctx.run_ncc(args + list(flags), env=env)
        if p.returncode != 0:
            raise Failure("ncc run exited with status %d" % p.returncode)
        want = "device: emu" if dev == "emu" else "device: cuda"
        if want not in p.stdout:
            raise Failure("ncc run did not say '%s'" % want)
        if env and dev == "emu" and "checked, reverse fiber order" not in p.stdout:
            raise Failure("checked mode in reverse fiber order was asked for but not reported")
        log = p.stdout + p.stderr
        m = re.findall(r"pass precision: int8: (\d+) conv2d/linear/matmul ops? with int8 operands and int32 sums, "
                       r"(\d+) fell back", log)
        if not m:
            raise Failure("ncc run -v printed no 'pass precision: int8: ...' line")
        got = {}
        for k, path in outs.items():
            if not os.path.exists(path):
                raise Failure("ncc run wrote no %s" % path)
            got[k] = np.load(path)
        return got, read_calibration_cache(ctx.path(cache)), (int(m[-1][0]), int(m[-1][1])), log

    def compile(self, cache, flags=(), emit=None):
        """The generated code (or --emit text) of the int8 build with the cache's scales."""
        out = self.ctx.path("gen.cu" if emit is None else "gen." + emit)
        cmd = [self.ctx.ncc, self.net_path, "-o", out, "--precision=int8", "--calibration-cache=" + self.ctx.path(cache),
               "--weights", self.wpath, "--freeze"] + (["--emit=" + emit] if emit else []) + list(flags)
        print("$", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if p.returncode != 0:
            raise Failure("%s failed: %s" % (" ".join(cmd), p.stderr))
        with open(out) as f:
            return f.read()

    def kernels(self, cache, flags=()):
        """name -> body of the per-inference kernels of the int8 build, the
        model's prefix left out of the names ("k2_conv2d_mul_add_relu")"""
        code = self.compile(cache, flags)
        ks = {}
        for part in code.split("NCC_KERNEL void ")[1:]:
            part = re.sub(r"^__launch_bounds__\(\d+, \d+\) ", "", part)
            name = part.split("(", 1)[0]
            if not name.startswith(self.ctx.name + "_"):
                raise Failure("kernel %s: not prefixed by the model's name" % name)
            name = name[len(self.ctx.name) + 1:]
            if re.match(r"k\d+_", name):
                ks[name] = part
        return ks

    def check(self, got, cache, max_error):
        """Each layer on ncc's own input: the int8 reference (or fp32 where the
        cache's error exceeds max_error); returns the fp32 model's output (float64)
        for the model's input.  self.clamped: the activations of the int8 layers
        beyond 127.5 scales (clamped to +-127)."""
        import numpy as np
        import torch
        prev = self.x
        self.clamped = 0
        for L, o in zip(self.layers, self.outs):
            xin = q8_input(L, prev)
            ent = cache["layers"].get(L["name"])
            if ent is None:
                raise Failure("the calibration cache has no layer %s" % L["name"])
            fp = q8_fp32(L, xin, self.P)
            if ent["error"] > max_error:
                print("layer %s: fp32 (the cache's error %.4g > %g)" % (L["name"], ent["error"], max_error))
                check_close(o, got[o], fp.numpy())
            else:
                v = np.abs(xin.numpy().astype(np.float32) * (np.float32(1) / np.float32(ent["scale"])))
                n = int(np.sum(v >= 127.5))
                self.clamped += n
                print("layer %s: int8, scale %.9g; %d of %d activations clamped to +-127"
                      % (L["name"], ent["scale"], n, v.size))
                check_int8(o, got[o], q8_int8(L, xin, self.P, ent["scale"]).numpy(), fp.numpy())
            prev = torch.from_numpy(got[o].astype(np.float64))
        return q8_forward(self.layers, self.P, self.x)[0]

    def taps(self):
        """Each layer's input over the calibration rows, from PyTorch in float32 (numpy)."""
        import torch
        with torch.no_grad():
            return [t.numpy() for t in q8_forward(self.layers, self.P, self.cal.to(torch.float32))[1]]


def q8_expect_counts(counts, n8, nfb):
    print("precision pass: %d int8 layers, %d fell back" % counts)
    if counts != (n8, nfb):
        raise Failure("the precision pass made %d layers int8 with %d falling back; expected %d and %d"
                      % (counts + (n8, nfb)))


def q8_check_amax(c, layers, taps, rtol=1e-5):
    """The cache's absmax against max |x| of PyTorch's float32 activations: the
    model's input exactly, a computed activation within float32 sums' rounding."""
    import numpy as np
    out = []
    for i, (L, t) in enumerate(zip(layers, taps)):
        amax = float(np.abs(t).max())
        got = c["layers"][L["name"]]["absmax"]
        exact = i == 0 and not L.get("pool")
        print("layer %s: absmax %.9g, PyTorch %.9g (%s)" % (L["name"], got, amax, "exact" if exact else "rtol %g" % rtol))
        if exact and np.float32(got) != np.float32(amax):
            raise Failure("layer %s: the cache's absmax %.9g is not max |x| of the calibration rows, %.9g"
                          % (L["name"], got, amax))
        if abs(got - amax) > rtol * amax:
            raise Failure("layer %s: the cache's absmax %.9g differs from PyTorch's %.9g" % (L["name"], got, amax))
        out.append(amax)
    return out


def q8_hist(t, amax):
    """driver/calibrate.c's histogram: 2048 bins of |x| over [0, amax]; bin int(|x| / (amax / 2048)), the last
    bin also holding |x| = amax"""
    import numpy as np
    a = np.abs(np.asarray(t, dtype=np.float64)).ravel()
    a = a[~np.isnan(a)]
    b = np.minimum(np.floor(a / (amax / Q8_BINS)).astype(np.int64), Q8_BINS - 1)
    return np.bincount(b, minlength=Q8_BINS).astype(np.float64)


def q8_percentile(h, amax, pct):
    """The upper edge of the first bin where the cumulative count reaches pct% of the total."""
    import numpy as np
    c = np.cumsum(h)
    i = int(np.argmax(c >= c[-1] * pct / 100.0)) if np.any(c >= c[-1] * pct / 100.0) else Q8_BINS - 1
    return (min(i, Q8_BINS - 1) + 1) * amax / Q8_BINS


def q8_smooth(p, eps=1e-4):
    """p (counts) with its zeros set to eps and that mass taken evenly from its nonzero entries (MXNet's
    _smooth_distribution), then normalised to 1; None for no mass."""
    import numpy as np
    n, zeros = p.size, p == 0
    nz = int(zeros.sum())
    if nz == n:
        return None
    r = np.where(zeros, eps, p - eps * nz / (n - nz))
    return r / r.sum() if r.sum() > 0 else None


def q8_entropy(h, amax, smooth=q8_smooth):
    """TensorRT's KL threshold over 2048 bins (driver/calibrate.c's comment):
    the first bin (a ReLU's zeros) given the second bin's count, as NVIDIA's
    pytorch-quantization does; for i = 128..2048 bins, P = the first i bins,
    the rest (the outliers) added to bin i-1; Q = the first i bins merged
    into 128 levels (level b: bins floor(b i / 128) .. floor((b+1) i / 128) -
    1), each level's count spread evenly over its nonzero bins (zero bins
    stay 0); both smoothed; the i of the least KL(P || Q).  Returns
    (threshold, i, the KL of every i, NaN where undefined)."""
    import numpy as np
    h = np.array(h, dtype=np.float64)
    h[0] = h[1]
    best, bestkl = Q8_BINS, np.inf
    kls = np.full(Q8_BINS + 1, np.nan)
    tail = np.concatenate([np.cumsum(h[::-1])[::-1], [0.0]])   # tail[i] = sum h[i:]
    for i in range(128, Q8_BINS + 1):
        p = h[:i].copy()
        p[i - 1] += tail[i]
        edges = np.arange(129) * i // 128
        lvl = np.repeat(np.arange(128), np.diff(edges))
        nzb = h[:i] != 0
        sums = np.bincount(lvl, weights=h[:i], minlength=128)
        cnt = np.bincount(lvl, weights=nzb.astype(np.float64), minlength=128)
        q = np.where(nzb, sums[lvl] / np.maximum(cnt[lvl], 1), 0.0)
        ps, qs = smooth(p), smooth(q)
        if ps is None or qs is None:
            continue
        with np.errstate(all="ignore"):
            kl = float(np.sum(ps * np.log(ps / qs)))
        kls[i] = kl
        if kl < bestkl:
            best, bestkl = i, kl
    return best * amax / Q8_BINS, best, kls


def q8_check_scales(c, layers, amaxes, thresholds):
    """The cache's scale of every layer against threshold / 127, within one bin (amax / 2048 / 127)."""
    for L, amax, t in zip(layers, amaxes, thresholds):
        got = c["layers"][L["name"]]["scale"]
        want = t / 127 if t > 0 else 1.0
        bin_ = amax / Q8_BINS / 127
        print("layer %s: scale %.9g, recomputed %.9g (threshold %.6g of absmax %.6g): %.3g bins apart"
              % (L["name"], got, want, t, amax, abs(got - want) / bin_))
        if abs(got - want) > bin_ * (1 + 1e-6):
            raise Failure("layer %s: the cache's scale %.9g is %.3g histogram bins from the recomputed %.9g"
                          % (L["name"], got, abs(got - want) / bin_, want))


# int8_conv_tiled: two convolutions on the tiled kernel, on tensor cores
# (mma.sync s8; stride 1; stride 2 with dilation 2) and a linear head;
# minmax scales = amax / 127.
Q8_CONV_TILED = [
    dict(kind="conv", name="conv1", out=16, k=3, pad=1, relu=True),
    dict(kind="conv", name="conv2", out=16, k=3, stride=2, pad=2, dil=2, relu=True),
    dict(kind="linear", name="fc", out=10),
]


@case("int8_conv_tiled", ["op", "int8"])
def _int8_conv_tiled(ctx, env=None):
    import numpy as np
    q = Q8(ctx, (4, 8, 10, 10), Q8_CONV_TILED)
    got, c, counts, _ = q.run(["--calibration-method=minmax", "--int8-max-error=1e9"], env=env)
    q8_expect_counts(counts, 3, 0)
    if c.get("method") != "minmax" or c.get("samples") != 64:
        raise Failure("the cache says method %s, %s samples; expected minmax, 64" % (c.get("method"), c.get("samples")))
    ref = q.check(got, c, 1e9)
    print("output y: cosine %.6f against the fp32 model" % cosine(got["y"], ref.numpy()))
    amaxes = q8_check_amax(c, q.layers, q.taps())
    for L, amax in zip(q.layers, amaxes):
        s, a = c["layers"][L["name"]]["scale"], c["layers"][L["name"]]["absmax"]
        print("layer %s: minmax scale %.9g, absmax / 127 %.9g, PyTorch's amax / 127 %.9g" % (L["name"], s, a / 127, amax / 127))
        if np.float32(s) != np.float32(a / 127) or abs(s - amax / 127) > 1e-5 * s:
            raise Failure("layer %s: the minmax scale %.9g is not absmax / 127 (%.9g; PyTorch's %.9g)"
                          % (L["name"], s, a / 127, amax / 127))
    ks = q.kernels("calib.txt", ["--int8-max-error=1e9"])
    conv = [k for k, v in ks.items() if "conv2d" in k and "ncc_q8" in v and "ncc_mma_s8_16x8x16(" in v]
    print("tiled int8 convolution kernels: %s" % ", ".join(conv))
    if len(conv) != 2:
        raise Failure("expected both convolutions on the tiled s8 tensor-core kernel; kernels: %s"
                      % ", ".join(ks))


case("int8_conv_tiled_checked_reverse", ["op", "int8", "check", "fiber"])(
    lambda ctx: _int8_conv_tiled(ctx, env=CHECKED_REVERSE))


# int8_conv_direct: depthwise (groups = channels, stride 2) and a grouped
# convolution of 2 outputs a group: the direct kernel (< 8 outputs a group),
# percentile scales (99%: the largest activations clamp at 127).
Q8_CONV_DIRECT = [
    dict(kind="conv", name="dw", out=8, k=3, stride=2, pad=1, groups=8, relu=True),
    dict(kind="conv", name="dw2", out=16, k=3, pad=1, groups=8),
]


@case("int8_conv_direct", ["op", "int8"])
def _int8_conv_direct(ctx, env=None):
    q = Q8(ctx, (2, 8, 9, 9), Q8_CONV_DIRECT)
    got, c, counts, _ = q.run(["--calibration-method=percentile", "--percentile=99", "--int8-max-error=1e9"], env=env)
    q8_expect_counts(counts, 2, 0)
    q.check(got, c, 1e9)
    if not q.clamped:
        raise Failure("no activation was clamped: the case means the 99th percentile to clip some")
    ks = q.kernels("calib.txt", ["--int8-max-error=1e9"])
    direct = [k for k, v in ks.items() if "conv2d" in k and "vi += (int)ncc_q8(" in v and "Bs[" not in v]
    print("direct int8 convolution kernels: %s" % ", ".join(direct))
    if len(direct) != 2:
        raise Failure("expected both convolutions on the direct kernel with int32 sums; kernels: %s" % ", ".join(ks))


case("int8_conv_direct_checked_reverse", ["op", "int8", "check", "fiber"])(
    lambda ctx: _int8_conv_direct(ctx, env=CHECKED_REVERSE))


# int8_linear_gemv: 4 rows (the GEMV kernel); int8_linear_tiled: 32 rows (the
# tiled GEMM on s8 tensor cores), percentile scales (99.5%: clamping).
def q8_linear_case(ctx, rows, gemv, env=None):
    q = Q8(ctx, (rows, 130), [dict(kind="linear", name="fc1", out=70, relu=True),
                              dict(kind="linear", name="fc2", out=33)])
    flags = ["--int8-max-error=1e9"] + (["--calibration-method=minmax"] if gemv else
                                        ["--calibration-method=percentile", "--percentile=99.5"])
    got, c, counts, _ = q.run(flags, env=env)
    q8_expect_counts(counts, 2, 0)
    q.check(got, c, 1e9)
    if not gemv and not q.clamped:
        raise Failure("no activation was clamped: the case means the 99.5th percentile to clip some")
    ks = q.kernels("calib.txt", ["--int8-max-error=1e9"])
    lin = [k for k, v in ks.items() if "linear" in k and "ncc_q8" in v]
    g = [k for k in lin if "_gemv" in k]
    tiled = [k for k in lin if "_gemv" not in k and "ncc_mma_s8_16x8x16(" in ks[k]]
    print("int8 linear kernels: %s (GEMV: %s)" % (", ".join(lin), ", ".join(g) or "none"))
    if len(lin) != 2 or len(g if gemv else tiled) != 2:
        raise Failure("expected both linears %s; kernels: %s" % ("as GEMVs" if gemv else "on the tiled GEMM",
                                                                  ", ".join(ks)))


# the larger tensor-core tiles at int8 (--gemm-tile forces one): a convolution
# of 130 outputs on 162 columns, a linear of 150 rows and 133 outputs
def q8_tile_case(ctx, tile, in_shape, layers, env=None):
    q = Q8(ctx, in_shape, layers)
    got, c, counts, log = q.run(["--calibration-method=minmax", "--int8-max-error=1e9", "--gemm-tile=" + tile], env=env)
    q8_expect_counts(counts, len(layers), 0)
    q.check(got, c, 1e9)
    tiles = re.findall(r"pass precision: \S+ (\S+): tile (\d+x\d+), forced", log)
    print("tiles: %s" % tiles)
    if not tiles or any(t != tile for _, t in tiles):
        raise Failure("expected every tensor-core GEMM at tile %s; -v said %s" % (tile, tiles))


case("int8_tile128x128_conv", ["op", "int8", "tile"])(lambda ctx: q8_tile_case(
    ctx, "128x128", (2, 12, 9, 9), [dict(kind="conv", name="conv1", out=130, k=3, pad=1, relu=True),
                                    dict(kind="linear", name="fc", out=10)]))
case("int8_tile128x64_linear", ["op", "int8", "tile"])(lambda ctx: q8_tile_case(
    ctx, "128x64", (150, 77), [dict(kind="linear", name="fc1", out=133, relu=True),
                               dict(kind="linear", name="fc2", out=20)]))
# the same checked, in reverse fiber order
case("int8_tile128x128_conv_checked_reverse", ["op", "int8", "tile", "check", "fiber"])(lambda ctx: q8_tile_case(
    ctx, "128x128", (2, 12, 9, 9), [dict(kind="conv", name="conv1", out=130, k=3, pad=1, relu=True),
                                    dict(kind="linear", name="fc", out=10)], env=CHECKED_REVERSE))
case("int8_tile128x64_linear_checked_reverse", ["op", "int8", "tile", "check", "fiber"])(lambda ctx: q8_tile_case(
    ctx, "128x64", (150, 77), [dict(kind="linear", name="fc1", out=133, relu=True),
                               dict(kind="linear", name="fc2", out=20)], env=CHECKED_REVERSE))
# int8 with the pipelined tiles (the default) where an operand is stored int8
# and k-contiguous with K a multiple of 16: a linear's weight (B), quantized at
# load, and a convolution's (A) go by cp.async and ldmatrix; B by x4 (four
# 8-column blocks) at the default tile of fc1, x2 (two) at fc2's and at
# 32x32, A by x2 there (one 16-row slice a warp).  The same bits as --gemm-pipeline=off, checked and in reverse
# fiber order, and the int8 reference.
def q8_pipeline_case(ctx, tile, in_shape, layers, op, want, also=(), stages=None):
    import numpy as np
    q = Q8(ctx, in_shape, layers)
    flags = ["--calibration-method=minmax", "--int8-max-error=1e9"] + (["--gemm-tile=" + tile] if tile else [])
    off, c, counts, _ = q.run(flags + ["--gemm-pipeline=off"])
    flags += ["--gemm-stages=%d" % stages] if stages else []
    q8_expect_counts(counts, len(layers), 0)
    q.check(off, c, 1e9)
    for extra, env in ((["--check"], {}), ([], {"NCC_FIBER_ORDER": "reverse"})):
        os.environ.update(env)
        try:
            on, _, _, _ = q.run(flags + extra, tag="pipe")
        finally:
            for k in env:
                del os.environ[k]
        for k in off:
            if not np.array_equal(off[k].view("uint32"), on[k].view("uint32")):
                raise Failure("the pipelined tiles (%s) changed output %s (max diff %g)"
                              % (" ".join(extra) or "reverse", k, float(np.abs(off[k] - on[k]).max())))
    print("outputs bit-equal with and without the pipelined tiles, checked and reversed")
    ks = q.kernels("calib.txt", flags[1:])
    sel = {k: v for k, v in ks.items() if op in k and "ncc_mma_s8_16x8x16(" in v}
    bad = [k for k, v in sel.items() if want not in v]
    print("int8 %s kernels: %s" % (op, ", ".join(sel)))
    if len(sel) != len(layers) or bad:
        raise Failure("expected each %s on s8 tensor cores with %r; not in: %s" % (op, want, ", ".join(bad) or "-"))
    for w in also:   # and in one of them
        if not any(w in v for v in sel.values()):
            raise Failure("expected %r in one of the %s kernels" % (w, op))


Q8_PIPE_LINEARS = [dict(kind="linear", name="fc1", out=64, relu=True), dict(kind="linear", name="fc2", out=40)]
case("int8_linear_pipeline", ["op", "int8", "check", "fiber"])(lambda ctx: q8_pipeline_case(
    ctx, None, (70, 96), Q8_PIPE_LINEARS, "linear", "&Bs[st][lb + j * 384]",
    ("ncc_ldmatrix_x4(q, &Bs[st]", "ncc_ldmatrix_x2(q, &Bs[st]")))
case("int8_tile32x32_linear_pipeline", ["op", "int8", "tile", "check", "fiber"])(lambda ctx: q8_pipeline_case(
    ctx, "32x32", (70, 96), Q8_PIPE_LINEARS, "linear", "ncc_ldmatrix_x2(q, &Bs[st][lb + j * 384])"))
case("int8_tile32x32_conv_pipeline", ["op", "int8", "tile", "check", "fiber"])(lambda ctx: q8_pipeline_case(
    ctx, "32x32", (2, 16, 7, 9), [dict(kind="conv", name="conv1", out=40, k=3, pad=1, relu=True)], "conv2d",
    "ncc_ldmatrix_x2(ah[i], &As[st][lo + i * 768])"))
# --gemm-stages at int8: three stages of both linears' weights, four of a convolution's
case("int8_linear_pipeline_stages3", ["op", "int8", "check", "fiber"])(lambda ctx: q8_pipeline_case(
    ctx, None, (70, 96), Q8_PIPE_LINEARS, "linear", "ncc_cp_async_wait(2);", stages=3))
case("int8_tile32x32_conv_pipeline_stages4", ["op", "int8", "tile", "check", "fiber"])(lambda ctx: q8_pipeline_case(
    ctx, "32x32", (2, 16, 7, 9), [dict(kind="conv", name="conv1", out=40, k=3, pad=1, relu=True)], "conv2d",
    "ncc_cp_async_wait(3);", stages=4))
# int8_matmul_*: a matmul of two activations at int8 (ir_int8_candidate): both
# operands quantized with their own calibrated per-tensor scales (the cache's
# layers "qk" and "qk#b"), int32 sums, y = sum * float32(sa * sb).  The two
# linears before it make its operands (int8 too); ncc's own operands, outputs
# of the model, feed the reference.  gemv: 8 rows a batch matrix (the GEMV
# kernel); tiled: 40 (s8 tensor cores).
def q8_matmul_case(ctx, rows, tile):
    import numpy as np
    import torch
    seed(61)
    B, D, K, N = 2, 96, 12, 36
    net = ("model %s\ninput x: f32[%d, %d]\n"
           "h = relu(linear(x, %d, name=\"fq\"))\nk = linear(x, %d, name=\"fk\")\n"
           "q = reshape(h, [%d, %d, %d])\nkk = reshape(k, [%d, %d, %d])\ny = matmul(q, kk, name=\"qk\")\n"
           "output y\noutput q\noutput kk\n" % (ctx.name, B, D, rows * K, K * N, B, rows, K, B, K, N))
    P = {"fq.weight": rand(rows * K, D) / D ** 0.5, "fq.bias": rand(rows * K) * 0.1,
         "fk.weight": rand(K * N, D) / D ** 0.5, "fk.bias": rand(K * N) * 0.1}
    netp, wp, xp, calp = ctx.path("m.net"), ctx.path("w.safetensors"), ctx.path("x.npy"), ctx.path("cal.npy")
    with open(netp, "w") as f:
        f.write(net)
    write_safetensors(wp, {k: as64(v) for k, v in P.items()})
    cal, x = rand(32, D), rand(B, D)
    save_npy(calp, f32np(cal))
    save_npy(xp, f32np(x))
    if os.path.exists(ctx.path("c.txt")):
        os.unlink(ctx.path("c.txt"))
    outs = {k: ctx.path("out_%s.npy" % k) for k in ("y", "q", "kk")}
    args = [netp, "--device", oracle_device() if oracle_device() != "jit" else "cuda"]
    args += ["--jit"] if oracle_device() == "jit" else []
    args += ["--weights", wp, "--input", "x=" + xp, "--precision=int8", "--calibrate=" + calp,
             "--calibration-method=minmax", "--int8-max-error=1e9", "--calibration-cache=" + ctx.path("c.txt"), "-v"]
    for k, v in outs.items():
        args += ["--output", "%s=%s" % (k, v)]
    p = ctx.run_ncc(args)
    if p.returncode != 0:
        raise Failure("ncc run exited with status %d" % p.returncode)
    m = re.findall(r"pass precision: int8: (\d+) conv2d/linear/matmul ops? with int8", p.stderr)
    if not m or m[-1] != "3":
        raise Failure("expected the two linears and the matmul at int8; -v said %s" % m)
    c = read_calibration_cache(ctx.path("c.txt"))
    if list(c["layers"]) != ["fq", "fk", "qk", "qk#b"]:
        raise Failure("the cache's layers are %s, expected fq, fk, qk and qk#b" % list(c["layers"]))
    # minmax: each operand's scale is max |x| / 127 of it in fp32 over the calibration rows
    with torch.no_grad():
        c32 = cal.to(torch.float32)
        taps = {"qk": torch.relu(torch.nn.functional.linear(c32, P["fq.weight"].float(), P["fq.bias"].float())),
                "qk#b": torch.nn.functional.linear(c32, P["fk.weight"].float(), P["fk.bias"].float())}
    for key, t in taps.items():
        amax, ent = float(t.abs().max()), c["layers"][key]
        print("layer %s: absmax %.9g (PyTorch %.9g), scale %.9g" % (key, ent["absmax"], amax, ent["scale"]))
        if abs(ent["absmax"] - amax) > 1e-5 * amax or np.float32(ent["scale"]) != np.float32(ent["absmax"] / 127):
            raise Failure("layer %s: the minmax scale is not max |x| / 127 of PyTorch's operand" % key)
    got = {k: np.load(v) for k, v in outs.items()}
    sa, sb = np.float32(c["layers"]["qk"]["scale"]), np.float32(c["layers"]["qk#b"]["scale"])

    def quant(v, s):
        return np.clip(np.rint(v.astype(np.float32) * (np.float32(1) / s)), -127, 127).astype(np.float64)
    qa, qb = quant(got["q"], sa), quant(got["kk"], sb)
    isum = np.matmul(qa, qb)   # exact: integers well inside float64's
    ref = (isum.astype(np.float32) * np.float32(sa * sb)).astype(np.float64)
    fp32 = np.matmul(got["q"].astype(np.float64), got["kk"].astype(np.float64))
    check_int8("y", got["y"], ref, fp32)
    print("output y: cosine %.6f against the fp32 matmul of the same operands" % cosine(got["y"], fp32))
    code = subprocess.run([ctx.ncc, netp, "--precision=int8", "--calibration-cache=" + ctx.path("c.txt"),
                           "--weights", wp, "--freeze", "-o", ctx.path("gen.cu")], capture_output=True, text=True)
    src = open(ctx.path("gen.cu")).read() if code.returncode == 0 else ""
    kern = [k for k in re.findall(r"NCC_KERNEL void (?:__launch_bounds__\(\d+, \d+\) )?(\w+)\(", src)
            if re.match(r"_k\d+_matmul", k[len(ctx.name):])]
    print("matmul kernels: %s" % kern)
    want = "_gemv" if not tile else "_mma"
    if len(kern) != 1 or want not in kern[0] or "ncc_q8(v * inv_scale_b)" not in src:
        raise Failure("expected the int8 matmul on the %s kernel, its b quantized with inv_scale_b" % want)


case("int8_matmul_gemv", ["op", "int8"])(lambda ctx: q8_matmul_case(ctx, 8, False))
case("int8_matmul_tiled", ["op", "int8"])(lambda ctx: q8_matmul_case(ctx, 40, True))
case("int8_linear_gemv", ["op", "int8"])(lambda ctx: q8_linear_case(ctx, 4, True))
case("int8_linear_tiled", ["op", "int8"])(lambda ctx: q8_linear_case(ctx, 32, False))
case("int8_linear_gemv_checked_reverse", ["op", "int8", "check", "fiber"])(
    lambda ctx: q8_linear_case(ctx, 4, True, env=CHECKED_REVERSE))
case("int8_linear_tiled_checked_reverse", ["op", "int8", "check", "fiber"])(
    lambda ctx: q8_linear_case(ctx, 32, False, env=CHECKED_REVERSE))


# int8_pool_prologue_O3: conv -> relu -> maxpool -> conv at -O3, the pooling
# computed in the second convolution's loads (rule pool-prologue): the window's
# maximum quantized as it enters the tile.
@case("int8_pool_prologue_O3", ["op", "int8", "fusion"])
def _int8_pool_prologue(ctx):
    layers = [dict(kind="conv", name="conv1", out=16, k=3, pad=1, relu=True),
              dict(kind="conv", name="conv2", out=16, k=3, pad=1, pool=2, relu=True)]
    q = Q8(ctx, (2, 4, 12, 12), layers)
    got, c, counts, log = q.run(["--calibration-method=minmax", "--int8-max-error=1e9", "-O3"])
    q8_expect_counts(counts, 2, 0)
    q.check(got, c, 1e9)
    # the numbers first, then the kernels: the int8 build's fuse pass (the last one in the log)
    last = log.split("pass fuse:")[-1].split("\n")
    refused = [l.strip() for l in last if re.search(r"not fused: \S+ -> conv2 \[pool-prologue\]", l)]
    ks = q.kernels("calib.txt", ["--int8-max-error=1e9", "-O3"])
    pro = [k for k, v in ks.items() if "maxpool2d" in k and "conv2d" in k and "ncc_q8" in v]
    print("int8 convolution kernels with the pooling as prologue: %s" % (", ".join(pro) or "none"))
    if refused:
        raise Failure("-O3: the pooling did not join conv2's loads as a prologue (%s)" % refused[0])
    if len(pro) != 1 or any(re.match(r"k\d+_maxpool2d$", k) for k in ks):
        raise Failure("expected one maxpool2d+conv2d kernel and no pooling kernel; kernels: %s" % ", ".join(ks))


# int8_pool_prologue_O3_pipeline: the same model with --gemm-pipeline=on (the
# default) and off: with it conv2's B elements (the pooled window, quantized; its
# weight tap-major) go through registers, the next K tile's loaded during the
# MMAs: the same bits.
@case("int8_pool_prologue_O3_pipeline", ["op", "int8", "fusion"])
def _int8_pool_prologue_pipeline(ctx):
    import numpy as np
    layers = [dict(kind="conv", name="conv1", out=16, k=3, pad=1, relu=True),
              dict(kind="conv", name="conv2", out=16, k=3, pad=1, pool=2, relu=True)]
    q = Q8(ctx, (2, 4, 12, 12), layers)
    flags = ["--calibration-method=minmax", "--int8-max-error=1e9", "-O3"]
    got, c, counts, log = q.run(flags + ["--gemm-pipeline=off"])
    q8_expect_counts(counts, 2, 0)
    pipe, _, _, _ = q.run(flags + ["--gemm-pipeline=on"], tag="pipe")
    for k in got:
        if not np.array_equal(got[k].view("uint32"), pipe[k].view("uint32")):
            raise Failure("--gemm-pipeline=on changed output %s (max diff %g)" % (k, float(np.abs(got[k] - pipe[k]).max())))
    print("outputs bit-equal with --gemm-pipeline=on")
    ks = q.kernels("calib.txt", ["--int8-max-error=1e9", "-O3", "--gemm-pipeline=on"])
    pro = [k for k, v in ks.items() if "maxpool2d" in k and "conv2d" in k and "ncc_q8" in v
           and "in flight during the MMAs" in v and "one tap a K tile" in v]
    print("int8 pooling-prologue kernels prefetching B, tap-major: %s" % (", ".join(pro) or "none"))
    if len(pro) != 1:
        raise Failure("expected the maxpool2d+conv2d kernel to prefetch its tap-major B elements; kernels: %s"
                      % ", ".join(ks))


# int8_fold_bn: conv2d + batchnorm2d + relu at -O2: the batchnorm folded into
# the convolution's weight and bias (at load time), then quantized per output
# channel; the reference quantizes the folded weight (gamma / sqrt(var + eps) >
# 0: the integers are the unfolded weight's).  A grouped convolution too.
@case("int8_fold_bn", ["op", "int8", "fold"])
def _int8_fold_bn(ctx):
    layers = [dict(kind="conv", name="conv1", out=16, k=3, pad=1, bias=False, bn=True, relu=True),
              dict(kind="conv", name="conv2", out=16, k=3, pad=1, groups=2, bn=True, relu=True),
              dict(kind="linear", name="fc", out=10)]
    q = Q8(ctx, (4, 4, 8, 8), layers)
    got, c, counts, log = q.run(["--calibration-method=minmax", "--int8-max-error=1e9", "-O2"])
    q8_expect_counts(counts, 3, 0)
    if not re.search(r"pass fold: 2 batchnorms folded \(2 into convolutions", log.split("calibration: ")[-1]):
        raise Failure("-O2: the two batchnorms were not folded into their convolutions")
    q.check(got, c, 1e9)


# int8_scales_percentile, int8_scales_entropy: the scales recomputed here
# (amax, the histogram and the threshold, in numpy from PyTorch's float32
# activations), within one histogram bin of the cache's; then the outputs at
# those scales as above.  Normal calibration rows: tails to clip.
Q8_SCALES = [
    dict(kind="conv", name="conv1", out=16, k=3, pad=1, relu=True),
    dict(kind="conv", name="conv2", out=16, k=3, pad=1, relu=True),
    dict(kind="linear", name="fc", out=10),
]


def q8_scales_case(ctx, method):
    q = Q8(ctx, (8, 3, 8, 8), Q8_SCALES, rows=64, data="normal")
    flags = ["--calibration-method=" + method, "--int8-max-error=1e9"]
    if method == "percentile":
        flags.append("--percentile=99.9")
    got, c, counts, _ = q.run(flags)
    q8_expect_counts(counts, 3, 0)
    pct = 99.9 if method == "percentile" else 99.99
    if c.get("method") != method or c.get("samples") != 64 or c.get("percentile") != pct:
        raise Failure("the cache says method %s, percentile %s, %s samples; expected %s, %g, 64"
                      % (c.get("method"), c.get("percentile"), c.get("samples"), method, pct))
    taps = q.taps()
    amaxes = q8_check_amax(c, q.layers, taps)
    ths = []
    for L, t, amax in zip(q.layers, taps, amaxes):
        h = q8_hist(t, amax)
        if method == "percentile":
            ths.append(q8_percentile(h, amax, pct))
        else:
            th, i, kls = q8_entropy(h, amax)
            undefined = int(sum(1 for k in kls[128:] if k != k))
            print("layer %s: entropy: the least KL at %d of 2048 bins (KL %.5g); KL undefined at %d of the 1921 "
                  "thresholds" % (L["name"], i, kls[i], undefined))
            ths.append(th)
    q8_check_scales(c, q.layers, amaxes, ths)
    q.check(got, c, 1e9)
    if not q.clamped:
        raise Failure("no activation was clamped: the case means the %s threshold to clip some" % method)


case("int8_scales_percentile", ["op", "int8"])(lambda ctx: q8_scales_case(ctx, "percentile"))
case("int8_scales_entropy", ["op", "int8"])(lambda ctx: q8_scales_case(ctx, "entropy"))


# int8_fallback: conv1's output channel 0 scaled by 1e4 and conv2's weights of
# that input channel divided by 1e4 (the fp32 function the same, relu being
# positively homogeneous): conv2's one activation scale for all its input
# channels is then 1e4 times too coarse for the others, which quantize to 0
# (and so do the 1e-4-scaled weights).  The calibration measures conv2's
# error above the bound (0.05), the report says it falls back, and ncc's
# output (conv2 in fp32) is within the int8 tolerance of that reference and
# close to fp32 (cosine > 0.999); with the fallback disabled
# (--int8-max-error=1e9, the same cache) conv2 runs at int8 and the output is
# far from fp32.
def q8_fallback_params(in_shape, layers):
    P = q8_params(in_shape, layers)
    P["conv1.weight"][0] = as64(P["conv1.weight"][0] * 1e4)
    P["conv1.bias"][0] = as64(P["conv1.bias"][0].abs() * 1e4)
    P["conv2.weight"][:, 0] = as64(P["conv2.weight"][:, 0] / 1e4)
    return P


@case("int8_fallback", ["op", "int8"])
def _int8_fallback(ctx):
    import numpy as np
    layers = [dict(kind="conv", name="conv1", out=8, k=3, pad=1, relu=True),
              dict(kind="conv", name="conv2", out=16, k=3, pad=1, relu=True),
              dict(kind="linear", name="fc", out=10)]
    q = Q8(ctx, (4, 3, 8, 8), layers, params=q8_fallback_params)
    got, c, counts, _ = q.run(["--calibration-method=minmax"], tag="fallback")
    errs = {k: v["error"] for k, v in c["layers"].items()}
    if not errs["conv2"] > 0.05 or errs["conv1"] > 0.05 or errs["fc"] > 0.05:
        raise Failure("the cache's errors %s: expected conv2's alone above 0.05" % errs)
    q8_expect_counts(counts, 2, 1)
    report = q.compile("calib.txt", emit="report")
    rows = {}
    for line in report.split("\n"):
        w = line.split()
        if len(w) >= 6 and w[0] == "#" and w[1] in errs:
            rows[w[1]] = " ".join(w[5:])
    print("report: %s" % rows)
    if not rows.get("conv2", "").startswith("fp32 (error") or rows.get("conv1") != "int8" or rows.get("fc") != "int8":
        raise Failure("the report's int8 table should say conv2 fell back to fp32 and conv1, fc are int8: %s" % rows)
    if "1 of 3 layers fell back to fp32" not in report:
        raise Failure("the report does not say '1 of 3 layers fell back to fp32'")
    ref = q.check(got, c, 0.05).numpy()
    cos_fb = cosine(got["y"], ref)
    err_fb = float(np.abs(got["y"] - ref).max())
    # the same cache, no fallback: conv2 at int8
    got8, c8, counts8, log8 = q.run(["--int8-max-error=1e9"], tag="all_int8")
    if "calibration, the inputs' ranges" in log8:
        raise Failure("the second run calibrated again instead of reading the cache")
    q8_expect_counts(counts8, 3, 0)
    q.check(got8, c8, 1e9)
    cos8 = cosine(got8["y"], ref)
    err8 = float(np.abs(got8["y"] - ref).max())
    print("output y against the fp32 model: with the fallback cosine %.6f, max|err| %.3g; all int8 cosine %.6f, "
          "max|err| %.3g" % (cos_fb, err_fb, cos8, err8))
    if cos_fb < 0.999:
        raise Failure("with conv2 in fp32 the output should be close to fp32 (cosine %.6f < 0.999)" % cos_fb)
    if cos8 > 0.99 or err8 < 10 * err_fb:
        raise Failure("with conv2 at int8 the output should be far from fp32 (cosine %.6f, max|err| %.3g; "
                      "with the fallback %.3g)" % (cos8, err8, err_fb))



# ---------------------------------------------------------------- the fold pass
# Batchnorm at inference with folding (-O2: into the convolution before it, or
# as a load-time scale/shift) and without (-O0: per element), against PyTorch.
# The models with batchnorm at -O0 and -O1 too (the cases above run -O2).
case("model_resnet18_O1", ["model", "fold"])(
    lambda ctx: model_case(ctx, "resnet18", 1, 32, ["N=1", "S=32"], flags=["-O1"]))
case("model_resnet50_small_O0", ["model", "fold"])(
    lambda ctx: model_case(ctx, "resnet50", 1, 32, ["N=1", "S=32"], flags=["-O0"]))
case("model_mobilenet_v2_O0", ["model", "fold"])(
    lambda ctx: model_case(ctx, "mobilenet_v2", 1, 32, ["N=1", "S=32"], flags=["-O0"]))
case("model_mobilenet_v2_O1_cublas", ["model", "fold", "cublas"])(
    lambda ctx: model_case(ctx, "mobilenet_v2", 1, 32, ["N=1", "S=32"], flags=["-O1", "--cublas"]))

# name: (N, C, H, W, out, kernel, stride, pad, groups, bias); out channels per
# group >= 8 take the GEMM paths, fewer the direct kernel
FOLD_CONVS = {
    "bias":      (2, 3, 8, 8, 16, 3, 1, 1, 1, True),
    "nobias":    (2, 5, 7, 7, 12, 3, 2, 1, 1, False),
    "k1":        (2, 8, 5, 5, 16, 1, 1, 0, 1, False),
    "groups2":   (2, 4, 7, 7, 16, 3, 1, 1, 2, True),
    "groups4":   (1, 16, 6, 6, 32, 3, 2, 1, 4, False),
    "depthwise": (2, 6, 8, 8, 6, 3, 1, 1, 6, False),
    "dw_bias":   (1, 8, 9, 9, 8, 3, 2, 1, 8, True),
    "dw_mult2":  (1, 4, 7, 7, 8, 3, 1, 1, 4, False),
}


def bn_params(C, name):
    """Random batchnorm parameters; variances from 0.05 to 2, so that the folded
    scale 1/sqrt(var + eps) ranges over a factor of six."""
    import torch
    g, b = as64(rand(C, lo=0.5, hi=1.5)), as64(rand(C))
    rm, rv = as64(rand(C, lo=-0.5, hi=0.5)), as64(rand(C, lo=0.05, hi=2.0))
    params = {name + ".weight": g, name + ".bias": b, name + ".running_mean": rm, name + ".running_var": rv,
              name + ".num_batches_tracked": torch.tensor(3, dtype=torch.int64)}
    return params, (rm, rv, g, b)


def fold_conv_case(ctx, variant, opt, cublas=False):
    """conv (+bias) + batchnorm + relu: at -O1+ the batchnorm is folded into the
    convolution's weight and bias (computed at load time)."""
    import torch.nn.functional as F
    N, C, H, W, O, k, s, p, g, bias = FOLD_CONVS[variant]
    seed(40)
    x = as64(rand(N, C, H, W))
    w = as64(rand(O, C // g, k, k) / (C // g * k * k) ** 0.5)
    b = as64(rand(O)) if bias else None
    params, (rm, rv, gm, bt) = bn_params(O, "bn")
    params["conv.weight"] = w
    if bias:
        params["conv.bias"] = b
    net = ("model %s\ninput x: f32[%s]\n"
           "y = relu(batchnorm2d(conv2d(x, %d, kernel=%d, stride=%d, pad=%d, groups=%d, bias=%s, name=\"conv\"), "
           "name=\"bn\"))\noutput y\n" % (ctx.name, dims((N, C, H, W)), O, k, s, p, g, "true" if bias else "false"))
    ref = F.relu(F.batch_norm(F.conv2d(x, w, b, stride=s, padding=p, groups=g), rm, rv, gm, bt, False, 0.0, 1e-5))
    run_and_compare(ctx, net, params, {"x": f32np(x)}, {"y": ref.numpy()},
                    flags=["-O%d" % opt] + (["--cublas"] if cublas else []))


for _v in FOLD_CONVS:
    for _o in (0, 2):
        case("fold_conv_%s_O%d" % (_v, _o), ["op", "fold"])(lambda ctx, v=_v, o=_o: fold_conv_case(ctx, v, o))
for _v in ("bias", "groups2", "k1"):
    case("fold_conv_%s_cublas" % _v, ["op", "fold", "cublas"])(
        lambda ctx, v=_v: fold_conv_case(ctx, v, 2, cublas=True))


def fold_graph_case(ctx, which, opt):
    """Batchnorms the pass cannot fold into a convolution: they become a
    load-time scale/shift and a per-inference multiply-add."""
    import torch.nn.functional as F
    seed(41)
    C = 6
    if which == "after_add":           # bn(a + b): no convolution before it
        a, b = as64(rand(2, C, 5, 4)), as64(rand(2, C, 5, 4))
        params, bn = bn_params(C, "bn")
        net = "input a: f32[2, 6, 5, 4]\ninput b: f32[2, 6, 5, 4]\ny = relu(batchnorm2d(a + b, name=\"bn\"))\noutput y\n"
        inputs = {"a": a, "b": b}
        refs = {"y": F.relu(F.batch_norm(a + b, *bn, False, 0.0, 1e-5))}
    elif which == "first":             # the network's first layer, eps given, then a scalar op
        x = as64(rand(1, C, 4, 7, lo=-3, hi=3))
        params, bn = bn_params(C, "bn")
        net = "input x: f32[1, 6, 4, 7]\ny = batchnorm2d(x, eps=0.01, name=\"bn\") * 2.0\noutput y\n"
        inputs = {"x": x}
        refs = {"y": F.batch_norm(x, *bn, False, 0.0, 0.01) * 2.0}
    elif which == "shared_conv":       # the conv's output has a second reader: not folded into it
        x = as64(rand(2, 3, 6, 6))
        w = as64(rand(C, 3, 3, 3) / 5.0)
        params, bn = bn_params(C, "bn")
        params["c.weight"] = w
        net = ("input x: f32[2, 3, 6, 6]\nh = conv2d(x, 6, kernel=3, pad=1, bias=false, name=\"c\")\n"
               "y = batchnorm2d(h, name=\"bn\") + relu(h)\noutput y\n")
        inputs = {"x": x}
        h = F.conv2d(x, w, padding=1)
        refs = {"y": F.batch_norm(h, *bn, False, 0.0, 1e-5) + F.relu(h)}
    elif which == "conv_output":       # the conv is an output itself
        x = as64(rand(2, 3, 6, 6))
        w, cb = as64(rand(C, 3, 1, 1)), as64(rand(C))
        params, bn = bn_params(C, "bn")
        params.update({"c.weight": w, "c.bias": cb})
        net = ("input x: f32[2, 3, 6, 6]\nh = conv2d(x, 6, kernel=1, name=\"c\")\n"
               "y = relu(batchnorm2d(h, name=\"bn\"))\noutput y, h\n")
        inputs = {"x": x}
        h = F.conv2d(x, w, cb)
        refs = {"y": F.relu(F.batch_norm(h, *bn, False, 0.0, 1e-5)), "h": h}
    elif which == "double":            # bn(bn(conv)): both fold into the convolution, one after the other
        x = as64(rand(2, 3, 5, 5))
        w, cb = as64(rand(C, 3, 3, 3) / 5.0), as64(rand(C))
        p1, bn1 = bn_params(C, "b1")
        p2, bn2 = bn_params(C, "b2")
        params = dict(p1, **p2)
        params.update({"c.weight": w, "c.bias": cb})
        net = ("input x: f32[2, 3, 5, 5]\n"
               "y = batchnorm2d(batchnorm2d(conv2d(x, 6, kernel=3, name=\"c\"), name=\"b1\"), name=\"b2\")\noutput y\n")
        inputs = {"x": x}
        h = F.batch_norm(F.conv2d(x, w, cb), *bn1, False, 0.0, 1e-5)
        refs = {"y": F.batch_norm(h, *bn2, False, 0.0, 1e-5)}
    elif which == "chain":             # conv+bn twice, one eps shared, a residual bn(add) at the end
        x = as64(rand(2, 4, 6, 6))
        w1, w2 = as64(rand(8, 4, 3, 3) / 6.0), as64(rand(8, 8, 3, 3) / 8.5)
        p1, bn1 = bn_params(8, "bn1")
        p2, bn2 = bn_params(8, "bn2")
        p3, bn3 = bn_params(8, "bn3")
        params = dict(p1, **p2, **p3)
        params.update({"c1.weight": w1, "c2.weight": w2})
        net = ("input x: f32[2, 4, 6, 6]\n"
               "h = relu(batchnorm2d(conv2d(x, 8, kernel=3, pad=1, bias=false, name=\"c1\"), name=\"bn1\"))\n"
               "g = batchnorm2d(conv2d(h, 8, kernel=3, pad=1, bias=false, name=\"c2\"), name=\"bn2\")\n"
               "y = relu(batchnorm2d(g + h, name=\"bn3\"))\noutput y\n")
        inputs = {"x": x}
        h = F.relu(F.batch_norm(F.conv2d(x, w1, padding=1), *bn1, False, 0.0, 1e-5))
        g = F.batch_norm(F.conv2d(h, w2, padding=1), *bn2, False, 0.0, 1e-5)
        refs = {"y": F.relu(F.batch_norm(g + h, *bn3, False, 0.0, 1e-5))}
    net = "model %s\n" % ctx.name + net
    run_and_compare(ctx, net, params, {k: f32np(v) for k, v in inputs.items()},
                    {k: v.numpy() for k, v in refs.items()}, flags=["-O%d" % opt])


for _w in ("after_add", "first", "shared_conv", "conv_output", "double", "chain"):
    for _o in (0, 2):
        case("fold_bn_%s_O%d" % (_w, _o), ["op", "fold"])(lambda ctx, w=_w, o=_o: fold_graph_case(ctx, w, o))


@case("fold_sqrt", ["op", "fold"])
def _sqrt(ctx):
    """The op the fold pass added, as the language spells it (torch.sqrt)."""
    act_case(ctx, None, "sqrt(x * x + 1.0) - sqrt(relu(x))", lambda F, x: (x * x + 1.0).sqrt() - F.relu(x).sqrt())


@case("fold_default_init", ["run", "fold"])
def _fold_default_init(ctx):
    """Without --weights, ncc run initialises the parameters after create and
    loads them: the folded weights must be computed from those (-O2), giving
    what the unfolded model computes (-O0) from the same --seed."""
    import numpy as np
    seed(42)
    xp = ctx.path("x.npy")
    save_npy(xp, f32np(rand(1, 3, 32, 32)))
    outs = []
    for opt in ("-O0", "-O2"):
        out = ctx.path("y%s.npy" % opt)
        if os.path.exists(out):
            os.unlink(out)
        p = ctx.run_ncc([os.path.join(EXAMPLES, "resnet18.net"), "--device", "emu", "--set", "N=1", "--set", "S=32",
                         "--seed", "7", opt, "--input", "x=" + xp, "--output", "logits=" + out])
        if p.returncode != 0:
            raise Failure("ncc run %s exited with %d" % (opt, p.returncode))
        outs.append(np.load(out))
    if float(np.abs(outs[0]).max()) == 0.0:
        raise Failure("the -O0 logits are all zero: the initial weights did not load")
    check_close("logits (-O2 against -O0)", outs[1], outs[0])


# ---------------------------------------------------------------- NaN and infinities
# PyTorch's semantics for non-finite values, op by op: relu(NaN) is NaN (not
# 0, as fmaxf would give), max pooling and every maximum propagate NaN,
# softmax of a row holding +inf or NaN is NaN, of a row of -inf NaN, and so
# on.  Each case plants NaN, +inf, -inf and zeros among finite values and
# compares with check_nonfinite (NaN where PyTorch has NaN, equal infinities,
# the usual tolerance elsewhere).  The references are computed in float64 on
# the float32 inputs; the finite values are small, so nothing overflows in
# float32 that does not in float64.
NAN, INF = float("nan"), float("inf")


def specials(*shape, lo=-2.0, hi=2.0, frac=0.1, zeros=True):
    """Random finite values in [lo, hi) with NaN, +inf, -inf (and 0) each at
    about `frac` of the elements, at least one of each, at random places."""
    import torch
    x = rand(*shape, lo=lo, hi=hi)
    flat = x.view(-1)
    kinds = [NAN, INF, -INF] + ([0.0] if zeros else [])
    k = max(1, int(flat.numel() * frac))
    if flat.numel() < k * len(kinds):
        raise ValueError("shape %s is too small for the specials" % (shape,))
    perm = torch.randperm(flat.numel())
    for j, v in enumerate(kinds):
        flat[perm[j * k:(j + 1) * k]] = v
    return as64(x)


def nan_run(ctx, net_body, inputs, refs, params=None, flags=()):
    """net_body: the model's lines after `model`; inputs/refs/params: float64 torch tensors."""
    import numpy as np
    for k, v in inputs.items():
        a = v.numpy()
        if a.dtype.kind == "f" and not (np.isnan(a).any() and np.isinf(a).any()):
            raise Failure("test bug: input %s holds no NaN or no infinity" % k)
    net = "model %s\n%s" % (ctx.name, net_body)
    run_and_compare(ctx, net, params, {k: f32np(v) if v.is_floating_point() else v.numpy().astype("int32")
                                       for k, v in inputs.items()},
                    {k: v.detach().numpy() for k, v in refs.items()}, flags=flags, compare=check_nonfinite)


def nan_unary(ctx, call, fn, shape=(2, 3, 5, 7), frac=0.1, flags=()):
    import torch.nn.functional as F
    seed(60)
    x = specials(*shape, lo=-8, hi=8, frac=frac)
    nan_run(ctx, "input x: f32[%s]\ny = %s\noutput y\n" % (dims(shape), call), {"x": x}, {"y": fn(F, x)},
            flags=flags)


for _a in ACTIVATIONS:
    case("nan_act_" + _a, ["op", "nan"])(lambda ctx, a=_a: nan_unary(ctx, "%s(x)" % a, ACTIVATIONS[a]))
case("nan_act_leaky_relu_slope", ["op", "nan"])(
    lambda ctx: nan_unary(ctx, "leaky_relu(x, slope=0.2)", lambda F, x: F.leaky_relu(x, 0.2)))
case("nan_dropout_identity", ["op", "nan"])(
    lambda ctx: nan_unary(ctx, "dropout2d(dropout(x, 0.5), 0.3)", lambda F, x: x))
# x / 0.0 is +-inf or NaN, x * 0.0 NaN for infinite x
case("nan_scalar_arith", ["op", "nan", "binary"])(
    lambda ctx: nan_unary(ctx, "x * 0.0 - x / 0.0 + 1.0", lambda F, x: x * 0.0 - x / 0.0 + 1.0))
# epilogue chains: the same expressions applied in a fused kernel
case("nan_act_chain_O3", ["op", "nan", "fusion"])(
    lambda ctx: nan_unary(ctx, "relu(hardswish(relu6(x) * 2.0 - 3.0) + leaky_relu(x)) * 2.0",
                          lambda F, x: F.relu(F.hardswish(F.relu6(x) * 2.0 - 3.0) + F.leaky_relu(x)) * 2.0,
                          flags=["-O3"]))


def nan_binary(ctx, op, sa, sb):
    seed(61)
    a, b = specials(*sa), specials(*sb)
    fn = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b}[op]
    nan_run(ctx, "input a: f32[%s]\ninput b: f32[%s]\ny = %s(a, b)\noutput y\n" % (dims(sa), dims(sb), op),
            {"a": a, "b": b}, {"y": fn(a, b)})


for _o in ("add", "sub", "mul", "div"):
    case("nan_%s" % _o, ["op", "nan", "binary"])(lambda ctx, o=_o: nan_binary(ctx, o, (2, 3, 4, 5), (2, 3, 4, 5)))
    case("nan_%s_bcast" % _o, ["op", "nan", "binary"])(lambda ctx, o=_o: nan_binary(ctx, o, (2, 3, 4, 5), (3, 1, 5)))


def nan_pool(ctx, kind, shape, k, s, p):
    import torch.nn.functional as F
    seed(62)
    x = specials(*shape, frac=0.05)
    # windows made on purpose: all -inf (the max is -inf, not the lowest
    # float), NaN beside +inf (NaN wins), +inf beside -inf (inf; NaN in a mean)
    x[0, 0, 0:2, 0:2] = -INF
    x[0, 1, 2:4, 2:4] = 1.0
    x[0, 1, 2, 2], x[0, 1, 3, 3] = NAN, INF
    x[1, 0, 4:6, 4:6] = 0.5
    x[1, 0, 4, 4], x[1, 0, 5, 5] = INF, -INF
    net = ("input x: f32[%s]\ny = %s(x, %s, stride=%s, pad=%s)\noutput y\n"
           % (dims(shape), kind, pair(k), pair(s), pair(p)))
    ref = F.max_pool2d(x, k, s, p) if kind == "maxpool2d" else F.avg_pool2d(x, k, s, p)
    nan_run(ctx, net, {"x": x}, {"y": ref})


for _k in ("maxpool2d", "avgpool2d"):
    case("nan_%s_k2" % _k, ["op", "nan", "pool"])(lambda ctx, k=_k: nan_pool(ctx, k, (2, 3, 8, 8), 2, 2, 0))
    case("nan_%s_k3_s2_p1" % _k, ["op", "nan", "pool"])(
        lambda ctx, k=_k: nan_pool(ctx, k, (2, 3, 9, 9), 3, 2, 1))


@case("nan_global_avgpool2d", ["op", "nan", "pool"])
def _nan_gap(ctx):
    seed(63)
    x = specials(2, 8, 7, 6, frac=0.01)   # some channels clean, some with inf, some NaN
    nan_run(ctx, "input x: f32[2, 8, 7, 6]\ny = global_avgpool2d(x)\noutput y\n", {"x": x},
            {"y": x.mean(dim=(2, 3), keepdim=True)})


@case("nan_batchnorm2d", ["op", "nan"])
def _nan_bn(ctx):
    import torch.nn.functional as F
    seed(64)
    x = specials(2, 5, 6, 7)
    w, b = as64(rand(5, lo=0.5, hi=1.5)), as64(rand(5))
    rm, rv = as64(rand(5, lo=-0.5, hi=0.5)), as64(rand(5, lo=0.3, hi=2.0))
    nan_run(ctx, "input x: f32[2, 5, 6, 7]\ny = batchnorm2d(x, name=\"bn\")\noutput y\n", {"x": x},
            {"y": F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-5)},
            params={"bn.weight": w, "bn.bias": b, "bn.running_mean": rm, "bn.running_var": rv})


@case("nan_layernorm", ["op", "nan"])
def _nan_ln(ctx):
    import torch.nn.functional as F
    seed(65)
    x = specials(4, 3, 16, frac=0.02)     # a few rows hit, the others clean
    w, b = as64(rand(16, lo=0.5, hi=1.5)), as64(rand(16))
    nan_run(ctx, "input x: f32[4, 3, 16]\ny = layernorm(x, name=\"ln\")\noutput y\n", {"x": x},
            {"y": F.layer_norm(x, (16,), w, b)}, params={"ln.weight": w, "ln.bias": b})


def softmax_rows(D):
    """Rows: clean, one +inf, one -inf, all -inf, a NaN, two +inf, +inf and
    -inf, mostly -inf; far apart in a wide row so that they meet only in the
    block reduction."""
    x = rand(8, D, lo=-4, hi=4)
    x[1, D - 1] = INF
    x[2, D // 2] = -INF
    x[3, :] = -INF
    x[4, (3 * D) // 4] = NAN
    x[5, 0], x[5, D - 1] = INF, INF
    x[6, 1], x[6, D - 2] = INF, -INF
    x[7, 1:] = -INF
    return as64(x)


def nan_softmax(ctx, kind, D, axis1=False):
    import torch
    seed(66)
    x = softmax_rows(D)
    if axis1:      # the same rows along axis 1 of a [2, D, 4] tensor
        x = x.reshape(2, 4, D).transpose(1, 2).contiguous()
    ax = 1 if axis1 else -1
    fn = torch.softmax if kind == "softmax" else torch.log_softmax
    nan_run(ctx, "input x: f32[%s]\ny = %s(x, axis=%d)\noutput y\n" % (dims(x.shape), kind, ax), {"x": x},
            {"y": fn(x, ax)})


for _k in ("softmax", "log_softmax"):
    case("nan_" + _k, ["op", "nan", "softmax"])(lambda ctx, k=_k: nan_softmax(ctx, k, 10))
    case("nan_" + _k + "_wide", ["op", "nan", "softmax"])(lambda ctx, k=_k: nan_softmax(ctx, k, 1000))
    case("nan_" + _k + "_axis1", ["op", "nan", "softmax"])(lambda ctx, k=_k: nan_softmax(ctx, k, 12, True))


@case("nan_move", ["op", "nan", "move"])
def _nan_move(ctx):
    import torch
    seed(67)
    a, b = specials(2, 3, 4), specials(2, 5, 4)
    nan_run(ctx, "input a: f32[2, 3, 4]\ninput b: f32[2, 5, 4]\n"
                 "y = reshape(transpose(concat(a, b, axis=1), [2, 0, 1]), [8, 8])\noutput y\n",
            {"a": a, "b": b}, {"y": torch.cat([a, b], 1).permute(2, 0, 1).reshape(8, 8)})


def nan_conv(ctx, variant, cublas=False, opt=None):
    import torch.nn.functional as F
    N, C, H, W, O, k, s, p, d, g, bias = CONV_VARIANTS[variant]
    seed(68)
    x = specials(N, C, H, W, frac=0.01)
    w = as64(rand(O, C // g, k, k) / (C // g * k * k) ** 0.5)
    b = as64(rand(O)) if bias else None
    net = ("input x: f32[%s]\ny = relu(conv2d(x, %d, kernel=%d, stride=%d, pad=%d, dilation=%d, groups=%d, "
           "bias=%s, name=\"conv\"))\noutput y\n" % (dims((N, C, H, W)), O, k, s, p, d, g, "true" if bias else "false"))
    params = {"conv.weight": w}
    if bias:
        params["conv.bias"] = b
    flags = (["--cublas"] if cublas else []) + (["-O%d" % opt] if opt is not None else [])
    nan_run(ctx, net, {"x": x}, {"y": F.relu(F.conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=g))},
            params=params, flags=flags)


case("nan_conv_k3_s2_p1", ["op", "nan", "conv"])(lambda ctx: nan_conv(ctx, "k3_s2_p1"))
case("nan_conv_k3_s2_p1_O0", ["op", "nan", "conv"])(lambda ctx: nan_conv(ctx, "k3_s2_p1", opt=0))
case("nan_conv_wide_cublas", ["op", "nan", "conv", "cublas"])(lambda ctx: nan_conv(ctx, "wide", cublas=True))
case("nan_conv_k1_cublas", ["op", "nan", "conv", "cublas"])(lambda ctx: nan_conv(ctx, "k1", cublas=True))
case("nan_conv_depthwise", ["op", "nan", "conv"])(lambda ctx: nan_conv(ctx, "dw_s2"))


def nan_gemm(ctx, kind, cublas=False):
    import torch
    import torch.nn.functional as F
    seed(69)
    flags = ["--cublas"] if cublas else []
    if kind == "linear":
        x = specials(8, 40, frac=0.01)
        w, b = as64(rand(24, 40) / 40 ** 0.5), as64(rand(24))
        nan_run(ctx, "input x: f32[8, 40]\ny = linear(x, 24, name=\"fc\")\noutput y\n", {"x": x},
                {"y": F.linear(x, w, b)}, params={"fc.weight": w, "fc.bias": b}, flags=flags)
    else:
        a, b = specials(2, 6, 20, frac=0.01), specials(2, 20, 7, frac=0.01)
        nan_run(ctx, "input a: f32[2, 6, 20]\ninput b: f32[2, 20, 7]\ny = matmul(a, b)\noutput y\n",
                {"a": a, "b": b}, {"y": torch.matmul(a, b)}, flags=flags)


case("nan_linear", ["op", "nan"])(lambda ctx: nan_gemm(ctx, "linear"))
case("nan_linear_cublas", ["op", "nan", "cublas"])(lambda ctx: nan_gemm(ctx, "linear", True))
case("nan_matmul", ["op", "nan"])(lambda ctx: nan_gemm(ctx, "matmul"))
case("nan_matmul_cublas", ["op", "nan", "cublas"])(lambda ctx: nan_gemm(ctx, "matmul", True))


def nan_loss(ctx, kind):
    """One loss per situation (a loss is one number: one NaN decides it):
    l0 -inf at a logit no label picks (finite), l1 -inf at a picked logit
    (+inf; for cross_entropy), l2 a NaN logit (NaN), l3 a +inf logit (NaN for
    cross_entropy, whose log-sum-exp is inf - inf; -inf for nll_loss)."""
    import torch
    import torch.nn.functional as F
    seed(70)
    N, C = 6, 5
    y = torch.tensor([0, 1, 2, 3, 4, 0])
    ins, refs, body = {"y": y}, {}, "input y: i32[%d]\n" % N
    for i in range(4):
        a = rand(N, C, lo=-3, hi=3)
        if kind == "nll_loss":
            a = torch.log_softmax(a, 1)
        if i == 0:
            a[0, 3] = -INF
        elif i == 1:
            a[2, 2] = -INF
        elif i == 2:
            a[4, 1] = NAN
        else:
            a[1, 1] = INF
        a = as64(a)
        ins["a%d" % i] = a
        refs["l%d" % i] = (F.cross_entropy if kind == "cross_entropy" else F.nll_loss)(a, y)
        body += "input a%d: f32[%d, %d]\nl%d = %s(a%d, y)\n" % (i, N, C, i, kind, i)
    body += "output l0, l1, l2, l3\n"
    net = "model %s\n%s" % (ctx.name, body)
    # each input holds only some of the specials: nan_run's check is for the planted kind
    run_and_compare(ctx, net, None, {k: f32np(v) if v.is_floating_point() else v.numpy().astype("int32")
                                     for k, v in ins.items()},
                    {k: v.reshape(()).numpy() for k, v in refs.items()}, compare=check_nonfinite)


case("nan_cross_entropy", ["op", "nan", "loss"])(lambda ctx: nan_loss(ctx, "cross_entropy"))
case("nan_nll_loss", ["op", "nan", "loss"])(lambda ctx: nan_loss(ctx, "nll_loss"))


@case("nan_mse_loss", ["op", "nan", "loss"])
def _nan_mse(ctx):
    import torch.nn.functional as F
    seed(71)
    body, ins, refs = "", {}, {}
    for i in range(3):       # finite; an inf (inf); inf - inf (NaN)
        a, b = rand(4, 5), rand(4, 5)
        if i >= 1:
            a[1, 2] = INF
        if i == 2:
            b[1, 2] = INF
        a, b = as64(a), as64(b)
        ins["a%d" % i], ins["b%d" % i] = a, b
        refs["l%d" % i] = F.mse_loss(a, b)
        body += "input a%d: f32[4, 5]\ninput b%d: f32[4, 5]\nl%d = mse_loss(a%d, b%d)\n" % (i, i, i, i, i)
    net = "model %s\n%soutput l0, l1, l2\n" % (ctx.name, body)
    run_and_compare(ctx, net, None, {k: f32np(v) for k, v in ins.items()},
                    {k: v.reshape(()).numpy() for k, v in refs.items()}, compare=check_nonfinite)


@case("nan_fuse_conv_bn_relu_add_O3", ["op", "nan", "fusion"])
def _nan_fused(ctx):
    """conv + batchnorm + residual add + relu in one kernel at -O3."""
    import torch.nn.functional as F
    seed(72)
    x, r = specials(2, 4, 7, 7, frac=0.01), specials(2, 16, 7, 7, frac=0.02)
    w = as64(rand(16, 4, 3, 3) / 6.0)
    g, b = as64(rand(16, lo=0.5, hi=1.5)), as64(rand(16))
    rm, rv = as64(rand(16, lo=-0.2, hi=0.2)), as64(rand(16, lo=0.5, hi=1.5))
    nan_run(ctx, "input x: f32[2, 4, 7, 7]\ninput r: f32[2, 16, 7, 7]\n"
                 "h = batchnorm2d(conv2d(x, 16, kernel=3, pad=1, bias=false, name=\"c\"), name=\"bn\")\n"
                 "y = relu(h + r)\noutput y\n", {"x": x, "r": r},
            {"y": F.relu(F.batch_norm(F.conv2d(x, w, padding=1), rm, rv, g, b, False, 0.0, 1e-5) + r)},
            params={"c.weight": w, "bn.weight": g, "bn.bias": b, "bn.running_mean": rm, "bn.running_var": rv},
            flags=["-O3"])


def all_nan(x):
    x.fill_(NAN)
    return x


def one_nan_image(x):
    """The first image gets one NaN pixel (every logit of it turns NaN by the
    global pooling), the second stays finite: nothing leaks between images."""
    x[0, 0, 5, 7] = NAN
    return x


case("model_lenet_nan", ["model", "nan"])(
    lambda ctx: model_case(ctx, "lenet", 2, 28, ["N=2"], in_ch=1, poison=all_nan))
case("model_lenet_nan_O0", ["model", "nan"])(
    lambda ctx: model_case(ctx, "lenet", 2, 28, ["N=2"], flags=["-O0"], in_ch=1, poison=all_nan))
case("model_lenet_nan_cublas", ["model", "nan", "cublas"])(
    lambda ctx: model_case(ctx, "lenet", 2, 28, ["N=2"], flags=["--cublas"], in_ch=1, poison=all_nan))
case("model_resnet18_nan", ["model", "nan"])(
    lambda ctx: model_case(ctx, "resnet18", 2, 32, ["N=2", "S=32"], poison=one_nan_image))


# ---------------------------------------------------------------- bad input
BAD_NET = """model bad
input x: f32[2, 3, 8, 8]
y = conv2d(x, 4, kernel=3, name="conv")
output y
"""


def bad_setup(ctx):
    import numpy as np
    net = ctx.path("bad.net")
    with open(net, "w") as f:
        f.write(BAD_NET)
    seed(30)
    w = {"conv.weight": rand(4, 3, 3, 3), "conv.bias": rand(4)}
    wp = ctx.path("w.safetensors")
    write_safetensors(wp, w)
    xp = ctx.path("x.npy")
    np.save(xp, np.random.RandomState(0).rand(2, 3, 8, 8).astype("float32"))
    out = ctx.path("out.npy")
    if os.path.exists(out):
        os.unlink(out)
    return net, wp, xp, out


def expect_user_error(ctx, args, words, out, env=None, once=()):
    """once: file names the message must name exactly once (not "x: x: ...")."""
    p = ctx.run_ncc(args, env=env)
    if p.returncode != 1:
        raise Failure("expected exit status 1, got %d" % p.returncode)
    low = p.stderr.lower()
    for w in words:
        if w.lower() not in low:
            raise Failure("the message does not mention %r:\n%s" % (w, p.stderr))
    for w in once:
        if p.stderr.count(w) != 1:
            raise Failure("the message names %r %d times, not once:\n%s" % (w, p.stderr.count(w), p.stderr))
    if os.path.exists(out):
        raise Failure("an output file %s was left behind" % out)
    leftovers = [f for f in os.listdir(os.path.dirname(out)) if ".ncc-tmp" in f]
    if leftovers:
        raise Failure("temporary files left behind: %s" % leftovers)


@case("bad_npy_shape", ["bad"])
def _bad_shape(ctx):
    import numpy as np
    net, wp, xp, out = bad_setup(ctx)
    np.save(xp, np.zeros((2, 3, 8, 9), "float32"))
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["x.npy", "f32[2, 3, 8, 9]", "f32[2, 3, 8, 8]"], out, once=["x.npy"])


@case("bad_npy_dtype", ["bad"])
def _bad_dtype(ctx):
    import numpy as np
    net, wp, xp, out = bad_setup(ctx)
    np.save(xp, np.zeros((2, 3, 8, 8), "int32"))
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["x.npy", "i32", "f32"], out, once=["x.npy"])


@case("bad_npy_unsupported", ["bad"])
def _bad_unsupported(ctx):
    import numpy as np
    net, wp, xp, out = bad_setup(ctx)
    np.save(xp, np.zeros((2, 3, 8, 8), "complex64"))
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["x.npy"], out, once=["x.npy"])


@case("run_npy_f64", ["run"])
def _run_f64(ctx):
    """numpy's default float64 arrays are accepted for f32 inputs (the runtime
    converts them), and give the result of the same data as float32."""
    import torch.nn.functional as F
    import numpy as np
    net, wp, xp, out = bad_setup(ctx)
    x = np.load(xp).astype("float64")
    np.save(xp, x)
    p = ctx.run_ncc([net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out])
    if p.returncode != 0:
        raise Failure("ncc run rejected a float64 input (status %d)" % p.returncode)
    import torch
    seed(30)   # the weights bad_setup wrote
    cw, cb = as64(rand(4, 3, 3, 3)), as64(rand(4))
    ref = F.conv2d(torch.from_numpy(x), cw, cb)
    check_close("y", np.load(out), ref.numpy())


@case("bad_npy_garbage", ["bad"])
def _bad_npy_garbage(ctx):
    net, wp, xp, out = bad_setup(ctx)
    with open(xp, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00garbage that is not a header")
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["x.npy"], out, once=["x.npy"])


@case("bad_missing_input", ["bad"])
def _bad_missing(ctx):
    net, wp, xp, out = bad_setup(ctx)
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--output", "y=" + out],
                      ["missing", "x", "f32[2, 3, 8, 8]"], out)


@case("bad_unknown_input", ["bad"])
def _bad_unknown(ctx):
    net, wp, xp, out = bad_setup(ctx)
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp,
                            "--input", "z=" + xp, "--output", "y=" + out], ["'z'"], out)


@case("bad_unknown_output", ["bad"])
def _bad_unknown_out(ctx):
    net, wp, xp, out = bad_setup(ctx)
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp,
                            "--output", "logits=" + out], ["logits"], out)


@case("bad_input_file_missing", ["bad"])
def _bad_nofile(ctx):
    net, wp, xp, out = bad_setup(ctx)
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + ctx.path("nope.npy"),
                            "--output", "y=" + out], ["nope.npy"], out, once=["nope.npy"])


@case("bad_truncated_safetensors", ["bad"])
def _bad_trunc(ctx):
    net, wp, xp, out = bad_setup(ctx)
    data = open(wp, "rb").read()
    with open(wp, "wb") as f:
        f.write(data[:len(data) - 40])
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["w.safetensors"], out,
                      once=["w.safetensors"])


@case("bad_safetensors_header", ["bad"])
def _bad_header(ctx):
    net, wp, xp, out = bad_setup(ctx)
    with open(wp, "wb") as f:
        f.write(struct.pack("<Q", 1 << 40) + b"{")
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["w.safetensors"], out,
                      once=["w.safetensors"])


@case("bad_missing_tensor", ["bad"])
def _bad_missing_tensor(ctx):
    net, wp, xp, out = bad_setup(ctx)
    write_safetensors(wp, {"conv.weight": rand(4, 3, 3, 3)})
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["conv.bias"], out,
                      once=["w.safetensors"])


@case("bad_misshaped_tensor", ["bad"])
def _bad_misshaped(ctx):
    net, wp, xp, out = bad_setup(ctx)
    write_safetensors(wp, {"conv.weight": rand(4, 3, 5, 5), "conv.bias": rand(4)})
    expect_user_error(ctx, [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["conv.weight"], out,
                      once=["w.safetensors"])


@case("bad_weights_file_missing", ["bad"])
def _bad_wmissing(ctx):
    net, wp, xp, out = bad_setup(ctx)
    expect_user_error(ctx, [net, "--device", "emu", "--weights", ctx.path("none.safetensors"), "--input",
                            "x=" + xp, "--output", "y=" + out], ["none.safetensors"], out,
                      once=["none.safetensors"])


@case("bad_device_cuda", ["bad"])
def _bad_cuda(ctx):
    net, wp, xp, out = bad_setup(ctx)
    try:
        import ctypes
        ctypes.CDLL("libcuda.so.1")
        cu = ctypes.CDLL("libcuda.so.1")
        n = ctypes.c_int(0)
        if cu.cuInit(0) == 0 and cu.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0:
            raise Skip("a GPU answers on this machine, so --device cuda cannot fail for want of one")
    except OSError:
        pass
    expect_user_error(ctx, [net, "--device", "cuda", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["--device cuda", "gpu"], out)


@case("bad_flag", ["bad"])
def _bad_flag(ctx):
    net, wp, xp, out = bad_setup(ctx)
    expect_user_error(ctx, [net, "--device", "tpu", "--input", "x=" + xp, "--output", "y=" + out], ["tpu"], out)
    expect_user_error(ctx, [net, "--bogus", "--input", "x=" + xp, "--output", "y=" + out], ["--bogus"], out)
    expect_user_error(ctx, [net, "--set", "nonsense", "--input", "x=" + xp, "--output", "y=" + out],
                      ["nonsense"], out)
    expect_user_error(ctx, [net, "--set", "Q=3", "--input", "x=" + xp, "--output", "y=" + out], ["'Q'"], out)
    lenet = os.path.join(EXAMPLES, "lenet.net")
    expect_user_error(ctx, [lenet, "--set", "N=0", "--input", "x=" + xp, "--output", "y=" + out],
                      ["lenet.net:", "positive"], out)
    expect_user_error(ctx, [net, "--input", "x=" + xp, "--output", "y=" + ctx.path("nodir/out.npy")],
                      ["nodir"], out)
    expect_user_error(ctx, [net, "--input", "x=" + xp, "--input", "x=" + xp, "--output", "y=" + out],
                      ["twice"], out)


@case("bad_model_syntax", ["bad"])
def _bad_model(ctx):
    net, wp, xp, out = bad_setup(ctx)
    with open(net, "w") as f:
        f.write("model bad\ninput x: f32[2, 3, 8, 8]\ny = conv2d(x, 4, kernel=3\noutput y\n")
    expect_user_error(ctx, [net, "--device", "emu", "--input", "x=" + xp, "--output", "y=" + out], ["bad.net:"], out)


@case("run_default_init", ["run"])
def _default_init(ctx):
    """Without --weights: PyTorch's default init (uniform(+-1/sqrt(fan_in))) from --seed.
    Checks the distribution through the outputs of a 1x1 conv on unit inputs:
    y[o] = sum_c w[o, c] + b[o] lies in +-(C+1)/sqrt(C), and two seeds differ."""
    import numpy as np
    C = 64
    net = ctx.path("init.net")
    with open(net, "w") as f:
        f.write("model init\ninput x: f32[1, %d, 1, 1]\ny = conv2d(x, 256, kernel=1, name=\"c\")\noutput y\n" % C)
    xp = ctx.path("x.npy")
    np.save(xp, np.ones((1, C, 1, 1), "float32"))
    ys = []
    for s in ("1", "2", "1"):
        out = ctx.path("y%s_%d.npy" % (s, len(ys)))
        p = ctx.run_ncc([net, "--device", "emu", "--seed", s, "--input", "x=" + xp, "--output", "y=" + out])
        if p.returncode != 0:
            raise Failure("ncc run exited with %d" % p.returncode)
        if "no --weights" not in p.stderr or "kaiming_uniform" not in p.stderr or "seed %s" % s not in p.stderr:
            raise Failure("ncc run did not say on stderr which initialisation and seed it used")
        ys.append(np.load(out).ravel())
    bound = (C + 1) / C ** 0.5
    if np.abs(ys[0]).max() > bound:
        raise Failure("|y| %.3g exceeds the init bound %.3g" % (np.abs(ys[0]).max(), bound))
    # sum of C+1 U(-b, b) with b = 1/sqrt(C): variance (C+1)/(3C) ~ 0.338
    var = float(np.var(ys[0]))
    if not 0.2 < var < 0.5:
        raise Failure("variance of outputs %.3f is not that of PyTorch's default init (~0.34)" % var)
    if np.array_equal(ys[0], ys[1]) or not np.array_equal(ys[0], ys[2]):
        raise Failure("--seed does not decide the initial weights")
    print("default init: var %.3f (expected ~0.34), seeds 1 and 2 differ, seed 1 repeats" % var)


@case("run_weights_f16", ["run"])
def _weights_f16(ctx):
    """A safetensors file of F16 tensors (a half-precision checkpoint) loads
    into the f32 model; the result is that of the f16-rounded weights."""
    import torch
    import torch.nn.functional as F
    seed(31)
    x = as64(rand(2, 3, 8, 8))
    w = rand(16, 3, 3, 3).to(torch.float16).to(torch.float64)
    b = rand(16).to(torch.float16).to(torch.float64)
    net = ctx.path("h.net")
    with open(net, "w") as f:
        f.write("model h\ninput x: f32[2, 3, 8, 8]\ny = conv2d(x, 16, kernel=3, name=\"conv\")\noutput y\n")
    wp = ctx.path("w16.safetensors")
    write_safetensors(wp, {"conv.weight": w, "conv.bias": b}, float_dtype="F16")
    xp, out = ctx.path("x.npy"), ctx.path("y.npy")
    save_npy(xp, f32np(x))
    if os.path.exists(out):
        os.unlink(out)
    p = ctx.run_ncc([net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out])
    if p.returncode != 0:
        raise Failure("ncc run rejected F16 weights (status %d)" % p.returncode)
    import numpy as np
    check_close("y", np.load(out), F.conv2d(x, w, b).numpy())


@case("run_compile_failure", ["run"])
def _compile_failure(ctx):
    """When the generated code does not compile (here: CC=false), ncc run
    exits with 2 (ncc's own failure, not the user's), says so, keeps the
    generated source for the bug report and writes no output."""
    import re
    import shutil
    net, wp, xp, out = bad_setup(ctx)
    shutil.rmtree(ctx.path("cache"), ignore_errors=True)
    p = ctx.run_ncc([net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out],
                    env={"CC": "false", "NCC_CACHE_DIR": ctx.path("cache")})
    if p.returncode != 2 or "did not compile" not in p.stderr:
        raise Failure("expected status 2 and 'did not compile'")
    if os.path.exists(out):
        raise Failure("an output file was written")
    m = re.search(r"kept in (\S+)", p.stderr)
    if not m or not os.path.exists(os.path.join(m.group(1), "bad.cu")):
        raise Failure("the generated source was not kept")
    shutil.rmtree(m.group(1))


@case("run_device_auto", ["run"])
def _auto(ctx):
    """--device auto (the default) says which device it used; without a GPU,
    the emulator, with the runtime's thread count (NCC_EMU_THREADS)."""
    import numpy as np
    net, wp, xp, out = bad_setup(ctx)
    p = ctx.run_ncc([net, "--weights", wp, "--input", xp, "--output", out], env={"NCC_EMU_THREADS": "3"})
    if p.returncode != 0:
        raise Failure("ncc run exited with %d" % p.returncode)
    if not os.path.exists("/dev/nvidia0") and "device: emu (3 threads)" not in p.stdout:
        raise Failure("expected 'device: emu (3 threads)' in the output")
    if "device: " not in p.stdout:
        raise Failure("ncc run did not say which device it used")
    if np.load(out).shape != (2, 4, 6, 6):
        raise Failure("unnamed --input/--output (the model's only ones) did not work")


@case("bench_lenet", ["run", "bench"])
def _bench(ctx):
    """ncc bench prints ms/batch, the kernels' share of it and samples/s, for -O0 and -O2 with --compare."""
    import re
    cmd = [ctx.ncc, "bench", os.path.join(EXAMPLES, "lenet.net"), "--device", "emu", "--set", "N=4",
           "--iters", "3", "--warmup", "1", "--compare"]
    print("$", " ".join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    print(p.stdout + p.stderr)
    if p.returncode != 0:
        raise Failure("ncc bench exited with %d" % p.returncode)
    ms = re.findall(r"^ms/batch: median ([0-9.]+)  min ([0-9.]+)", p.stdout, re.M)
    sps = re.findall(r"^samples/s: ([0-9.]+)", p.stdout, re.M)
    if len(ms) != 2 or len(sps) != 2 or "batch 4" not in p.stdout or "passes: -O2 is" not in p.stdout:
        raise Failure("ncc bench output lacks the expected lines")
    for (med, mn), s in zip(ms, sps):
        if not 0 < float(mn) <= float(med) or abs(float(s) - 4000.0 / float(med)) > 0.02 * float(s) + 0.1:
            raise Failure("inconsistent figures: median %s min %s samples/s %s" % (med, mn, s))
    # the kernels' share of each call (M_kernel_seconds): positive, at most the whole call's
    km = re.findall(r"^ms/batch in the kernels \(input and output copies left out\): median ([0-9.]+)  min ([0-9.]+)",
                    p.stdout, re.M)
    if len(km) != 2:
        raise Failure("ncc bench printed no kernel time for each build")
    for (med, mn), (kmed, kmn) in zip(ms, km):
        if not 0 < float(kmn) <= float(kmed) or float(kmed) > float(med) or float(kmn) > float(mn):
            raise Failure("kernel time median %s min %s against the call's median %s min %s" % (kmed, kmn, med, mn))
    p = subprocess.run([ctx.ncc, "bench", os.path.join(EXAMPLES, "lenet.net"), "--iters", "0"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 1 or "--iters" not in p.stderr:
        raise Failure("--iters 0 should be refused with status 1")


def have_gpu():
    try:
        import ctypes
        cu = ctypes.CDLL("libcuda.so.1")
        n = ctypes.c_int(0)
        return cu.cuInit(0) == 0 and cu.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0
    except OSError:
        return False


@case("run_gpu_builds", ["run", "gpu"])
def _gpu_builds(ctx):
    """The GPU build paths of `ncc run` without a GPU (NCC_RUN_ASSUME_GPU=1
    skips the probe): the model is compiled by nvcc (sm_90) and, with --jit,
    as host C for NVRTC; both objects load and expose the generated API, and
    creating the model fails with the runtime's clear message, status 1, no
    output.  On a machine with a GPU this is a real run instead."""
    import shutil
    net, wp, xp, out = bad_setup(ctx)
    shutil.rmtree(ctx.path("cache"), ignore_errors=True)
    env = {"NCC_RUN_ASSUME_GPU": "1", "NCC_CUDA_ARCH": "sm_90", "NCC_CACHE_DIR": ctx.path("cache")}
    nvcc = os.path.exists(os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/bin/nvcc") or shutil.which("nvcc")
    for flags in (["--jit"], []) if nvcc else (["--jit"],):
        args = [net, "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out, "-v"] + flags
        if have_gpu():
            p = ctx.run_ncc(args)
            if p.returncode != 0 or "device: cuda" not in p.stdout:
                raise Failure("ncc run %s on the GPU failed" % " ".join(flags))
            continue
        p = ctx.run_ncc(args, env=env)
        what = "jit" if flags else "nvcc"
        if "compiled in" not in p.stderr:
            raise Failure("the %s build did not compile" % what)
        if (what == "nvcc") != ("nvcc" in p.stderr):
            raise Failure("expected the %s build" % what)
        if p.returncode != 1 or "no CUDA device answers" not in p.stderr:
            raise Failure("expected status 1 and the runtime's 'no CUDA device answers'")
        if os.path.exists(out):
            raise Failure("output written although the model never ran")
    if not nvcc:
        raise Skip("nvcc not found ($CUDA_HOME/bin, /usr/local/cuda/bin, PATH): only the --jit build was tried")


@case("run_cache", ["run"])
def _cache(ctx):
    """A second run of the same model finds the compiled object in the cache."""
    import numpy as np
    import shutil
    net, wp, xp, out = bad_setup(ctx)
    shutil.rmtree(ctx.path("cache"), ignore_errors=True)
    os.makedirs(ctx.path("cache"))
    # an object unused for 40 days goes when the cache is next written
    stale = ctx.path("cache/old-0123456789abcdef-emu.so")
    open(stale, "w").close()
    t = os.stat(stale).st_mtime - 40 * 86400
    os.utime(stale, (t, t))
    env = {"NCC_CACHE_DIR": ctx.path("cache")}
    args = [net, "--device", "emu", "--weights", wp, "--input", "x=" + xp, "--output", "y=" + out, "-v"]
    p1 = ctx.run_ncc(args, env=env)
    if os.path.exists(stale):
        raise Failure("a cached object unused for 40 days was not pruned")
    y1 = np.load(out)
    p2 = ctx.run_ncc(args, env=env)
    if p1.returncode or p2.returncode:
        raise Failure("ncc run failed")
    if "compiling" not in p1.stderr or "compiling" in p2.stderr or "cache" not in p2.stderr:
        raise Failure("the second run compiled again")
    if not np.array_equal(y1, np.load(out)):
        raise Failure("the cached object gave another result")
    if len([f for f in os.listdir(ctx.path("cache")) if f.endswith(".so")]) != 1:
        raise Failure("expected one object in the cache")


# ---------------------------------------------------------------- embed example data
def embed_data(d):
    """For tests/oracle/embed_test.cmake: lenet weights, 4 images and the
    classes PyTorch predicts for them (one per line)."""
    import torch
    os.makedirs(d, exist_ok=True)
    seed(40)
    m = build_module("lenet").eval()
    sd = {k: v.to(torch.float32) for k, v in m.state_dict().items()}
    write_safetensors(os.path.join(d, "lenet.safetensors"), sd)
    m = m.double()
    # of 512 random images keep, for as many distinct predicted classes as
    # possible, the one whose top-1 class wins by the widest margin: float32
    # rounding must not be able to flip a prediction, and a program printing
    # one class for everything must not pass
    x = as64(torch.randn(512, 1, 28, 28, dtype=torch.float64) * 2)
    with torch.no_grad():
        lg = m(x)
    t2 = torch.topk(lg, 2, dim=1).values
    marg, cls = t2[:, 0] - t2[:, 1], lg.argmax(1)
    best = {}
    for i in range(512):
        c = int(cls[i])
        if c not in best or marg[i] > marg[best[c]]:
            best[c] = i
    pick = sorted(best.values(), key=lambda i: -float(marg[i]))[:4]
    while len(pick) < 4:
        pick.append(pick[0])
    x = x[pick].contiguous()
    save_npy(os.path.join(d, "images.npy"), f32np(x))
    with torch.no_grad():
        logits = m(x)
    top2 = torch.topk(logits, 2, dim=1).values
    margin = float((top2[:, 0] - top2[:, 1]).min())
    with open(os.path.join(d, "expected.txt"), "w") as f:
        for i, c in enumerate(logits.argmax(1).tolist()):
            f.write("image %d: class %d\n" % (i, c))
    print("expected classes written; smallest top-1 margin %.3g" % margin)


# ---------------------------------------------------------------- main
def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("case", nargs="?")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--labels", action="store_true", help="with --list: NAME;LABELS per line")
    ap.add_argument("--ncc")
    ap.add_argument("--work", default=None)
    ap.add_argument("--embed-data", metavar="DIR")
    a = ap.parse_args()
    if a.embed_data:
        embed_data(a.embed_data)
        return 0
    if a.list:
        for n, (f, labels) in CASES.items():
            print("%s %s" % (n, ",".join(labels)) if a.labels else n)
        return 0
    if a.case not in CASES:
        print("unknown case %r" % a.case, file=sys.stderr)
        return 2
    if not a.ncc:
        print("--ncc PATH is required", file=sys.stderr)
        return 2
    work = a.work or os.path.join(os.getcwd(), "oracle-work", a.case)
    # a failed run keeps its files; this one starts without them (an int8
    # case's calibration cache left there would be read as this run's own).
    # Only a folder that holds the case's model is a run's, and removed
    if os.path.isfile(os.path.join(work, a.case + ".net")):
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    ctx = Ctx(a.case, os.path.abspath(a.ncc), work)
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
