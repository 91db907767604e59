"""check_train_optimizer.py — the optimizer update's kernel against torch.optim.

    check_train_optimizer.py TRAIN_OPTIMIZER RUNTIME_DIR LIBDIR WORKDIR

Renders every configuration (train_optimizer.c), compiles it as C for the CPU
emulation, runs three steps and compares the parameters and the optimizer
state after each step with torch.optim's single-tensor step in float32 on the
same numbers: within 2e-6 * max(1, |ref|) (the same operations in the same
order; libm's sqrt and the bias corrections' rounding may differ in the last
bit).  WORKDIR is removed when every configuration passed."""
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

tool, rt, lib, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
subprocess.run([tool, work], check=True)
cfgs = subprocess.run([tool, "--list"], check=True, capture_output=True, text=True).stdout.split("\n")
N = 1000
fail = 0
for line in cfgs:
    if not line.strip():
        continue
    name, opt, lr, mom, wd, b1, b2, eps, nest = line.split()
    lr, mom, wd, b1, b2, eps, nest = float(lr), float(mom), float(wd), float(b1), float(b2), float(eps), int(nest)
    exe = os.path.join(work, name)
    subprocess.run(["cc"] + os.environ.get("CG_CFLAGS", "").split() + ["-std=c11", "-O1", "-DNCC_EMU", "-Wall", "-Wextra", "-Werror", "-I", rt,
                    os.path.join(work, name + ".c"), "-L", lib, "-lnccrt", "-Wl,-rpath," + lib, "-lm", "-o", exe],
                   check=True)
    vals = np.array(subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split(), dtype=np.float32)
    p = torch.nn.Parameter(torch.from_numpy(vals[:N].copy()))
    if opt == "sgd":
        o = torch.optim.SGD([p], lr=lr, momentum=mom, weight_decay=wd, nesterov=bool(nest), foreach=False)
    elif opt == "adam":
        o = torch.optim.Adam([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)
    else:
        o = torch.optim.AdamW([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)
    off = N
    for step in range(1, 4):
        rows = vals[off:off + 4 * N].reshape(4, N)
        off += 4 * N
        p.grad = torch.from_numpy(rows[1].copy())
        o.step()
        st = o.state[p]
        refs = [("param", p.detach().numpy())]
        if "momentum_buffer" in st and st["momentum_buffer"] is not None:
            refs.append(("momentum_buffer", st["momentum_buffer"].numpy()))
        if "exp_avg" in st:
            refs += [("exp_avg", st["exp_avg"].numpy()), ("exp_avg_sq", st["exp_avg_sq"].numpy())]
        got = {"param": rows[0], "momentum_buffer": rows[2], "exp_avg": rows[2], "exp_avg_sq": rows[3]}
        for what, ref in refs:
            err = np.abs(got[what].astype(np.float64) - ref.astype(np.float64))
            tol = 2e-6 * np.maximum(1.0, np.abs(ref.astype(np.float64)))
            if not (err <= tol).all():
                i = int(np.argmax(err - tol))
                print("%s step %d: %s[%d] = %r, torch.optim %r" % (name, step, what, i, got[what][i], ref[i]))
                fail = 1
if not fail:
    print("optimizer kernels agree with torch.optim (%d configurations)" % sum(1 for l in cfgs if l.strip()))
    shutil.rmtree(work)
sys.exit(fail)
