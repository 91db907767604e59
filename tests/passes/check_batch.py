#!/usr/bin/python3
"""check_batch.py NCC WORK — the batch pass's verdicts (passes/batch.c).

Small models, each with the verdict the pass must reach: batches 1..N from
one build (every output row computed from the same input row), or the
compiled batch only, with the node the report's `# batch:` line must name.
A wrong "1..N" would let a smaller batch compute wrong rows; a wrong "N only"
would refuse what works: both fail here."""
import os
import subprocess
import sys

HEAD = "model b\nconst N = 4\ninput x: f32[N, 6]\n"
CASES = [   # name, body, None (1..N) or words the "N only" line must hold
    ("mlp", "y = linear(relu(linear(x, 8, name=\"a\")), 3, name=\"b\")\noutput y\n", None),
    ("softmax_rows", "y = softmax(x, axis=1)\noutput y\n", None),
    ("softmax_batch", "y = softmax(x, axis=0)\noutput y\n", ["softmax"]),
    ("layernorm", "y = layernorm(x, name=\"ln\")\noutput y\n", None),
    ("transpose_keep", "y = transpose(reshape(x, [N, 2, 3]), [0, 2, 1])\noutput y\n", None),
    ("transpose_move", "y = transpose(x, [1, 0])\noutput y\n", ["transpose"]),
    ("reshape_keep", "y = reshape(x, [N, 3, 2])\noutput y\n", None),
    ("reshape_merge", "y = reshape(x, [2, 12])\noutput y\n", ["reshape"]),
    ("concat_features", "y = concat([x, x * 2.0], axis=1)\noutput y\n", None),
    ("concat_batch", "y = concat([x, x], axis=0)\noutput y\n", ["concat"]),
    ("matmul_gram", "y = matmul(x, transpose(x, [1, 0]))\noutput y\n", ["transpose"]),
    ("matmul_batched", "a = reshape(x, [N, 2, 3])\ny = matmul(a, transpose(a, [0, 2, 1]))\noutput y\n", None),
    ("loss_output", "input t: i32[N]\ny = cross_entropy(x, t)\noutput y\n", ["cross_entropy"]),
]


def main():
    ncc, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    bad = []
    for name, body, words in CASES:
        path = os.path.join(work, name + ".net")
        with open(path, "w") as f:
            f.write(HEAD + body)
        p = subprocess.run([ncc, path, "--emit=report"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        line = [l for l in p.stdout.splitlines() if l.startswith("# batch:")]
        got = line[0] if line else "(no batch line; ncc: %s)" % p.stderr.strip()
        print("%-16s %s" % (name, got))
        if p.returncode != 0:
            bad.append("%s: ncc exited with %d: %s" % (name, p.returncode, p.stderr.strip()))
        elif words is None and "any batch 1..4" not in got:
            bad.append("%s: expected batches 1..4, got %r" % (name, got))
        elif words is not None and ("4 only" not in got or any(w not in got for w in words)):
            bad.append("%s: expected '4 only' naming %s, got %r" % (name, words, got))
    for b in bad:
        print("FAIL:", b)
    print("%d models, %d failures" % (len(CASES), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
