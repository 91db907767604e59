#!/usr/bin/python3
"""test_python.py — the Python module `ncc` (python/ncc) against PyTorch.

    test_python.py --list
    test_python.py CASE --ncc BUILD/ncc --work DIR [--build BUILD]

One ctest test per case (tests/python.cmake, label `python`).  The module is
imported from the source tree (python/ on sys.path) and finds ncc through
NCC, except in `installed`, which imports it from a `cmake --install` prefix
with neither.  Numeric cases compare with PyTorch at the oracle's tolerance,
max|ncc - ref| <= 1e-4 * max(1, max|ref|) (tests/oracle/oracle.py), and at
its TF32 tolerance (1e-2) for --precision=tf32.  A case whose tools are
missing (numpy, torch) exits 77: skipped.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "examples")
SKIP = 77
RTOL, RTOL_TF32 = 1e-4, 1e-2
CASES = {}


def case(name):
    def deco(f):
        CASES[name] = f
        return f
    return deco


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def need_torch():
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        raise Skip("%s (run with the Python that has numpy and torch: NCC_PYTHON)" % e)


def close_to(name, got, ref, rtol=RTOL):
    import numpy as np
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        raise Failure("%s: shape %s, PyTorch's is %s" % (name, got.shape, ref.shape))
    err = float(np.abs(got - ref).max())
    tol = rtol * max(1.0, float(np.abs(ref).max()))
    print("%s %s: max|err| = %.3g, tolerance %.3g" % (name, tuple(got.shape), err, tol))
    if not err <= tol:
        raise Failure("%s differs from PyTorch by %.3g (tolerance %.3g)" % (name, err, tol))


def raises(what, words, f, *args, **kwargs):
    """f(...) must raise ncc.Error whose message holds every word."""
    import ncc
    try:
        f(*args, **kwargs)
    except ncc.Error as e:
        msg = str(e)
        print("%s -> ncc.Error: %s" % (what, msg.replace("\n", "\n    ")))
        missing = [w for w in words if w not in msg]
        if missing:
            raise Failure("%s: the message lacks %r" % (what, missing))
        return msg
    raise Failure("%s: no ncc.Error raised" % what)


def lenet(seed):
    import torch
    sys.path.insert(0, EXAMPLES)
    from demo import LeNet           # examples/demo.py: the names of examples/lenet.net
    torch.manual_seed(seed)
    return LeNet().eval()


def mlp(seed):
    import torch
    import torch.nn as nn

    class MLP(nn.Module):            # examples/mlp.net's PyTorch twin, by its layer names
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 10)

        def forward(self, x):
            x = torch.flatten(x, 1)
            return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

    torch.manual_seed(seed)
    return MLP().eval()


def torch_ref(module, x):
    import torch
    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


def images(n, seed=1):
    import numpy as np
    return np.random.RandomState(seed).rand(n, 1, 28, 28).astype(np.float32)


def net(name):
    return os.path.join(EXAMPLES, name)


# ---------------------------------------------------------------- numerics against PyTorch
@case("lenet_safetensors")
def _lenet_file(ctx):
    """LeNet with PyTorch's weights from a safetensors file (examples/demo.py's
    writer), -O3 at N=8, against PyTorch."""
    need_torch()
    import ncc
    sys.path.insert(0, EXAMPLES)
    from demo import save_safetensors
    t = lenet(0)
    w = ctx.path("lenet.safetensors")
    save_safetensors(w, t.state_dict())
    m = ncc.compile(net("lenet.net"), "-O3", "--set", "N=8", weights=w)
    print(m)
    if m.name != "lenet" or m.max_batch != 8 or [i.name for i in m.inputs] != ["x"] \
            or [(o.name, o.shape) for o in m.outputs] != [("logits", (8, 10))]:
        raise Failure("unexpected model description: %r" % m)
    if sorted(p.name for p in m.params) != sorted(t.state_dict()):
        raise Failure("params %s are not the state_dict's names" % [p.name for p in m.params])
    x = images(8)
    close_to("logits", m(x), torch_ref(t, x))
    close_to("run()['logits']", m.run(x=x)["logits"], torch_ref(t, x))
    m.close()


@case("lenet_dict")
def _lenet_dict(ctx):
    """LeNet's weights as a dict: NumPy arrays of the state_dict, then torch
    tensors straight from state_dict(); --cublas; loading other weights
    changes the result to theirs."""
    need_torch()
    import ncc
    a, b = lenet(0), lenet(1)
    x = images(16, seed=2)
    with ncc.Model(net("lenet.net"), ["--cublas", "--set", "N=16"],
                   weights={k: v.numpy() for k, v in a.state_dict().items()}) as m:
        close_to("logits (numpy dict)", m(x), torch_ref(a, x))
        m.load(b.state_dict())
        close_to("logits (torch state_dict)", m(x), torch_ref(b, x))


@case("mlp")
def _mlp(ctx):
    """examples/mlp.net (a train block; inference only here) with its
    PyTorch twin's weights from a dict, -O2 at N=32."""
    need_torch()
    import ncc
    t = mlp(3)
    m = ncc.compile(net("mlp.net"), "--set", "N=32", weights={k: v.numpy() for k, v in t.state_dict().items()})
    if [i.name for i in m.inputs] != ["x"]:
        raise Failure("mlp's inference inputs should be x alone (the labels feed only the loss): %s" % m.inputs)
    x = images(32, seed=4)
    close_to("logits", m(x), torch_ref(t, x))


@case("onnx")
def _onnx(ctx):
    """An ONNX model: its own weights (the initializers) load without
    weights=, and the outputs equal PyTorch's."""
    need_torch()
    try:
        import onnx  # noqa: F401  (torch.onnx.export needs it)
    except ImportError as e:
        raise Skip("%s" % e)
    import torch
    import ncc
    t = lenet(6)
    x = images(2, seed=6)
    path = os.path.join(ctx.work, "lenet.onnx")
    torch.onnx.export(t.eval(), torch.from_numpy(x), path, opset_version=13, input_names=["x"], output_names=["y"])
    try:
        m = ncc.compile(path)
    except ncc.Error as e:
        if "without ONNX support" in str(e):
            raise Skip("ncc was built without ONNX support")
        raise
    close_to("y (the file's weights)", m(x), torch_ref(t, x))


@case("tf32")
def _tf32(ctx):
    """--precision=tf32: LeNet within the oracle's TF32 tolerance of fp32 PyTorch."""
    need_torch()
    import ncc
    t = lenet(5)
    x = images(4, seed=5)
    m = ncc.compile(net("lenet.net"), "--precision=tf32", "--set", "N=4", weights=t.state_dict())
    close_to("logits (tf32)", m(x), torch_ref(t, x), rtol=RTOL_TF32)


@case("max_memory")
def _max_memory(ctx):
    """--max-memory below the unconstrained arena: LeNet at N=16 fits the budget
    (M_info()->arena_bytes) by running the batch in slices, and by smaller
    im2col chunks on the cuBLAS path, and still equals PyTorch at full and
    partial batches; an impossible budget is an ncc.Error naming the smallest
    arena ncc reaches."""
    need_torch()
    import ncc
    t = lenet(8)
    x = images(16, seed=8)
    ref = torch_ref(t, x)
    for flags in ([], ["--cublas"]):
        full = ncc.compile(net("lenet.net"), "--set", "N=16", *flags).arena_bytes
        budgets = [int(full * 0.6)] + ([full - 1] if flags else [])
        for budget in budgets:
            m = ncc.compile(net("lenet.net"), "--set", "N=16", "--max-memory=%d" % budget, *flags,
                            weights=t.state_dict())
            print("%s budget %d (unconstrained %d): arena %d" % (" ".join(flags) or "tiled", budget, full, m.arena_bytes))
            if not m.arena_bytes <= budget < full:
                raise Failure("arena %d bytes for a budget of %d (unconstrained: %d)" % (m.arena_bytes, budget, full))
            if m.max_batch != 16:
                raise Failure("the API should still take 16 rows, not %d" % m.max_batch)
            close_to("logits, budget %d" % budget, m(x), ref)
            close_to("logits, 11 rows", m(x[:11]), ref[:11])
    raises("impossible budget", ["--max-memory=4096", "smallest arena"],
           ncc.compile, net("lenet.net"), "--set", "N=16", "--max-memory=4K")


@case("batch")
def _batch(ctx):
    """Which batches go, decided in one place (Model._batch): with
    M_infer_io_batch in the object, 1..N rows, each checked against PyTorch;
    without it, exactly N, and any other batch is an ncc.Error."""
    need_torch()
    import ncc
    t = lenet(6)
    m = ncc.compile(net("lenet.net"), "--set", "N=8", weights=t.state_dict())
    x = images(8, seed=6)
    close_to("batch 8", m(x), torch_ref(t, x))
    print("batch_variable:", m.batch_variable)
    if not m.batch_variable or m.max_batch != 8:
        raise Failure("lenet compiled for N=8 should take batches 1..8 (batch_variable %s, max_batch %s)"
                      % (m.batch_variable, m.max_batch))
    for b in (1, 3, 7):
        close_to("batch %d" % b, m(x[:b]), torch_ref(t, x[:b]))
    raises("batch 9", ["batch 9", "8"], m, images(9))
    raises("batch 0", ["batch 0", "8"], m, x[:0])
    # a model whose output mixes the rows of the batch runs its N only
    import numpy as np
    fixed = ncc.compile(ctx.write("mix.net", MIX))
    if fixed.batch_variable or fixed.max_batch != 4:
        raise Failure("softmax over axis 0: batch_variable %s, max_batch %s" % (fixed.batch_variable, fixed.max_batch))
    raises("batch 3 (fixed N)", ["batch 3", "exactly 4", "--set N=3"], fixed, np.ones((3, 3), np.float32))


MIX = """model mix
const N = 4
input x: f32[N, 3]
h = softmax(x, axis=0)
output h
"""


# ---------------------------------------------------------------- bad input, errors
TWO = """model two
const N = 4
input x: f32[N, 3]
input y: i32[N]
a = relu(x) * 2.0
output a
loss = cross_entropy(x, y)
output loss
"""


@case("bad_input")
def _bad_input(ctx):
    """Wrong dtype, rank, shape, batch, names and counts: ncc.Error with a
    clear message, never a crash; the model works afterwards."""
    need_torch()
    import numpy as np
    import ncc
    m = ncc.compile(net("lenet.net"), "--set", "N=2")
    good = images(2)
    raises("float64", ["input x", "float64", "float32", ".astype"], m, good.astype(np.float64))
    raises("int32", ["input x", "int32", "float32"], m, good.astype(np.int32))
    raises("rank 3", ["input x", "shape (2, 28, 28)", "f32[2, 1, 28, 28]"], m, good[:, 0])
    raises("shape", ["input x", "shape (2, 1, 27, 28)"], m, good[:, :, :27])
    raises("batch 3", ["batch 3"], m, images(3))
    raises("batch 0", ["batch 0"], m, good[:0])
    raises("a list", ["input x", "NumPy array", "list"], m, good.tolist())
    raises("no input", ["no inputs"], m)
    raises("two inputs", ["2 inputs given", "takes 1"], m, good, good)
    raises("unknown name", ["no input 'y'", "x"], m, y=good)
    raises("twice", ["given twice"], m, good, x=good)
    # a non-contiguous array of the right dtype and shape is fine
    wide = np.zeros((2, 1, 28, 56), np.float32)
    wide[..., ::2] = good
    y1, y2 = m(good), m(wide[..., ::2])
    if not np.array_equal(y1, y2):
        raise Failure("a strided view gave another result than its contiguous copy")
    # two inputs (f32, i32) by name, two outputs (a dict), one of them not batched
    two = ncc.compile(ctx.write("two.net", TWO))
    print(two)
    x = np.array([[-1, 2, 3]] * 4, np.float32)
    y = np.array([0, 1, 2, 1], np.int32)
    r = two(y=y, x=x)
    if sorted(r) != ["a", "loss"] or not np.array_equal(r["a"], np.array([[0, 4, 6]] * 4, np.float32)):
        raise Failure("two: wrong result %s" % r)
    import torch
    import torch.nn.functional as F
    close_to("loss", r["loss"], F.cross_entropy(torch.from_numpy(x), torch.from_numpy(y).long()).numpy())
    raises("labels as int64", ["input y", "int64", "int32"], two, x, y.astype(np.int64))
    raises("labels missing", ["missing input y"], two, x)
    raises("batches differ", ["different batches"], two, x, y[:3])
    m.close()
    raises("closed", ["closed"], m, good)


BAD_NET = "model bad\ninput x: f32[2, 3]\ny = relu(x, 3, 4\noutput y\n"


@case("errors")
def _errors(ctx):
    """ncc's own messages: a compile error (file:line from the ncc process),
    an unknown flag, weights that do not fit (M_error's text), a missing
    weight file, a bad device, NCC pointing nowhere."""
    need_torch()
    import numpy as np
    import ncc
    bad = ctx.write("bad.net", BAD_NET)
    raises("syntax error", ["compiling", "bad.net:3:"], ncc.compile, bad)
    raises("unknown flag", ["--frobnicate"], ncc.compile, net("lenet.net"), "--frobnicate")
    raises("not a string", ["strings"], ncc.compile, net("lenet.net"), 8)
    raises("unknown const", ["'Q'"], ncc.compile, net("lenet.net"), "--set", "Q=1")
    raises("no such model", ["nothere.net"], ncc.compile, ctx.path("nothere.net"))
    raises("device", ["device='tpu'"], ncc.compile, net("lenet.net"), device="tpu")
    m = ncc.compile(net("lenet.net"), "--set", "N=2")
    msg = raises("wrong weights", ["conv1.weight", "[10, 1, 5, 5]", "missing"], m.load,
                 {"conv1.weight": np.zeros((3, 3), np.float32)})
    if "ncc-weights-" in msg:
        raise Failure("the message names the temporary file instead of the dict")
    raises("bad dtype", ["conv1.weight", "complex"], m.load, {"conv1.weight": np.zeros((10, 1, 5, 5), np.complex64)})
    raises("no file", ["nothere.safetensors", "no such file"], m.load, ctx.path("nothere.safetensors"))
    trunc = ctx.path("trunc.safetensors")
    with open(trunc, "wb") as f:
        f.write(b"\x10\x00")
    raises("truncated file", ["trunc.safetensors"], m.load, trunc)
    old = os.environ.get("NCC")
    os.environ["NCC"] = ctx.path("no-ncc")
    try:
        raises("NCC elsewhere", ["NCC=", "no-ncc"], ncc.compile, net("lenet.net"))
    finally:
        os.environ["NCC"] = old


@case("report")
def _report(ctx):
    """Model.report() is `ncc --emit=report` with the model's options, and
    report_total() its total: line as a dict of ints."""
    import ncc
    opts = ["-O3", "--set", "N=8"]
    m = ncc.compile(net("lenet.net"), *opts)
    text = m.report()
    cli = subprocess.run([os.environ["NCC"], net("lenet.net"), "--emit=report"] + opts, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    if text != cli:
        raise Failure("Model.report() differs from ncc --emit=report")
    total = m.report_total()
    print(total)
    want = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", cli.strip().splitlines()[-1]))
    if total != want or set(total) != {"params", "flops", "launches", "bytes", "peak_memory", "naive_memory"}:
        raise Failure("report_total() %s is not the total: line %s" % (total, want))
    if total["params"] != 21840:
        raise Failure("LeNet has 21840 parameters, the report says %d" % total["params"])
    if ncc.parse_total(ncc.report(net("lenet.net"), "-O0", "--set", "N=8"))["launches"] <= total["launches"]:
        raise Failure("-O0 should launch more kernels than -O3")


# ---------------------------------------------------------------- installed
@case("installed")
def _installed(ctx):
    """`cmake --install` into a prefix: the module imports from
    PREFIX/lib/python3/dist-packages and finds PREFIX/bin/ncc by itself
    (no NCC, the build folder not on PATH, run from elsewhere)."""
    need_torch()
    if not ctx.build:
        raise Failure("--build BUILD_DIR is needed")
    prefix = ctx.path("prefix")
    r = subprocess.run(["cmake", "--install", ctx.build, "--prefix", prefix], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode != 0:
        raise Failure("cmake --install failed: %s" % r.stdout)
    site = os.path.join(prefix, "lib", "python3", "dist-packages")
    src = ctx.write("tiny.net", "model tiny\ninput x: f32[2, 3]\ny = relu(x) * 2.0\noutput y\n")
    code = ("import ncc, numpy as np\n"
            "print(ncc.__file__); print(ncc.find_ncc())\n"
            "m = ncc.compile(%r)\n"
            "print(m(np.array([[-1, 2, 3], [4, -5, 6]], np.float32)).tolist())\n" % src)
    env = {k: v for k, v in os.environ.items() if k not in ("NCC", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = site
    env["PATH"] = "/usr/bin:/bin"
    p = subprocess.run([sys.executable, "-c", code], cwd=ctx.work, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    print(p.stdout)
    lines = p.stdout.splitlines()
    if p.returncode != 0 or len(lines) != 3:
        raise Failure("the installed module failed")
    if not lines[0].startswith(os.path.realpath(site)) and not lines[0].startswith(site):
        raise Failure("imported %s, not the installed module" % lines[0])
    if os.path.realpath(lines[1]) != os.path.realpath(os.path.join(prefix, "bin", "ncc")):
        raise Failure("the installed module found %s, not PREFIX/bin/ncc" % lines[1])
    if lines[2] != "[[0.0, 4.0, 6.0], [8.0, 0.0, 12.0]]":
        raise Failure("wrong result %s" % lines[2])
    shutil.rmtree(prefix)


class Ctx:
    def __init__(self, work, build):
        self.work, self.build = work, build
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)

    def path(self, f):
        return os.path.join(self.work, f)

    def write(self, name, text):
        p = self.path(name)
        with open(p, "w") as f:
            f.write(text)
        return p


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
        print("usage: test_python.py CASE --ncc PATH --work DIR (cases: %s)" % ", ".join(CASES), file=sys.stderr)
        return 2
    os.environ["NCC"] = os.path.abspath(a.ncc)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    ctx = Ctx(os.path.abspath(a.work), a.build and os.path.abspath(a.build))
    try:
        CASES[a.case](ctx)
    except Skip as e:
        print("skipped: %s" % e)
        return SKIP
    except Failure as e:
        print("FAIL %s: %s" % (a.case, e))
        return 1
    shutil.rmtree(ctx.work, ignore_errors=True)    # working files go as each test passes
    print("PASS %s" % a.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
