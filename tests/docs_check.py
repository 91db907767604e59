#!/usr/bin/python3
"""docs_check.py — every model shown in the documentation compiles.

    docs_check.py NCC docs/page.md...     # exit 0 when every block behaves as marked

Extracts the fenced blocks whose info string starts with `net` from each
Markdown file and compiles each one, as a file of its own, with
`ncc BLOCK.net -o BLOCK.cu` (the whole pipeline, code generation included):

    ```net              must compile: exit 0, BLOCK.cu and BLOCK.h written
    ```net error        must be refused: exit 1, no output file, and an error
                        located in the block (file:line:col); a line with a
                        comment `# error: TEXT` must be the line of an error
                        whose message contains TEXT

    ```c pass           a pass written in a guide: compiles as C11 against
                        the tree's headers (cc -std=c11 -Wall -Wextra -Werror
                        -fsyntax-only), so the guide follows the IR's API

    ```python           runs to exit 0 with this Python, the source tree's
                        python/ on PYTHONPATH (the module `ncc`), NCC=NCC, a
                        private compile cache, from a scratch folder where
                        `examples` is the repository's; the blocks of one file
                        run in order in one folder, so a later block may read
                        what an earlier one wrote.  NCC_PYTHON_PRELOAD, when
                        set, is their LD_PRELOAD (the ASan runtime, under the
                        sanitizers).  README.md's are readme_check.py's:
                        they read what its `$ ` sessions wrote

Links: every Markdown link of the files must stay inside the repository (a
relative path to a file that exists, and to a heading that exists when it
names one); no link to the web, and no mention of design notes that live
outside the repository (the upper-case design notes that OUTSIDE below names).

A first line `# args: ...` adds flags (e.g. --set N=2).  Blocks are named
FILE-N (N counts from 1 in the file) in the messages; the model name is the
block's own `model` statement.  Exit 1 when any block misbehaves, 2 on bad
usage.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\S*)(.*)$")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def blocks(path):
    """(number, info, first line number, text) of every ```net, ```c pass and ```python block."""
    out, cur, n = [], None, 0
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if cur is None and m and m.group(1):
                cur = {"lang": m.group(1), "info": (m.group(1) + m.group(2)).split(), "line": i + 1, "text": []}
            elif cur is not None and line.startswith("```"):
                if cur["lang"] in ("net", "python") or cur["info"][:2] == ["c", "pass"]:
                    n += 1
                    out.append((n, cur["info"], cur["line"], "\n".join(cur["text"]) + "\n"))
                cur = None
            elif cur is not None:
                cur["text"].append(line)
    return out


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"\b(LANGUAGE|ARCHITECTURE|EMULATION|STYLE)\.md\b")


def anchors(path):
    """GitHub's anchors of the headings of a Markdown file."""
    out, fence = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
            m = None if fence else re.match(r"#+ (.*)", line)
            if m:
                t = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower().replace("`", ""))
                out.add(t.replace(" ", "-"))
    return out


def check_links(md):
    problems, fence = [], False
    with open(md, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines, 1):
        if line.startswith("```"):
            fence = not fence
        m = OUTSIDE.search(line)
        if m:
            problems.append("%s:%d: mentions %s, a design note outside the repository" % (md, i, m.group(0)))
        for target in ([] if fence else LINK.findall(line)):
            if re.match(r"[a-z]+:", target):
                problems.append("%s:%d: link %s leaves the repository" % (md, i, target))
                continue
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            if not os.path.exists(dest):
                problems.append("%s:%d: link %s: no such file %s" % (md, i, target, dest))
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                problems.append("%s:%d: link %s: %s has no heading #%s" % (md, i, target, dest, frag))
    return problems


def check_c(md, n, first, text, tmp):
    src = os.path.join(tmp, "%s-%d.c" % (os.path.splitext(os.path.basename(md))[0], n))
    with open(src, "w") as f:
        f.write(text)
    cc = os.environ.get("CC", "cc")
    p = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                        "-I", os.path.join(ROOT, "passes"), "-I", os.path.join(ROOT, "ir"), "-I", ROOT, src],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        return ["%s:%d (block %d): the C code does not compile:\n%s" % (md, first, n, p.stdout)]
    return []


def check_python(ncc, md, n, first, text, tmp):
    work = os.path.join(tmp, "py-" + os.path.splitext(os.path.basename(md))[0])
    if not os.path.isdir(work):
        os.makedirs(work)
        os.symlink(os.path.join(ROOT, "examples"), os.path.join(work, "examples"))
    env = dict(os.environ, NCC=ncc, NCC_CACHE_DIR=os.path.join(tmp, "cache"), NCC_EMU_THREADS="2",
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python")] +
                                          ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    if os.environ.get("NCC_PYTHON_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["NCC_PYTHON_PRELOAD"]
    p = subprocess.run([sys.executable, "-"], input=text, cwd=work, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, errors="replace", timeout=600)
    if p.returncode != 0:
        return ["%s:%d (block %d): the Python block exited with %d:\n%s" % (md, first, n, p.returncode, p.stdout)]
    return []


def check(ncc, md, n, info, first, text, tmp):
    """Returns a list of problems (empty: the block behaves as marked)."""
    if info[0] == "c":
        return check_c(md, n, first, text, tmp)
    if info[0] == "python":
        if os.path.basename(md) == "README.md":
            return []
        return check_python(ncc, md, n, first, text, tmp)
    base = "%s-%d" % (os.path.splitext(os.path.basename(md))[0], n)
    src = os.path.join(tmp, base + ".net")
    with open(src, "w") as f:
        f.write(text)
    out = os.path.join(tmp, base + ".cu")
    args = []
    m = re.match(r"# args: (.*)", text)
    if m:
        args = shlex.split(m.group(1))
    p = subprocess.run([ncc, base + ".net", "-o", base + ".cu"] + args, cwd=tmp, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, errors="replace", timeout=120)
    where = "%s:%d (block %d)" % (md, first, n)
    problems = []
    written = os.path.exists(out) or os.path.exists(os.path.join(tmp, base + ".h"))
    if "error" not in info[1:]:
        if p.returncode != 0:
            problems.append("%s: ncc exited with %d:\n%s" % (where, p.returncode, p.stderr))
        elif not written:
            problems.append("%s: ncc wrote no %s" % (where, base + ".cu"))
        return problems
    if p.returncode != 1:
        problems.append("%s: an error example, but ncc exited with %d (want 1):\n%s" % (where, p.returncode, p.stderr))
    if written:
        problems.append("%s: an error example, but ncc wrote an output file" % where)
    located = re.findall(r"^%s:(\d+):\d+: error: (.*)$" % re.escape(base + ".net"), p.stderr, re.M)
    if not located:
        problems.append("%s: no error with file:line:col in:\n%s" % (where, p.stderr))
    for k, line in enumerate(text.split("\n"), 1):
        m = re.search(r"# error: (.*)$", line)
        if m and not any(int(ln) == k and m.group(1).strip() in msg for ln, msg in located):
            problems.append("%s: expected an error on line %d of the block containing %r; ncc said:\n%s"
                            % (where, k, m.group(1).strip(), p.stderr))
    return problems


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    ncc = os.path.abspath(sys.argv[1])
    problems, count = [], 0
    with tempfile.TemporaryDirectory(prefix="ncc-docs-") as tmp:
        for md in sys.argv[2:]:
            got = check_links(md)
            print("%s %s links" % ("FAIL" if got else "ok  ", md))
            problems += got
            for n, info, first, text in blocks(md):
                count += 1
                got = check(ncc, md, n, info, first, text, tmp)
                kind = (" [error example]" if "error" in info[1:] else " [C]" if info[0] == "c" else
                        " [Python]" if info[0] == "python" else "")
                print("%s %s block %d (line %d)%s" % ("FAIL" if got else "ok  ", md, n, first, kind))
                problems += got
    for pr in problems:
        print(pr)
    if count == 0:
        print("no ```net blocks found in %s" % " ".join(sys.argv[2:]))
        return 1
    print("%d blocks, %d problems" % (count, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
