#!/usr/bin/env python3
"""bank_report.py — the shared-memory bank conflicts of the tile stores in a
generated .cu, worked out from the source, no GPU needed.

    bank_report.py FILE.cu [--kernel SUBSTR] [--array NAME] [--max-ways N]

For each kernel, each store into a shared tile (`ncc_sts32(&As[...], w)`,
`Bs[...] = v`; not cp.async, whose copies the hardware schedules) is evaluated
for the 32 lanes of warp 0 of block 0 (m0 = n0 = k0 = 0, the first stage), for
every value of the loops around it inside the kernel, from the declarations
the source makes on its way there (a 2-D block's threadIdx.x and .y from its
`tid = ty * BX + tx`; an index chain such as [kk][rr] flattened by the
array's extents, a stage [st] 0): each combination is one store instruction
of the warp (a request).  A request's wavefronts are, per phase of lanes (all
32 for a store of 4 bytes or less, 16 for 8 bytes, 8 for 16), the most
distinct 32-bit words any one of the 32 banks holds, summed over phases: 1 a
phase is conflict-free.  It prints a line a store site: its kernel and line,
the array, the bytes a lane stores, the requests, their mean and worst
wavefronts against the least possible.

What it leaves out: ptxas may merge two stores into one wider one (a float32
piece's two words of a k-major B tile become one STS.64, conflict-free), and
a site whose address the script cannot work out (an unknown name) is listed
as unresolved.  --kernel and --array keep the kernels whose name holds
SUBSTR and the stores into array NAME (As, Bs).  --max-ways N: exit 1 when
a resolved request's wavefronts pass N times the least possible, or when no
store site was resolved (a check for tests).
"""
import itertools
import re
import sys

ELEM = {"float": 4, "unsigned short": 2, "signed char": 1, "unsigned char": 1, "int": 4, "unsigned": 4}


def kernels(text):
    """(name, first line number, lines) of each kernel."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"NCC_KERNEL void (?:__launch_bounds__\([^)]*\) )?(\w+)\(", lines[i])
        if not m:
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j] != "}":
            j += 1
        out.append((m.group(1), i + 1, lines[i:j + 1]))
        i = j + 1
    return out


def indent(s):
    return len(s) - len(s.lstrip(" "))


def split_top(s, sep=","):
    """s split at the separators outside brackets"""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def pyexpr(e):
    """a C integer expression (non-negative operands) as Python"""
    e = re.sub(r"\((?:int|unsigned|long long)\)", "", e)
    e = e.replace("&&", " and ").replace("||", " or ")
    e = re.sub(r"!(?!=)", " not ", e)
    e = re.sub(r"(?<![/])/(?![/])", "//", e)
    e = re.sub(r"(\d+)u\b", r"\1", e)
    return e


def ev(e, env):
    try:
        return int(eval(pyexpr(e), {"__builtins__": {}}, env))
    except Exception:
        return None


def shared_arrays(klines):
    """{name: (element bytes, its extents)} of the kernel's __shared__ arrays"""
    arr = {}
    for ln in klines:
        m = re.match(r"\s*__shared__ (?:__align__\(\d+\) )?([\w ]+?) (\w+)((?:\[\d+\])+)", ln)
        if m:
            arr[m.group(2)] = (ELEM.get(m.group(1).strip(), 4), [int(x) for x in re.findall(r"\d+", m.group(3))])
    return arr


STORE = re.compile(r"^\s*(?:ncc_sts(32|64)\(&(\w+)((?:\[[^\]]*\])+),|(\w+)((?:\[[^\]]*\])+) = )")


def flat_index(brackets, dims):
    """the element offset of a chain such as [kk][rr] in an array of extents dims, as one expression"""
    parts = indices(brackets)
    e = "(%s)" % parts[0]
    for p, d in zip(parts[1:], dims[1:]):
        e = "(%s) * %d + (%s)" % (e, d, p)
    return e


def indices(brackets):
    """the [...] of a chain such as [st][expr], in order"""
    parts, depth, cur = [], 0, ""
    for ch in brackets:
        if ch == "[":
            if depth == 0:
                cur = ""
            else:
                cur += ch
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                parts.append(cur)
            else:
                cur += ch
        else:
            cur += ch
    return parts


def context(klines, i):
    """the enclosing headers (outermost first) and, per scope, the declarations before line i"""
    cur = indent(klines[i])
    items = []   # reversed: ("decl", text) / ("for", text) / ("if", text)
    for j in range(i - 1, 0, -1):
        ln = re.sub(r"/\*.*?\*/", "", klines[j]).rstrip()
        if not ln.strip() or ln.strip().startswith("/*") or ln.strip().startswith("*"):
            continue
        d = indent(ln)
        s = ln.strip()
        if d < cur and s.endswith("{"):
            cur = d
            items.append(("for" if s.startswith("for ") else "if" if s.startswith("if ") else "block", s))
        elif d == cur and re.match(r"(?:const )?(?:int|unsigned) \w+( ?\[\d+\])? ?=", s):
            items.append(("decl", s))
    return list(reversed(items))


def decls(s):
    """(name, expression) pairs of one declaration statement"""
    s = re.sub(r"/\*.*?\*/", "", s).strip().rstrip(";")
    s = re.sub(r"^(?:const )?(?:int|unsigned) ", "", s)
    out = []
    for part in split_top(s):
        if "=" not in part:
            continue
        name, e = part.split("=", 1)
        name = name.strip()
        if "[" in name:
            continue
        out.append((name, e.strip()))
    return out


FOR = re.compile(r"for \(int (\w+) = ([^,;]+)((?:, \w+ = [^,;]+)*); \1 < ([^;]+); (?:\1\+\+|\1 \+= ([^)]+))\)")


def site_requests(klines, i, idx_expr):
    """the address lists (one a request, None for an inactive lane) of the store at line i"""
    ctx = context(klines, i)
    loops = []
    for kind, s in ctx:
        if kind == "for":
            m = FOR.match(s)
            if not m:
                return None
            loops.append(m)
    # every combination of the loops' values (lane-uniform bounds; a bound's "&& tid < N" is a lane guard)
    ranges = []
    for m in loops:
        bound = m.group(4)
        guard = None
        if "&&" in bound:
            bound, guard = [x.strip() for x in bound.split("&&", 1)]
        lo, hi, st = ev(m.group(2), {}), ev(bound, {}), ev(m.group(5) or "1", {})
        if m.group(1) == "k0":   # the K loop: its first tile (the same places each tile; a split range's start 0)
            ranges.append(("k0", [lo or 0], guard))
            continue
        if lo is None or hi is None or not st:
            return None
        ranges.append((m.group(1), list(range(lo, hi, st)), guard))
    reqs = []
    for combo in itertools.product(*[r[1] for r in ranges]):
        fixed = {r[0]: v for r, v in zip(ranges, combo)}
        addrs = []
        for lane in range(32):
            env = {"tid": lane, "m0": 0, "n0": 0, "k0": 0, "kb": 0, "st": 0, "sk": 0, "z": 0}
            env.update(fixed)
            active = True
            for kind, s in ctx:
                if kind == "decl":
                    bx = re.search(r"tid = ty \* (\d+) \+ tx", s)   # a 2-D block: tid = ty * BX + tx
                    for name, e in decls(s):
                        if "threadIdx.x" in e and bx:
                            v = lane % int(bx.group(1))
                        elif "threadIdx.y" in e and bx:
                            v = lane // int(bx.group(1))
                        elif "threadIdx" in e:
                            v = lane
                        elif "blockIdx" in e:
                            v = 0
                        else:
                            v = ev(e, env)
                        if v is not None:
                            env[name] = v
                        else:
                            env.pop(name, None)
                elif kind == "for":   # a loop's other declarations ("for (int p = 0, rr = tid % 128; ...")
                    for part in split_top(FOR.match(s).group(3))[1:]:
                        name, e = part.split("=", 1)
                        v = ev(e.strip(), env)
                        if v is not None:
                            env[name.strip()] = v
                elif kind == "if":
                    c = re.match(r"if \((.*)\) \{$", s)
                    if c and "tid" in c.group(1):
                        v = ev(c.group(1), env)
                        if v is not None and not v:
                            active = False
            for name, _, guard in ranges:
                if guard is not None:
                    v = ev(guard, env)
                    if v is not None and not v:
                        active = False
            a = ev(idx_expr, env) if active else None
            if active and a is None:
                return None
            addrs.append(a)
        reqs.append(addrs)
    return reqs


def wavefronts(addrs, elem, width):
    """a request's wavefronts, and the least possible for its active lanes"""
    phase = 32 if width <= 4 else 16 if width == 8 else 8
    total = least = 0
    for p0 in range(0, 32, phase):
        words = {}
        nbytes = 0
        for a in addrs[p0:p0 + phase]:
            if a is None:
                continue
            b = a * elem
            nbytes += width
            for w in range(b // 4, (b + width - 1) // 4 + 1):
                words.setdefault(w % 32, set()).add(w)
        if not words:
            continue
        total += max(len(s) for s in words.values())
        least += max(1, -(-nbytes // 128)) if width > 4 else 1
    return total, least


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    path, sub, only, maxw = argv[0], None, None, None
    i = 1
    while i < len(argv):
        if argv[i] == "--kernel" and i + 1 < len(argv):
            sub = argv[i + 1]
            i += 2
        elif argv[i] == "--array" and i + 1 < len(argv):
            only = argv[i + 1]
            i += 2
        elif argv[i] == "--max-ways" and i + 1 < len(argv):
            maxw = float(argv[i + 1])
            i += 2
        else:
            print("bank_report.py: unknown argument %s" % argv[i], file=sys.stderr)
            return 2
    try:
        text = open(path).read()
    except OSError as e:
        print("bank_report.py: %s: %s" % (path, e.strerror), file=sys.stderr)
        return 2
    bad = sites = resolved = 0
    print("%-44s %6s %-3s %5s %8s %6s %6s %6s" % ("kernel", "line", "arr", "bytes", "requests", "mean", "worst", "least"))
    for name, first, kl in kernels(text):
        if sub and sub not in name:
            continue
        arr = shared_arrays(kl)
        for i, ln in enumerate(kl):
            m = STORE.match(ln)
            if not m:
                continue
            var = m.group(2) or m.group(4)
            if var not in arr or (only and var != only):
                continue
            elem, dims = arr[var]
            idx = flat_index(m.group(3) or m.group(5), dims)
            width = int(m.group(1)) // 8 if m.group(1) else elem
            reqs = site_requests(kl, i, idx)
            sites += 1
            if reqs is None:
                print("%-44s %6d %-3s %5d %8s" % (name[-44:], first + i, var, width, "unresolved"))
                continue
            resolved += 1
            wf = [wavefronts(r, elem, width) for r in reqs]
            mean = sum(w for w, _ in wf) / len(wf)
            worst = max(w / l for w, l in wf)
            least = sum(l for _, l in wf) / len(wf)
            print("%-44s %6d %-3s %5d %8d %6.2f %6.2f %6.2f" % (name[-44:], first + i, var, width, len(reqs), mean,
                                                                max(w for w, _ in wf), least))
            if maxw is not None and worst > maxw:
                bad += 1
    print("%s: %d store sites, %d resolved%s" % (path, sites, resolved, ", %d over %g times the least wavefronts" %
                                                 (bad, maxw) if maxw is not None else ""))
    return 1 if maxw is not None and (bad or not resolved) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
