#!/usr/bin/python3
"""make_digits.py OUTDIR — the digits data set for `ncc train` (examples/digits.net).

scikit-learn's copy of the UCI optical digits (1797 images of 8x8 pixels,
values 0..16, 10 classes; Debian: python3-sklearn, no download), scaled to
[0, 1] by /16, shuffled by a fixed permutation (numpy seed 0), then split:
the first 1500 for training, the last 297 for testing.  Writes
  OUTDIR/x.npy       float32 [1500, 1, 8, 8]    OUTDIR/y.npy       int32 [1500]
  OUTDIR/test_x.npy  float32 [297, 1, 8, 8]     OUTDIR/test_y.npy  int32 [297]
The same files every time (no randomness beyond the fixed seed)."""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

NTRAIN = 1500


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_digits.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    d = load_digits()
    x = (d.images.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int32)
    perm = np.random.RandomState(0).permutation(len(y))
    x, y = np.ascontiguousarray(x[perm]), np.ascontiguousarray(y[perm])
    np.save(os.path.join(out, "x.npy"), x[:NTRAIN])
    np.save(os.path.join(out, "y.npy"), y[:NTRAIN])
    np.save(os.path.join(out, "test_x.npy"), x[NTRAIN:])
    np.save(os.path.join(out, "test_y.npy"), y[NTRAIN:])
    print("digits: %d training and %d test images of 1x8x8 in %s" % (NTRAIN, len(y) - NTRAIN, out))


if __name__ == "__main__":
    main()
