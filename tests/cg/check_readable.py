#!/usr/bin/python3
"""check_readable.py — the generated code reads like code written by hand.

    check_readable.py NCC BUILD_GRAPHS EXAMPLES_DIR WORK_DIR

Generates the example models (default, --cublas, -O0) and build_graphs'
cases, and fails on:
  - kernel parameters named by position (in0, out6, ws2) instead of by role
    (x, weight, bn_running_mean, y);
  - host code indexing buffers by number (&m->bufs[102]) instead of by name
    (m->bufs[BUF_conv1_weight]);
  - arithmetic and conditions a person would not write: "1 &&", "+ 0", "* 1",
    "/ 1", "% 1", a parenthesised lone identifier before an operator
    ("(k) / 9"), "(void)r";
and checks that role names keep identical kernels shared: in ResNet-18 some
kernel is launched for more than one layer (names taken from the buffers
would make every kernel text unique)."""
import collections
import os
import re
import subprocess
import sys

NOISE = [
    (re.compile(r"(?<![<>=] )\b1 &&|&& 1\b(?! *[-+*/%<>=.])"), "a constant in a condition"),
    (re.compile(r"[-+] 0\b(?!\.)"), "adding 0"),
    (re.compile(r"[*/%] 1\b(?!\.)"), "multiplying, dividing or taking the remainder by 1"),
    (re.compile(r"(?<!\w)\(([A-Za-z_]\w*)\) [-+*/%]"), "a lone identifier in parentheses"),
    (re.compile(r"\(void\)r;"), "a variable kept only to silence a warning"),
]
POSITIONAL = re.compile(r"__restrict__ (in|out|ws)\d+\b")
NUMBERED_BUF = re.compile(r"bufs\[\d+\]")


def kernels_section(text):
    a = text.find("/* ---- kernels")
    b = text.find("/* ---- end of kernels")
    return text[a:b] if a >= 0 and b > a else ""


def check(path, problems):
    text = open(path).read()
    ker = kernels_section(text)
    for m in POSITIONAL.finditer(ker):
        problems.append("%s: kernel parameter named by position: %s" % (path, m.group(0)))
    for m in NUMBERED_BUF.finditer(text):
        problems.append("%s: buffer addressed by number: %s" % (path, m.group(0)))
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("/*", "*")) or '"' in line:
            continue    # comments and strings (messages) are prose
        for rx, what in NOISE:
            m = rx.search(line)
            if m:
                problems.append("%s:%d: %s: %s" % (path, lineno, what, line.strip()))
    return text


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited with %d: %s" % (" ".join(cmd), p.returncode, p.stderr))


def main():
    ncc, build_graphs, examples, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    files = []
    for f in sorted(os.listdir(examples)):
        if not f.endswith(".net"):
            continue
        for flags in ([], ["--cublas"], ["-O0"]):
            out = os.path.join(work, "%s%s.cu" % (f[:-4], "".join(flags).replace("-", "_")))
            run([ncc, os.path.join(examples, f), "-o", out] + flags)
            files.append(out)
    for flags in ([], ["--cublas"]):
        d = os.path.join(work, "cases" + "".join(flags).replace("-", "_"))
        os.makedirs(d, exist_ok=True)
        run([build_graphs, d] + flags)
        files += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".cu")]
    problems = []
    texts = {f: check(f, problems) for f in files}
    r18 = texts[os.path.join(work, "resnet18.cu")]
    launches = collections.Counter(re.findall(r"ncc_launch\(m->dev, &(\w+)_desc", r18))
    shared = [k for k, n in launches.items() if n > 1]
    print("resnet18: %d kernels for %d launches; launched more than once: %s"
          % (len(launches), sum(launches.values()), ", ".join(sorted(shared)) or "none"))
    if not shared:
        problems.append("resnet18.cu: no kernel is shared between layers (kernel texts differ by buffer?)")
    for p in problems[:40]:
        print(p)
    if problems:
        print("FAIL: %d problems in %d files" % (len(problems), len(files)))
        return 1
    print("PASS: %d generated files read cleanly" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
