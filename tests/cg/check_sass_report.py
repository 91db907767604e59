#!/usr/bin/python3
"""check_sass_report.py — tests of sass_report.py (the kernel-quality report).

  check_sass_report.py --parse
      no tool needed: the SASS parser on hand-written listings in both
      disassemblers' formats (loops, nesting, the main loop, the instruction
      mix), the launch-geometry parser, and the occupancy rules on cases
      worked out by hand from cuda_occupancy.h.
  check_sass_report.py --report NCC NVCC MODEL.net WORKDIR
      the report on a real model: ncc MODEL.net -O3, then sass_report.py for
      sm_80 and sm_90.  Every kernel of the model has a row with a register
      count, a block size and an occupancy; every forward convolution and
      linear layer (a tiled GEMM: NCC_KF_BARRIER) has a main loop with FFMAs
      and shared loads inside a loop over K tiles with global loads and
      barriers; the text table has one row per kernel and a summary line.
      Exits 77 (skipped) when sass_report.py finds no nvcc or disassembler.
  check_sass_report.py --tensor-cores NCC NVCC EXAMPLES WORKDIR
      the tensor-core GEMMs (--precision=tf32, ir_gemm_mma; ResNet-50 at tf32, MobileNetV2 at bf16 and
      VGG-16 at fp16 once each at sm_90; ResNet-18 at int8 (IMMA), fp16 and
      the MLP at bf16 too; ResNet-18 at tf32 with the 128 x 128 tile and at
      int8 with 128 x 64, --gemm-tile, and at fp16 with --gemm-stages (the digits network at 128 x 128 with
      four asked, three given, and the MLP with three; cp.async copies in every main loop where the source
      stages by cp.async), those at sm_90 only), and the digits network's fp16 training step at sm_90 (the
      gradients' GEMMs, the data gradient's convolution staged by cp.async), and a training step's strided
      data gradients by phases (PHASES_NET, fp16, sm_90): ResNet-18 and
      the MLP (batch 64) at -O3, sm_80 and sm_90.  Every convolution and
      linear layer that is not a GEMV or a direct convolution is an "_mma"
      kernel, and every "_mma" kernel has tensor-core instructions in its
      main loop, at most 2 shared loads per MMA, no spills and at least two
      resident blocks per SM (or one block of at least 8 warps: the 128 x 128
      tile's).  Exits 77 as --report does.
  check_sass_report.py --fp32-wide NCC NVCC WORKDIR
      the float32 GEMM's float4 tiles at sm_80 and sm_90: a convolution the
      tile rule makes wide (ir_fp32_wide), a linear layer and a matmul at
      64 x 64, then forced wide (--gemm-tile=128x128).  Every wide kernel's
      main loop is at least 80% FFMA, its shared loads all 128-bit and at most
      one for 16 FFMAs; every 64 x 64 one's at least 70% FFMA, 128-bit loads,
      one for 8 FFMAs at most; no spill, no stack frame, two blocks an SM;
      the wide ones double-buffered (one barrier in the loop over K tiles,
      with the next tile's global loads and shared stores), the 64 x 64 ones
      too with --gemm-stages=2, else with two barriers.
      Exits 77 as --report does.
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sass_report as sr  # noqa: E402

fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL", what)


NVDISASM = """
//--------------------- .text.k_gemm --------------------------
\t.section\t.text.k_gemm,"ax",@progbits
        .global         k_gemm
k_gemm:
.text.k_gemm:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0020*/                   STS [R3], R2 ;
        /*0030*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
.L_x_0:
        /*0040*/                   LDS.128 R8, [R3] ;
        /*0050*/                   LDS R12, [R3+0x40] ;
        /*0060*/                   FFMA R16, R8, R12, R16 ;
        /*0070*/                   FFMA R17, R9, R12, R17 ;
        /*0080*/                   HFMA2.MMA R20, -RZ, RZ, 0, 0 ;
        /*0090*/                   ISETP.NE.AND P0, PT, R5, 0x10, PT ;
        /*00a0*/               @P0 BRA `(.L_x_0) ;
        /*00b0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00c0*/                   I2F.U32.RP R6, R7 ;
        /*00d0*/                   IMAD.HI R6, R7, 0x55555556, RZ ;
        /*00e0*/              @!P1 BRA `(.L_x_1) ;
        /*00f0*/                   EXIT ;
.L_x_2:
        /*0100*/                   BRA `(.L_x_2);
//--------------------- .text.k_flat --------------------------
.text.k_flat:
        /*0000*/                   FFMA R1, R2, R3, R4 ;
        /*0010*/                   EXIT ;
.L_x_3:
        /*0020*/                   BRA `(.L_x_3);
"""

CUOBJDUMP = """
\tcode for sm_90
\t\tFunction : k_unrolled
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;                  /* 0x00000a00ff017b82 */
                                                                           /* 0x000fe20000000800 */
        /*0010*/                   LDG.E R2, desc[UR4][R4.64] ;            /* 0x0000000000097919 */
        /*0020*/                   STS [R3], R2 ;                          /* 0x0000000000097919 */
        /*0030*/              @P0 BRA 0x10 ;                               /* 0x0000000000097919 */
        /*0040*/                   LDS R8, [R3] ;                          /* 0x0000000000097919 */
        /*0050*/                   FFMA R16, R8, R8, R16 ;                 /* 0x0000000000097919 */
        /*0060*/                   HMMA.16816.F32.TF32 R20, R4, R8, R20 ;  /* 0x0000000000097919 */
        /*0070*/              @P1 BRA 0x0 ;                                /* 0x0000000000097919 */
        /*0080*/                   EXIT ;                                  /* 0x0000000000097919 */
        /*0090*/                   BRA 0x90;                               /* 0x0000000000097919 */
"""


def parse_tests():
    f = sr.parse_sass(NVDISASM)
    check(sorted(f) == ["k_flat", "k_gemm"], f"nvdisasm functions: {sorted(f)}")
    g = f["k_gemm"]
    check(len(g) == 17, f"k_gemm: {len(g)} instructions, not 17")
    loops = sr.find_loops(g)
    check([(lp["head"], lp["tail"], lp["depth"], lp["innermost"]) for lp in loops] ==
          [(0x10, 0xe0, 1, False), (0x40, 0xa0, 2, True)], f"k_gemm loops: {loops}")
    m, o = sr.main_loop(g)
    want = {"ins": 7, "ffma": 2, "fma": 2, "mma": 0, "lds": 2, "l128": 1, "ldg": 0, "async": 0, "bar": 0,
            "idiv": 0, "cdiv": 0, "depth": 2, "head": 0x40}
    check(m and all(m[k] == v for k, v in want.items()), f"k_gemm main loop: {m}")
    want = {"ins": 14, "ldg": 1, "sts": 1, "bar": 2, "idiv": 1, "cdiv": 1, "ffma": 2, "head": 0x10}
    check(o and all(o[k] == v for k, v in want.items()), f"k_gemm outer loop: {o}")
    check(sr.main_loop(f["k_flat"]) == (None, None), "k_flat: no loop (the trap after EXIT is none)")

    f = sr.parse_sass(CUOBJDUMP)
    check(list(f) == ["k_unrolled"], f"cuobjdump functions: {list(f)}")
    m, o = sr.main_loop(f["k_unrolled"])
    # the MMA sits in the outer loop's own body: the inner loop only loads
    want = {"ins": 5, "ffma": 1, "mma": 1, "lds": 1, "ldg": 0, "depth": 1, "innermost": False, "head": 0}
    check(m and all(m[k] == v for k, v in want.items()), f"k_unrolled main loop: {m}")
    check(o and o["ins"] == 8 and o["ldg"] == 1 and o["sts"] == 1, f"k_unrolled outer loop: {o}")
    k = {"name": "k_unrolled", "uses": ["infer"], "regs": 40, "spill_st": 0, "spill_ld": 0, "loop": m,
         "occupancy": sr.occupancy("sm_90", 128, 40, 0), "total": sr.mix(f["k_unrolled"])}
    s = sr.summary([k])
    check(s["gemm_loops"] == 1 and s["mma"] == 1 and s["gemm_mma_share"] == [20.0] * 3
          and s["gemm_lds_per_mma"] == [1.0] * 3 and s["gemm_lds_per_ffma"] == [1.0] * 3, f"summary: {s}")
    line = sr.summary_line({"file": "k.cu", "arch": "sm_90", "use": None, "kernels": [k], "summary": s})
    check("tensor-core share 20%" in line and "tensor-core instructions 1;" in line, f"summary line: {line}")

    src = """
static int net_run(net *m) {
    ncc_dim3 g_ = {(unsigned)m->nb, 4u, 1u}, b_ = {16u, 16u, 1u};
    rc = ncc_launch(m->dev, &net_k0_conv2d_desc, g_, b_, 0, a_);
    ncc_dim3 g_ = {7u, 1u, 1u}, b_ = {256u, 1u, 1u};
    rc = ncc_launch(m->dev, &net_k1_relu_desc, g_, b_, 0, a_);
}
static int net_train_run(net *m) {
    ncc_dim3 g_ = {1u, 1u, 1u}, b_ = {32u, 1u, 1u};
    rc = ncc_launch(m->dev, &net_k1_relu_desc, g_, b_, 512, a_);
}
static int net_prepare(net *m) {
    ncc_dim3 g_ = {1u, 1u, 1u}, b_ = {256u, 1u, 1u};
    rc = ncc_launch(m->dev, &net_prep2_mul_desc, g_, b_, 0, a_);
"""
    geo = sr.launch_geometry(src)
    check(geo == {"net_k0_conv2d": {"threads": {256}, "dyn_smem": {0}, "uses": {"infer"}},
                  "net_k1_relu": {"threads": {256, 32}, "dyn_smem": {0, 512}, "uses": {"infer", "train"}},
                  "net_prep2_mul": {"threads": {256}, "dyn_smem": {0}, "uses": {"load"}}}, f"launch geometry: {geo}")

    # (arch, threads, regs, smem) -> (blocks, warps, limit), by hand:
    #  48 regs: 1536 per warp, 16384 / 1536 = 10 warps per sub-partition, 40 per SM, 5 blocks of 8 warps;
    #  8320 + 1024 bytes = 9344 per block: 167936 / 9344 = 17, 233472 / 9344 = 24
    #  40000 + 1024 -> 41088 (128-byte units): 167936 / 41088 = 4 blocks, 233472 / 41088 = 5
    #  13 regs -> 512 per warp: 32 warps per sub-partition, the 64-warp limit binds
    #  32 threads, 16 regs: the 32-block limit binds (32 warps)
    #  255 regs -> 8192 per warp: 2 warps per sub-partition, 8 per SM: one block of 8 warps
    cases = [("sm_80", 256, 48, 8320, (5, 40, "r")), ("sm_90", 256, 48, 8320, (5, 40, "r")),
             ("sm_80", 128, 32, 40000, (4, 16, "s")), ("sm_90", 128, 32, 40000, (5, 20, "s")),
             ("sm_90", 256, 13, 0, (8, 64, "w")), ("sm_80", 32, 16, 0, (32, 32, "b")),
             ("sm_80", 256, 255, 0, (1, 8, "r")), ("sm_90", 256, 64, 0, (4, 32, "r")),
             ("sm_80", 256, 16, 48 * 1024 + 1, (0, 0, "s"))]
    for arch, thr, regs, smem, (b, w, lim) in cases:
        o = sr.occupancy(arch, thr, regs, smem)
        check((o["blocks"], o["warps"], o["limit"]) == (b, w, lim) and abs(o["percent"] - 100.0 * w / 64) < 1e-9,
              f"occupancy {arch} {thr} threads {regs} regs {smem} B: {o}, want {(b, w, lim)}")


def report_json(cmd):
    """sass_report.py --json's data, or the exit status to return: SKIP
    without the tools, 1 (a failed check) when it failed."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == sr.SKIP:
        print(r.stdout.strip())
        return sr.SKIP
    check(r.returncode == 0, f"sass_report.py --json exited {r.returncode}: {r.stderr}")
    return 1 if r.returncode else json.loads(r.stdout)


def report_tests(ncc, nvcc, net, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    name = os.path.splitext(os.path.basename(net))[0]
    cu = os.path.join(work, name + ".cu")
    subprocess.run([ncc, net, "-O3", "-o", cu], check=True)
    tool = [sys.executable, os.path.join(HERE, "sass_report.py"), "--nvcc", nvcc]
    data = report_json(tool + ["--json", "--arch", "sm_80,sm_90", cu])
    if not isinstance(data, dict):
        return data
    print("tools:", data["tools"])
    src = open(cu).read()
    names = re.findall(r"NCC_KERNEL_DESC\((\w+), (\w+),", src)
    gemms = [k for k, fl in names if re.search(r"_(conv2d|linear)(_|$)", k) and "_bwd" not in k
             and "_gemv" not in k and fl == "NCC_KF_BARRIER"]   # a GEMV has no shared-memory tiles
    check(len(gemms) >= 2, f"{name}: only {gemms} as forward GEMM kernels")
    check([r["arch"] for r in data["reports"]] == ["sm_80", "sm_90"], "one report per architecture")
    for rep in data["reports"]:
        arch = rep["arch"]
        ks = {k["name"]: k for k in rep["kernels"]}
        check([k["name"] for k in rep["kernels"]] == [k for k, _ in names], f"{arch}: the kernels, in order")
        for k in rep["kernels"]:
            n = f"{arch} {k['name']}"
            check(k["regs"] > 0, f"{n}: no register count")
            check(k["uses"] and set(k["uses"]) <= {"infer", "train", "load"}, f"{n}: launched by {k['uses']}")
            check(k["threads"] and k["threads"] % 32 == 0 or k["threads"] in (1, 2, 4, 8, 16), f"{n}: block {k['threads']}")
            o = k["occupancy"]
            check(o and 1 <= o["blocks"] <= 32 and 0 < o["warps"] <= 64 and o["limit"], f"{n}: occupancy {o}")
            check(k["spill_st"] >= 0 and k["spill_ld"] >= 0 and k["smem"] >= 0, f"{n}: ptxas figures")
            check(k["total"]["ins"] > 0, f"{n}: no SASS")
            lp = k["loop"]
            if lp:
                check(0 < lp["ins"] <= k["total"]["ins"] and lp["depth"] >= 1, f"{n}: main loop {lp}")
                check(k["outer_loop"] and k["outer_loop"]["ins"] >= lp["ins"], f"{n}: outer loop")
        for g in gemms:
            k = ks.get(g)
            lp = k and k["loop"]
            n = f"{arch} {g}"
            check(bool(lp), f"{n}: a tiled GEMM without a main loop")
            if not lp:
                continue
            check(lp["ffma"] + lp["mma"] > 0 and lp["lds"] > 0, f"{n}: main loop without FMAs or shared loads: {lp}")
            check(0 < lp["ffma"] <= lp["ins"] and 0 < lp["lds"] / max(lp["ffma"], 1) <= 4, f"{n}: FFMA/LDS {lp}")
            o = k["outer_loop"]
            check(o["ldg"] + o["async"] > 0 and o["bar"] > 0 and o["sts"] + o["async"] > 0, f"{n}: K loop {o}")
            check(k["smem"] > 0 and k["barriers"] > 0, f"{n}: no shared memory or barrier")
        s = rep["summary"]
        check(s["kernels"] == len(names) and s["gemm_loops"] >= len(gemms), f"{arch}: summary {s}")
        check(s["gemm_ffma_share"] and 0 < s["gemm_ffma_share"][0] <= s["gemm_ffma_share"][2] <= 100,
              f"{arch}: FFMA share {s['gemm_ffma_share']}")
    r = subprocess.run(tool + ["--json", "--arch", "sm_90", "--use", "infer", cu], capture_output=True, text=True)
    inf = json.loads(r.stdout)["reports"][0]["kernels"] if r.returncode == 0 else []
    check(gemms and all("infer" in k["uses"] for k in inf) and set(gemms) <= {k["name"] for k in inf}
          and len(inf) < len(names), f"--use infer: {[k['name'] for k in inf]}")
    r = subprocess.run(tool + ["--arch", "sm_90", cu], capture_output=True, text=True)
    check(r.returncode == 0, f"sass_report.py (text) exited {r.returncode}: {r.stderr}")
    lines = r.stdout.splitlines()
    rows = [ln for ln in lines if ln.split() and ln.split()[0] in dict(names)]
    check(len(rows) == len(names), f"text table: {len(rows)} rows for {len(names)} kernels")
    check(all(len(ln) == len(rows[0]) for ln in rows), "text table: fixed columns")
    check(any(ln.startswith(f"{name}.cu sm_90: {len(names)} kernels") for ln in lines), "text table: summary line")
    print("\n".join(lines[:6] + ["..."] + lines[-2:]))
    if not fails and os.environ.get("NCC_KEEP_WORK", "0") != "1":
        shutil.rmtree(work, ignore_errors=True)
    return 0


def async_kernels(cu):
    """The kernels of a generated file whose shared tiles are staged by cp.async (their declaration says so)"""
    names, cur = set(), None
    for line in open(cu):
        m = re.match(r"NCC_KERNEL void (\w+)\(", line)
        if m:
            cur = m.group(1)
        elif cur and "stages: cp.async" in line:
            names.add(cur)
    return names


def mma_rules(n, k):
    """A tensor-core kernel's rules: MMAs in its main loop, at most 2 shared loads a MMA (a warp's tile
    of one MMA, 16 x 8, takes A's fragment and B's with a load each: a training step's weight gradient
    of few columns), no spill, no stack frame, two blocks an SM or one of 8 warps."""
    lp = k["loop"]
    check(bool(lp) and lp["mma"] > 0, f"{n}: no tensor-core instruction in the main loop: {lp}")
    check(bool(lp) and lp["lds"] <= 2 * lp["mma"], f"{n}: more than 2 shared loads per MMA: {lp}")
    check(k["spill_st"] == 0 and k["spill_ld"] == 0, f"{n}: spills {k['spill_st']}/{k['spill_ld']}")
    # the accumulators in registers to the end: no local array (the epilogue unrolled whole, NCC_UNROLL)
    check(k["stack"] == 0, f"{n}: a stack frame of {k['stack']} bytes")
    # two blocks an SM, or one of 8 warps (the 128 x 128 tile: as many warps as two blocks of 4)
    check(k["occupancy"] and (k["occupancy"]["blocks"] >= 2 or k["occupancy"]["warps"] >= 8),
          f"{n}: occupancy {k['occupancy']}")


# A training step with two strided data gradients by phases: a 3x3 at stride 2 (phases of 1, 2, 2 and 4
# taps) and a 1x1 downsample (one phase of four with a tap)
PHASES_NET = """model phases
const N = 8
input x: f32[N, 16, 16, 16]
input y: i32[N]
h = relu(conv2d(x, 64, kernel=3, pad=1, bias=false, name="c0"))
m = relu(conv2d(h, 128, kernel=3, stride=2, pad=1, bias=false, name="c1"))
d = conv2d(h, 128, kernel=1, stride=2, bias=false, name="down")
logits = linear(flatten(global_avgpool2d(m + d)), 10, name="fc")
output logits
loss = cross_entropy(logits, y)
train {
  optimizer sgd(lr=0.1)
  minimize loss
}
"""


def tensor_core_tests(ncc, nvcc, examples, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cus, tiled, staged = [], [], []
    rn = ["--set", "N=2", "--set", "S=64"]
    # int8: a calibration first (random rows, the initial weights of seed 0),
    # its cache then read by the compile
    import numpy as np
    cal, cache = os.path.join(work, "cal.npy"), os.path.join(work, "cal.txt")
    np.save(cal, np.random.default_rng(0).uniform(-1, 1, (4, 3, 64, 64)).astype(np.float32))
    subprocess.run([ncc, "bench", os.path.join(examples, "resnet18.net"), "-O3", "--device", "emu", "--iters", "1",
                    "--warmup", "0", "--precision=int8", "--calibrate=" + cal, "--calibration-cache=" + cache,
                    "--int8-max-error=1e9"] + rn, check=True, stdout=subprocess.DEVNULL)
    q8 = ["--calibration-cache=" + cache, "--int8-max-error=1e9"]
    # and the larger tiles the tile model may choose (forced here: at N=2 it keeps the defaults)
    for net, sets, prec in (("resnet18", rn, "tf32"), ("mlp", [], "tf32"), ("resnet18", rn, "fp16"), ("mlp", [], "bf16"),
                            ("resnet18", rn + q8, "int8"), ("resnet18", rn + ["--gemm-tile=128x128"], "tf32"),
                            ("resnet18", rn + q8 + ["--gemm-tile=128x64"], "int8"),
                            ("digits", ["--gemm-tile=128x128", "--gemm-stages=4"], "fp16"),
                            ("mlp", ["--gemm-stages=3"], "fp16")):
        tile = [s.split("=")[1] for s in sets if s.startswith("--gemm-tile=")]
        st = [s.split("=")[1] for s in sets if s.startswith("--gemm-stages=")]
        cu = os.path.join(work, "%s_%s%s%s.cu" % (net, prec, "_" + tile[0] if tile else "", "_s" + st[0] if st else ""))
        if st:
            staged.append(cu)
        if tile or st:   # the larger tiles and deeper pipelines at sm_90 alone (the ptxas and SASS time: the slow test's own)
            tiled.append(cu)
        subprocess.run([ncc, os.path.join(examples, net + ".net"), "-O3", "--precision=" + prec, "-o", cu] + sets,
                       check=True)
        cus.append(cu)
    # the other example models, once each at sm_90 (the rules hold for every tensor-core GEMM of every
    # model): ResNet-50's bottlenecks at tf32, MobileNetV2's pointwise convolutions at bf16, VGG-16 at fp16
    for net, sets, prec in (("resnet50", rn, "tf32"), ("mobilenet_v2", rn, "bf16"),
                            ("vgg16", ["--set", "N=2", "--set", "S=32"], "fp16")):
        cu = os.path.join(work, "%s_%s.cu" % (net, prec))
        subprocess.run([ncc, os.path.join(examples, net + ".net"), "-O3", "--precision=" + prec, "-o", cu] + sets,
                       check=True)
        cus.append(cu)
        tiled.append(cu)
    tool = [sys.executable, os.path.join(HERE, "sass_report.py"), "--nvcc", nvcc, "--use", "infer"]
    both = [cu for cu in cus if cu not in tiled]
    data = report_json(tool + ["--json", "--arch", "sm_80,sm_90"] + both)
    if not isinstance(data, dict):
        return data
    data90 = report_json(tool + ["--json", "--arch", "sm_90"] + tiled)
    if not isinstance(data90, dict):
        return data90
    reps = data["reports"] + data90["reports"]
    check(len(reps) == 2 * len(both) + len(tiled), f"{len(reps)} reports for {len(both)} files x 2 architectures "
          f"and {len(tiled)} at sm_90")
    nmma = nstaged = 0
    for rep in reps:
        where = f"{os.path.basename(rep['file'])} {rep['arch']}" if "file" in rep else rep["arch"]
        for k in rep["kernels"]:
            n = f"{where} {k['name']}"
            gemm = re.search(r"_(conv2d|linear|matmul)(_|$)", k["name"]) and not re.search(r"_(gemv|direct)(_|$)", k["name"])
            if gemm and "_mma" not in k["name"]:
                # a direct convolution has no form suffix: it is the one without barriers
                check(k["barriers"] == 0, f"{n}: a tiled GEMM at tf32/fp16/bf16/int8 that is not on tensor cores")
            if "_mma" not in k["name"]:
                continue
            nmma += 1
            lp = k["loop"]
            mma_rules(n, k)
            # --gemm-stages: a kernel whose source stages an operand by cp.async has LDGSTS in its main loop
            if rep.get("file") in staged and k["name"] in async_kernels(rep["file"]):
                check(bool(lp) and lp["ldgsts"] > 0, f"{n}: no LDGSTS in the main loop with --gemm-stages: {lp}")
                nstaged += 1
            if lp:
                print(f"{n}: regs {k['regs']}, {k['occupancy']['blocks']} blocks/SM, main loop {lp['mma']} MMA, "
                      f"{lp['lds']} LDS, {lp['ffma']} FFMA")
    check(nmma >= 2 * (2 * len(both) + len(tiled)), f"only {nmma} tensor-core kernels")
    check(nstaged >= 2 * len(staged), f"only {nstaged} kernels with staged cp.async copies")
    # a training step's GEMMs (the digits network at fp16, sm_90): the forward's, the gradients' tiled
    # GEMMs and the data gradient's convolution (autodiff's dgrad_as_conv) under the same rules, and that
    # convolution, launched after the loss's gradient, stages its reversed 16-bit weight by cp.async
    tcu = os.path.join(work, "digits_fp16_train.cu")
    subprocess.run([ncc, os.path.join(examples, "digits.net"), "--train", "--precision=fp16", "-o", tcu], check=True)
    trn = report_json([sys.executable, os.path.join(HERE, "sass_report.py"), "--nvcc", nvcc, "--use", "train",
                       "--json", "--arch", "sm_90", tcu])
    if not isinstance(trn, dict):
        return trn
    src = open(tcu).read()
    order = re.findall(r"&(\w+)_desc, g_, b_", src[src.find("_train_run("):])
    loss = next((i for i, k in enumerate(order) if k.endswith("_cross_entropy_bwd")), len(order))
    dgrad = {k for k in order[loss:] if re.search(r"_conv2d_mma", k) and "_bwd_" not in k}
    check(len(dgrad) == 1, f"the digits step's data gradient as one convolution on tensor cores: {sorted(dgrad)}")
    ntrain = 0
    for rep in trn["reports"]:
        for k in rep["kernels"]:
            if "_mma" not in k["name"]:
                continue
            ntrain += 1
            n, lp = f"digits training {k['name']}", k["loop"]
            mma_rules(n, k)
            if k["name"] in dgrad:
                check(k["name"] in async_kernels(tcu) and bool(lp) and lp["ldgsts"] > 0,
                      f"{n}: the data gradient's convolution should stage its weight by cp.async: {lp}")
            print(f"{n}: regs {k['regs']}, {k['occupancy']['blocks']} blocks/SM, main loop {lp and lp['mma']} MMA")
    check(ntrain >= 5, f"only {ntrain} tensor-core kernels in the digits training step")
    # strided data gradients by phases (ir_dgrad_phases), a 3x3 and a 1x1 at stride 2, fp16 training, sm_90:
    # the same rules, and the 3x3's transposed weight staged by cp.async
    pnet, pcu = os.path.join(work, "phases.net"), os.path.join(work, "phases_fp16_train.cu")
    with open(pnet, "w") as f:
        f.write(PHASES_NET)
    subprocess.run([ncc, pnet, "--train", "--precision=fp16", "-o", pcu], check=True)
    prn = report_json([sys.executable, os.path.join(HERE, "sass_report.py"), "--nvcc", nvcc, "--use", "train",
                       "--json", "--arch", "sm_90", pcu])
    if not isinstance(prn, dict):
        return prn
    phased = {}   # kernel: its phases reordered (zp: the 3x3's)
    for body in open(pcu).read().split("NCC_KERNEL void ")[1:]:
        name = re.match(r"(?:__launch_bounds__\([\d, ]+\) )?(\w+)\(", body).group(1)
        if "the block's phase" in body.split("\n}\n", 1)[0]:
            phased[name] = " zp = " in body.split("\n}\n", 1)[0]
    check(len(phased) == 2, f"two data gradients by phases in {pcu}: {sorted(phased)}")
    for rep in prn["reports"]:
        for k in rep["kernels"]:
            if k["name"] not in phased:
                continue
            n, lp = f"phases {k['name']}", k["loop"]
            mma_rules(n, k)
            if phased[k["name"]]:   # the 3x3: its phases ordered (zp), its weight transposed
                check(k["name"] in async_kernels(pcu) and bool(lp) and lp["ldgsts"] > 0,
                      f"{n}: the 3x3's transposed weight should be staged by cp.async: {lp}")
            print(f"{n}: regs {k['regs']}, {k['occupancy']['blocks']} blocks/SM, main loop {lp and lp['mma']} MMA, "
                  f"{lp and lp['ins']} instructions")
    if not fails and os.environ.get("NCC_KEEP_WORK", "0") != "1":
        shutil.rmtree(work, ignore_errors=True)
    return 0


# The float32 GEMM's wide tile (ir_fp32_wide): a convolution the tile rule gives it (128 channels at 56 x 56,
# 16 images: 392 blocks of 128 x 128), and a linear layer and a matmul with it forced (--gemm-tile=128x128)
WIDE_NET = """model wide
input x: f32[16, 128, 56, 56]
input a: f32[256, 300]
input b: f32[4, 200, 136]
input c: f32[4, 136, 130]
y = relu(conv2d(x, 128, kernel=3, pad=1, name="conv"))
z = relu(linear(a, 260, name="fc"))
w = matmul(b, c)
output y
output z
output w
"""


def fp32_wide_tests(ncc, nvcc, work):
    """The float32 tiled GEMM's float4 tiles, at sm_80 and sm_90: every wide kernel's main loop (128 x 128,
    8 x 8 a thread) FFMAs at least 80% of its instructions, its shared loads all 128-bit and at most one for
    16 FFMAs; every 64 x 64 one's (4 x 4 a thread) at least 70% FFMA, its shared loads all 128-bit, one for
    8 FFMAs at most; no spill, no stack frame, two blocks an SM for both.  The wide tile double-buffered
    (Node.pipe: one barrier a K tile, the next tile's global loads and stores in the loop), the 64 x 64 one
    with --gemm-stages=2 (the third file), else one stage (two barriers a K tile).  The convolution's and
    the linear layer's epilogues store four columns a 128-bit store."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    net = os.path.join(work, "wide.net")
    with open(net, "w") as f:
        f.write(WIDE_NET)
    cus = []
    for tag, flags in (("auto", []), ("forced", ["--gemm-tile=128x128"]), ("stages2", ["--gemm-stages=2"]),
                       ("w64", ["--gemm-tile=64x128"])):
        cu = os.path.join(work, "wide_%s.cu" % tag)
        subprocess.run([ncc, net, "-o", cu] + flags, check=True)
        cus.append(cu)
    src = {cu: open(cu).read() for cu in cus}
    data = report_json([sys.executable, os.path.join(HERE, "sass_report.py"), "--nvcc", nvcc, "--json",
                        "--arch", "sm_80,sm_90"] + cus)
    if not isinstance(data, dict):
        return data
    seen = {"wide": 0, "64x64": 0, "64x128": 0}
    for rep in data["reports"]:
        text = src[rep["file"]]
        for k in rep["kernels"]:
            if not re.search(r"_(conv2d|linear|matmul)(_|$)", k["name"]) or "splitk_sum" in k["name"]:
                continue
            body = text.split("void " + k["name"] + "(", 1)[1].split("\n}\n", 1)[0]
            n, lp = f"{os.path.basename(rep['file'])} {rep['arch']} {k['name']}", k["loop"]
            tile = ("wide" if "float acc[8][8];" in body else "64x64" if "float acc[4][4];" in body
                    else "64x128" if "float acc[4][8];" in body else None)
            two = tile == "wide" or rep["file"].endswith("_stages2.cu")   # two stages expected
            check(tile is not None and ("ncc_lds4(af, &As[st][kk][4 * ty]);" if two else
                                        "ncc_lds4(af, &As[kk][4 * ty]);") in body,
                  f"{n}: not the 128 x 128, 64 x 128 or 64 x 64 tile, or a float a load, or not {1 + two} stage(s)")
            if tile is None:
                continue
            seen[tile] += 1
            share, per = {"wide": (0.8, 16), "64x128": (0.8, 10), "64x64": (0.7, 8)}[tile]
            check(bool(lp) and lp["ffma"] >= share * lp["ins"], f"{n}: FFMAs under {share:.0%} of the main loop: {lp}")
            check(bool(lp) and lp["lds"] == lp["l128"] and per * lp["lds"] <= lp["ffma"],
                  f"{n}: shared loads not all 128-bit, or more than one for {per} FFMAs: {lp}")
            check(k["spill_st"] == 0 and k["spill_ld"] == 0 and k["stack"] == 0,
                  f"{n}: spills {k['spill_st']}/{k['spill_ld']}, stack {k['stack']}")
            check(k["occupancy"] and k["occupancy"]["blocks"] >= 2, f"{n}: occupancy {k['occupancy']}")
            # double-buffered: the loop over K tiles (the main loop, or the one around it where ptxas kept the
            # loop over k) one barrier, the next tile's global loads and shared stores in it
            kl = lp if lp and lp["bar"] else k.get("outer_loop") or {}
            check(kl.get("bar") == 2 - two and kl.get("ldg", 0) > 0 and kl.get("sts", 0) > 0 and kl.get("ffma", 0) > 0,
                  f"{n}: the loop over K tiles should hold {2 - two} barrier(s), the global loads and the stores: {kl}")
            # the epilogue's stores four columns at once where the output takes them so (out_quad: the
            # convolution's 3136 pixels, the linear layer's 260 outputs; not the matmul's 130 columns)
            ops = (k.get("total") or {}).get("ops", {})
            quads = "ncc_st4f(&" in body
            check(quads == ("_matmul" not in k["name"]), f"{n}: four columns a store expected but for the matmul")
            if quads:
                check(ops.get("STG.E.128", 0) > 0 and ops.get("STG.E", 0) == 0,
                      f"{n}: the epilogue should store 128 bits a store: {ops.get('STG.E.128', 0)} STG.E.128, "
                      f"{ops.get('STG.E', 0)} STG.E")
            print(f"{n}: {tile}, regs {k['regs']}, {k['occupancy']['blocks']} blocks/SM, main loop {lp['ins']} "
                  f"instructions, {lp['ffma']} FFMA, {lp['lds']} LDS ({lp['l128']} of 128 bits); K tile loop "
                  f"{kl['bar']} barrier, {kl['ldg']} LDG, {kl['sts']} STS; {ops.get('STG.E.128', 0)} STG.E.128, "
                  f"{ops.get('STG.E', 0)} STG.E")
    # the convolution wide by the rule (three files), the linear layer and the matmul 64 x 64 by the rule (one
    # stage, then two), all three wide forced, then 64 x 128 forced: at two architectures
    check(seen == {"wide": 2 * 5, "64x64": 2 * 4, "64x128": 2 * 3},
          f"kernels by tile {seen}, expected 10 wide, 8 of 64 x 64 and 6 of 64 x 128")
    if not fails and os.environ.get("NCC_KEEP_WORK", "0") != "1":
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv):
    if argv[:1] == ["--parse"]:
        parse_tests()
        rc = 0
    elif argv[:1] == ["--report"] and len(argv) == 5:
        rc = report_tests(*argv[1:])
        if rc == sr.SKIP and not fails:
            return rc
    elif argv[:1] == ["--tensor-cores"] and len(argv) == 5:
        rc = tensor_core_tests(*argv[1:])
        if rc == sr.SKIP and not fails:
            return rc
    elif argv[:1] == ["--fp32-wide"] and len(argv) == 4:
        rc = fp32_wide_tests(*argv[1:])
        if rc == sr.SKIP and not fails:
            return rc
    else:
        print(__doc__)
        return 2
    if fails:
        print(f"{len(fails)} checks failed")
        return 1
    print("ok")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
