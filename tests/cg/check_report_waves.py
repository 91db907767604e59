#!/usr/bin/python3
"""check_report_waves.py — the report's blocks, blocks per SM and waves are
those of the generated code, by the model docs/gpu.md documents ("The
report's time model").

    check_report_waves.py NCC EXAMPLES_DIR WORKDIR

For each case (an example model, flags, --arch) it writes MODEL.cu and the
report with the same flags, then:
  - reads every launch of MODEL_run() from the .cu (its grid at the compiled
    batch, its block, the dynamic shared memory it passes, the kernel's static
    __shared__ arrays from the kernel's text), one group per launch comment;
  - checks that the report has one inference row per group, in order, and
    that each row's `blocks` is the grid of the group's widest launch, its
    `blk/SM` the resident blocks (and the binding limit) by cuda_occupancy.h's
    rules with the documented register estimates, computed here and by
    sass_report.py's occupancy(), and its `waves` blocks / (SMs x blk/SM);
  - checks the `waves:` summary line: its totals are the sums of the rows,
    and each row's time over the roofline's is the share of the SMs the
    documented formula gives (min(1, blocks / SMs) up to one wave,
    waves / ceil(waves) past it).
And one exact case, a small convolution (built here): 12 channels of 28x28
in, 64 out, at batch 1 launch 13 blocks of the tiled GEMM, fewer than the
SMs (and K = 108 is too short for split-K to cut it), so its
time is the roofline's (computed here from the shapes) divided by 13 / SMs,
plus the launch, and more than the roofline's.
Exit 0 when all hold.  WORKDIR is removed when they do."""
import math
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_report import occupancy as sass_occupancy  # noqa: E402  (an independent implementation of the rules)

# docs/gpu.md, "The report's time model": the machine per --arch
SMS = {"sm_80": 108, "sm_90": 132}
SMEM_SM = {"sm_80": 164 * 1024, "sm_90": 228 * 1024}
PEAK = {"sm_80": 19.5e12, "sm_90": 67.0e12}
BW = {"sm_80": 1.555e12, "sm_90": 3.35e12}
LAUNCH_US = 3.0
# registers a thread by kernel kind (the documented estimates)
REGS = {"tiled": 56, "wide": 120, "w64": 72, "gemv": 32, "direct": 24, "other": 32,
        "tiled2": 64, "wide2": 128, "w642": 96}   # the float32 tiles double-buffered (two stages: "int nx = st ^ 1;")
# the tensor-core GEMM's by its tile (docs/gpu.md, "Tile choice"): (convolution, other GEMMs)
MMA_REGS = {"16x32": (64, 64), "16x64": (72, 64), "32x32": (72, 64), "32x64": (96, 64), "64x32": (96, 64),
            "64x64": (120, 64), "128x64": (160, 128), "64x128": (192, 128), "128x128": (160, 128)}


def regs_of(kind, kernel, comment):
    if kind != "mma":
        return REGS[kind]
    tile = re.search(r": tile (\d+x\d+)", comment)
    if not tile:
        raise SystemExit("%s: the launch comment names no tile: %s" % (kernel, comment))
    return MMA_REGS[tile.group(1)][0 if "_conv2d" in kernel else 1]

CASES = [
    ("lenet", [], "sm_90"),
    ("lenet", ["-O0"], "sm_80"),
    ("resnet50", [], "sm_90"),
    ("resnet50", ["-O3"], "sm_80"),
    ("resnet50", ["--set", "N=8"], "sm_90"),
    ("resnet18", ["--precision=tf32"], "sm_90"),   # tensor-core GEMMs and split-K
    ("resnet50", ["--precision=fp16", "--set", "N=32"], "sm_90"),   # the larger tiles (ir/tile.c)
    ("resnet50", ["--set", "N=32"], "sm_90"),   # the float32 wide tile (ir_fp32_wide)
    ("mobilenet_v2", [], "sm_90"),
    ("vgg16", ["--set", "N=2", "--set", "S=64"], "sm_80"),
]

SMALL = """model waves_small
input x: f32[1, 12, 28, 28]
h = relu(conv2d(x, 64, kernel=3, pad=1, name="conv"))
output h
"""


def occupancy(arch, threads, regs, smem_static, smem_dyn):
    """Resident blocks per SM and the binding limits (t, b, r, s), written
    from the rules docs/gpu.md states."""
    warps = -(-threads // 32)
    lim = {"t": 2048 // 32 // warps, "b": 32}
    regs_warp = -(-regs * 32 // 256) * 256
    lim["r"] = 0 if regs_warp * (-(-warps // 4) * 4) > 65536 else (65536 // 4 // regs_warp) * 4 // warps
    smem = -(-(smem_static + smem_dyn + 1024) // 128) * 128
    lim["s"] = 0 if smem_static > 48 * 1024 or smem > SMEM_SM[arch] else SMEM_SM[arch] // smem
    best = min(lim.values())
    return best, {k for k, v in lim.items() if v == best}


def share(arch, blocks, per_sm):
    w = blocks / (SMS[arch] * per_sm)
    return (min(1.0, blocks / SMS[arch]) if w <= 1 else w / math.ceil(w)), w


def c_int(expr, nb):
    """A grid extent as host.c writes it, at batch nb."""
    e = expr.replace("(unsigned)", "").replace("m->nb", str(nb))
    e = re.sub(r"(\d+)(?:LL|u)\b", r"\1", e).replace("/", "//")
    return int(eval(e, {"__builtins__": {}}))


def static_smem(src, kernel):
    """Bytes of a kernel's __shared__ arrays, from its definition."""
    m = re.search(r"NCC_KERNEL void (?:__launch_bounds__\(\d+, \d+\) )?%s\((.*?)\n}\n" % re.escape(kernel), src, re.S)
    if not m:
        raise SystemExit("no definition of %s" % kernel)
    total = 0
    for typ, dims in re.findall(r"(?<!extern )__shared__ (?:__align__\(\d+\) )?([\w ]+?) \w+((?:\[[^\]]+\])+);",
                                m.group(1)):
        n = 1
        for d in re.findall(r"\[([^\]]+)\]", dims):
            n *= int(eval(d, {"__builtins__": {}}))
        total += n * {"double": 8, "half": 2, "__half": 2, "short": 2, "char": 1}.get(typ.split()[-1], 4)
    return total, m.group(1)


def launches(cu, model, nb):
    """[(comment, kernel, blocks, threads, smem_static, smem_dyn, kind)] of MODEL_run()."""
    src = open(cu).read()
    body = re.search(r"static int %s_run\(%s \*m\) \{\n(.*?)\n}\n" % (model, model), src, re.S).group(1)
    out = []
    pat = (r"  /\* ([^\n]*?) \*/\n  \{\n.*?ncc_dim3 g_ = \{(.*?), (.*?), (.*?)\}, b_ = \{(\d+)u, (\d+)u, 1u\};\n"
           r"\s*rc = ncc_launch\(m->dev, &(\w+)_desc, g_, b_, (\d+), a_\);")
    for m in re.finditer(pat, body, re.S):
        comment, gx, gy, gz, bx, by, kernel, dyn = m.groups()
        blocks = c_int(gx, nb) * c_int(gy, nb) * c_int(gz, nb)
        smem, text = static_smem(src, kernel)
        # the float32 tiled GEMM, its wide tile (8 x 8 a thread, docs/gpu.md) apart
        tiled = re.search(r"__shared__ (__align__\(16\) )?float As\[", text)
        kind = ("mma" if re.search(r"_mma(_|$)", kernel) else
                ("wide" if "float acc[8][8];" in text else "w64" if "float acc[4][8];" in text else "tiled")
                + ("2" if "int nx = st ^ 1;" in text else "")
                if tiled
                else "gemv" if re.search(r"_gemv(_|$)", kernel) else "other")
        out.append((comment, kernel, blocks, int(bx) * int(by), smem, int(dyn), kind))
    if len(out) != body.count("ncc_launch("):
        raise SystemExit("%s: read %d of %d launches" % (cu, len(out), body.count("ncc_launch(")))
    return out


def report_rows(text):
    """The inference rows: (ops, time_us, blocks, blk/SM, waves) and the waves: line's totals."""
    rows = []
    for line in text.split("\n"):
        if line.startswith("# run once") or line.startswith("# multiply-adds"):
            break
        if line.startswith("#") or not line.strip():
            continue
        p = line.split()
        rows.append((line, float(p[-4]), p[-3], p[-2], p[-1]))
    m = re.search(r"^# waves: .*; modeled time ([\d.]+) us with waves and occupancy, ([\d.]+) us by the roofline alone",
                  text, re.M)
    return rows, (float(m.group(1)), float(m.group(2))) if m else None


def ncc(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise SystemExit("%s exited %d\n%s" % (" ".join(args), p.returncode, p.stderr))
    return p.stdout


def check_case(nccbin, net, flags, arch, work, problems):
    name = os.path.splitext(os.path.basename(net))[0]
    tag = "%s %s --arch %s" % (name, " ".join(flags), arch)
    cu = os.path.join(work, "%s.cu" % name)
    ncc([nccbin, net] + flags + ["-o", cu])
    rep = ncc([nccbin, net] + flags + ["--emit=report", "--arch", arch])
    model = re.search(r"^# ncc report: model (\w+), per inference, batch (\d+)", rep, re.M)
    nb = int(model.group(2))
    ls = launches(cu, model.group(1), nb)
    groups = []   # consecutive launches under one comment: one group
    for L in ls:
        if groups and groups[-1][0][0] == L[0]:
            groups[-1].append(L)
        else:
            groups.append([L])
    rows, totals = report_rows(rep)
    if len(rows) != len(groups):
        problems.append("%s: %d report rows, %d launch groups in %s_run()" % (tag, len(rows), len(groups), name))
        return
    if totals is None:
        problems.append("%s: no `# waves:` line" % tag)
        return
    roof_sum = with_sum = 0.0
    few = 0
    for (line, t, blocks, blk, waves), grp in zip(rows, groups):
        # a split-K GEMM's group: the GEMM, then the sum of its ranges (two launches)
        split = any(re.search(r"_splitk_sum(_|$)", L[1]) for L in grp)
        widest = grp[0] if split else max(grp, key=lambda L: L[2])
        _, kernel, nblocks, threads, smem, dyn, kind = widest
        if "[direct]" in line:
            kind = "direct"
        if "[gemv]" in line and kind != "gemv":
            problems.append("%s: %s: the report marks [gemv], the kernel is %s" % (tag, kernel, kind))
        regs = regs_of(kind, kernel, widest[0])
        per_sm, limits = occupancy(arch, threads, regs, smem, dyn)
        so = sass_occupancy(arch, threads, regs, smem, dyn)
        if so["blocks"] != per_sm:
            problems.append("%s: %s: %d blocks per SM here, sass_report.py's rules say %d" % (tag, kernel, per_sm,
                                                                                              so["blocks"]))
        sh, w = share(arch, nblocks, per_sm)
        want_waves = "%.*f" % (3 if w < 0.1 else 2, w)
        if blocks != str(nblocks) or int(blk[:-1]) != per_sm or blk[-1] not in limits or waves != want_waves:
            problems.append("%s: %s: report says blocks=%s blk/SM=%s waves=%s; the .cu gives %d blocks of %d threads, "
                            "%d+%d bytes shared, %d registers (%s): %d%s per SM, %s waves"
                            % (tag, kernel, blocks, blk, waves, nblocks, threads, smem, dyn, regs, kind, per_sm,
                               "/".join(sorted(limits)), want_waves))
        nl = 2 if split else 1
        if split and "split-K" not in line:
            problems.append("%s: %s: a split-K sum, but the report does not mark split-K" % (tag, kernel))
        roof_sum += (t - nl * LAUNCH_US) * sh + nl * LAUNCH_US
        with_sum += t
        few += nblocks < SMS[arch]
    n = len(rows)
    # each row's time is printed to 0.1 us: the sums agree to 0.05 us a row
    if abs(with_sum - totals[0]) > 0.05 * n + 0.05:
        problems.append("%s: the rows' times sum to %.1f us, the waves: line says %.1f" % (tag, with_sum, totals[0]))
    if abs(roof_sum - totals[1]) > 0.05 * n + 0.05:
        problems.append("%s: the rows' times times their share of the SMs sum to %.1f us, the roofline alone is %.1f"
                        % (tag, roof_sum, totals[1]))
    m = re.search(r"^# waves: (\d+) of (\d+) kernels launch fewer blocks", rep, re.M)
    if int(m.group(1)) != few or int(m.group(2)) != n:
        problems.append("%s: the waves: line counts %s of %s kernels under the SMs, the rows %d of %d"
                        % (tag, m.group(1), m.group(2), few, n))
    print("%s: %d kernels, %d under the %d SMs; %.1f us with waves, %.1f by the roofline" % (tag, n, few, SMS[arch],
                                                                                            totals[0], totals[1]))


def check_small(nccbin, work, problems):
    net = os.path.join(work, "waves_small.net")
    with open(net, "w") as f:
        f.write(SMALL)
    for arch in ("sm_80", "sm_90"):
        rep = ncc([nccbin, net, "--emit=report", "--arch", arch])
        rows, totals = report_rows(rep)
        line, t, blocks, blk, waves = rows[0]
        Ci, C, H, K = 12, 64, 28, 3
        flops = 2 * C * H * H * Ci * K * K + 2 * C * H * H   # multiply-adds, the bias, the relu
        byts = 4 * (Ci * H * H + C * Ci * K * K + C + C * H * H)
        roof = max(flops / PEAK[arch], byts / BW[arch]) * 1e6
        # the tiled GEMM: 64 output channels by 784 pixels in 64x64 tiles, two stages of As[16][68] and Bs[16][64]
        nblocks = math.ceil(H * H / 64) * math.ceil(C / 64)
        per_sm, _ = occupancy(arch, 256, REGS["tiled2"], 2 * 4 * 16 * (68 + 64), 0)
        sh, w = share(arch, nblocks, per_sm)
        want = roof / sh + LAUNCH_US
        print("small conv %s: %s blocks, %s per SM, %s waves, %.1f us (the roofline: %.1f us)"
              % (arch, blocks, blk, waves, t, roof + LAUNCH_US))
        if blocks != str(nblocks) or not w < 1 or not float(waves) < 1:
            problems.append("small conv %s: %s blocks, %s waves; expected %d blocks, under one wave" % (arch, blocks, waves,
                                                                                                         nblocks))
        if abs(t - want) > 0.0501:   # printed to 0.1 us
            problems.append("small conv %s: %.1f us, the documented model gives %.1f" % (arch, t, want))
        if not t > roof + LAUNCH_US + 1 or not totals[0] > totals[1]:
            problems.append("small conv %s: %.1f us is not above the roofline's %.1f" % (arch, t, roof + LAUNCH_US))


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    nccbin, examples, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    problems = []
    check_small(nccbin, work, problems)
    for model, flags, arch in CASES:
        check_case(nccbin, os.path.join(examples, model + ".net"), flags, arch, work, problems)
    for p in problems:
        print("FAIL: " + p)
    if not problems and not os.environ.get("NCC_KEEP_WORK"):
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
