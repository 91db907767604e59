"""ncc — compile a .net model and call it on NumPy arrays.

    import ncc, numpy as np
    lenet = ncc.compile("examples/lenet.net", "--set", "N=8", weights="lenet.safetensors")
    logits = lenet(np.zeros((8, 1, 28, 28), np.float32))

How it works: `ncc run MODEL.net --print-object OPTIONS` builds the model
into ncc's compile cache (the shared object `ncc run` itself loads) and says
where it is; this module loads that object with ctypes and calls the
generated API of docs/generated-code.md (M_info, M_create_on, M_load,
M_infer_io, M_error, M_destroy).  No C extension is compiled.

The `ncc` program is found by, in order: the environment variable NCC; a
`bin/ncc` in a folder above this package (an installed prefix:
PREFIX/lib/python3/dist-packages/ncc -> PREFIX/bin/ncc); `build/ncc` in a
folder above it (the source tree's python/ncc -> build/ncc); the PATH.

Every failure raises ncc.Error with ncc's message: compile errors carry the
ncc process's stderr, load and inference errors M_error()'s text, and bad
arrays (dtype, shape, batch) say what the model expects.  docs/python.md is
the page.
"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

__all__ = ["Error", "Model", "TensorInfo", "compile", "find_ncc", "report", "parse_total"]


class Error(Exception):
    """A failure of ncc: compiling, loading weights, bad input, inference."""


# ---- finding the ncc program --------------------------------------------------

def find_ncc():
    """The path of the `ncc` program (see the module's docstring); raises
    Error when there is none."""
    env = os.environ.get("NCC")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise Error("NCC=%s is not an executable file" % env)
        return env
    d = os.path.dirname(os.path.abspath(__file__))
    for _ in range(6):
        d = os.path.dirname(d)
        for sub in ("bin", "build"):
            p = os.path.join(d, sub, "ncc")
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    p = shutil.which("ncc")
    if p:
        return p
    raise Error("cannot find the ncc program: set NCC=/path/to/ncc, or put it on PATH")


def _ncc(args, what):
    """Runs ncc with args; its stdout, or Error carrying its stderr."""
    cmd = [find_ncc()] + [str(a) for a in args]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       errors="replace")
    if p.returncode != 0:
        msg = p.stderr.strip() or "(no message)"
        raise Error("%s failed (ncc exited with %d):\n%s" % (what, p.returncode, msg))
    return p.stdout


def _options(options):
    """The options as command-line words: ("-O3", "--set", "N=8") or one list."""
    if len(options) == 1 and isinstance(options[0], (list, tuple)):
        options = tuple(options[0])
    for o in options:
        if not isinstance(o, str):
            raise Error("options are ncc's command-line words (strings), got %r" % (o,))
    return list(options)


# ---- the report ---------------------------------------------------------------

def report(net, *options):
    """`ncc NET --emit=report OPTIONS`: the text (per-kernel rows, then the
    `total:` line).  options: compile flags (-O, --set, --cublas, --precision,
    --passes, --train ...)."""
    return _ncc([net, "--emit=report"] + _options(options), "ncc %s --emit=report" % net)


def parse_total(text):
    """The `total: params=P flops=F ...` line of a report as a dict of ints."""
    for line in reversed(text.splitlines()):
        if line.startswith("total:"):
            return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", line)}
    raise Error("the report has no `total:` line")


# ---- the generated API through ctypes -----------------------------------------

class _TensorInfoC(ctypes.Structure):     # ncc_tensor_info (runtime/ncc_rt.h)
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * 8)]


class _ModelInfoC(ctypes.Structure):      # the start of ncc_model_info: fields are only ever appended
    _fields_ = [("model", ctypes.c_char_p),
                ("ninputs", ctypes.c_int), ("inputs", ctypes.POINTER(_TensorInfoC)),
                ("noutputs", ctypes.c_int), ("outputs", ctypes.POINTER(_TensorInfoC)),
                ("nparams", ctypes.c_int), ("params", ctypes.POINTER(_TensorInfoC)),
                ("arena_bytes", ctypes.c_size_t),
                ("ntrain_inputs", ctypes.c_int), ("train_inputs", ctypes.POINTER(_TensorInfoC)),
                ("max_batch", ctypes.c_int), ("batch_variable", ctypes.c_int), ("precision", ctypes.c_char_p)]


# NCC_F32, F16, BF16, I32, I8 (runtime/ncc_rt.h); bf16 has no NumPy dtype
_DTYPES = {0: np.dtype("float32"), 1: np.dtype("float16"), 2: None, 3: np.dtype("int32"), 4: np.dtype("int8")}
_DTNAMES = {0: "f32", 1: "f16", 2: "bf16", 3: "i32", 4: "i8"}
_DEV_CUDA, _DEV_EMU = 1, 2                   # NCC_DEV_CUDA, NCC_DEV_EMU


class TensorInfo:
    """One input, output or parameter: name, dtype (a NumPy dtype, None for
    bf16), dt (ncc's name: f32, i32 ...) and shape (a tuple, the compiled N
    first for inputs and outputs)."""

    def __init__(self, c):
        self.name = c.name.decode()
        self.dtype = _DTYPES.get(c.dtype)
        self.dt = _DTNAMES.get(c.dtype, "?")
        self.shape = tuple(int(c.shape[i]) for i in range(c.rank))

    def __repr__(self):
        return "%s: %s[%s]" % (self.name, self.dt, ", ".join(str(d) for d in self.shape))


def _infos(ptr, n):
    return [TensorInfo(ptr[i]) for i in range(n)]


# safetensors dtypes of NumPy arrays, for weights given as a dict
_ST_DTYPES = {"float32": "F32", "float16": "F16", "float64": "F64", "int32": "I32", "int64": "I64",
              "int8": "I8", "uint8": "U8", "int16": "I16"}


def _write_safetensors(path, tensors):
    """Writes {name: array} as a safetensors file (little-endian, C order)."""
    header, blobs, off = {}, [], 0
    for name, v in tensors.items():
        if not isinstance(name, str):
            raise Error("weights: the names must be strings (state_dict names), got %r" % (name,))
        if hasattr(v, "detach"):                 # a torch tensor, without importing torch
            v = v.detach().cpu().numpy()
        a = np.asarray(v)
        st = _ST_DTYPES.get(a.dtype.name)
        if st is None:
            raise Error("weights: %s has dtype %s; float32, float16, float64, int32, int64 or int8 are taken"
                        % (name, a.dtype))
        b = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": st, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for b in blobs:
            f.write(b)


class Model:
    """A compiled model, created on its device (the CPU emulation, or a GPU
    when ncc builds for one).

        Model(net, *options, weights=None, device="auto")

    net: a .net file or an ONNX model.  options: ncc's command-line words for compiling
    (`"-O3"`, `"--cublas"`, `"--set", "N=8"`, `"--precision=tf32"` ...), as
    separate strings or one list.  weights: a safetensors file or a dict of
    arrays by state_dict name (see load); without weights the parameters are
    zero, but for an ONNX model, whose own weights (its initializers) load.  device: "auto", "emu" or "cuda" (`ncc run --device`).

    Attributes: name, inputs, outputs, params (lists of TensorInfo),
    max_batch (the compiled N: the first dimension of the inputs),
    batch_variable (True when batches 1..max_batch are accepted, else only
    max_batch: the report's "# batch:" line says why), precision ("fp32",
    "tf32"), device ("emu (2 threads)" ...), object (the shared object's
    path), arena_bytes.
    """

    def __init__(self, net, *options, weights=None, device="auto"):
        self._m = None
        self.net = os.fspath(net)
        self.options = _options(options)
        if device not in ("auto", "emu", "cuda"):
            raise Error("device=%r: expected 'auto', 'emu' or 'cuda'" % (device,))
        out = _ncc(["run", self.net, "--print-object", "--device", device] + self.options,
                   "compiling %s" % self.net)
        lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        if not {"device", "model", "object"} <= set(lines):
            raise Error("`ncc run --print-object` printed no device/model/object lines:\n%s" % out)
        self.device, self.name, self.object = lines["device"], lines["model"], lines["object"]
        try:
            self._so = ctypes.CDLL(self.object)
        except OSError as e:
            raise Error("cannot load the compiled model %s: %s" % (self.object, e))
        self._bind()
        self._batch_fn = getattr(self._so, self.name + "_infer_io_batch", None)
        if self._batch_fn is not None:
            self._batch_fn.restype = ctypes.c_int
            self._batch_fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        info = self._info().contents
        self.inputs = _infos(info.inputs, info.ninputs)
        self.outputs = _infos(info.outputs, info.noutputs)
        self.params = _infos(info.params, info.nparams)
        self.arena_bytes = int(info.arena_bytes)
        self.max_batch = int(info.max_batch)
        self.batch_variable = self._batch_fn is not None and bool(info.batch_variable)
        self.precision = info.precision.decode() if info.precision else "fp32"
        m = ctypes.c_void_p()
        kind = _DEV_CUDA if self.device.startswith("cuda") else _DEV_EMU
        rc = self._create_on(ctypes.byref(m), kind)
        if rc != 0:
            msg = self._message(m) if m.value else "(no message)"
            if m.value:
                self._destroy(m)
            raise Error("cannot create the model %s on %s: %s" % (self.name, self.device, msg))
        self._m = m
        if weights is None and "weights" in lines:   # an ONNX model's initializers
            weights = lines["weights"]
        if weights is not None:
            self.load(weights)

    def _bind(self):
        def fn(suffix, restype, argtypes):
            try:
                f = getattr(self._so, self.name + "_" + suffix)
            except AttributeError:
                raise Error("the compiled model lacks %s_%s (docs/generated-code.md)" % (self.name, suffix))
            f.restype, f.argtypes = restype, argtypes
            return f
        vp = ctypes.c_void_p
        self._info = fn("info", ctypes.POINTER(_ModelInfoC), [])
        self._create_on = fn("create_on", ctypes.c_int, [ctypes.POINTER(vp), ctypes.c_int])
        self._load = fn("load", ctypes.c_int, [vp, ctypes.c_char_p])
        self._infer_io = fn("infer_io", ctypes.c_int, [vp, vp, vp])
        self._error = fn("error", ctypes.c_char_p, [vp])
        self._destroy = fn("destroy", None, [vp])

    def _message(self, m=None):
        e = self._error(m if m is not None else self._m)
        return e.decode(errors="replace") if e else "(no message)"

    def _handle(self):
        if self._m is None:
            raise Error("the model %s is closed" % getattr(self, "name", "?"))
        return self._m

    # ---- weights
    def load(self, weights):
        """Parameters from a safetensors file (a path) or from a dict of
        arrays by state_dict name (NumPy arrays, or anything np.asarray
        takes; torch tensors too), e.g. a PyTorch module's state_dict().
        Names, shapes and dtypes are checked as M_load checks a file."""
        m = self._handle()
        if isinstance(weights, dict):
            with tempfile.TemporaryDirectory(prefix="ncc-weights-") as d:
                path = os.path.join(d, "weights.safetensors")
                _write_safetensors(path, weights)
                if self._load(m, path.encode()) != 0:
                    raise Error("weights: %s" % self._message().replace(path, "the dict of weights"))
            return
        path = os.fspath(weights)
        if not os.path.isfile(path):
            raise Error("weights: %s: no such file" % path)
        if self._load(m, path.encode()) != 0:
            msg = self._message()
            raise Error("weights: %s" % (msg if path in msg else "%s: %s" % (path, msg)))

    # ---- inference
    def _batch(self, arrays):
        """The batch the arrays hold, checked: every batch-carrying input
        (first dimension max_batch when compiled) must have the same first
        dimension; exactly max_batch, or 1..max_batch when the object has
        M_infer_io_batch.  The one place that decides which batches go."""
        n = self.max_batch
        batches = {a.shape[0] for a, t in zip(arrays, self.inputs) if t.shape and t.shape[0] == n and a.ndim}
        if len(batches) > 1:
            raise Error("the inputs hold different batches (%s): they must share their first dimension"
                        % ", ".join(str(b) for b in sorted(batches)))
        b = batches.pop() if batches else n
        if b < 1:
            raise Error("batch 0: the inputs hold no rows; the model takes batches of %s"
                        % ("1 to %d" % n if self.batch_variable else "exactly %d" % n))
        if self.batch_variable:
            if not 1 <= b <= n:
                raise Error("batch %d: this model takes batches of 1 to %d (its N; `--set N=...` compiles "
                            "another)" % (b, n))
        elif b != n:
            raise Error("batch %d: this model is compiled for batches of exactly %d (its N; compile it with "
                        "`--set N=%d` for that batch)" % (b, n, b))
        return b

    def _rows(self, t, b):
        """t's shape with b rows when its first dimension is the batch."""
        if t.shape and t.shape[0] == self.max_batch:
            return (b,) + t.shape[1:]
        return t.shape

    def run(self, *args, **kwargs):
        """Runs inference; inputs positionally in `inputs` order or by name.
        Returns {output name: array}."""
        m = self._handle()
        if len(args) + len(kwargs) == 0:
            raise Error("no inputs given; the model takes %s" % ", ".join(map(repr, self.inputs)))
        if len(args) > len(self.inputs):
            raise Error("%d inputs given; the model takes %d: %s"
                        % (len(args), len(self.inputs), ", ".join(map(repr, self.inputs))))
        given = dict(zip((t.name for t in self.inputs), args))
        for k, v in kwargs.items():
            if k not in {t.name for t in self.inputs}:
                raise Error("the model has no input %r (it has: %s)" % (k, ", ".join(t.name for t in self.inputs)))
            if k in given:
                raise Error("input %r given twice" % k)
            given[k] = v
        arrays = []
        for t in self.inputs:
            if t.name not in given:
                raise Error("missing input %s" % (t,))
            a = given[t.name]
            if hasattr(a, "detach"):
                a = a.detach().cpu().numpy()
            if not isinstance(a, np.ndarray):
                raise Error("input %s: expected a NumPy array, got %s" % (t.name, type(a).__name__))
            if a.dtype != t.dtype:
                raise Error("input %s: dtype %s, but the model expects %s (%s): convert it with .astype(np.%s)"
                            % (t.name, a.dtype, t.dtype, t, t.dtype))
            if a.ndim != len(t.shape) or a.shape[1:] != t.shape[1:]:
                raise Error("input %s: shape %s, but the model expects %s (the first dimension being the batch)"
                            % (t.name, tuple(a.shape), t))
            arrays.append(np.ascontiguousarray(a))
        b = self._batch(arrays)
        outs = [np.empty(self._rows(t, b), dtype=t.dtype if t.dtype is not None else np.uint16)
                for t in self.outputs]
        ins = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        outp = (ctypes.c_void_p * max(1, len(outs)))(*[o.ctypes.data for o in outs])
        if self.batch_variable:
            rc = self._batch_fn(m, b, ins, outp)
        else:
            rc = self._infer_io(m, ins, outp)
        if rc != 0:
            raise Error("inference failed on %s: %s" % (self.device, self._message()))
        return {t.name: o for t, o in zip(self.outputs, outs)}

    def __call__(self, *args, **kwargs):
        """As run, but a model with one output returns that array."""
        r = self.run(*args, **kwargs)
        return next(iter(r.values())) if len(r) == 1 else r

    # ---- the report
    def report(self):
        """ncc's --emit=report text for this model and its options."""
        return report(self.net, *self.options)

    def report_total(self):
        """The report's `total:` line as a dict: params, flops, launches,
        bytes, peak_memory, naive_memory."""
        return parse_total(self.report())

    # ---- life
    def close(self):
        """Destroys the model (its device memory); the object stays loaded."""
        if getattr(self, "_m", None) is not None:
            self._destroy(self._m)
            self._m = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<ncc.Model %s on %s: %s -> %s>" % (self.name, self.device, ", ".join(map(repr, self.inputs)),
                                                    ", ".join(map(repr, self.outputs)))


def compile(net, *options, weights=None, device="auto"):
    """Compiles net with options and creates the model: Model(...)."""
    return Model(net, *options, weights=weights, device=device)
