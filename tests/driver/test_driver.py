#!/usr/bin/python3
"""test_driver.py — tests of the `ncc` command itself (driver/), one case per
invocation, each its own ctest test (driver.CASE, tests/driver.cmake).

    test_driver.py --list                          # the case names
    test_driver.py CASE --ncc PATH --work DIR [--build BUILD]   # exit 0 pass, 1 fail

What they hold the driver to:
  help_*      every flag the option table gives a command appears in that
              command's --help (`ncc --list-options` prints the table), and
              the parser agrees with the table: each listed flag is taken,
              each flag of another command is refused naming that command
  init_*      without --weights, parameters get PyTorch's default init decided
              by the IR's parameter kinds and the consuming op, from --seed:
              bounds from fan_in (groups included), norms at 1/0, the same
              seed the same weights, another seed others; stderr says so
  cache_*     the compile cache lives where NCC_CACHE_DIR / XDG_CACHE_HOME /
              HOME say, is reused, can be deleted, and --help names it
  errors_*    one path per message
  runtime_*   headers and libnccrt found from the executable's place, in the
              build folder, in an installed prefix, and through NCC_RUNTIME_DIR
  train_*     `ncc train` (more in test_train.py): its help, its refusals
Only numpy is needed (torch is not imported).
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "examples")
CASES = {}


def case(name):
    def deco(f):
        CASES[name] = f
        return f
    return deco


class Failure(Exception):
    pass


class Ctx:
    def __init__(self, ncc, work, build):
        self.ncc, self.work, self.build = ncc, work, build
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)

    def path(self, f):
        return os.path.join(self.work, f)

    def ncc_cmd(self, args, env=None, ncc=None, unset=(), timeout=600):
        e = dict(os.environ)
        for k in unset:
            e.pop(k, None)
        e.update(env or {})
        cmd = [ncc or self.ncc] + list(args)
        print("$", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, errors="replace", timeout=timeout)
        if p.returncode < 0:
            raise Failure("ncc was killed by signal %d" % -p.returncode)
        return p

    def write(self, name, text):
        p = self.path(name)
        with open(p, "w") as f:
            f.write(text)
        return p


def show(p):
    out = (p.stdout + p.stderr).rstrip()
    if out:
        print("  " + out.replace("\n", "\n  "))


# ---------------------------------------------------------------- help and the table
def table(ctx):
    p = ctx.ncc_cmd(["--list-options"])
    if p.returncode != 0:
        raise Failure("ncc --list-options exited with %d" % p.returncode)
    t = {}
    for line in p.stdout.splitlines():
        cmd, flag = line.split()
        if flag in t.get(cmd, []):
            raise Failure("the table gives %s two rows for %s (a parser would take the first)" % (cmd, flag))
        t.setdefault(cmd, []).append(flag)
    for c in ("compile", "run", "bench", "train"):
        if not t.get(c):
            raise Failure("--list-options lists no flag for %s" % c)
    return t


def help_args(cmd):
    return ["--help"] if cmd == "compile" else [cmd, "--help"]


@case("help_lists_every_flag")
def _help(ctx):
    t = table(ctx)
    for cmd, flags in t.items():
        p = ctx.ncc_cmd(help_args(cmd))
        if p.returncode != 0 or p.stderr:
            raise Failure("`ncc %s --help` exited with %d (stderr %r)" % (cmd, p.returncode, p.stderr))
        # the flags of the help's rows: "  -h, --help   text", "  --emit=KIND   text"
        rows = set()
        for m in re.finditer(r"^  (-\S.*?)(?:\s{2,}|$)", p.stdout, re.M):
            for tok in m.group(1).split(", "):
                rows.add(tok.split()[0].split("=")[0])
        missing = [f for f in flags if f not in rows]
        if missing:
            raise Failure("`ncc %s --help` does not mention %s" % (cmd, ", ".join(missing)))
        print("ncc %s --help: all %d flags listed" % (cmd, len(flags)))
    top = ctx.ncc_cmd(["--help"]).stdout
    for sub in ("ncc run --help", "ncc bench --help", "ncc train --help"):
        if sub not in top:
            raise Failure("`ncc --help` does not point to `%s`" % sub)


@case("help_parser_agrees")
def _parser(ctx):
    """Each flag the table gives a command is taken by that command's parser
    (whatever its value's fate), each flag of another command is refused with
    the command that takes it; nothing here compiles anything."""
    t = table(ctx)
    allflags = sorted({f for fl in t.values() for f in fl})
    for cmd in ("compile", "run", "bench"):
        pre = [] if cmd == "compile" else [cmd]
        for f in allflags:
            # `x` is the flag's value or, after a switch, a model that does not exist
            p = ctx.ncc_cmd(pre + [f, "x"])
            low = p.stderr.lower()
            if f in t[cmd]:
                if "unknown option" in low or "is a flag of" in low:
                    raise Failure("ncc %s refuses its own flag %s: %s" % (cmd, f, p.stderr))
            else:
                if p.returncode != 1 or "is a flag of" not in low:
                    raise Failure("ncc %s accepts %s, which the table gives only to other commands (%d: %s)"
                                  % (cmd, f, p.returncode, p.stderr))
    p = ctx.ncc_cmd(["run", "--wieghts", "w.safetensors", "m.net"])
    if p.returncode != 1 or "unknown option '--wieghts'" not in p.stderr or "--weights" not in p.stderr:
        raise Failure("a misspelt flag should be refused with a suggestion: %s" % p.stderr)
    p = ctx.ncc_cmd(["m.net", "--seed", "3", "-o", "m.cu"])
    if p.returncode != 1 or "ncc run" not in p.stderr:
        raise Failure("--seed when compiling should be refused naming `ncc run`: %s" % p.stderr)


@case("train_help")
def _train(ctx):
    """`ncc train` exists: --help describes the data and the counting; no
    model or no --data is refused with status 1."""
    p = ctx.ncc_cmd(["train", "--help"])
    if p.returncode != 0 or "x.npy" not in p.stdout or "--save-grads" not in p.stdout:
        raise Failure("`ncc train --help`: status %d, %r" % (p.returncode, p.stdout[:300]))
    for args, want in ((["train"], "no model file"),
                       (["train", os.path.join(EXAMPLES, "digits.net")], "--data DIR")):
        p = ctx.ncc_cmd(args)
        show(p)
        if p.returncode != 1 or want not in p.stderr:
            raise Failure("`ncc %s`: expected status 1 and %r" % (" ".join(args), want))


# ---------------------------------------------------------------- initialisation
def run_outputs(ctx, net, inputs, outputs, flags=(), env=None):
    import numpy as np
    args = ["run", net, "--device", "emu"]
    for k, v in inputs.items():
        p = ctx.path("in_%s.npy" % k)
        np.save(p, v)
        args += ["--input", "%s=%s" % (k, p)]
    outs = {}
    for k in outputs:
        outs[k] = ctx.path("out_%s.npy" % k)
        args += ["--output", "%s=%s" % (k, outs[k])]
    p = ctx.ncc_cmd(args + list(flags), env=env)
    show(p)
    if p.returncode != 0:
        raise Failure("ncc run exited with %d" % p.returncode)
    return {k: np.load(v) for k, v in outs.items()}, p


INIT_NET = """model init
input e: f32[64, 64]
input z: f32[1, 64]
input img: f32[32, 32, 1, 1]
input t: f32[2, 4, 3, 3]
input s: f32[3, 16]
# weight alone: y = e @ W^T = W^T for e = I
w = linear(e, 256, bias=false, name="fc_w")
# bias alone: zeros in, the bias out
b = linear(z, 4096, name="fc_b")
# a grouped 1x1 conv on one-hot channels: each weight once; fan_in = 32/4
g = conv2d(img, 64, kernel=1, groups=4, bias=false, name="grouped")
# batchnorm with weight 1, bias 0, mean 0, var 1: x / sqrt(1 + eps)
n = batchnorm2d(t, name="running_var")
# layernorm with weight 1, bias 0: plain normalisation
l = layernorm(s, name="bias")
output w, b, g, n, l
"""


def init_inputs():
    import numpy as np
    r = np.random.RandomState(3)
    img = np.zeros((32, 32, 1, 1), "float32")
    for i in range(32):
        img[i, i, 0, 0] = 1
    return {"e": np.eye(64, dtype="float32"), "z": np.zeros((1, 64), "float32"), "img": img,
            "t": r.randn(2, 4, 3, 3).astype("float32"), "s": r.randn(3, 16).astype("float32")}


def check_uniform(name, v, bound):
    """v: samples that should be uniform(-bound, bound).  Each statistic may
    stray by 4 of its standard deviations for len(v) samples: the test is
    deterministic (fixed seed) and must not hang on luck."""
    import numpy as np
    v = np.asarray(v, np.float64).ravel()
    n = v.size
    lo, hi = float(v.min()), float(v.max())
    print("%s: %d values in [%.5f, %.5f], bound %.5f, var %.4g (uniform: %.4g)"
          % (name, n, lo, hi, bound, v.var(), bound * bound / 3))
    if hi > bound or lo < -bound:
        raise Failure("%s: values outside +-%.5f" % (name, bound))
    # P(max < (1 - 2e) bound) = (1 - e)^n ~ exp(-en): e = 7/n leaves 1e-3
    if hi < (1 - 14.0 / n) * bound or lo > -(1 - 14.0 / n) * bound:
        raise Failure("%s: values do not reach +-%.5f (a narrower distribution)" % (name, bound))
    # the sample variance of a uniform has relative std 0.894/sqrt(n)
    if abs(v.var() / (bound * bound / 3) - 1) > 4 * 0.894 / n ** 0.5:
        raise Failure("%s: variance %.4g is not that of uniform(+-%.4g)" % (name, v.var(), bound))
    # uniform, not normal: a quarter of the values in each quarter of the range
    hist = np.histogram(v, bins=4, range=(-bound, bound))[0] / n
    if np.abs(hist - 0.25).max() > 4 * (0.1875 / n) ** 0.5:
        raise Failure("%s: histogram %s is not flat" % (name, hist))


@case("init_from_param_kinds")
def _init(ctx):
    """The names are chosen to mislead a guess from suffixes (a batchnorm named
    running_var, a layernorm named bias); the IR's kinds decide."""
    import numpy as np
    net = ctx.write("init.net", INIT_NET)
    ins = init_inputs()
    o, p = run_outputs(ctx, net, ins, ["w", "b", "g", "n", "l"], ["--seed", "11"])
    # linear weight [256, 64]: kaiming_uniform(a=sqrt(5)) = uniform(+-1/sqrt(64))
    check_uniform("fc_w.weight", o["w"], 1 / 8.0)
    # linear bias: uniform(+-1/sqrt(fan_in = 64))
    check_uniform("fc_b.bias", o["b"], 1 / 8.0)
    # grouped conv weight [64, 8, 1, 1]: fan_in 8; image i lights channel i, which
    # group i // 8 reads: outputs of other groups must be exactly 0
    g = o["g"].reshape(32, 64)
    mask = np.zeros((32, 64), bool)
    for i in range(32):
        mask[i, (i // 8) * 16:(i // 8 + 1) * 16] = True
    if np.any(g[~mask] != 0):
        raise Failure("grouped conv: outputs outside the input's group are not zero")
    check_uniform("grouped.weight", g[mask], 1 / 8 ** 0.5)
    ref_n = ins["t"] / np.sqrt(1 + 1e-5)
    if np.abs(o["n"] - ref_n).max() > 1e-5:
        raise Failure("batchnorm: not weight 1, bias 0, mean 0, var 1 (max err %g)" % np.abs(o["n"] - ref_n).max())
    s = ins["s"].astype(np.float64)
    ref_l = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5)
    if np.abs(o["l"] - ref_l).max() > 1e-4:
        raise Failure("layernorm: not weight 1, bias 0 (max err %g)" % np.abs(o["l"] - ref_l).max())
    for word in ("no --weights", "kaiming_uniform", "seed 11"):
        if word not in p.stderr:
            raise Failure("stderr does not say %r" % word)
    if "seed 11 (" in p.stderr:
        raise Failure("an explicit seed is called the default")


@case("init_seed")
def _seed(ctx):
    """Same seed, same weights (at any -O); another seed, other weights; no
    seed is seed 0 and stderr says it is the default."""
    import numpy as np
    net = ctx.write("init.net", INIT_NET)
    ins = init_inputs()
    a, _ = run_outputs(ctx, net, ins, ["w", "b"], ["--seed", "1"])
    b, _ = run_outputs(ctx, net, ins, ["w", "b"], ["--seed", "1", "-O0"])
    c, _ = run_outputs(ctx, net, ins, ["w", "b"], ["--seed", "2"])
    d, p = run_outputs(ctx, net, ins, ["w", "b"])
    e, _ = run_outputs(ctx, net, ins, ["w", "b"], ["--seed", "0"])
    for k in ("w", "b"):
        if not np.array_equal(a[k], b[k]):
            raise Failure("%s: --seed 1 gave other values at -O0" % k)
        if np.array_equal(a[k], c[k]) or np.mean(a[k] == c[k]) > 0.01:
            raise Failure("%s: --seed 1 and --seed 2 gave the same values" % k)
        if not np.array_equal(d[k], e[k]):
            raise Failure("%s: no --seed is not --seed 0" % k)
    if "seed 0 (the default" not in p.stderr:
        raise Failure("without --seed, stderr does not say seed 0 is the default")
    # bench takes --seed too, and says what it initialised
    p = ctx.ncc_cmd(["bench", net, "--device", "emu", "--iters", "1", "--warmup", "0", "--seed", "4"])
    show(p)
    if p.returncode != 0 or "seed 4" not in p.stderr:
        raise Failure("ncc bench --seed 4 did not say so")
    # --weights: no initialisation, and no word of it
    import numpy as np
    w = ctx.path("w.safetensors")
    write_safetensors(w, {"fc_w.weight": np.ones((256, 64), "float32"),
                          "fc_b.weight": np.zeros((4096, 64), "float32"),
                          "fc_b.bias": np.full((4096,), 0.5, "float32"),
                          "grouped.weight": np.ones((64, 8, 1, 1), "float32"),
                          "running_var.weight": np.ones(4, "float32"), "running_var.bias": np.zeros(4, "float32"),
                          "running_var.running_mean": np.zeros(4, "float32"),
                          "running_var.running_var": np.ones(4, "float32"),
                          "bias.weight": np.ones(16, "float32"), "bias.bias": np.zeros(16, "float32")})
    o, p = run_outputs(ctx, net, ins, ["w", "b"], ["--weights", w])
    if "initialised" in p.stderr or not np.all(o["b"] == 0.5) or not np.all(o["w"] == 1):
        raise Failure("--weights: the file's values were not used, or an initialisation was announced")


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        i8 = a.dtype.name == "int8"
        b = a.tobytes() if i8 else a.astype("<f4").tobytes()
        header[name] = {"dtype": "I8" if i8 else "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---------------------------------------------------------------- the compile cache
TINY = "model tiny\ninput x: f32[2, 3]\ny = relu(x) * 2.0\noutput y\n"


def tiny_run(ctx, env, unset=(), ncc=None, extra=()):
    import numpy as np
    net = ctx.path("tiny.net")
    if not os.path.exists(net):
        ctx.write("tiny.net", TINY)
        np.save(ctx.path("x.npy"), np.array([[-1, 2, 3], [4, -5, 6]], "float32"))
    out = ctx.path("y.npy")
    if os.path.exists(out):
        os.unlink(out)
    p = ctx.ncc_cmd(["run", net, "--device", "emu", "--input", ctx.path("x.npy"), "--output", out, "-v"] + list(extra),
                    env=env, unset=unset, ncc=ncc)
    show(p)
    if p.returncode != 0:
        raise Failure("ncc run exited with %d" % p.returncode)
    y = np.load(out)
    if not np.array_equal(y, np.array([[0, 4, 6], [8, 0, 12]], "float32")):
        raise Failure("wrong result %s" % y)
    return p


def objects(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".so")) if os.path.isdir(d) else []


@case("cache_location")
def _cache(ctx):
    home, xdg, own = ctx.path("home"), ctx.path("xdg"), ctx.path("own")
    os.makedirs(home)
    # HOME only: ~/.cache/ncc
    p = tiny_run(ctx, {"HOME": home}, unset=("NCC_CACHE_DIR", "XDG_CACHE_HOME"))
    if "compiling" not in p.stderr or len(objects(os.path.join(home, ".cache/ncc"))) != 1:
        raise Failure("without NCC_CACHE_DIR/XDG_CACHE_HOME the object is not in ~/.cache/ncc")
    p = tiny_run(ctx, {"HOME": home}, unset=("NCC_CACHE_DIR", "XDG_CACHE_HOME"))
    if "compiling" in p.stderr or "found in the cache" not in p.stderr:
        raise Failure("the second run did not reuse the cached object")
    # XDG_CACHE_HOME: $XDG_CACHE_HOME/ncc
    tiny_run(ctx, {"HOME": home, "XDG_CACHE_HOME": xdg}, unset=("NCC_CACHE_DIR",))
    if len(objects(os.path.join(xdg, "ncc"))) != 1:
        raise Failure("XDG_CACHE_HOME does not move the cache")
    # NCC_CACHE_DIR wins over both
    tiny_run(ctx, {"HOME": home, "XDG_CACHE_HOME": xdg, "NCC_CACHE_DIR": own})
    if len(objects(own)) != 1 or len(objects(os.path.join(xdg, "ncc"))) != 1:
        raise Failure("NCC_CACHE_DIR does not move the cache")
    # clearing: delete the folder, the next run compiles again into a new one
    shutil.rmtree(own)
    p = tiny_run(ctx, {"NCC_CACHE_DIR": own})
    if "compiling" not in p.stderr or len(objects(own)) != 1:
        raise Failure("after deleting the cache folder the next run did not rebuild it")
    # an unwritable cache: the run still works, the object is not kept
    ro = ctx.path("file-not-dir")
    open(ro, "w").close()
    p = tiny_run(ctx, {"NCC_CACHE_DIR": os.path.join(ro, "sub")})
    if "not kept" not in p.stderr:
        raise Failure("an unusable cache folder is not reported with -v")
    # the help names the folder it would use
    for cmd in ("run", "bench"):
        h = ctx.ncc_cmd([cmd, "--help"], env={"NCC_CACHE_DIR": own}).stdout
        if own not in h or "NCC_CACHE_DIR" not in h or "30 days" not in h:
            raise Failure("`ncc %s --help` does not document the cache (its folder, NCC_CACHE_DIR, pruning)" % cmd)


# ---------------------------------------------------------------- one path per message
@case("errors_one_path")
def _errors(ctx):
    import numpy as np
    net = ctx.write("tiny.net", "model tiny\ninput x: f32[2, 3]\ny = linear(x, 4, name=\"fc\")\noutput y\n")
    x = ctx.path("x.npy")
    np.save(x, np.zeros((2, 3), "float32"))
    wrong = ctx.path("wrong.safetensors")
    write_safetensors(wrong, {"fc.weight": np.zeros((5, 3), "float32"), "fc.bias": np.zeros(4, "float32")})
    trunc = ctx.path("trunc.safetensors")
    with open(trunc, "wb") as f:
        f.write(b"\x10\x00")
    badnpy = ctx.path("bad.npy")
    with open(badnpy, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00garbage")
    cases = [
        (["--weights", wrong, "--input", x], wrong, "does not match"),
        (["--weights", trunc, "--input", x], trunc, "safetensors"),
        (["--weights", ctx.path("none.safetensors"), "--input", x], ctx.path("none.safetensors"), "no such file"),
        (["--input", badnpy], badnpy, "npy"),
    ]
    for args, path, word in cases:
        p = ctx.ncc_cmd(["run", net, "--device", "emu"] + args)
        show(p)
        if p.returncode != 1 or word not in p.stderr.lower():
            raise Failure("expected status 1 and %r" % word)
        n = p.stderr.count(os.path.basename(path))
        if n != 1:
            raise Failure("the message names %s %d times, not once" % (os.path.basename(path), n))
    # -o -: standard output for a one-file listing; refused where two files are written
    dash = os.path.join(os.getcwd(), "-")
    p = ctx.ncc_cmd([net, "--emit=report", "-o", "-"])
    if p.returncode != 0 or "total: params=16" not in p.stdout or os.path.exists(dash):
        raise Failure("--emit=report -o - should print the report on standard output and write no file '-'")
    for args in ([net, "-o", "-"], ["quantize", ctx.path("w.safetensors"), "-o", "-"]):
        p = ctx.ncc_cmd(args)
        show(p)
        if p.returncode != 1 or "-o -:" not in p.stderr or "give a file name" not in p.stderr or os.path.exists(dash):
            raise Failure("`ncc %s`: expected status 1 and no file '-'" % " ".join(args))


def expect_refused(ctx, cases, out):
    """Each (args, words): `ncc ARGS` exits 1, its message holds every word,
    and the output file `out` was not written."""
    for args, words in cases:
        p = ctx.ncc_cmd(args)
        show(p)
        if p.returncode != 1 or any(wd not in p.stderr for wd in words) or os.path.exists(out):
            raise Failure("`ncc %s`: expected status 1, %r in the message and no output" % (" ".join(args), words))


@case("precision_flags")
def _precision(ctx):
    """--precision: fp32, tf32, fp16 and bf16 compile, and a training step at
    tf32, bf16 and fp16 (fp16's with the loss scaled; a model's training
    step beside fp16 inference stays fp32), each also with --cublas
    (ncc_gemm_ex at a rounded precision); int8 without calibration, unknown names, and
    --loss-scale that is not a positive number or not with fp16 training are
    refused with status 1, a message, and no output."""
    net = ctx.write("tiny.net", "model tiny\ninput x: f32[2, 3]\ny = linear(x, 4, name=\"fc\")\noutput y\n")
    out = ctx.path("tiny.cu")
    for prec in ("fp32", "tf32", "fp16", "bf16"):
        p = ctx.ncc_cmd([net, "--precision=" + prec, "-o", out])
        show(p)
        if p.returncode != 0 or not os.path.exists(out):
            raise Failure("--precision=%s should compile" % prec)
        os.unlink(out)
        # and with --cublas: a rounded precision is cuBLAS's reduced-precision compute type
        p = ctx.ncc_cmd([net, "--precision=" + prec, "--cublas", "-o", out])
        show(p)
        call = "ncc_sgemm(m->dev, " if prec == "fp32" else "ncc_gemm_ex(m->dev, NCC_GEMM_%s, " % prec.upper()
        if p.returncode != 0 or not os.path.exists(out) or call not in open(out).read():
            raise Failure("--precision=%s --cublas should compile to a %s...) call" % (prec, call))
        os.unlink(out)
    expect_refused(ctx, [
        ([net, "--precision=int8", "-o", out], ["needs calibration"]),
        ([net, "--precision=fp64", "-o", out], ["unknown precision"]),
        ([net, "--precision=fp16", "--loss-scale=1024", "-o", out], ["--loss-scale goes with fp16 training"]),
        (["train", net, "--data", ctx.path("none"), "--precision=bf16", "--loss-scale=1024"],
         ["--loss-scale goes with fp16 training"]),
        (["train", net, "--data", ctx.path("none"), "--precision=fp16", "--loss-scale=0"], ["positive number"]),
        (["train", net, "--data", ctx.path("none"), "--precision=fp16", "--loss-scale=big"], ["positive number"]),
        (["train", net, "--data", ctx.path("none"), "--precision=fp16", "--loss-scale=nan"], ["positive number"]),
        (["train", net, "--data", ctx.path("none"), "--precision=fp16", "--loss-scale=1e39"], ["positive number"]),
    ], out)
    # a training step at tf32 and bf16 compiles, its gradients' GEMMs rounded too
    tnet = ctx.write("tiny_train.net", "model tiny\ninput x: f32[2, 3]\ninput y: i32[2]\n"
                                       "z = linear(x, 4, name=\"fc\")\noutput z\nloss = cross_entropy(z, y)\n"
                                       "train {\n  optimizer sgd(lr=0.1)\n  minimize loss\n}\n")
    for prec in ("tf32", "bf16", "fp16"):
        p = ctx.ncc_cmd([tnet, "--train", "--precision=" + prec, "-o", out] +
                        (["--loss-scale=1024"] if prec == "fp16" else []))
        show(p)
        if p.returncode != 0 or not os.path.exists(out):
            raise Failure("--train --precision=%s should compile" % prec)
        src = open(out).read()
        if "ncc_%s(dy[" % prec not in src:
            raise Failure("--train --precision=%s: the weight gradient's GEMM does not round dy" % prec)
        # fp16 alone scales the loss: the unscale kernel, the skip, the scale given
        scaled = ["_unscale_grads(", "if (*found_inf) return;", "_INIT_SCALE 1024 "]
        for frag in scaled:
            if (frag in src) != (prec == "fp16"):
                raise Failure("--train --precision=%s: '%s' %s the generated code" %
                              (prec, frag, "missing from" if prec == "fp16" else "unexpected in"))
        os.unlink(out)
    # without --train, the training step MODEL.cu carries beside fp16 inference stays fp32
    p = ctx.ncc_cmd([tnet, "--precision=fp16", "-o", out])
    show(p)
    if p.returncode != 0 or not os.path.exists(out):
        raise Failure("a model with a train block should compile at --precision=fp16 (its training step in fp32)")
    src = open(out).read()
    if "ncc_fp16(" not in src:
        raise Failure("--precision=fp16: the inference GEMM does not round")
    if "ncc_fp16(dy[" in src:
        raise Failure("--precision=fp16 without --train: the training step's gradients should stay fp32")
    os.unlink(out)


@case("gemm_tile")
def _gemm_tile(ctx):
    """The tensor-core GEMM's tile (ir/tile.c, docs/gpu.md "Tile choice"):
    the model keeps the default for a small GEMM and chooses a larger tile
    for VGG-16's convolutions at batch 32; the report, -v and the launch
    comment say which and why; --gemm-tile forces one (the generated kernel
    then has that many threads and that shared tile); a bad tile, or one
    without a tensor-core precision, is refused with status 1."""
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
    vgg = os.path.join(examples, "vgg16.net")
    rep = ctx.path("vgg.txt")
    p = ctx.ncc_cmd([vgg, "--precision=fp16", "--set", "N=32", "--emit=report", "-v", "-o", rep])
    show(p)
    if p.returncode != 0:
        raise Failure("the VGG-16 report at fp16 failed")
    text = open(rep).read()
    tiles = re.findall(r"\[mma (\d+x\d+)", text)
    print("tiles: %s" % tiles)
    if "128x128" not in tiles:
        raise Failure("VGG-16 at batch 32: expected the model to choose a larger tile somewhere: %s" % tiles)
    why = re.findall(r"pass precision: conv2d (\S+): tile (\d+x\d+)([:,])", p.stderr)
    if len(why) != 13 or any(t != tiles[i] for i, (_, t, _) in enumerate(why)):
        raise Failure("-v should give each of the 13 convolutions its tile, as the report: %s" % why)
    # a GEMM of one row tile keeps the default, and says why
    net = ctx.write("small.net", "model small\ninput x: f32[40, 30]\ny = linear(x, 20, name=\"fc\")\noutput y\n")
    out = ctx.path("small.cu")
    p = ctx.ncc_cmd([net, "--precision=tf32", "-o", out])
    show(p)
    src = open(out).read() if p.returncode == 0 else ""
    if "/* fc: tile 32x32, the default" not in src:
        raise Failure("the linear of 40 x 20 should keep the default 32 x 32 tile, said at its launch")
    # forced: the 128 x 128 kernel has 8 warps and a 128-row shared tile
    p = ctx.ncc_cmd([net, "--precision=tf32", "--gemm-tile=128x128", "-o", out])
    show(p)
    src = open(out).read() if p.returncode == 0 else ""
    if ("__launch_bounds__" in src or "b_ = {256u, 1u, 1u}" not in src or "A tile, 128 x 16" not in src
            or "tile 128x128, forced (--gemm-tile)" not in src):
        raise Failure("--gemm-tile=128x128 should give a kernel of 256 threads and a 128-row A tile")
    p = ctx.ncc_cmd([net, "--precision=fp16", "--gemm-tile=128x64", "-o", out])
    src = open(out).read() if p.returncode == 0 else ""
    if "__launch_bounds__(128, 3)" not in src:
        raise Failure("--gemm-tile=128x64 should ask ptxas for three blocks an SM")
    # fp32 (ir_fp32_wide): the small linear keeps the 64 x 64 kernel; forced, 8 x 8 outputs a thread, said at
    # its launch; VGG-16 at batch 32 takes it by the rule where 128 x 128 tiles fill the SMs twice
    p = ctx.ncc_cmd([net, "-o", out])
    src = open(out).read() if p.returncode == 0 else ""
    if p.returncode != 0 or "float acc[2][1];" not in src or "ncc_lds4(af" in src:
        raise Failure("at fp32 the linear of 40 x 20 should keep the default tile (2 x 1 outputs a thread)")
    p = ctx.ncc_cmd([net, "--gemm-tile=128x128", "-o", out])
    src = open(out).read() if p.returncode == 0 else ""
    if (p.returncode != 0 or "float acc[8][8];" not in src or "ncc_lds4(af, &As[st][kk][4 * ty]);" not in src
            or "/* fc: fp32 tile 128x128, forced (--gemm-tile)" not in src or "; two stages */" not in src):
        raise Failure("--gemm-tile=128x128 at fp32 should give the wide kernel (8 x 8 a thread), double-buffered, "
                      "said at its launch")
    # two stages (docs/gpu.md, "The float32 GEMM double-buffered"): the wide tile's by default, one with
    # --gemm-pipeline=off; the 64 x 64 tile's with --gemm-stages=2
    p = ctx.ncc_cmd([net, "--gemm-tile=128x128", "--gemm-pipeline=off", "-o", out])
    src = open(out).read() if p.returncode == 0 else ""
    if p.returncode != 0 or "float acc[8][8];" not in src or "As[2]" in src or "two stages" in src:
        raise Failure("--gemm-pipeline=off at fp32 should keep the wide tile in one stage")
    big = os.path.join(ctx.work, "big.net")
    with open(big, "w") as f:
        f.write("model big\ninput x: f32[96, 80]\ny = linear(x, 72, name=\"fc\")\noutput y\n")
    p = ctx.ncc_cmd([big, "-o", out])
    one = open(out).read() if p.returncode == 0 else ""
    p = ctx.ncc_cmd([big, "--gemm-stages=2", "-v", "-o", out])
    two = open(out).read() if p.returncode == 0 else ""
    if ("float acc[4][4];" not in one or "As[2]" in one or "float As[2][16][68];" not in two
            or "tiles: linear fc: fp32 tile 64x64, the default: a 96 x 72 GEMM" not in p.stderr
            or "; two stages" not in p.stderr):
        raise Failure("a 96 x 72 linear at fp32: one stage of the 64 x 64 tile by default, two with --gemm-stages=2 "
                      "(said by -v): %s" % p.stderr)
    p = ctx.ncc_cmd([vgg, "--set", "N=32", "--emit=report", "-v", "-o", rep])
    text = open(rep).read() if p.returncode == 0 else ""
    wide = re.findall(r"conv2d\+relu \[128x128\]\s+(\S+)", text)
    said = re.findall(r"tiles: conv2d (\S+): fp32 tile 128x128: (\d+) blocks", p.stderr)
    print("fp32 wide: %s; -v: %s" % (wide, said))
    if wide != ["features.%d" % i for i in (5, 7, 10, 12, 14, 17, 19, 21)] or [w for w, _ in said[:8]] != wide:
        raise Failure("VGG-16 at fp32, batch 32: the wide tile for features.5 to .21 (M and N >= 128, 264 blocks of "
                      "128 x 128 or more), in the report and -v: %s, %s" % (wide, said))
    # 64 x 128 (4 x 8 a thread) where 128 x 128 does not suit: the 64-channel layers, and the last three (392
    # blocks of 64 x 128, 196 of 128 x 128)
    w64 = re.findall(r"conv2d\+relu \[64x128\]\s+(\S+)", text)
    said = re.findall(r"tiles: conv2d (\S+): fp32 tile 64x128: (\d+) blocks", p.stderr)
    print("fp32 64x128: %s; -v: %s" % (w64, said))
    if (w64 != ["features.%d" % i for i in (0, 2, 24, 26, 28)] or [w for w, _ in said] != w64
            or [b for _, b in said] != ["12544", "12544", "392", "392", "392"]
            or "[64x128] the float32 GEMM's 64 x 128 tile" not in text):
        raise Failure("VGG-16 at fp32, batch 32: the 64x128 tile for features.0, .2, .24, .26 and .28, in the report "
                      "(its mark explained) and -v: %s, %s" % (w64, said))
    os.unlink(out)
    expect_refused(ctx, [
        ([net, "--precision=fp16", "--gemm-tile=100x64", "-o", out], ["--gemm-tile=100x64: expected one of"]),
        ([net, "--precision=fp16", "--gemm-tile=128", "-o", out], ["--gemm-tile=128: expected one of"]),
        ([net, "--precision=fp16", "--gemm-pipeline=yes", "-o", out], ["--gemm-pipeline=yes: expected on or off"]),
        ([net, "--streams=2", "-o", out], ["--streams=2: expected on or off"]),
        ([net, "--precision=fp16", "--gemm-stages=5", "-o", out], ["--gemm-stages=5: expected 2, 3 or 4"]),
        ([net, "--precision=fp16", "--gemm-stages=", "-o", out], ["--gemm-stages=: expected 2, 3 or 4"]),
        # stages where nothing is staged: refused, not ignored
        ([net, "--precision=fp16", "--gemm-pipeline=off", "--gemm-stages=3", "-o", out],
         ["--gemm-stages=3", "--gemm-pipeline=off"]),
        ([net, "--gemm-stages=4", "-o", out], ["--gemm-stages=4", "fp32"]),
        ([net, "--gemm-pipeline=off", "--gemm-stages=2", "-o", out], ["--gemm-stages=2", "--gemm-pipeline=off"]),
        ([net, "--precision=bf16", "--cublas", "--gemm-stages=2", "-o", out], ["--gemm-stages=2", "--cublas"]),
        # at fp32 the CUDA-core tiles alone: 64x64 and 128x128 (ir_fp32_wide)
        ([net, "--gemm-tile=32x32", "-o", out], ["--gemm-tile=32x32: at fp32", "64x64 (the default), 64x128 or 128x128"]),
        ([net, "--gemm-tile=128x64", "-o", out], ["--gemm-tile=128x64: at fp32"]),
        ([net, "--precision=tf32", "--cublas", "--gemm-tile=64x64", "-o", out], ["does not go with --cublas"]),
        ([net, "--cublas", "--gemm-tile=128x128", "-o", out], ["does not go with --cublas"]),
    ], out)


@case("bench_profile")
def _bench_profile(ctx):
    """`ncc bench --profile`: after the timed runs, --iters more with each
    launch timed alone (ncc_profile_set), a row per kernel slowest first, and
    the report's modeled time beside it.  Inference of ResNet-18 at fp16
    (split-K GEMMs, kernels shared by two layers) and the digits network's
    fp16 training step (its kernels numbered after the inference ones, an
    unscale before the update): the launches a run equal the report's
    `launches=`, every kernel has a modeled time, the modeled times add up to
    the report's, the rows are sorted, and their shares add up to 100%."""
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
    for net, flags in ((os.path.join(examples, "resnet18.net"), ["--set", "N=2", "--set", "S=32", "--precision=fp16"]),
                       (os.path.join(examples, "digits.net"), ["--train", "--precision=fp16"])):
        name = os.path.basename(net)
        p = ctx.ncc_cmd(["bench", net, "--device", "emu", "--iters", "1", "--warmup", "0", "--profile"] + flags)
        show(p)
        if p.returncode != 0:
            raise Failure("%s: ncc bench --profile failed" % name)
        r = ctx.ncc_cmd([net, "--emit=report"] + flags)
        tot = re.search(r"^total: .* launches=(\d+)", r.stdout, re.M)
        mod = re.search(r"modeled time ([\d.]+) us on sm_90", r.stdout)
        head = re.search(r"^profile: 1 run, .*: ([\d.]+) ms/\w+ in (\d+) launches a run", p.stdout, re.M)
        allm = re.search(r"^modeled: the report's time on sm_90 \(a GPU's, not this device's\), ([\d.]+) ms", p.stdout, re.M)
        if not (tot and mod and head and allm):
            raise Failure("%s: the profile's or the report's summary is missing" % name)
        if int(head.group(2)) != int(tot.group(1)):
            raise Failure("%s: %s launches a run profiled, the report counts %s" % (name, head.group(2), tot.group(1)))
        if abs(float(allm.group(1)) * 1e3 - float(mod.group(1))) > 1.0:
            raise Failure("%s: modeled %s ms in all, the report says %s us" % (name, allm.group(1), mod.group(1)))
        rows = re.findall(r"^\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)%\s+(\d+)\s+(\S+)\s+(\w+)$", p.stdout, re.M)
        ms = [float(x[0]) for x in rows]
        if not rows or ms != sorted(ms, reverse=True):
            raise Failure("%s: the rows should be sorted, slowest first: %s" % (name, ms))
        if sum(int(x[3]) for x in rows) != int(tot.group(1)):
            raise Failure("%s: the rows' calls add up to %d, not %s" % (name, sum(int(x[3]) for x in rows), tot.group(1)))
        # each share printed to 0.1%: their sum within 0.05% a row of 100%, the last cumulative share 100.0%
        if abs(sum(float(x[1]) for x in rows) - 100) > 0.05 * len(rows) + 1e-9 or abs(float(rows[-1][2]) - 100) > 0.05:
            raise Failure("%s: the shares should add up to 100%%" % name)
        if any(x[4] == "-" for x in rows):
            raise Failure("%s: a kernel without a modeled time: %s" % (name, [x[5] for x in rows if x[4] == "-"]))
        print("%s: %d kernels, %s launches a run, modeled %s ms as the report" % (name, len(rows), head.group(2),
                                                                              allm.group(1)))


@case("half_storage")
def _half_storage(ctx):
    """Half-width storage (passes/storage.c, docs/precision.md): at fp16 and
    bf16 a value that only the rounding GEMMs read is stored in 16 bits.  The
    outputs must be bit for bit those of float32 storage (the same build
    without the storage pass), in checked mode and both fiber orders; the
    listing shows the f16/bf16 values, -v names why the others stay f32, the
    generated kernels store ncc_fp16_bits and stage the stored bits, and
    VGG-16's report shows less memory.  Folded convolution weights (load-time
    values only the GEMMs read, rounding them) are stored in 16 bits too.
    --gemm-pipeline=off (no cp.async, ldmatrix or B prefetch; on is the
    default) gives the same bits, checked and reversed.  MobileNetV2's 1x1
    convolutions copy their 16-bit images by cp.async (ldmatrix.trans)."""
    import numpy as np
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
    golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "passes", "storage.net")
    off = "--passes=prune,fold,precision,fuse,plan,batch"
    r = np.random.RandomState(7)
    small = {"x": r.randn(2, 3, 8, 8).astype("float32") * 3, "q": r.randn(2, 4, 8).astype("float32")}
    img = {"x": r.randn(2, 3, 32, 32).astype("float32")}
    runs = [(golden, small, ["y", "a"], ["-O3"]),
            (os.path.join(examples, "resnet18.net"), img, ["logits"], ["--set", "N=2", "--set", "S=32"]),
            (os.path.join(examples, "mobilenet_v2.net"), img, ["logits"], ["--set", "N=2", "--set", "S=32"])]
    for prec in ("fp16", "bf16"):
        for i, (net, inputs, outs, flags) in enumerate(runs):
            if i > 0 and (i == 1) != (prec == "fp16"):
                continue   # resnet18 at fp16, mobilenet_v2 at bf16: the time of the suite
            base = ["--precision=" + prec] + flags
            ref, _ = run_outputs(ctx, net, inputs, outs, base + [off])
            got, p = run_outputs(ctx, net, inputs, outs, base + ["--check", "-v"])
            rev, _ = run_outputs(ctx, net, inputs, outs, base, env={"NCC_FIBER_ORDER": "reverse"})
            # each K tile loaded, then multiplied (--gemm-pipeline=off): the same operands and MMAs, the same bits
            pch, _ = run_outputs(ctx, net, inputs, outs, base + ["--check", "--gemm-pipeline=off"])
            prv, _ = run_outputs(ctx, net, inputs, outs, base + ["--gemm-pipeline=off"], env={"NCC_FIBER_ORDER": "reverse"})
            # the 20 folded weights, 16 of them reordered tap-major as they are folded (the fold pass)
            if "resnet18" in net and not re.search(r"pass storage: 20 load-time weights \(folded or reordered\) stored as f16",
                                                   p.stderr):
                raise Failure("ResNet-18 at fp16: its 20 folded convolution weights should be stored as f16")
            for k in outs:
                for name, y in (("checked", got[k]), ("reverse", rev[k]), ("unpipelined, checked", pch[k]),
                                ("unpipelined, reverse", prv[k])):
                    if y.shape != ref[k].shape or not np.array_equal(y.view("uint32"), ref[k].view("uint32")):
                        raise Failure("%s %s %s (%s): half-width storage changed output %s (max diff %g)" % (
                            os.path.basename(net), prec, " ".join(flags), name, k, float(np.abs(y - ref[k]).max())))
            print("%s %s: outputs bit-equal to float32 storage" % (os.path.basename(net), prec))
    # the listing, -v and the kernels
    out = ctx.path("s.cu")
    p = ctx.ncc_cmd([golden, "--precision=fp16", "-O3", "-v", "--emit=ir", "--passes=prune,fold,precision,fuse,storage,plan"])
    show(p)
    half = re.findall(r"^%\d+ = (\w+)\(.*: f16\[", p.stdout, re.M)
    if sorted(half) != ["add"] + ["cast"] * 5 + ["relu", "softmax", "transpose"]:
        raise Failure("expected c1's relu, the residual add, the softmax, the transpose and the five GEMM weights' "
                      "casts stored as f16: %s" % half)
    # the weights converted at load: each conv's and the linear's weight read through a load-time cast of the param
    casts = re.findall(r"^%(\d+) = cast\(%(\d+)\) load-time : f16\[", p.stdout, re.M)
    params = set(re.findall(r"^%(\d+) = param \"\w+\.weight\"", p.stdout, re.M))
    if len(casts) != 5 or {src for _, src in casts} != params or "5 parameter weights converted at load" not in p.stderr:
        raise Failure("expected a load-time cast of each of the 5 GEMM weights: %s of %s" % (casts, sorted(params)))
    if "f32: relu2 (%9): add1 (add) reads it in float32" not in p.stderr or "matmul1 (%26): an output" not in p.stderr:
        raise Failure("-v should say why relu2 and the output stay f32")
    # VGG-11's weights (no batchnorm: parameters converted at load), f16: by cp.async in two stages and
    # ldmatrix (the default, --gemm-pipeline=on), with --gemm-pipeline=off staged 16 bytes a load
    vgg11 = [os.path.join(examples, "vgg11.net"), "--precision=fp16", "--set", "N=2", "--set", "S=32", "-o", out]
    p = ctx.ncc_cmd(vgg11)
    src = open(out).read() if p.returncode == 0 else ""
    if ("ncc_cp_async16(dst, &weight[" not in src or "ncc_ldmatrix_x4(ah[i], &As[st][" not in src or
            "_cast(const float *__restrict__ in0, unsigned short *__restrict__ y)" not in src):
        raise Failure("VGG-11 at fp16: the weights should be cast to f16 at load and staged with cp.async and ldmatrix")
    p = ctx.ncc_cmd(vgg11 + ["--gemm-pipeline=off"])
    src = open(out).read() if p.returncode == 0 else ""
    if "ncc_ldg128(q, &weight[" not in src or "ncc_cp_async" in src or "ncc_ldmatrix" in src:
        raise Failure("VGG-11 at fp16: the weights should be staged with 128-bit loads (--gemm-pipeline=off)")
    # MobileNetV2's 1x1 convolutions of images stored in 16 bits (n-contiguous B): copied k-major by cp.async,
    # 16 bytes where the pixels come in 8s (16 x 16), 8 bytes in 4s (2 x 2), the fragments by ldmatrix.trans
    p = ctx.ncc_cmd([os.path.join(examples, "mobilenet_v2.net"), "--precision=bf16", "--set", "N=2", "--set", "S=32",
                     "-o", out])
    src = open(out).read() if p.returncode == 0 else ""
    if ("ncc_ldmatrix_x4_trans(q, &Bs[st][lb + j * 8])" not in src or
            "ncc_cp_async16(dst, &x[(n / 256 * 32 + k) * 256 + n % 256])" not in src or
            "ncc_cp_async8(dst, &x[(n / 4 * 192 + k) * 4 + n % 4])" not in src):
        raise Failure("MobileNetV2 at bf16: the 1x1 convolutions' 16-bit images should be copied by cp.async "
                      "(16 and 8 bytes) and read by ldmatrix.trans")
    # ResNet-18's folded weights, f16 and k-contiguous: staged 16 bytes a load (--gemm-pipeline=off)
    p = ctx.ncc_cmd([os.path.join(examples, "resnet18.net"), "--precision=fp16", "--set", "N=2", "--set", "S=32",
                     "--gemm-pipeline=off", "-o", out])
    src = open(out).read() if p.returncode == 0 else ""
    if "ncc_ldg128(q, &weight[" not in src or "const unsigned short *__restrict__ weight" not in src:
        raise Failure("ResNet-18 at fp16: the folded f16 weights should be staged with 128-bit loads")
    # float32 operands with rows of 4n floats, 4 floats a 128-bit load (vec32_fetch): ResNet-18's folded
    # weights at tf32 with --gemm-pipeline=off (on, the default: copied by cp.async, rounded in place), and
    # in the digits network's fp16 training step (float32 storage) the linear's input and the weight
    # gradients' dy (4 x 4 and 8 x 8 output pixels).  The train oracle's tf32, fp16 and bf16 gradient
    # cases (6 x 6 outputs) run the same staging against PyTorch
    r18 = [os.path.join(examples, "resnet18.net"), "--precision=tf32", "--set", "N=2", "--set", "S=32", "-o", out]
    p = ctx.ncc_cmd(r18 + ["--gemm-pipeline=off"])
    src = open(out).read() if p.returncode == 0 else ""
    if "ncc_ldg128f(a4[q], &weight[" not in src or "ncc_ldg128(" in src:
        raise Failure("ResNet-18 at tf32 (--gemm-pipeline=off): the float32 weights should be staged 4 floats a "
                      "128-bit load")
    p = ctx.ncc_cmd(r18)
    src = open(out).read() if p.returncode == 0 else ""
    if ("ncc_cp_async16(dst, &weight[" not in src or "rounded to TF32 in place" not in src or
            "ncc_ldg128f(a4[q], &weight[" in src):
        raise Failure("ResNet-18 at tf32: the float32 weights should be copied by cp.async and rounded in place")
    p = ctx.ncc_cmd([os.path.join(examples, "digits.net"), "--precision=fp16", "--train", "-o", out])
    src = open(out).read() if p.returncode == 0 else ""
    if src.count("ncc_ldg128f(a4[q], &dy[") < 2 or "ncc_ldg128f(a4[q], &x[" not in src:
        raise Failure("the digits step at fp16: dy of the weight gradients and the linear's input should be "
                      "staged 4 floats a 128-bit load")
    # --gemm-pipeline=on (the default) fetches such pieces a K tile ahead, in flight during the MMAs, only in
    # tiles of 256 threads (Node.pipe_r): the 4096^3 GEMM's 128 x 128, not the digits step's 4-warp tiles
    ahead = "the next K tile's A pieces, in flight during the MMAs"
    if ahead in src:
        raise Failure("the digits step at fp16: its 4-warp tiles should not fetch float32 pieces a K tile ahead")
    gemm = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu", "gemm4096.net")
    p = ctx.ncc_cmd([gemm, "--precision=fp16", "-o", out])
    src = open(out).read() if p.returncode == 0 else ""
    if ahead not in src or "ncc_ldg128f(a4[q], &a[" not in src:
        raise Failure("the 4096^3 GEMM at fp16: its float32 A should be fetched a K tile ahead, 4 floats a load")
    p = ctx.ncc_cmd([golden, "--precision=bf16", "-O3", "-o", out])
    src = open(out).read() if p.returncode == 0 else ""
    if "ncc_bf16_bits(v)" not in src or "unsigned short v = 0;" not in src or "const unsigned short *__restrict__" not in src:
        raise Failure("the bf16 kernels should store the bits, stage the stored bits and take 16-bit pointers")
    for flags, why in (([], "fp32"), (["--precision=tf32"], "tf32"), (["--precision=fp16", "--cublas"], "cuBLAS")):
        p = ctx.ncc_cmd([golden, "-O3", "-o", out] + flags)
        if p.returncode != 0 or "unsigned short *" in open(out).read():
            raise Failure("%s: no value may be stored half-width" % why)
    # VGG-16 at batch 32: the peak activation memory and the bytes moved fall
    vgg = os.path.join(examples, "vgg16.net")
    tot = []
    for extra in ([], [off]):
        p = ctx.ncc_cmd([vgg, "--precision=fp16", "--set", "N=32", "--emit=report"] + extra)
        m = re.search(r"^total: .* bytes=(\d+) peak_memory=(\d+)", p.stdout, re.M)
        if p.returncode != 0 or not m:
            raise Failure("VGG-16's report at fp16 failed")
        tot.append((int(m.group(1)), int(m.group(2))))
    print("VGG-16 N=32 fp16: bytes %d -> %d, peak_memory %d -> %d" % (tot[1][0], tot[0][0], tot[1][1], tot[0][1]))
    if not (tot[0][1] < 0.8 * tot[1][1] and tot[0][0] < 0.8 * tot[1][0]):
        raise Failure("VGG-16 at fp16: half-width storage should cut the peak memory and the bytes moved by 20%")


Q8_NET = """model q8
input x: f32[4, 3, 8, 8]
h = relu(conv2d(x, 16, kernel=3, pad=1, name="c1"))
h2 = relu(conv2d(h, 16, kernel=3, pad=1, name="c2"))
r = conv2d(h2, 16, kernel=3, pad=1, name="c3") + h2
f = flatten(relu(conv2d(r, 8, kernel=1, name="c4")))
y = linear(relu(linear(f, 32, name="fc1")), 10, name="fc2")
output y
s = reshape(r, [4, 16, 64])
a = matmul(softmax(s), transpose(s, [0, 2, 1]))
output a
"""


@case("int8_storage")
def _int8_storage(ctx):
    """int8 storage (passes/storage.c): a value that only int8 GEMMs read, all
    quantizing it with one scale, is stored as its int8 quantization by the
    producer's epilogue, and the readers take the integers as they are.  The
    outputs must be bit for bit those of float32 storage (the same build
    without the storage pass) on the tiled, GEMV and matmul paths, in checked
    mode and both fiber orders; ResNet-18 and MobileNetV2 (direct depthwise
    kernels) too.  The int8 weights' integers (load-time quantize nodes) are
    stored as i8 too."""
    import numpy as np
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
    off = "--passes=prune,fold,precision,fuse,plan,batch"
    r = np.random.RandomState(2)
    net = ctx.write("q8.net", Q8_NET)
    cal = ctx.path("cal.npy")
    np.save(cal, r.randn(64, 3, 8, 8).astype("float32"))
    cal32 = ctx.path("cal32.npy")
    np.save(cal32, r.randn(8, 3, 32, 32).astype("float32"))
    runs = [(net, cal, {"x": r.randn(4, 3, 8, 8).astype("float32")}, ["y", "a"], [], 5),
            (os.path.join(examples, "resnet18.net"), cal32, {"x": r.randn(2, 3, 32, 32).astype("float32")}, ["logits"],
             ["--set", "N=2", "--set", "S=32"], 12),
            (os.path.join(examples, "mobilenet_v2.net"), cal32, {"x": r.randn(2, 3, 32, 32).astype("float32")}, ["logits"],
             ["--set", "N=2", "--set", "S=32"], 1)]
    for i, (net_, cal_, inputs, outs, flags, want) in enumerate(runs):
        # one calibration a model: the first run writes the cache, the others read it (the same scales)
        base = ["--precision=int8", "--calibrate=" + cal_, "--int8-max-error=1",
                "--calibration-cache=" + ctx.path("cal%d.txt" % i)] + flags
        ref, _ = run_outputs(ctx, net_, inputs, outs, base + [off])
        got, p = run_outputs(ctx, net_, inputs, outs, base + ["--check", "-v"])
        rev, _ = run_outputs(ctx, net_, inputs, outs, base, env={"NCC_FIBER_ORDER": "reverse"})
        m = re.findall(r"pass storage: (\d+) values stored as i8", p.stderr)
        if not m or int(m[-1]) < want:
            raise Failure("%s: expected at least %d values stored as i8: %s" % (os.path.basename(net_), want, m))
        w8 = re.findall(r"pass storage: (\d+) load-time weights \(int8 integers\) stored as i8", p.stderr)
        if not w8 or int(w8[-1]) < 3:
            raise Failure("%s: the int8 layers' weights should be stored as i8: %s" % (os.path.basename(net_), w8))
        for k in outs:
            for name, yv in (("checked", got[k]), ("reverse", rev[k])):
                if yv.shape != ref[k].shape or not np.array_equal(yv.view("uint32"), ref[k].view("uint32")):
                    raise Failure("%s (%s): int8 storage changed output %s (max diff %g)" % (
                        os.path.basename(net_), name, k, float(np.abs(yv - ref[k]).max())))
        print("%s: %s values stored as i8, outputs bit-equal to float32 storage" % (os.path.basename(net_), m[-1]))


def tune_setup(ctx):
    """The autotune cases' model (a convolution and a linear layer), cache folder, environment and outputs"""
    net = ctx.write("tune.net", "model tune\ninput x: f32[4, 16, 24, 24]\ninput q: f32[200, 96]\n"
                                "h = relu(conv2d(x, 128, kernel=3, pad=1, name=\"conv\"))\n"
                                "z = linear(q, 160, name=\"fc\")\noutput h\noutput z\n")
    cache = ctx.path("cache")
    return net, cache, {"NCC_CACHE_DIR": cache}, ctx.path("tune.cu"), ctx.path("tune2.cu")


@case("autotune")
def _autotune(ctx):
    """--autotune=SECONDS (driver/autotune.c): each tensor-core GEMM shape with
    more than one candidate tile is built and run once per tile under
    emulation, every tile must give the default's bits, the choice (the tile
    model's, with no GPU to time) and its reason go into the generated code and
    the cache's autotune.txt (tab-separated, by device); a second compile
    reads the cache and runs nothing, and gives the same source; a budget too
    small tries nothing and writes nothing; a corrupt cache and bad flags are
    refused with status 1 and no output.  A GEMM whose operand the model
    stores in 16 bits is tried reading it so."""
    net, cache, env, out, out2 = tune_setup(ctx)
    p = ctx.ncc_cmd([net, "--precision=fp16", "--autotune=120", "-o", out], env=env)
    show(p)
    if p.returncode != 0:
        raise Failure("--autotune=120 should compile")
    m = re.search(r"autotune: (\d+) GEMM shapes?: (\d+) from \S+, (\d+) tried now \((\d+) builds", p.stderr)
    if not m or m.groups() != ("2", "0", "2", "7"):
        raise Failure("expected 2 shapes, none cached, both tried in 7 builds (3 conv tiles, 4 linear): %s"
                      % (m.groups() if m else p.stderr))
    lines = [l.split("\t") for l in open(os.path.join(cache, "autotune.txt")).read().split("\n")
             if l and not l.startswith("#") and not l.startswith("ncc-autotune")]
    print(lines)
    keys = sorted(l[1] for l in lines)
    if (len(lines) != 2 or any(len(l) != 4 or l[0] != "emu" or "gave equal bits under emulation" not in l[3]
                               for l in lines)
            or keys != ["fp16 conv2d x=4x16x24x24 w=128x16x3x3 s=1x1 p=1x1 d=1x1 g=1 tap-major",
                        "fp16 linear m=200 k=96 n=160"]):
        raise Failure("autotune.txt should hold the two shapes, on emu, with their reasons")
    src = open(out).read()
    if src.count("gave equal bits under emulation") != 2:
        raise Failure("both launches should carry the autotuner's reason")
    p = ctx.ncc_cmd([net, "--precision=fp16", "--autotune=120", "-o", out], env=env)
    show(p)
    m = re.search(r"autotune: (\d+) GEMM shapes?: (\d+) from \S+, (\d+) tried now \((\d+) builds", p.stderr)
    if p.returncode != 0 or not m or m.groups() != ("2", "2", "0", "0") or open(out).read() != src:
        raise Failure("a second compile should take both shapes from the cache, build nothing, and give the same source")
    # a linear layer reading a value the storage pass stores in 16 bits: its trials read it so (a relu of
    # the input, stored as fp16), and the one reading the input reads float32, as in the model
    narrow = ctx.write("narrow.net", "model tunen\ninput q: f32[200, 96]\nh = relu(linear(q, 96, name=\"fc1\"))\n"
                                     "z = linear(h, 160, name=\"fc2\")\noutput z\n")
    p = ctx.ncc_cmd([narrow, "--precision=fp16", "--autotune=120", "-o", out2], env=env)
    show(p)
    if (p.returncode != 0 or "1 reads an operand stored narrow, as the model stores it" not in p.stderr
            or "the trial's operand" in p.stderr):
        raise Failure("fc2's trials should read their operand stored as fp16, as the model stores it; fc1's float32")
    os.unlink(out2)
    # a budget too small for one build: the tile model's choice, nothing written
    small = ctx.write("small.net", "model small\ninput q: f32[200, 96]\nz = linear(q, 130, name=\"fc\")\noutput z\n")
    p = ctx.ncc_cmd([small, "--precision=bf16", "--autotune=0.000001", "-o", out2], env=env)
    show(p)
    if p.returncode != 0 or "over the budget" not in p.stderr or "bf16" in open(os.path.join(cache, "autotune.txt")).read():
        raise Failure("an exhausted budget should leave the shape to the model and write nothing")
    os.unlink(out2)
    # a corrupt cache: refused, naming the file and line
    with open(os.path.join(cache, "autotune.txt"), "a") as f:
        f.write("emu\tfp16 linear m=1 k=1 n=1\t99x99\twhy\n")
    p = ctx.ncc_cmd([net, "--precision=fp16", "--autotune=120", "-o", out2], env=env)
    show(p)
    if p.returncode != 1 or "autotune.txt:" not in p.stderr or "no tile of ncc's" not in p.stderr or os.path.exists(out2):
        raise Failure("a corrupt autotune.txt should be refused with its file and line, and no output")
    expect_refused(ctx, [
        ([net, "--precision=fp16", "--autotune=0", "-o", out2], ["--autotune=0: expected a time budget"]),
        ([net, "--precision=fp16", "--autotune=soon", "-o", out2], ["--autotune=soon: expected a time budget"]),
        ([net, "--precision=fp16", "--gemm-tile=64x64", "--autotune=10", "-o", out2], ["--gemm-tile (a tile forced)"]),
        ([net, "--precision=fp16", "--cublas", "--autotune=10", "-o", out2], ["--cublas"]),
    ], out2)


@case("autotune_fp32")
def _autotune_fp32(ctx):
    """--autotune at fp32 (driver/autotune.c, ir_fp32_candidates): each float32 tiled GEMM shape tried in
    the default tile, 64 x 128 and 128 x 128, each in one stage and two (6 builds a shape here), all giving the
    default's bits; under emulation the tile rule's choice (one stage of 64 x 64 for these), written
    BMxBN/S into autotune.txt and said at each launch; a second compile builds nothing.  A line naming
    128x128/2 (as a GPU's timing would) gives that shape the wide tile in two stages; a stage count other
    than 1 or 2, or a tensor-core tile, on a float32 line is refused with the file and line."""
    net, cache, env, out, out2 = tune_setup(ctx)
    p = ctx.ncc_cmd([net, "--autotune=120", "-o", out], env=env)
    show(p)
    m = re.search(r"autotune: (\d+) GEMM shapes?: (\d+) from \S+, (\d+) tried now \((\d+) builds", p.stderr)
    if p.returncode != 0 or not m or m.groups() != ("2", "0", "2", "12"):
        raise Failure("expected 2 float32 shapes, both tried in 12 builds: %s" % (m.groups() if m else p.stderr))
    path = os.path.join(cache, "autotune.txt")
    lines = [l.split("\t") for l in open(path).read().split("\n")
             if l and not l.startswith("#") and not l.startswith("ncc-autotune")]
    print(lines)
    if (sorted((l[1], l[2]) for l in lines) !=
            [("fp32 conv2d x=4x16x24x24 w=128x16x3x3 s=1x1 p=1x1 d=1x1 g=1 tap-major", "64x64/1"),
             ("fp32 linear m=200 k=96 n=160", "64x64/1")]
            or any("6 tiles and stages gave equal bits under emulation" not in l[3] for l in lines)):
        raise Failure("autotune.txt should hold both float32 shapes at 64x64/1, the rule's choice")
    src = open(out).read()
    if src.count(": fp32 tile 64x64, one stage, the tile rule's choice") != 2 or "As[2]" in src:
        raise Failure("both launches should say the autotuner's choice, one stage")
    p = ctx.ncc_cmd([net, "--autotune=120", "-o", out], env=env)
    m = re.search(r"autotune: (\d+) GEMM shapes?: (\d+) from \S+, (\d+) tried now \((\d+) builds", p.stderr)
    if p.returncode != 0 or not m or m.groups() != ("2", "2", "0", "0") or open(out).read() != src:
        raise Failure("a second compile should take both shapes from the cache and give the same source")
    # the line a GPU's timing would write: the linear wide, in two stages
    text = open(path).read().replace("n=160\t64x64/1\t", "n=160\t128x128/2\t128x128, two stages, timed\t", 1)
    text = text.replace("timed\t64x64, one stage, the tile rule's choice: 6 tiles and stages gave equal bits under "
                        "emulation (no GPU to time them)", "timed")
    with open(path, "w") as f:
        f.write(text)
    p = ctx.ncc_cmd([net, "--autotune=120", "-o", out], env=env)
    src = open(out).read() if p.returncode == 0 else ""
    fc = src.split("NCC_KERNEL void tune_k1_linear(", 1)[-1].split("\n}\n", 1)[0]
    if ("/* fc: fp32 tile 128x128, two stages, timed */" not in src or "float acc[8][8];" not in fc
            or "float As[2][16][132];" not in fc):
        raise Failure("a cached 128x128/2 should give the linear the wide tile in two stages: %s" % p.stderr)
    # --gemm-pipeline=off: a cached choice of two stages is none of this build's candidates, so the linear is
    # tried again (its three tiles in one stage) and its line rewritten; the convolution's stays
    p = ctx.ncc_cmd([net, "--autotune=120", "--gemm-pipeline=off", "-o", out2], env=env)
    show(p)
    m = re.search(r"autotune: (\d+) GEMM shapes?: (\d+) from \S+, (\d+) tried now \((\d+) builds", p.stderr)
    fc = [l.split("\t")[2] for l in open(path).read().split("\n") if "\tfp32 linear m=200 k=96 n=160\t" in l]
    if p.returncode != 0 or not m or m.groups() != ("2", "1", "1", "3") or fc != ["64x64/1"]:
        raise Failure("with --gemm-pipeline=off a cached 128x128/2 should be tried again in 3 builds and rewritten "
                      "64x64/1: %s, %s" % (fc, p.stderr))
    os.unlink(out2)
    with open(path, "w") as f:
        f.write(text)
    # with --train: the tiles tried on the inference graph's shapes, the training step's forward GEMMs take them
    # too (MLP, batch 64: fc1 and fc2 in one stage and two, split along K so no wider tile; fc3's 10 columns
    # have one candidate)
    mlp = os.path.join(EXAMPLES, "mlp.net")
    p = ctx.ncc_cmd([mlp, "--train", "--autotune=120", "-o", out2], env=env)
    show(p)
    src = open(out2).read() if p.returncode == 0 else ""
    step = src.split("static int mlp_train_run(", 1)[-1].split("\n}\n", 1)[0]
    m = re.search(r"autotune: (\d+) GEMM shapes?: (\d+) from \S+, (\d+) tried now \((\d+) builds", p.stderr)
    if (not m or m.groups() != ("3", "0", "2", "4")
            or step.count(": fp32 tile 64x64, one stage, the tile rule's choice: 2 tiles and stages") != 4):
        raise Failure("--autotune with --train: 3 shapes, 2 tried in 4 builds, the training step's fc1 and fc2 "
                      "launches (each split along K: the GEMM and its sum) with the autotuner's reason: %s" % p.stderr)
    os.unlink(out2)
    for bad, why in (("128x128/3", "no tile of ncc's"), ("32x64/1", "no tile of ncc's"), ("128x128", "lacks its stages")):
        with open(path, "w") as f:
            f.write(text.replace("n=160\t128x128/2\t", "n=160\t%s\t" % bad, 1))
        p = ctx.ncc_cmd([net, "--autotune=120", "-o", out2], env=env)
        show(p)
        if p.returncode != 1 or "autotune.txt" not in p.stderr or why not in p.stderr or os.path.exists(out2):
            raise Failure("a float32 line with %s should be refused (%s), no output" % (bad, why))


@case("autotune_int8")
def _autotune_int8(ctx):
    """--autotune at int8: after the calibration (which once died by a signal on this model: its matmul's
    second operand, x transposed, does not follow the batch), each int8 GEMM shape is tried at its tiles, the
    one-layer models quantizing at the model's scales (a matmul's two), every tile giving the default's bits;
    the tile model's choice under emulation, in autotune.txt and at the launches; a second compile builds
    nothing and gives the same source."""
    import numpy as np
    net = ctx.write("mm8.net", "model mm8\ninput x: f32[256, 96]\nq = linear(x, 96, name=\"q\")\n"
                               "z = matmul(q, transpose(x, [1, 0]), name=\"att\")\noutput z\n")
    r = np.random.default_rng(1)
    w = ctx.path("mm8.safetensors")
    write_safetensors(w, {"q.weight": r.normal(0, 0.1, (96, 96)).astype("f4"),
                          "q.bias": r.normal(0, 0.1, 96).astype("f4")})
    cal = ctx.path("cal.npy")
    np.save(cal, r.uniform(-1, 1, (256, 96)).astype(np.float32))
    cache = ctx.path("cache")
    env = {"NCC_CACHE_DIR": cache}
    out = ctx.path("mm8.cu")
    flags = [net, "--precision=int8", "--calibrate=" + cal, "--weights", w, "--calibration-cache=" + ctx.path("cal.txt"),
             "--autotune=120", "-o", out]
    p = ctx.ncc_cmd(flags, env=env)
    show(p)
    m = re.search(r"autotune: (\d+) GEMM shapes?: (\d+) from \S+, (\d+) tried now \((\d+) builds", p.stderr)
    if p.returncode != 0 or not m or m.groups() != ("2", "0", "2", "6") or "other bits" in p.stderr:
        raise Failure("expected 2 int8 shapes tried in 6 builds (2 linear tiles, 4 matmul), equal bits: %s"
                      % (m.groups() if m else p.stderr))
    # q, read by the matmul alone, is stored as int8 (the storage pass): the matmul's trials store it so too
    if "1 reads an operand stored narrow, as the model stores it" not in p.stderr or "the trial's operand" in p.stderr:
        raise Failure("the matmul's trials should read their first operand stored as int8, as the model does")
    lines = [l.split("\t") for l in open(os.path.join(cache, "autotune.txt")).read().split("\n")
             if l and not l.startswith("#") and not l.startswith("ncc-autotune")]
    print(lines)
    if sorted(l[1] for l in lines) != ["int8 linear m=256 k=96 n=96", "int8 matmul a=256x96 b=96x256"]:
        raise Failure("autotune.txt should hold the int8 linear and matmul")
    src = open(out).read()
    if src.count("the tile model's choice") < 2:
        raise Failure("the launches should carry the autotuner's reason")
    p = ctx.ncc_cmd(flags, env=env)
    m = re.search(r"autotune: (\d+) GEMM shapes?: (\d+) from \S+, (\d+) tried now \((\d+) builds", p.stderr)
    if p.returncode != 0 or not m or m.groups() != ("2", "2", "0", "0") or open(out).read() != src:
        raise Failure("a second compile should take both shapes from the cache and give the same source")


@case("int8_inputs")
def _int8_inputs(ctx):
    """--precision=int8 and its calibration flags: what is refused (no
    calibration, a flag without int8, unknown methods, out-of-range numbers,
    int8 with training or --cublas, calibration data of the wrong dtype,
    shape or format, a cache of another model or a corrupt one), each with
    status 1, a message naming the file where there is one, and no output;
    and what works: a calibration writes the cache, a second compile reads it
    (the same MODEL.cu, the report naming the cache), another method
    calibrates again."""
    import numpy as np
    net = ctx.write("q.net", "model q\nconst N = 4\ninput x: f32[N, 6]\nh = relu(linear(x, 8, name=\"fc1\"))\n"
                             "y = linear(h, 3, name=\"fc2\")\noutput y\n")
    other = ctx.write("o.net", "model o\nconst N = 4\ninput x: f32[N, 6]\ny = linear(x, 3, name=\"head\")\noutput y\n")
    rng = np.random.default_rng(0)
    w = ctx.path("w.safetensors")
    write_safetensors(w, {"fc1.weight": rng.standard_normal((8, 6)).astype(np.float32),
                          "fc1.bias": rng.standard_normal(8).astype(np.float32),
                          "fc2.weight": rng.standard_normal((3, 8)).astype(np.float32),
                          "fc2.bias": rng.standard_normal(3).astype(np.float32)})
    cal = ctx.path("cal.npy")
    np.save(cal, rng.standard_normal((16, 6)).astype(np.float32))
    bad64 = ctx.path("cali.npy")   # integers: not calibration data (float64 is taken, as float32)
    np.save(bad64, rng.integers(0, 9, (16, 6)).astype(np.int32))
    badshape = ctx.path("cal5.npy")
    np.save(badshape, rng.standard_normal((16, 5)).astype(np.float32))
    junk = ctx.write("junk.npy", "not an npy file\n")
    nanfile = ctx.path("calnan.npy")
    nans = rng.standard_normal((16, 6)).astype(np.float32)
    nans[3, 2] = np.nan
    np.save(nanfile, nans)
    out = ctx.path("q.cu")
    cache = ctx.path("q.cal")
    tnet = ctx.write("t.net", "model t\ninput x: f32[2, 3]\ninput y: i32[2]\nz = linear(x, 4, name=\"fc\")\n"
                              "output z\nloss = cross_entropy(z, y)\ntrain {\n  optimizer sgd(lr=0.1)\n  minimize loss\n}\n")
    i8 = [net, "--precision=int8", "-o", out]
    expect_refused(ctx, [
        (i8, ["needs calibration", "--calibrate"]),
        ([net, "--calibrate=" + cal, "-o", out], ["--calibrate goes with --precision=int8"]),
        ([net, "--calibration-cache=" + cache, "-o", out], ["--calibration-cache goes with --precision=int8"]),
        (i8 + ["--calibrate=" + cal, "--weights", w, "--calibration-method=kl"], ["minmax, percentile or entropy"]),
        (i8 + ["--calibrate=" + cal, "--weights", w, "--percentile=99"], ["--calibration-method=percentile"]),
        (i8 + ["--calibrate=" + cal, "--weights", w, "--calibration-method=percentile", "--percentile=101"],
         ["(0, 100]"]),
        (i8 + ["--calibrate=" + cal, "--weights", w, "--int8-max-error=-1"], ["positive number"]),
        (i8 + ["--calibrate=" + cal, "--weights", w, "--int8-fallback=int4"], ["fp32, fp16 or bf16"]),
        ([net, "--int8-fallback=fp16", "-o", out], ["--int8-fallback goes with --precision=int8"]),
        (i8 + ["--calibrate=" + cal], ["--weights"]),
        (i8 + ["--calibrate=" + cal, "--weights", w, "--cublas"], ["--cublas"]),
        ([tnet, "--train", "--precision=int8", "--calibrate=" + cal, "--weights", w, "-o", out], ["for inference"]),
        (["train", tnet, "--data", ctx.path("none"), "--precision=int8"], ["for inference"]),
        (i8 + ["--calibrate=" + bad64, "--weights", w], [bad64, "float32"]),
        (i8 + ["--calibrate=" + badshape, "--weights", w], [badshape, "rows of 5 floats"]),
        (i8 + ["--calibrate=" + junk, "--weights", w], [junk]),
        (i8 + ["--calibrate=" + nanfile, "--weights", w], [nanfile, "row 3", "NaN", "finite"]),
        (i8 + ["--calibrate=" + ctx.path("missing.npy"), "--weights", w], ["missing.npy"]),
        (i8 + ["--calibration-cache=" + cache], [cache, "cannot read"]),
    ], out)
    if os.path.exists(cache):
        raise Failure("a refused calibration wrote the cache %s" % cache)
    # a calibration writes the cache; a compile from the cache alone gives the same MODEL.cu
    p = ctx.ncc_cmd(i8 + ["--calibrate=" + cal, "--weights", w, "--calibration-cache=" + cache])
    show(p)
    if p.returncode != 0 or not os.path.exists(out) or not os.path.exists(cache):
        raise Failure("an int8 compile with --calibrate and --calibration-cache should write both files")
    first = open(out).read()
    if "ncc_q8(" not in first:
        raise Failure("the int8 MODEL.cu quantizes nothing (no ncc_q8)")
    lines = open(cache).read().splitlines()
    if not [l for l in lines if l.startswith("layer fc1 ")] or not [l for l in lines if l.startswith("layer fc2 ")]:
        raise Failure("the cache lists no layer fc1 and fc2:\n" + "\n".join(lines))
    os.unlink(out)
    p = ctx.ncc_cmd(i8 + ["--calibration-cache=" + cache])
    show(p)
    if p.returncode != 0 or not os.path.exists(out):
        raise Failure("a compile from the calibration cache alone should work")
    strip = lambda t: "\n".join(l for l in t.splitlines() if "command: ncc" not in l)
    if strip(open(out).read()) != strip(first):
        raise Failure("the MODEL.cu compiled from the cache differs from the calibrated one")
    os.unlink(out)
    # the cache serves another batch size (--set N=8: the layers' rows are the same)
    p = ctx.ncc_cmd(i8 + ["--calibration-cache=" + cache, "--set", "N=8"])
    show(p)
    if p.returncode != 0 or not os.path.exists(out):
        raise Failure("a compile at another batch size should read the calibration cache")
    os.unlink(out)
    p = ctx.ncc_cmd([net, "--precision=int8", "--calibration-cache=" + cache, "--emit=report"])
    show(p)
    if p.returncode != 0 or "cache " + cache not in p.stdout or "fc1" not in p.stdout:
        raise Failure("the report should name the cache the scales came from and list fc1")
    # another model's cache, or a corrupt one: refused, the file left as it was
    saved = open(cache).read()
    expect_refused(ctx, [
        ([other, "--precision=int8", "--calibration-cache=" + cache, "-o", out], [cache, "another model"]),
        ([other, "--precision=int8", "--calibration-cache=" + cache, "--calibrate=" + cal, "--weights", w, "-o", out],
         [cache, "another model"]),
    ], out)
    if open(cache).read() != saved:
        raise Failure("a refused compile changed the cache")
    broken = ctx.write("broken.cal", saved.replace("scale ", "scael ", 1))
    expect_refused(ctx, [(i8 + ["--calibration-cache=" + broken], [broken + ":", "cannot read"])], out)
    negative = ctx.write("neg.cal", re.sub(r"scale [0-9.e+-]+", "scale -1", saved, count=1))
    expect_refused(ctx, [(i8 + ["--calibration-cache=" + negative], [negative + ":", "positive and finite"])], out)
    # a layer name with a bad %XX escape (names are written %XX-escaped): refused with its line
    for bad in ("fc%2", "fc%zz1"):
        escaped = ctx.write("esc.cal", re.sub(r"^layer (\S+)", "layer " + bad, saved, count=1, flags=re.M))
        expect_refused(ctx, [(i8 + ["--calibration-cache=" + escaped], [escaped + ":", "bad %XX escape"])], out)
    # another method with data: calibrated again, the cache rewritten with it
    p = ctx.ncc_cmd(i8 + ["--calibration-cache=" + cache, "--calibrate=" + cal, "--weights", w,
                          "--calibration-method=minmax"])
    show(p)
    if p.returncode != 0 or "calibrating again" not in p.stderr or "method minmax" not in open(cache).read():
        raise Failure("--calibration-method=minmax with a cache of entropy scales should calibrate again")
    # ... and without data it is refused
    expect_refused(ctx, [(i8 + ["--calibration-cache=" + cache, "--calibration-method=entropy"],
                          [cache, "--calibrate"])], ctx.path("none.cu"))


@case("model_names")
def _model_names(ctx):
    """A model may be named like the generated code's own variables (m, rc,
    pm, batch, loss): the generated file still compiles and runs."""
    import numpy as np
    x = ctx.path("x.npy")
    np.save(x, np.array([[-1, 2, 3], [4, -5, 6]], "float32"))
    for name in ("m", "rc", "pm", "batch", "loss"):
        net = ctx.write(name + ".net", "model %s\nconst N = 2\ninput x: f32[N, 3]\ny = relu(x)\noutput y\n" % name)
        out = ctx.path(name + "_y.npy")
        p = ctx.ncc_cmd(["run", net, "--input", "x=" + x, "--output", "y=" + out])
        show(p)
        if p.returncode != 0 or not np.array_equal(np.load(out), np.maximum(np.load(x), 0)):
            raise Failure("a model named %s should compile and run" % name)


@case("max_memory")
def _max_memory(ctx):
    """--max-memory: a generous budget compiles as before; a budget below the
    model's arena processes the batch in slices and the report says so (the
    figures are one slice's, the total line stays the last); one below what
    ncc can reach, a softmax over the batch that cannot be sliced, and a
    budget that does not parse are refused: status 1, the smallest arena in
    the message, no output."""
    net = ctx.write("mlp.net", "model m\nconst N = 8\ninput x: f32[N, 64]\n"
                               "y = linear(relu(linear(x, 256, name=\"fc1\")), 10, name=\"fc2\")\noutput y\n")
    mix = ctx.write("mix.net", "model mix\nconst N = 8\ninput x: f32[N, 64]\n"
                               "y = softmax(linear(x, 256, name=\"fc1\"), axis=0)\noutput y\n")
    out = ctx.path("m.cu")
    def report(*flags):
        p = ctx.ncc_cmd([net, "--emit=report"] + list(flags))
        show(p)
        if p.returncode != 0:
            raise Failure("--emit=report %s failed" % " ".join(flags))
        lines = p.stdout.strip().splitlines()
        if not lines[-1].startswith("total: "):
            raise Failure("the total: line is not the last")
        return p.stdout, dict(kv.split("=") for kv in lines[-1].split()[1:])
    text, full = report()
    text, big = report("--max-memory=1G")
    if big != full or "memory budget 1.00 GiB" not in text or "slices" in text:
        raise Failure("a generous budget should leave the plan as it is and say the budget")
    # weights 75 KiB, 1.3 KiB of activations per row: 80 KiB needs slices of a few rows
    text, small = report("--max-memory=80K")
    if "runs in slices of" not in text or "any batch 1..8" not in text or int(small["peak_memory"]) >= int(full["peak_memory"]):
        raise Failure("--max-memory=80K: expected slices of the batch and a smaller peak (%s vs %s)"
                      % (small["peak_memory"], full["peak_memory"]))
    p = ctx.ncc_cmd([net, "--max-memory=80K", "-o", out])
    show(p)
    if p.returncode != 0 or not os.path.exists(out):
        raise Failure("--max-memory=80K -o should compile")
    src = open(out).read()
    if "_SLICE" not in src or "--max-memory=80K" not in src:
        raise Failure("the generated file should slice the batch and name its command")
    os.unlink(out)
    os.unlink(out[:-3] + ".h")
    expect_refused(ctx, [
        ([net, "--max-memory=10K", "-o", out], ["--max-memory=10240", "smallest arena", "bytes"]),
        ([mix, "--max-memory=40K", "-o", out], ["cannot be processed in slices", "softmax"]),
        ([net, "--max-memory=12Q", "-o", out], ["--max-memory=12Q", "K, M or G"]),
        ([net, "--max-memory=0", "-o", out], ["positive"]),
        ([net, "--max-memory=-5M", "-o", out], ["positive"]),
    ], out)


@case("quantize")
def _quantize(ctx):
    """`ncc quantize`: a weight file it writes loads in `ncc run` (dequantized);
    bad input is status 1 with a message naming the file, and no output."""
    import numpy as np
    net = ctx.write("tiny.net", "model tiny\ninput x: f32[2, 3]\ny = linear(x, 4, name=\"fc\")\noutput y\n")
    x = ctx.path("x.npy")
    np.save(x, np.ones((2, 3), "float32"))
    w = ctx.path("w.safetensors")
    write_safetensors(w, {"fc.weight": np.arange(12, dtype="float32").reshape(4, 3) - 6, "fc.bias": np.zeros(4, "float32")})
    wq = ctx.path("wq.safetensors")
    p = ctx.ncc_cmd(["quantize", w, "-o", wq])
    show(p)
    if p.returncode != 0 or "1 tensor as int8" not in p.stdout:
        raise Failure("ncc quantize should quantize fc.weight and say so")
    y = ctx.path("y.npy")
    p = ctx.ncc_cmd(["run", net, "--device", "emu", "--weights", wq, "--input", x, "--output", y])
    show(p)
    # x = ones: each output is the sum of its row of q * scale, scale = max|row| / 127
    wf = np.arange(12, dtype="float32").reshape(4, 3) - 6
    sc = (np.abs(wf).max(axis=1) / np.float32(127)).astype("float32")
    want = (np.rint(wf / sc[:, None]) * sc[:, None]).astype("float32").sum(axis=1)
    if p.returncode != 0 or not np.allclose(np.load(y)[0], want, rtol=0, atol=1e-5) or np.allclose(want, wf.sum(1)):
        raise Failure("the quantized weights should load, dequantized: %s, want %s" % (np.load(y)[0], want))
    nan = ctx.path("nan.safetensors")
    write_safetensors(nan, {"fc.weight": np.array([[1, 2, float("nan")], [0, 0, 0]], "float32")})
    noscale = ctx.path("noscale.safetensors")
    write_safetensors(noscale, {"fc.weight": np.zeros((4, 3), "int8"), "fc.bias": np.zeros(4, "float32")})
    garbage = ctx.write("garbage.safetensors", "not a safetensors file at all")
    out = ctx.path("out.safetensors")
    bad = [
        (["quantize", nan, "-o", out], [nan, "fc.weight", "element 2", "not finite"]),
        (["quantize", garbage, "-o", out], [garbage]),
        (["quantize", w, "-o", w], ["-o", "input file"]),
        (["quantize", w], ["-o"]),
        (["run", net, "--device", "emu", "--weights", noscale, "--input", x, "--output", out],
         [noscale, "fc.weight", "int8 without", "fc.weight.__scale__"]),
    ]
    expect_refused(ctx, bad, out)


@case("freeze")
def _freeze(ctx):
    """--freeze: a model that carries its weights (float32, or int8 from `ncc
    quantize`) gives the bits of the same model loading the file; a frozen
    model with a train block has no training step; bad input is status 1, a
    message naming the file, and no output."""
    import numpy as np
    rng = np.random.RandomState(3)
    net = os.path.join(EXAMPLES, "lenet.net")
    w = ctx.path("w.safetensors")
    write_safetensors(w, {"conv1.weight": rng.randn(10, 1, 5, 5) * 0.2, "conv1.bias": rng.randn(10),
                          "conv2.weight": rng.randn(20, 10, 5, 5) * 0.1, "conv2.bias": rng.randn(20),
                          "fc1.weight": rng.randn(50, 320) * 0.05, "fc1.bias": rng.randn(50),
                          "fc2.weight": rng.randn(10, 50) * 0.1, "fc2.bias": rng.randn(10)})
    x = ctx.path("x.npy")
    np.save(x, rng.rand(64, 1, 28, 28).astype("float32"))
    wq = ctx.path("wq.safetensors")
    p = ctx.ncc_cmd(["quantize", w, "-o", wq])
    show(p)
    outs = {}
    for tag, wf, freeze in (("file", w, []), ("frozen", w, ["--freeze"]), ("qfile", wq, []), ("qfrozen", wq, ["--freeze"])):
        outs[tag] = ctx.path(tag + ".npy")
        p = ctx.ncc_cmd(["run", net, "--device", "emu", "--weights", wf, "--input", x, "--output", outs[tag]] + freeze)
        show(p)
        if p.returncode != 0:
            raise Failure("ncc run %s failed" % tag)
    a, b, c, d = (np.load(outs[t]) for t in ("file", "frozen", "qfile", "qfrozen"))
    if not (np.array_equal(a, b) and np.array_equal(c, d)) or np.array_equal(a, c):
        raise Failure("a frozen model should give the bits of the model loading the same file")
    # a model with a train block, frozen: inference only
    cu = ctx.path("digits.cu")
    dw = ctx.path("digits.safetensors")
    write_safetensors(dw, {"conv1.weight": rng.randn(16, 1, 3, 3), "conv1.bias": rng.randn(16),
                           "conv2.weight": rng.randn(32, 16, 3, 3), "conv2.bias": rng.randn(32),
                           "fc1.weight": rng.randn(64, 128), "fc1.bias": rng.randn(64),
                           "fc2.weight": rng.randn(10, 64), "fc2.bias": rng.randn(10)})
    p = ctx.ncc_cmd([os.path.join(EXAMPLES, "digits.net"), "--freeze", "--weights", dw, "-o", cu])
    show(p)
    with open(ctx.path("digits.h")) as f:
        h = f.read()
    if p.returncode != 0 or "digits_train_step" in h or "digits_frozen_" not in open(cu).read():
        raise Failure("a frozen digits.cu should carry its weights and no training step")
    os.unlink(cu)
    bad = ctx.path("bad.safetensors")
    write_safetensors(bad, {"conv1.weight": np.zeros((3, 3), "float32")})
    expect_refused(ctx, [([net, "--freeze", "-o", cu], ["--freeze needs --weights"]),
                         ([net, "--weights", w, "-o", cu], ["--freeze"]),
                         ([net, "--freeze", "--weights", bad, "-o", cu], [bad, "conv1.weight", "missing"]),
                         ([net, "--freeze", "--train", "--weights", w, "-o", cu], ["--train"])], cu)


# ---------------------------------------------------------------- run --print-object
@case("print_object")
def _print_object(ctx):
    """`ncc run --print-object` builds the model into the cache and prints
    exactly three lines (device, model, object); the object exists and a
    second call finds it in the cache; it runs nothing, so --input/--output
    and a cache that cannot keep the object are refused (status 1, nothing
    on stdout)."""
    net = ctx.write("tiny.net", TINY)
    env = {"NCC_CACHE_DIR": ctx.path("cache")}
    outs = []
    for _ in range(2):
        p = ctx.ncc_cmd(["run", net, "--device", "emu", "--print-object", "-v"], env=env)
        show(p)
        lines = p.stdout.splitlines()
        if p.returncode != 0 or len(lines) != 3 or [l.split(":")[0] for l in lines] != ["device", "model", "object"]:
            raise Failure("expected status 0 and the lines device:, model:, object:")
        outs.append(lines)
    obj = outs[0][2][len("object: "):]
    if (not outs[0][0].startswith("device: emu") or outs[0][1] != "model: tiny" or not os.path.isabs(obj)
            or not os.path.isfile(obj) or os.path.dirname(obj) != os.path.realpath(ctx.path("cache"))):
        raise Failure("the lines do not name an emu build of `tiny` in the cache: %s" % outs[0])
    if outs[1] != outs[0] or "found in the cache" not in p.stderr:
        raise Failure("the second --print-object did not find the same object in the cache")
    blocked = ctx.path("file-not-dir")
    open(blocked, "w").close()
    for args, e, words in (
            (["--input", ctx.path("x.npy")], env, ["--print-object", "--input"]),
            (["--output", ctx.path("y.npy")], env, ["--print-object", "--output"]),
            ([], {"NCC_CACHE_DIR": os.path.join(blocked, "sub")}, ["NCC_CACHE_DIR"])):
        p = ctx.ncc_cmd(["run", net, "--device", "emu", "--print-object"] + args, env=e)
        show(p)
        if p.returncode != 1 or p.stdout or any(w not in p.stderr for w in words):
            raise Failure("`--print-object %s`: expected status 1, %r and nothing on stdout" % (" ".join(args), words))


# ---------------------------------------------------------------- where the runtime is
@case("runtime_discovery")
def _runtime(ctx):
    """The build folder's ncc through a symlink elsewhere (the real path
    decides), and NCC_RUNTIME_DIR: the source's runtime/ works, a folder
    without the headers is a user error naming it."""
    link = ctx.path("bin/ncc")
    os.makedirs(os.path.dirname(link))
    os.symlink(ctx.ncc, link)
    env = {"NCC_CACHE_DIR": ctx.path("cache")}
    p = tiny_run(ctx, env, ncc=link)
    if os.path.join(os.path.dirname(ctx.ncc), "include", "ncc") not in p.stderr:
        raise Failure("the build folder's include/ncc was not used")
    p = tiny_run(ctx, dict(env, NCC_RUNTIME_DIR=os.path.join(ROOT, "runtime")))
    if "headers %s" % os.path.realpath(os.path.join(ROOT, "runtime")) not in p.stderr:
        raise Failure("NCC_RUNTIME_DIR was not used")
    p = ctx.ncc_cmd(["run", ctx.path("tiny.net"), "--device", "emu", "--input", ctx.path("x.npy")],
                    env=dict(env, NCC_RUNTIME_DIR=ctx.work))
    show(p)
    if p.returncode != 1 or "NCC_RUNTIME_DIR=%s" % ctx.work not in p.stderr:
        raise Failure("a wrong NCC_RUNTIME_DIR should be a user error naming it")


@case("runtime_installed")
def _installed(ctx):
    """`cmake --install` into a prefix, then PREFIX/bin/ncc runs a model with
    no help from the build or source folder: headers from PREFIX/include/ncc,
    libnccrt from PREFIX/lib."""
    if not ctx.build:
        raise Failure("--build BUILD_DIR is needed")
    prefix = ctx.path("prefix")
    r = subprocess.run(["cmake", "--install", ctx.build, "--prefix", prefix], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode != 0:
        raise Failure("cmake --install failed: %s" % r.stdout)
    ncc = os.path.join(prefix, "bin", "ncc")
    p = tiny_run(ctx, {"NCC_CACHE_DIR": ctx.path("cache")}, unset=("LD_LIBRARY_PATH", "NCC_RUNTIME_DIR"), ncc=ncc)
    m = re.search(r"runtime: headers (\S+), library (\S+)", p.stderr)
    if not m or not m.group(1).startswith(os.path.realpath(prefix)) or not m.group(2).startswith(
            os.path.realpath(prefix)):
        raise Failure("the installed ncc did not use the prefix's runtime")
    shutil.rmtree(prefix)


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("case", nargs="?")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--ncc")
    ap.add_argument("--work")
    ap.add_argument("--build")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return 0
    if a.case not in CASES or not a.ncc or not a.work:
        print("usage: test_driver.py CASE --ncc PATH --work DIR (cases: %s)" % ", ".join(CASES), file=sys.stderr)
        return 2
    ctx = Ctx(os.path.abspath(a.ncc), os.path.abspath(a.work), a.build and os.path.abspath(a.build))
    try:
        CASES[a.case](ctx)
    except Failure as e:
        print("FAIL %s: %s" % (a.case, e))
        return 1
    shutil.rmtree(ctx.work, ignore_errors=True)    # working files go as each test passes
    print("PASS %s" % a.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
