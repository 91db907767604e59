#!/usr/bin/python3
"""sass_report.py — kernel quality of a generated model, read from its SASS.

Usage: sass_report.py [--arch sm_80,sm_90] [--json] [--summary] [--use PHASE]
                      [--venv DIR] [--nvcc NVCC] [-I DIR]... FILE.cu...

Compiles each generated FILE.cu (`ncc MODEL.net -o FILE.cu`) with
`nvcc -arch=ARCH -cubin -Xptxas -v` (ptxas_report.py's compile and parser),
disassembles the cubin (nvdisasm, else cuobjdump -sass) and prints, for each
file and architecture, one table with a row per kernel of the model (the
kernels with an NCC_KERNEL_DESC descriptor, in the file's order):

  use      where the host code launches it: inf (MODEL_run, inference),
           trn (the training step), load (MODEL_prepare: the folded
           parameters, once per load); --use infer|train|load keeps those alone
  thr      threads per block, from the file's launches (`b_ = {X, Y, 1u}`
           before `ncc_launch(..., &K_desc, ...)`); "?" when never launched
  regs, spill (stores/loads, bytes), smem (static shared memory, bytes): ptxas -v
  blk, warps, occ   theoretical occupancy: resident blocks and warps per SM and
           warps / 64, with the limits and the allocation rules of CUDA's
           cuda_occupancy.h for the architecture (registers per warp rounded
           up to 256, registers per sub-partition, shared memory in 128-byte
           units plus 1 KB reserved per block, the default carve-out) and
           lim, the limit that binds: r(egisters), s(hared memory), w(arps), b(locks)
  main loop: the hottest loop of the SASS.  A loop is the code between a
           backward branch's target and the branch; its own body is that code
           less the loops nested in it.  The main loop is the one whose own
           body has the most tensor-core instructions, then the most FMAs, then
           the deepest nesting, then the most instructions: the innermost loop
           of a tiled GEMM (over k within a tile), or the loop around it when
           ptxas unrolled that one whole; where it unrolled the loop over K
           tiles whole too (a few tiles), the code outside every loop, dep 0.
           The static mix of its own body:
             dep    nesting depth (1: outermost; 0: no loop, all unrolled)
             ins    instructions
             ffma   FFMA, and ffma% its share of ins
             mma    tensor-core instructions (HMMA, IMMA, DMMA, BMMA, HGMMA, ...)
             lds    shared-memory loads (LDS, LDSM), l128 the 128-bit ones
             lds/f, lds/m   shared loads per FFMA, per MMA
             ldg, async     global loads; LDGSTS (cp.async) and UTMALDG (TMA)
             idiv   integer divisions by a variable (I2F.*.RP, the start of
                    nvcc's division sequence), cdiv   IMAD.HI (a division or
                    modulo by a constant)
  outer loop: the outermost loop holding the main loop, whole (for a tiled
           GEMM, the loop over K tiles with the loads that fill shared
           memory): instructions, LDG, async copies, STS and BAR

A summary line follows each table.  --json prints the same as JSON, with
every kernel's full opcode counts; --summary prints the summary lines alone.

Tools: nvcc from --nvcc, $CUDA_HOME/bin, /usr/local/cuda/bin or PATH.
nvdisasm or cuobjdump from, in order: the virtual environment of --venv DIR,
the one of $NCC_SASS_VENV, $CUDA_HOME/bin, /usr/local/cuda/bin, PATH, and the
default virtual environment that tests/install-deps.sh makes,
~/.cache/ncc/sass-venv (pip packages nvidia-cuda-nvdisasm and
nvidia-cuda-cuobjdump; their programs lie under
lib/python3*/site-packages/nvidia/*/bin).  --venv may also name a folder that
holds the programs.  Exit status: 0, 1 when a compile or a disassembly
failed, 77 (the test suite's skip code) when nvcc or both disassemblers are
missing.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxas_report import compile_cubin, kernel_flags, parse_ptxas  # noqa: E402

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_VENV = os.path.join(os.path.expanduser("~"), ".cache", "ncc", "sass-venv")

# The per-SM limits of cuda_occupancy.h and the CUDA programming guide's
# table of compute capabilities (A100 for sm_80, H100 for sm_90).
ARCH_LIMITS = {
    "sm_80": {"threads_sm": 2048, "blocks_sm": 32, "regs_sm": 65536, "regs_block": 65536,
              "smem_sm": 167936, "smem_block": 49152, "smem_reserved": 1024},
    "sm_90": {"threads_sm": 2048, "blocks_sm": 32, "regs_sm": 65536, "regs_block": 65536,
              "smem_sm": 233472, "smem_block": 49152, "smem_reserved": 1024},
}
REG_UNIT, SMEM_UNIT, SUB_PARTITIONS, WARP = 256, 128, 4, 32

MMA_OPS = {"HMMA", "IMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA", "OMMA", "QMMA"}
ASYNC_OPS = {"LDGSTS", "UTMALDG"}


def round_up(x, u):
    return (x + u - 1) // u * u


# ---------------------------------------------------------------- tools

def tool_dirs(venv):
    """Folders to look in for nvdisasm/cuobjdump, in order (see the docstring)."""
    def of_venv(v):
        if not v:
            return []
        return [v, os.path.join(v, "bin")] + sorted(glob.glob(os.path.join(v, "lib", "python3*", "site-packages",
                                                                           "nvidia", "*", "bin")))
    dirs = of_venv(venv) + of_venv(os.environ.get("NCC_SASS_VENV"))
    if os.environ.get("CUDA_HOME"):
        dirs.append(os.path.join(os.environ["CUDA_HOME"], "bin"))
    dirs.append("/usr/local/cuda/bin")
    dirs += [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    return dirs + of_venv(DEFAULT_VENV)


def find_tool(name, dirs):
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def find_nvcc(given):
    if given:
        return shutil.which(given) or given
    for d in ([os.path.join(os.environ["CUDA_HOME"], "bin")] if os.environ.get("CUDA_HOME") else []) + \
            ["/usr/local/cuda/bin"]:
        if os.access(os.path.join(d, "nvcc"), os.X_OK):
            return os.path.join(d, "nvcc")
    return shutil.which("nvcc")


def disassemble(cubin, tools):
    """The cubin's SASS text with nvdisasm (labelled branches), else cuobjdump -sass."""
    if tools.get("nvdisasm"):
        r = subprocess.run([tools["nvdisasm"], "-c", cubin], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout, None
        err = "nvdisasm: " + r.stderr.strip()
    else:
        err = "no nvdisasm"
    if tools.get("cuobjdump"):
        r = subprocess.run([tools["cuobjdump"], "-sass", cubin], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout, None
        err += "; cuobjdump: " + r.stderr.strip()
    return None, err


# ---------------------------------------------------------------- parsing

def phase(fn):
    """What a host function of the generated code runs: infer (MODEL_run),
    train (MODEL_train_run), load (MODEL_prepare, the folded parameters)."""
    for suffix, name in (("_train_run", "train"), ("_prepare", "load"), ("_run", "infer")):
        if fn.endswith(suffix):
            return name
    return fn


def launch_geometry(src):
    """{kernel: {"threads": {..}, "dyn_smem": {..}, "uses": {..}}} from the
    generated host code: every launch is `ncc_dim3 g_ = {..}, b_ = {X, Y, Z};`
    followed by `ncc_launch(m->dev, &K_desc, g_, b_, DYN_SMEM, a_)`
    (codegen/cg_util.c), inside a host function that tells its phase."""
    geo = {}
    block, fn = None, ""
    for line in src.splitlines():
        m = re.match(r"(?:static )?(?:int|void) (\w+)\(", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"\bb_ = \{(\d+)u, (\d+)u, (\d+)u\}", line)
        if m:
            block = int(m.group(1)) * int(m.group(2)) * int(m.group(3))
            continue
        m = re.search(r"ncc_launch\([^,]+, &(\w+)_desc, g_, b_, (\d+)", line)
        if m and block is not None:
            g = geo.setdefault(m.group(1), {"threads": set(), "dyn_smem": set(), "uses": set()})
            g["threads"].add(block)
            g["dyn_smem"].add(int(m.group(2)))
            g["uses"].add(phase(fn))
            block = None
    return geo


INST_RE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
LABEL_RE = re.compile(r"^\s*(\.L\w+):")
FUNC_RES = (re.compile(r"^\s*\.text\.([A-Za-z_]\w*):"),          # nvdisasm
            re.compile(r"^\s*Function\s*:\s*([A-Za-z_]\w*)"))      # cuobjdump -sass


def parse_sass(text):
    """nvdisasm or cuobjdump -sass text -> {function: [inst]}, an inst being
    {"addr", "op" (opcode with modifiers), "target" (a branch's address or
    None), "never" (predicated on @!PT: never executed, e.g. the LDS RZ, [RZ]
    ptxas pads LDGSTS with)}.  nvdisasm names branch targets by label,
    cuobjdump by address."""
    funcs, cur, labels, pending = {}, None, {}, []
    fixups = []
    for line in text.splitlines():
        fm = FUNC_RES[0].match(line) or FUNC_RES[1].match(line)
        if fm:
            cur = funcs.setdefault(fm.group(1), [])
            labels, pending = {}, []
            fixups.append((cur, labels))
            continue
        if cur is None:
            continue
        lm = LABEL_RE.match(line)
        if lm:
            pending.append(lm.group(1))
            continue
        im = INST_RE.match(line)
        if not im:
            continue
        addr = int(im.group(1), 16)
        for lab in pending:
            labels[lab] = addr
        pending = []
        op, rest = im.group(3), im.group(4)
        target = None
        if op.split(".")[0] == "BRA":
            tm = re.search(r"`\((\.L\w+)\)", rest)
            if tm:
                target = tm.group(1)
            else:
                tm = re.search(r"\b0x([0-9a-f]+)\b", rest)
                if tm:
                    target = int(tm.group(1), 16)
        never = (im.group(2) or "").strip() == "@!PT"
        cur.append({"addr": addr, "op": op, "target": target, "never": never})
    for insts, labs in fixups:
        for i in insts:
            if isinstance(i["target"], str):
                i["target"] = labs.get(i["target"])
    return funcs


def find_loops(insts):
    """Loops of one function: each backward branch's target to the branch
    (branches to one head merged to the farthest), with nesting depth and
    whether another loop lies inside.  A branch to itself (the trap after
    EXIT) is no loop."""
    heads = {}
    for i in insts:
        t = i["target"]
        if t is not None and t < i["addr"]:
            heads[t] = max(heads.get(t, t), i["addr"])
    loops = [{"head": h, "tail": t} for h, t in sorted(heads.items())]
    for a in loops:
        inside = [b for b in loops if b is not a and a["head"] <= b["head"] and b["tail"] <= a["tail"]]
        around = [b for b in loops if b is not a and b["head"] <= a["head"] and a["tail"] <= b["tail"]]
        a["innermost"] = not inside
        a["depth"] = 1 + len(around)
        a["parent"] = min(around, key=lambda b: b["tail"] - b["head"]) if around else None
    return loops


def base(op):
    return op.split(".")[0]


def mix(insts, lo=None, hi=None):
    """Opcode counts of the instructions in [lo, hi] (all when lo is None),
    those never executed (@!PT) left out."""
    ops = {}
    for i in insts:
        if (lo is not None and not lo <= i["addr"] <= hi) or i.get("never"):
            continue
        ops[i["op"]] = ops.get(i["op"], 0) + 1
    return summarize(ops)


def summarize(ops):
    """The counted categories of an opcode histogram {opcode: count}."""
    c = {"ins": 0, "ffma": 0, "fma": 0, "mma": 0, "lds": 0, "l128": 0, "ldsm": 0, "ldg": 0, "async": 0,
         "ldgsts": 0, "sts": 0, "bar": 0, "idiv": 0, "cdiv": 0}
    for op, n in ops.items():
        b = base(op)
        mods = op.split(".")[1:]
        c["ins"] += n
        if b == "FFMA":
            c["ffma"] += n
        if b in ("FFMA", "DFMA") or (b == "HFMA2" and "MMA" not in mods):   # HFMA2.MMA: a move
            c["fma"] += n
        if b in MMA_OPS:
            c["mma"] += n
        if b in ("LDS", "LDSM"):
            c["lds"] += n
            if b == "LDSM":
                c["ldsm"] += n
            if "128" in mods:
                c["l128"] += n
        if b == "LDG":
            c["ldg"] += n
        if b in ASYNC_OPS:
            c["async"] += n
        if b == "LDGSTS":
            c["ldgsts"] += n
        if b == "STS":
            c["sts"] += n
        if b == "BAR":
            c["bar"] += n
        if b == "I2F" and "RP" in mods:
            c["idiv"] += n
        if b == "IMAD" and "HI" in mods:
            c["cdiv"] += n
    c["ops"] = dict(sorted(ops.items()))
    return c


def main_loop(insts):
    """(the main loop's mix, the mix of the outermost loop around it) or
    (None, None) when the function has no loop.  A loop's own body is its
    code less the loops nested in it; the main loop is the one whose own body
    has the most tensor-core instructions, then the most FMAs, then the
    deepest nesting, then the most instructions (an innermost loop, unless
    ptxas unrolled the inner loop whole: then the loop around it).  The outer
    loop is counted whole, nested loops included.  Where ptxas unrolled the K
    loop whole too (a K of a few tiles, known at compile time), the MMAs are
    in no loop: the main loop is then the code outside every loop, depth 0,
    marked unrolled, and it is its own outer loop."""
    loops = find_loops(insts)
    best = None
    for lp in loops:
        if lp["tail"] == lp["head"]:
            continue
        inner = [b for b in loops if b is not lp and lp["head"] <= b["head"] and b["tail"] <= lp["tail"]]
        own = [i for i in insts if lp["head"] <= i["addr"] <= lp["tail"]
               and not any(b["head"] <= i["addr"] <= b["tail"] for b in inner)]
        m = mix(own)
        key = (m["mma"], m["fma"], lp["depth"], m["ins"])
        if best is None or key > best[0]:
            best = (key, lp, m)
    if (best is None or best[2]["mma"] == 0) and mix(insts)["mma"] > 0:
        flat = [i for i in insts if not any(b["head"] <= i["addr"] <= b["tail"] for b in loops)]
        m = mix(flat)
        m.update(depth=0, head=insts[0]["addr"], tail=insts[-1]["addr"], innermost=True, unrolled=True)
        outer = dict(m)
        return m, outer
    if best is None:
        return None, None
    lp, m = best[1], best[2]
    m.update(depth=lp["depth"], head=lp["head"], tail=lp["tail"], innermost=lp["innermost"])
    top = lp
    while top["parent"]:
        top = top["parent"]
    outer = mix(insts, top["head"], top["tail"])
    outer.update(depth=top["depth"], head=top["head"], tail=top["tail"])
    return m, outer


# ---------------------------------------------------------------- occupancy

def occupancy(arch, threads, regs, smem, dyn_smem=0):
    """Theoretical occupancy as cuda_occupancy.h computes it with the default
    cache configuration: {"blocks", "warps", "percent", "limit"}."""
    L = ARCH_LIMITS[arch]
    warps_cta = -(-threads // WARP)
    lim = {"b": L["blocks_sm"], "w": L["threads_sm"] // WARP // warps_cta}
    regs_warp = round_up(max(regs, 1) * WARP, REG_UNIT)
    if regs > 255 or regs_warp * round_up(warps_cta, SUB_PARTITIONS) > L["regs_block"]:
        lim["r"] = 0
    else:
        lim["r"] = (L["regs_sm"] // SUB_PARTITIONS // regs_warp) * SUB_PARTITIONS // warps_cta
    smem_cta = round_up(smem + dyn_smem + L["smem_reserved"], SMEM_UNIT)
    if smem_cta > L["smem_block"] + L["smem_reserved"]:
        lim["s"] = 0     # over 48 KB needs the opt-in attribute, which ncc never sets
    else:
        lim["s"] = L["smem_sm"] // smem_cta
    blocks = min(lim.values())
    limit = "".join(k for k in "rswb" if lim[k] == blocks)
    warps = blocks * warps_cta
    return {"blocks": blocks, "warps": warps, "percent": 100.0 * warps / (L["threads_sm"] // WARP), "limit": limit}


# ---------------------------------------------------------------- report

def report_file(path, arch, nvcc, tools, incs, use=None):
    """One file at one architecture -> {"file", "arch", "kernels": [...], "summary"} or raises RuntimeError."""
    src = open(path).read()
    flags = kernel_flags(src)
    order = list(dict.fromkeys(re.findall(r"NCC_KERNEL_DESC\((\w+),", src)))
    geo = launch_geometry(src)
    with tempfile.TemporaryDirectory() as td:
        cubin = os.path.join(td, "k.cubin")
        r = compile_cubin(nvcc, arch, incs + ["-I", os.path.dirname(os.path.abspath(path))], path, cubin)
        if r.returncode:
            raise RuntimeError(f"{path}: nvcc -arch={arch} failed\n{r.stderr}")
        text, err = disassemble(cubin, tools)
        if text is None:
            raise RuntimeError(f"{path}: cannot disassemble: {err}")
    ptx = parse_ptxas(r.stderr)
    sass = parse_sass(text)
    kernels = []
    for k in order:
        p = ptx.get(k)
        insts = sass.get(k)
        if p is None or insts is None:
            raise RuntimeError(f"{path}: {'ptxas' if p is None else 'the SASS'} has no kernel {k}")
        g = geo.get(k)
        threads = max(g["threads"]) if g else None
        dyn = max(g["dyn_smem"]) if g else 0
        loop, outer = main_loop(insts)
        uses = sorted(g["uses"], key=lambda u: ("load", "infer", "train").index(u) if u in ("load", "infer", "train")
                      else 3) if g else []
        if use and use not in uses:
            continue
        kernels.append({
            "name": k, "flags": flags[k], "uses": uses, "threads": threads,
            "block_sizes": sorted(g["threads"]) if g else [],
            "regs": p["regs"], "spill_st": p["st"], "spill_ld": p["ld"], "stack": p.get("stack", 0), "smem": p["smem"], "dyn_smem": dyn,
            "barriers": p["bar"],
            "occupancy": occupancy(arch, threads, p["regs"], p["smem"], dyn) if threads else None,
            "loop": loop, "outer_loop": outer, "total": mix(insts)})
    return {"file": path, "arch": arch, "use": use, "kernels": kernels, "summary": summary(kernels)}


def median(xs):
    s = sorted(xs)
    n = len(s)
    return None if not n else (s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2)


def summary(kernels):
    """The figures of a whole model.  A GEMM loop: a main loop with FMAs or
    MMAs that reads shared memory (the tiled GEMMs and convolutions)."""
    gemm = [k for k in kernels if k["loop"] and (k["loop"]["fma"] or k["loop"]["mma"]) and k["loop"]["lds"]]
    occ = [k["occupancy"]["percent"] for k in kernels if k["occupancy"]]
    s = {"kernels": len(kernels), "gemm_loops": len(gemm),
         "spilling": sum(1 for k in kernels if k["spill_st"] or k["spill_ld"]),
         "mma": sum(k["total"]["mma"] for k in kernels),
         "async_copies": sum(k["total"]["async"] for k in kernels),
         "regs": [min(k["regs"] for k in kernels), max(k["regs"] for k in kernels)] if kernels else None,
         "occupancy": [min(occ), max(occ)] if occ else None}
    share = [100.0 * k["loop"]["ffma"] / k["loop"]["ins"] for k in gemm]
    per = [k["loop"]["lds"] / k["loop"]["ffma"] for k in gemm if k["loop"]["ffma"]]
    gocc = [k["occupancy"]["percent"] for k in gemm if k["occupancy"]]
    mshare = [100.0 * k["loop"]["mma"] / k["loop"]["ins"] for k in gemm if k["loop"]["mma"]]
    mper = [k["loop"]["lds"] / k["loop"]["mma"] for k in gemm if k["loop"]["mma"]]
    s["gemm_ffma_share"] = [min(share), median(share), max(share)] if share else None
    s["gemm_mma_share"] = [min(mshare), median(mshare), max(mshare)] if mshare else None
    s["gemm_lds_per_mma"] = [min(mper), median(mper), max(mper)] if mper else None
    s["gemm_lds_per_ffma"] = [min(per), median(per), max(per)] if per else None
    s["gemm_occupancy"] = [min(gocc), median(gocc), max(gocc)] if gocc else None
    return s


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if b else "-"


def summary_line(rep):
    s = rep["summary"]

    def rng(v, f):
        return "-" if v is None else f"{f(v[1])} (median; {f(v[0])}..{f(v[2])})"

    def pct(x):
        return f"{x:.0f}%"

    def two(x):
        return f"{x:.2f}"
    what = f"{rep['use']} kernels" if rep["use"] else "kernels"
    line = (f"{os.path.basename(rep['file'])} {rep['arch']}: {s['kernels']} {what}, {s['gemm_loops']} GEMM main loops; "
            f"spilling kernels {s['spilling']}; tensor-core instructions {s['mma']}; async copies {s['async_copies']}; "
            f"GEMM loops: FFMA share {rng(s['gemm_ffma_share'], pct)}, "
            f"shared loads per FFMA {rng(s['gemm_lds_per_ffma'], two)}, ")
    if s["gemm_mma_share"]:
        line += (f"tensor-core share {rng(s['gemm_mma_share'], pct)}, "
                 f"shared loads per MMA {rng(s['gemm_lds_per_mma'], two)}, ")
    return line + f"occupancy {rng(s['gemm_occupancy'], pct)}"


COLS = [("use", 3), ("thr", 4), ("regs", 4), ("spill", 7), ("smem", 6), ("blk", 3), ("warps", 5), ("occ", 4), ("lim", 3),
        ("|", 1), ("dep", 3), ("ins", 4), ("ffma", 4), ("ffma%", 5), ("mma", 4), ("lds", 4), ("l128", 4),
        ("lds/f", 5), ("lds/m", 5), ("ldg", 3), ("async", 5), ("idiv", 4), ("cdiv", 4),
        ("|", 1), ("ins", 4), ("ldg", 3), ("async", 5), ("sts", 3), ("bar", 3)]


def use_of(k):
    return "+".join({"infer": "inf", "train": "trn"}.get(u, u) for u in k["uses"]) or "-"


def print_table(rep):
    ks = rep["kernels"]
    w = max([len("kernel")] + [len(k["name"]) for k in ks])
    cols = [("use", max([3] + [len(use_of(k)) for k in ks]))] + COLS[1:]
    print(f"== {rep['file']} ({rep['arch']}{', ' + rep['use'] + ' kernels' if rep['use'] else ''})")
    group = f"{'':{w}} {'':{sum(c[1] + 1 for c in cols[:9]) - 1}} | {'main loop':{sum(c[1] + 1 for c in cols[10:23]) - 1}} | outer loop"
    print(group)
    print(f"{'kernel':{w}} " + " ".join(f"{n:>{cw}}" for n, cw in cols))
    for k in ks:
        o = k["occupancy"]
        lp, t = k["loop"], k["outer_loop"]
        spill = "0" if not (k["spill_st"] or k["spill_ld"]) else f"{k['spill_st']}/{k['spill_ld']}"
        v = [use_of(k), k["threads"] or "?", k["regs"], spill, k["smem"] + k["dyn_smem"]]
        v += [o["blocks"], o["warps"], f"{o['percent']:.0f}%", o["limit"]] if o else ["?"] * 4
        v.append("|")
        if lp:
            v += [lp["depth"], lp["ins"], lp["ffma"], f"{100.0 * lp['ffma'] / lp['ins']:.0f}%", lp["mma"], lp["lds"],
                  lp["l128"], fmt_ratio(lp["lds"], lp["ffma"]), fmt_ratio(lp["lds"], lp["mma"]), lp["ldg"],
                  lp["async"], lp["idiv"], lp["cdiv"]]
        else:
            v += ["-"] * 13
        v.append("|")
        v += [t["ins"], t["ldg"], t["async"], t["sts"], t["bar"]] if t else ["-"] * 5
        print(f"{k['name']:{w}} " + " ".join(f"{str(x):>{cw}}" for x, (_, cw) in zip(v, cols)))
    print(summary_line(rep))


def main(argv):
    archs, as_json, only_summary, venv, nvcc, incs, files, use = [], False, False, None, None, [], [], None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--arch", "--venv", "--nvcc", "-I", "--use") and i + 1 >= len(argv):
            print(f"sass_report.py: {a} needs a value", file=sys.stderr)
            return 2
        if a == "--arch":
            archs += [x for x in argv[i + 1].split(",") if x]; i += 2; continue
        if a == "--venv":
            venv = argv[i + 1]; i += 2; continue
        if a == "--nvcc":
            nvcc = argv[i + 1]; i += 2; continue
        if a == "--use":
            use = argv[i + 1]; i += 2; continue
        if a == "-I":
            incs += ["-I", argv[i + 1]]; i += 2; continue
        if a == "--json":
            as_json = True
        elif a == "--summary":
            only_summary = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("-"):
            print(f"sass_report.py: unknown option {a} (--help)", file=sys.stderr)
            return 2
        else:
            files.append(a)
        i += 1
    archs = archs or ["sm_80", "sm_90"]
    bad = [a for a in archs if a not in ARCH_LIMITS]
    if bad or not files:
        print(f"sass_report.py: {'unknown architecture ' + ','.join(bad) if bad else 'no FILE.cu'}"
              f" (architectures: {', '.join(ARCH_LIMITS)}; --help)", file=sys.stderr)
        return 2
    nvcc = find_nvcc(nvcc)
    dirs = tool_dirs(venv)
    tools = {"nvdisasm": find_tool("nvdisasm", dirs), "cuobjdump": find_tool("cuobjdump", dirs)}
    if not nvcc or not (tools["nvdisasm"] or tools["cuobjdump"]):
        what = "nvcc" if not nvcc else "nvdisasm and cuobjdump"
        print(f"skipped: {what} not found (looked in --venv, $NCC_SASS_VENV, $CUDA_HOME/bin, /usr/local/cuda/bin, "
              f"PATH, {DEFAULT_VENV}; tests/install-deps.sh makes that venv)")
        return SKIP
    incs = incs + ["-I", os.path.normpath(os.path.join(HERE, "..", "..", "runtime"))]
    reps, rc = [], 0
    for f in files:
        for arch in archs:
            try:
                rep = report_file(f, arch, nvcc, tools, incs, use)
            except (RuntimeError, OSError) as e:
                print(e, file=sys.stderr)
                rc = 1
                continue
            reps.append(rep)
            if only_summary:
                print(summary_line(rep))
            elif not as_json:
                print_table(rep)
                print()
    if as_json:
        json.dump({"tools": {"nvcc": nvcc, **tools}, "reports": reps}, sys.stdout, indent=1)
        print()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
