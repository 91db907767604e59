#!/usr/bin/python3
"""check_batch_grids.py NCC EXAMPLES_DIR WORK — the launch geometry of a
smaller batch is smaller (docs/generated-code.md "Batches 1..N").

Every example, at -O0, -O2, -O3 and with --cublas, compiled to MODEL.cu: the
batch pass must find it serves batches 1..N (the report's `# batch:` line),
and in <model>_run() (one inference) every launch's grid must follow the
call's batch (`m->nb`), and every cuBLAS call must take m->nb images or rows:
no launch of an example does work for rows the call did not ask for.  The
training step (<model>_train_run) keeps its geometry and is not checked here.
"""
import os
import re
import subprocess
import sys


def run_body(src, model):
    m = re.search(r"^static int %s_run\(%s \*m\) \{\n(.*?)^\}" % (model, model), src, re.S | re.M)
    if not m:
        raise SystemExit("FAIL: no %s_run() in the generated file" % model)
    return m.group(1)


def main():
    ncc, examples, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    bad, checked = [], 0
    for f in sorted(os.listdir(examples)):
        if not f.endswith(".net"):
            continue
        net = os.path.join(examples, f)
        for flags in (["-O0"], ["-O2"], ["-O3"], ["--cublas"]):
            out = os.path.join(work, f[:-4] + ".cu")
            p = subprocess.run([ncc, net, "-o", out] + flags, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            if p.returncode != 0:
                bad.append("%s %s: ncc failed: %s" % (f, " ".join(flags), p.stderr.strip()))
                continue
            rep = subprocess.run([ncc, net, "--emit=report"] + flags, stdout=subprocess.PIPE,
                                 universal_newlines=True).stdout
            if "# batch: any batch 1.." not in rep:
                bad.append("%s %s: the report does not say it serves batches 1..N" % (f, " ".join(flags)))
            src = open(out).read()
            model = re.search(r"^#define (\w+)_NMAX ", src, re.M).group(1)
            body = run_body(src, model)
            grids = re.findall(r"ncc_dim3 g_ = \{([^}]*)\}", body)
            fixed = [g for g in grids if "m->nb" not in g]
            gemms = re.findall(r"rc = ncc_sgemm\(m->dev, [^;]*;", body, re.S)
            gfixed = [g for g in gemms if "m->nb" not in g and "nb_" not in g]
            print("%-18s %-9s launches %3d (following the batch: %3d), cuBLAS calls %3d (following: %3d)"
                  % (f, " ".join(flags), len(grids), len(grids) - len(fixed), len(gemms), len(gemms) - len(gfixed)))
            if not grids:
                bad.append("%s %s: no launches found" % (f, " ".join(flags)))
            if fixed or gfixed:
                bad.append("%s %s: %d launches and %d cuBLAS calls keep the full batch, e.g. %s"
                           % (f, " ".join(flags), len(fixed), len(gfixed), (fixed + gfixed)[0][:120]))
            checked += 1
    for b in bad:
        print("FAIL:", b)
    print("%d compilations checked" % checked)
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
