#!/usr/bin/python3
"""check_fold.py — what the fold pass must leave in the generated code of the
example models with batchnorm, read from the generated files themselves:

  check_fold.py NCC EXAMPLES_DIR WORKDIR

For resnet18, resnet50 and mobilenet_v2 at -O1 and -O3:
  - `-v` says every batchnorm was folded into its convolution (20, 53, 52);
  - no inference kernel (the kernels section before the load-time banner)
    computes a batchnorm: no sqrtf/rsqrtf, no running statistics;
  - the load-time kernels do (sqrtf), and the generated <model>_prepare()
    launches them, called by create and by load;
  - the report's per-inference launches equal the launches of <model>_run()
    and its `# load-time:` kernels those of <model>_prepare().
At -O0 (no fold): the batchnorm is computed per element in the inference
kernels and there is no load-time code.  With --jit the embedded kernels
source has the same two parts.
Exit 0 when all holds; every failure is printed."""
import os
import re
import subprocess
import sys

BEGIN = "/* ---- kernels (this section alone is what NVRTC compiles for --jit) ---- */"
LOAD = "/* ---- load-time kernels:"
END = "/* ---- end of kernels ---- */"
BN_EXPR = re.compile(r"sqrtf|rsqrtf|running_var|running_mean")
MODELS = {"resnet18": 20, "resnet50": 53, "mobilenet_v2": 52}
fails = []


def fail(msg):
    print("FAIL: " + msg)
    fails.append(msg)


def ncc(args):
    p = subprocess.run([NCC] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        fail("ncc %s exited %d: %s" % (" ".join(args), p.returncode, p.stderr))
    return p


def function_body(text, name):
    m = re.search(r"\n(?:static )?int %s\([^)]*\) \{\n(.*?)\n\}\n" % re.escape(name), text, re.S)
    return m.group(1) if m else None


def run_kernels(section, text, model):
    """the kernels of section that <model>_run() launches: a model with a train
    block also holds the training step's kernels, which compute batchnorm in
    training mode (batch statistics) and are no inference kernels"""
    body = function_body(text, model + "_run") or ""
    names = set(re.findall(r"&(\w+)_desc\b", body))
    parts = re.split(r"\n(?=/\* \w+)", section)
    keep = [q for q in parts if re.match(r"/\* (\w+)", q) and re.match(r"/\* (\w+)", q).group(1) in names]
    return "\n".join(keep)


def check(model, opt):
    what = "%s %s" % (model, opt)
    cu = os.path.join(WORK, "%s%s.cu" % (model, opt))
    p = ncc([os.path.join(EXAMPLES, model + ".net"), opt, "-v", "-o", cu])
    if p.returncode:
        return
    text = open(cu).read()
    if BEGIN not in text or END not in text:
        fail("%s: no kernels section" % what)
        return
    section = text[text.index(BEGIN):text.index(END)]
    inference, _, load = section.partition(LOAD)
    inference = run_kernels(inference, text, model)
    if not inference:
        fail("%s: no kernel section of the ones %s_run() launches" % (what, model))
        return
    rep = ncc([os.path.join(EXAMPLES, model + ".net"), opt, "--emit=report"]).stdout
    launches = int(re.search(r"^total: .* launches=(\d+) ", rep, re.M).group(1))
    run = function_body(text, model + "_run") or ""
    if run.count("ncc_launch(") != launches:
        fail("%s: the report counts %d launches per inference, %s_run() makes %d"
             % (what, launches, model, run.count("ncc_launch(")))
    if opt == "-O0":
        if not BN_EXPR.search(inference):
            fail("%s: without fold the inference kernels should compute the batchnorm" % what)
        if load or "_prepare(" in text or "# load-time:" in rep:
            fail("%s: load-time code without the fold pass" % what)
        print("ok: %s: batchnorm per element, no load-time code (%d launches)" % (what, launches))
        return
    want = "pass fold: %d batchnorms folded (%d into convolutions" % (MODELS[model], MODELS[model])
    if want not in p.stderr:
        fail("%s: -v does not say '%s':\n%s" % (what, want, p.stderr))
    hit = BN_EXPR.search(inference)
    if hit:
        k = inference.rfind("\n/* ", 0, hit.start())
        fail("%s: an inference kernel computes a batchnorm (%r in %s)"
             % (what, hit.group(0), inference[k + 1:inference.find("*/", k) + 2]))
    if "sqrtf(" not in load:
        fail("%s: the load-time kernels do not compute 1/sqrt(var + eps)" % what)
    prep = function_body(text, model + "_prepare")
    m = re.search(r"^# load-time: (\d+) kernels", rep, re.M)
    if prep is None or not m:
        fail("%s: no %s_prepare() or no `# load-time:` report line" % (what, model))
        return
    if prep.count("ncc_launch(") != int(m.group(1)):
        fail("%s: the report counts %s load-time kernels, %s_prepare() launches %d"
             % (what, m.group(1), model, prep.count("ncc_launch(")))
    for fn in ("_create_on", "_load"):
        body = function_body(text, model + fn) or ""
        if model + "_prepare(m)" not in body:
            fail("%s: %s%s() does not call %s_prepare()" % (what, model, fn, model))
    print("ok: %s: no batchnorm in %d inference launches; %s load-time kernels in %s_prepare()"
          % (what, launches, m.group(1), model))


def check_jit():
    c = os.path.join(WORK, "resnet18_jit.c")
    if ncc([os.path.join(EXAMPLES, "resnet18.net"), "--jit", "-o", c]).returncode:
        return
    text = open(c).read()
    src = "".join(re.findall(r'^  "(.*)"$', text, re.M)).replace("\\n", "\n")
    inference, _, load = src.partition(LOAD)
    inference = run_kernels(inference, text, "resnet18")
    if not inference or not load or BN_EXPR.search(inference) or "sqrtf(" not in load or "resnet18_prepare(m)" not in text:
        fail("--jit: the embedded kernels or the host code lack the load-time part")
    else:
        print("ok: --jit: load-time kernels embedded after the inference ones, prepare called")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: check_fold.py NCC EXAMPLES_DIR WORKDIR")
    NCC, EXAMPLES, WORK = sys.argv[1:]
    os.makedirs(WORK, exist_ok=True)
    for model in MODELS:
        for opt in ("-O0", "-O1", "-O3"):
            check(model, opt)
    check_jit()
    sys.exit(1 if fails else 0)
