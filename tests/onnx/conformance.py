#!/usr/bin/env python3
"""ONNX's own node conformance tests (docs/onnx.md#conformance), generated
in memory from the installed onnx package's test-case generator
(onnx.backend.test.case.node: the `expect(...)` calls that ONNX's
`backend-test-tools generate-data` writes out as test/data/node); no copy of
the cases is kept in the repository.

For every operator ncc claims (the op table of frontend/onnx.c) every case
of that operator (its `_expanded` function-body variants included) is saved
as MODEL.onnx with its inputs as .npy files and run by
`ncc run MODEL.onnx --input NAME=FILE ... --output NAME=FILE ...` under
emulation.  The outputs are compared with ONNX's expected outputs: float
within np.allclose(rtol=1e-4, atol=1e-5), NaN where NaN is expected; other
dtypes exactly.

A case is
  pass      ncc ran it and every output matches;
  pass(c)   ncc refused it with the test's weights or shapes as graph
            inputs (ncc compiles weights as parameters and shapes as
            constants: "must be a constant", or an int64 graph input), and
            ran it correctly with every graph input but the first made an
            initializer holding the same test data;
  refused   ncc exited 1 with a "not supported" message (an attribute value,
            dtype, opset or operator ncc does not take);
  FAIL      anything else: wrong numbers, a crash (exit 2, a signal), exit 1
            without such a message, a missing output.

  conformance.py --ncc PATH/ncc [--op OP ...] [--summary] [-v]
    --op OP     only these operators (repeatable); default every claimed one
    --summary   print only the table (operator, cases, passed, refused, failed)
    -v          print ncc's message for refused and failed cases

Exit 0: no failure; 1: a failure; 77: skipped (no onnx module, ncc without
ONNX support)."""
import argparse
import importlib
import os
import pkgutil
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RTOL, ATOL = 1e-4, 1e-5
REFUSAL = re.compile(r"not supported|unsupported operator|ncc supports|ncc imports|must be a constant|"
                     r"ncc computes in float|ncc maps|is required|only [a-z0-9 -]+ (are|is) supported")

try:
    import numpy as np
    # onnx 1.12's generators still use NumPy aliases that NumPy 1.24 removed
    for _a, _t in (("float", float), ("int", int), ("bool", bool), ("object", object), ("complex", complex)):
        if _a not in np.__dict__:
            setattr(np, _a, _t)
    import onnx
    from onnx import numpy_helper
    import onnx.backend.test.case.node as onnx_node
except ImportError as e:
    print("skipped: %s" % e)
    sys.exit(77)


def claimed_ops():
    """The ONNX operators of frontend/onnx.c's op table, in its order."""
    with open(os.path.join(ROOT, "frontend", "onnx.c"), encoding="utf-8") as f:
        src = f.read()
    table = src[src.index("static const OpRow op_table[]"):]
    table = table[:table.index("};")]
    return re.findall(r'\{"(\w+)",', table)


def collect(ops):
    """{op: [TestCase]} from the generator modules that make nodes of these ops."""
    want = set(ops)
    pkg = os.path.dirname(onnx_node.__file__)
    for _, name, ispkg in pkgutil.iter_modules(onnx_node.__path__):
        if ispkg:
            continue
        with open(os.path.join(pkg, name + ".py"), encoding="utf-8") as f:
            made = set(re.findall(r"""make_node\(\s*['"](\w+)['"]""", f.read()))
        if made & want:
            importlib.import_module(onnx_node.__name__ + "." + name)
    base, out = {}, {op: [] for op in ops}
    for t in onnx_node._NodeTestCases:
        nodes = [n.op_type for n in t.model.graph.node]
        if len(nodes) == 1:
            base[t.name] = nodes[0]
    for t in onnx_node._NodeTestCases:
        op = base.get(t.name[:-len("_expanded")] if t.name.endswith("_expanded") else t.name)
        if op in out and all(x.name != t.name for x in out[op]):
            out[op].append(t)
    return out


C_KEYWORDS = set("auto bool break case char class const continue default delete do double else enum extern false "
                 "float for goto if inline int long new operator private protected public register restrict "
                 "return short signed sizeof static struct switch template this throw true try typedef typename "
                 "union unsigned using virtual void volatile while".split())


def ident(s):
    """ncc's C identifier for a graph input or output name (frontend/onnx.c ident())."""
    r = re.sub(r"[^A-Za-z0-9_]", "_", s or "x")
    return "t_" + r if r[0].isdigit() or r in C_KEYWORDS else r


def run_case(ncc, t, d, consts):
    """(status, message) of one data set of a case; consts: graph inputs but
    the first become initializers."""
    model = onnx.ModelProto()
    model.CopyFrom(t.model)
    g = model.graph
    inputs, outputs = t.data_sets[0]
    names = [vi.name for vi in g.input]
    args = []
    for k, (vi, x) in enumerate(zip(list(g.input), inputs)):
        if isinstance(x, (np.generic, float, int, bool)):
            x = np.asarray(x)
        if consts and k > 0 and isinstance(x, np.ndarray):
            g.initializer.append(numpy_helper.from_array(np.asarray(x), vi.name))
            continue
        if isinstance(x, (np.generic, float, int, bool)):
            x = np.asarray(x)
        if not isinstance(x, np.ndarray):
            return "refused", "input %s is not a tensor (a sequence or optional), which ncc does not take" % vi.name
        p = os.path.join(d, "in%d.npy" % k)
        np.save(p, x)
        args += ["--input", "%s=%s" % (ident(names[k]), p)]
    if consts:
        keep = [vi for k, vi in enumerate(g.input) if k == 0]
        del g.input[:]
        g.input.extend(keep)
    outs = []
    for k, vi in enumerate(g.output):
        p = os.path.join(d, "out%d.npy" % k)
        outs.append(p)
        args += ["--output", "%s=%s" % (ident(vi.name), p)]
    path = os.path.join(d, "case.onnx")
    onnx.save(model, path)
    for p in outs:
        if os.path.exists(p):
            os.remove(p)
    try:
        p = subprocess.run([ncc, "run", path] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, errors="replace", timeout=300)
    except subprocess.TimeoutExpired:
        return "FAIL", "ncc run timed out"
    msg = p.stdout.strip()
    unused = re.findall(r"--input (\w+)=\S*: the model has no input", msg)
    if p.returncode == 1 and unused:
        # a graph input no node reads (Dropout's ratio in inference): ncc drops it
        keep = []
        for k in range(0, len(args), 2):
            if not (args[k] == "--input" and args[k + 1].split("=")[0] in unused):
                keep += args[k:k + 2]
        p = subprocess.run([ncc, "run", path] + keep, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, errors="replace", timeout=300)
        msg = p.stdout.strip()
        args = keep
    if p.returncode == 1:
        errs = [ln for ln in msg.split("\n") if "error:" in ln]
        if errs and all(REFUSAL.search(ln) for ln in errs):
            return "refused", errs[0]
        return "FAIL", "exit 1 without a 'not supported' message:\n" + msg
    if p.returncode != 0:
        return "FAIL", "ncc exited %d:\n%s" % (p.returncode, msg)
    for k, (p_out, want) in enumerate(zip(outs, outputs)):
        if not os.path.exists(p_out):
            return "FAIL", "output %s was not written" % g.output[k].name
        got = np.load(p_out)
        want = np.asarray(want)
        if got.shape != want.shape:
            return "FAIL", "output %s: shape %s, expected %s" % (g.output[k].name, got.shape, want.shape)
        if want.dtype.kind == "f":
            ok = np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
            err = np.nanmax(np.abs(got.astype(np.float64) - want)) if want.size else 0.0
        else:
            ok, err = np.array_equal(got, want), 0.0
        if not ok:
            return "FAIL", "output %s differs: max |ncc - onnx| = %.3g (rtol %g, atol %g)" % (
                g.output[k].name, err, RTOL, ATOL)
    return check_translation(ncc, path, args, outs, d, getattr(t, "name", "?"))


NET_REFUSED = []   # passed cases whose --emit=net translation ncc refuses (an attribute .net cannot spell)
NET_KEYWORDS = set("model const input output def return if else for in train and or not true false".split())


def check_translation(ncc, path, args, outs, d, case):
    """A passed case's --emit=net translation (with the weights written
    beside it) must give the very bits the ONNX model gave."""
    net, st = os.path.join(d, "case.net"), os.path.join(d, "case.safetensors")
    for f in (net, st):
        if os.path.exists(f):
            os.remove(f)
    p = subprocess.run([ncc, path, "--emit=net", "-o", net], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, errors="replace", timeout=300)
    if p.returncode == 1 and "has no spelling" in p.stdout:
        NET_REFUSED.append((case, p.stdout.strip().splitlines()[-1].split("error: ")[-1]))
        return "pass", ""
    if p.returncode != 0:
        return "FAIL", "--emit=net exited %d:\n%s" % (p.returncode, p.stdout)
    nargs = ["--weights", st] if os.path.exists(st) else []
    for k in range(0, len(args), 2):   # a name .net reserves gets a trailing _
        name, f = args[k + 1].split("=", 1)
        nargs += [args[k], "%s%s=%s" % (name, "_" if name in NET_KEYWORDS else "", f + ".net.npy" if args[k] == "--output" else f)]
    p = subprocess.run([ncc, "run", net] + nargs, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, errors="replace", timeout=300)
    if p.returncode != 0:
        return "FAIL", "the --emit=net translation exited %d:\n%s\n%s" % (p.returncode, p.stdout, open(net).read())
    for p_out in outs:
        a, b = np.load(p_out), np.load(p_out + ".net.npy")
        if a.shape != b.shape or a.tobytes() != b.tobytes():
            return "FAIL", "the --emit=net translation gives other bits for %s" % os.path.basename(p_out)
    return "pass", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ncc", required=True)
    ap.add_argument("--op", action="append")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    ncc = os.path.abspath(a.ncc)
    ops = claimed_ops()
    if a.op:
        unknown = [o for o in a.op if o not in ops]
        if unknown:
            print("not claimed by frontend/onnx.c: %s" % " ".join(unknown), file=sys.stderr)
            return 2
        ops = a.op
    with tempfile.TemporaryDirectory(prefix="ncc-conf-") as d:
        with open(os.path.join(d, "probe.onnx"), "wb") as f:
            f.write(b"\x08\x07")
        p = subprocess.run([ncc, "run", os.path.join(d, "probe.onnx")], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        if "without ONNX support" in p.stdout:
            print("skipped: %s was built without ONNX support" % ncc)
            return 77
        cases = collect(ops)
        table, failed = [], 0
        for op in ops:
            n = {"pass": 0, "refused": 0, "FAIL": 0, "const": 0}
            for t in cases[op]:
                st, msg = run_case(ncc, t, d, False)
                if st == "refused" and len(t.model.graph.input) > 1 and (
                        "must be a constant" in msg or
                        any("graph input '%s'" % vi.name in msg for vi in t.model.graph.input[1:])):
                    st2, msg2 = run_case(ncc, t, d, True)
                    if st2 == "pass":
                        st, msg = "pass(c)", ""
                        n["const"] += 1
                    else:
                        st, msg = st2, msg2
                n["pass" if st.startswith("pass") else st] += 1
                if not a.summary:
                    show = st == "FAIL" or (a.v and msg)
                    print("%-8s %s %s%s" % (st, op, t.name, (": " + msg) if show else ""))
            failed += n["FAIL"]
            table.append((op, len(cases[op]), n["pass"], n["const"], n["refused"], n["FAIL"]))
    w = max(len(r[0]) for r in table)
    print("%-*s %5s %6s %8s %7s %6s" % (w, "operator", "cases", "passed", "(consts)", "refused", "failed"))
    for r in table:
        print("%-*s %5d %6d %8d %7d %6d" % ((w,) + r))
    tot = [sum(r[k] for r in table) for k in range(1, 6)]
    print("%-*s %5d %6d %8d %7d %6d" % ((w, "total") + tuple(tot)))
    print("tolerance: rtol %g, atol %g; onnx %s" % (RTOL, ATOL, onnx.__version__))
    print("--emit=net: every passed case's translation gives the same bits, but %d that .net cannot write%s"
          % (len(NET_REFUSED), "".join("\n  %s: %s" % r for r in NET_REFUSED)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
