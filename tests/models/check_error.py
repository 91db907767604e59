"""check_error.py — runs ncc on a .net file that must be rejected and checks
the diagnostic the way docs/language.md "Errors" describes it:

  - exit status 1 (not 0, not 2 = internal error, not a signal);
  - stderr has `FILE:LINE:COL: error: ` at the line given by `# line: L`,
    followed by every `# expect: TEXT` of the file, and shows the source line
    with a caret;
  - no output file is written (`-o` points into an empty directory).

  check_error.py NCC FILE.net
"""
import os
import re
import subprocess
import sys
import tempfile


def main(ncc, path):
    src = open(path).read()
    expects = re.findall(r"^# expect: (.*)$", src, re.M)
    lines = re.findall(r"^# line: (\d+)$", src, re.M)
    if not expects or len(lines) != 1:
        sys.exit("%s: needs `# expect: TEXT` and one `# line: L`" % path)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.txt")
        p = subprocess.run([ncc, path, "--emit=report", "-o", out], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        left = os.listdir(d)
    fails = []
    if p.returncode != 1:
        fails.append("exit status %d, expected 1" % p.returncode)
    base = re.escape(path)
    m = re.search(r"^%s:(\d+):(\d+): error: (.*)$" % base, p.stderr, re.M)
    if not m:
        fails.append("no `%s:LINE:COL: error:` in stderr" % path)
    else:
        if m.group(1) != lines[0]:
            fails.append("error at line %s, expected line %s" % (m.group(1), lines[0]))
        if "^" not in p.stderr:
            fails.append("no caret under the source line")
    for e in expects:
        if e not in p.stderr:
            fails.append("stderr lacks: %s" % e)
    if left:
        fails.append("output written despite the error: %s" % left)
    if fails:
        print("stderr was:\n" + p.stderr)
        for f in fails:
            print("FAIL: %s: %s" % (os.path.basename(path), f))
        return 1
    print("%s: ok (%s)" % (os.path.basename(path), m.group(3)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
