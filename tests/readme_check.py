#!/usr/bin/python3
"""readme_check.py — the README shows what ncc does, today.

    readme_check.py --ncc BUILD/ncc [--python /usr/bin/python3] [--readme README.md]

Every fenced ```sh block of the README is checked:

  * Lines starting with `$ ` are commands.  They run one after another, from
    a scratch directory where `examples` is the repository's (so relative
    paths work as in the repository's root), with ncc's build directory first
    on PATH, `python3` being --python (the one with PyTorch, as on Debian),
    NCC_EMU_THREADS=2 (so "device: emu (2 threads)" is stable) and a private
    NCC_CACHE_DIR.  A trailing `# comment` is not part of the command.
    Each must exit 0, and its output (stdout and stderr together) must match
    the lines shown under it:
        - a line `...` stands for any number of lines;
        - `…` inside a line stands for any text (a timing, a rounding);
        - every other line must equal an output line exactly, in order, and
          nothing else may be printed.
    On a mismatch the script prints the actual output, ready to paste.
  * Lines without `$ ` are set-up commands that CI runs (tests/run_all.sh,
    examples/demo.sh): a path they start with must be an executable file of
    the repository, and every `-DNAME=` they pass to cmake an option() of
    CMakeLists.txt.

Every ```python block runs, in its place among the sh sessions and in
their scratch directory (so it may read what they wrote), with --python,
the source tree's python/ on PYTHONPATH (the module `ncc`) and NCC=--ncc;
it must exit 0.

Every `--flag` on a line of any fenced block that starts with `ncc` (or on
its `common:` line) must be accepted by ncc: it must appear in
`ncc --help`, `ncc run --help`, `ncc bench --help` or `ncc train --help`.

Figures belong in sample output, where this script checks them: a number
in the README's prose (outside code) with three or more digits, a decimal
point or a unit (`ms`, `%`, `×`, `KB`, `MB`, `GB`) is reported.

Exit 0 when everything holds, 1 otherwise.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^(\s*)```(\S*)")
FIGURE = re.compile(r"\d[\d,]*\.\d|\d{3,}|\d+\s*(?:×|%|ms\b|KB\b|MB\b|GB\b|KiB\b|MiB\b|GiB\b)")


def fenced(lines):
    """(language, [(line number, text)], indent) of every fenced block, and
    the prose lines (number, text) outside them."""
    blocks, prose, cur = [], [], None
    for i, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if cur is None and m:
            cur = (m.group(2), [], len(m.group(1)))
        elif cur is not None and m and len(m.group(1)) == cur[2] and not m.group(2):
            blocks.append(cur)
            cur = None
        elif cur is not None:
            cur[1].append((i, line[cur[2]:] if line[:cur[2]].strip() == "" else line))
        else:
            prose.append((i, line))
    return blocks, prose


def strip_comment(cmd):
    """`ncc x.net -o x.cu   # writes x.cu` -> `ncc x.net -o x.cu` (commands here quote no '#')."""
    return re.sub(r"\s+#\s.*$", "", cmd).strip()


def match(expected, actual):
    """Does the list of actual lines match the expected pattern lines?"""
    def line_ok(pat, s):
        parts = [re.escape(p) for p in pat.split("…")]
        return re.fullmatch(".*?".join(parts), s) is not None

    memo = {}

    def go(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(expected):
            r = j == len(actual)
        elif expected[i] == "...":
            r = any(go(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            r = j < len(actual) and line_ok(expected[i], actual[j]) and go(i + 1, j + 1)
        memo[(i, j)] = r
        return r

    return go(0, 0)


def run_session(block, env, work, readme):
    """Runs the `$ ` commands of one block; returns a list of problems."""
    problems, items = [], []
    for ln, text in block:
        if text.startswith("$ "):
            items.append([ln, strip_comment(text[2:]), []])
        elif items:
            items[-1][2].append(text)
    for ln, cmd, expected in items:
        while expected and expected[-1].strip() == "":
            expected.pop()
        p = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, errors="replace", timeout=900)
        actual = p.stdout.rstrip("\n").split("\n") if p.stdout.strip() else []
        ok = p.returncode == 0 and match(expected, actual)
        print("%s %s:%d: $ %s" % ("ok  " if ok else "FAIL", readme, ln, cmd))
        if p.returncode != 0:
            problems.append("%s:%d: `%s` exited with %d" % (readme, ln, cmd, p.returncode))
        elif not ok:
            problems.append("%s:%d: the output of `%s` is not what the README shows.\n"
                            "  README (`...`: any lines, `…`: any text):\n%s\n"
                            "  actual output (paste it, with `…` where it varies):\n%s"
                            % (readme, ln, cmd, "\n".join("    " + e for e in expected),
                               "\n".join("    " + a for a in actual)))
    return problems


def run_python(block, env, work, readme):
    """Runs one ```python block as a script; returns a list of problems."""
    ln = block[0][0] if block else 0
    text = "\n".join(t for _, t in block) + "\n"
    p = subprocess.run([env["NCC_README_PYTHON"], "-"], input=text, cwd=work, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, errors="replace", timeout=900)
    print("%s %s:%d: python block" % ("ok  " if p.returncode == 0 else "FAIL", readme, ln))
    if p.returncode != 0:
        return ["%s:%d: the Python block exited with %d:\n%s" % (readme, ln, p.returncode, p.stdout)]
    return []


def check_setup_line(ln, text, readme, options):
    cmd = strip_comment(text)
    problems = []
    if not cmd:
        return problems
    for part in re.split(r"&&|;", cmd):
        words = part.split()
        if not words:
            continue
        first = words[0]
        if "/" in first:
            path = os.path.join(ROOT, first)
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                problems.append("%s:%d: %s is not an executable file of the repository" % (readme, ln, first))
        elif shutil.which(first) is None:
            problems.append("%s:%d: %s: no such command" % (readme, ln, first))
        for w in words:
            m = re.match(r"-D(\w+)=", w)
            if m and first == "cmake" and m.group(1) not in options and not m.group(1).startswith("CMAKE_"):
                problems.append("%s:%d: -D%s: CMakeLists.txt has no option(%s ...)" % (readme, ln, m.group(1),
                                                                                        m.group(1)))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncc", required=True)
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    ncc = os.path.abspath(a.ncc)
    readme = a.readme
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, prose = fenced(lines)
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        options = set(re.findall(r"^\s*option\((\w+)", f.read(), re.M))

    helps = ""
    for sub in ([], ["run"], ["bench"], ["train"]):
        p = subprocess.run([ncc] + sub + ["--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        helps += p.stdout
    known = set(re.findall(r"--[a-z][a-z0-9-]*", helps))

    problems = []
    for ln, text in prose:
        t = re.sub(r"`[^`]*`", "", text)          # inline code is not prose
        t = re.sub(r"\]\([^)]*\)", "]", t)       # nor link targets
        for m in FIGURE.finditer(t):
            problems.append("%s:%d: the figure %r stands in prose, where no test checks it; "
                            "show it in a `$ ` block's output instead" % (readme, ln, m.group(0)))
    for lang, block, _ in blocks:
        for ln, text in block:
            t = text[2:] if text.startswith("$ ") else text
            if re.match(r"ncc\b|common:", t):
                for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", strip_comment(t)):
                    if flag not in known:
                        problems.append("%s:%d: %s is in no `ncc [run|bench|train] --help`" % (readme, ln, flag))

    env = dict(os.environ)
    env["NCC_EMU_THREADS"] = "2"
    with tempfile.TemporaryDirectory(prefix="ncc-readme-") as work:
        env["NCC_CACHE_DIR"] = os.path.join(work, ".cache")
        bindir = os.path.join(work, ".bin")
        os.mkdir(bindir)
        os.symlink(os.path.abspath(a.python), os.path.join(bindir, "python3"))
        env["PATH"] = os.pathsep.join([os.path.dirname(ncc), bindir, env.get("PATH", "")])
        os.symlink(os.path.join(ROOT, "examples"), os.path.join(work, "examples"))
        env["NCC_README_PYTHON"] = os.path.abspath(a.python)
        pyenv = dict(env, NCC=ncc, PYTHONPATH=os.pathsep.join(
            [os.path.join(ROOT, "python")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])))
        for lang, block, _ in blocks:
            if lang == "python":
                problems += run_python(block, pyenv, work, readme)
            if lang != "sh":
                continue
            if any(t.startswith("$ ") for _, t in block):
                problems += run_session(block, env, work, readme)
            else:
                for ln, text in block:
                    problems += check_setup_line(ln, text, readme, options)
    for pr in problems:
        print(pr)
    print("%s: %d problems" % (readme, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
