#!/usr/bin/python3
"""test_train.py — `ncc train`'s handling of its inputs, one case per
invocation like test_driver.py (whose Ctx, Failure and main it uses).

    test_train.py --list
    test_train.py CASE --ncc PATH --work DIR [--build BUILD]

What they hold `ncc train` to:
  train_flags     flag combinations that cannot work are refused before any
                  compiling: --epochs with --steps, --resume without
                  --checkpoint or with a checkpoint that does not exist,
                  --resume with --weights, unreadable --data
  train_bad_data  every malformed data set is status 1 with a message that
                  names the file and what is wrong (and the first bad index of
                  a label): missing files, wrong dtype or shape, x and y of
                  different lengths, labels out of [0, classes), fewer samples
                  than one batch, test_x without test_y, a truncated .npy
  train_good_data good data (y int32 or int64, with and without a test set)
                  passes every check: the run either trains or, while the
                  generated training API is missing, stops at it
  train_no_block  a model without a train block is refused
Only numpy is needed.
"""
import os
import sys

import test_driver as td
from test_driver import Failure, case, show

td.CASES.clear()     # test_driver.py's own cases are its ctest tests, not these

DIGITS = os.path.join(td.EXAMPLES, "digits.net")
MLP_NO_TRAIN = """model plain
input x: f32[4, 8]
y = linear(x, 3, name="fc")
output y
"""


def data(ctx, name, n=64, x=None, y=None, test=None, xdtype="float32", ydtype="int32", classes=10):
    """A data folder for digits.net ([n, 1, 8, 8] samples, labels in [0, 10))."""
    import numpy as np
    d = ctx.path(name)
    os.makedirs(d, exist_ok=True)
    r = np.random.RandomState(1)
    if x is None:
        x = r.rand(n, 1, 8, 8).astype(xdtype)
    if y is None:
        y = (np.arange(n) % classes).astype(ydtype)
    if x is not False:
        np.save(os.path.join(d, "x.npy"), x)
    if y is not False:
        np.save(os.path.join(d, "y.npy"), y)
    if test:
        tx, ty = test
        if tx is not None:
            np.save(os.path.join(d, "test_x.npy"), tx)
        if ty is not None:
            np.save(os.path.join(d, "test_y.npy"), ty)
    return d


def expect_error(ctx, args, *words):
    p = ctx.ncc_cmd(["train"] + args + ["--device", "emu"])
    show(p)
    if p.returncode != 1:
        raise Failure("`ncc train %s`: expected status 1, got %d" % (" ".join(args), p.returncode))
    for w in words:
        if w not in p.stderr:
            raise Failure("`ncc train %s`: the message should contain %r" % (" ".join(args), w))
    if "internal error" in p.stderr:
        raise Failure("a user's error reported as an internal one")
    return p


def passes_checks(ctx, args):
    """The run gets past every data check: it trains (status 0), or stops
    where the generated training API is missing (status 2, naming the symbol)."""
    p = ctx.ncc_cmd(["train"] + args + ["--device", "emu"])
    show(p)
    if p.returncode == 0:
        return p
    if p.returncode == 2 and "lacks digits_train_step_io" in p.stderr:
        print("(the generated training API is not there yet: stopped at it, after the data checks)")
        return p
    raise Failure("`ncc train %s`: good data refused (status %d)" % (" ".join(args), p.returncode))


@case("train_flags")
def _flags(ctx):
    import time
    d = data(ctx, "ok")
    t = time.time()
    expect_error(ctx, [DIGITS, "--data", d, "--epochs", "1", "--steps", "3"], "--epochs and --steps")
    expect_error(ctx, [DIGITS, "--data", d, "--resume"], "--resume needs --checkpoint")
    ck = ctx.path("nothing.safetensors")
    expect_error(ctx, [DIGITS, "--data", d, "--resume", "--checkpoint", ck], ck, "--resume")
    expect_error(ctx, [DIGITS, "--data", d, "--resume", "--checkpoint", ck, "--weights", ck], "--weights")
    expect_error(ctx, [DIGITS, "--data", ctx.path("no-such-dir")], os.path.join(ctx.path("no-such-dir"), "x.npy"))
    expect_error(ctx, [DIGITS, "--data", d, "--epochs", "0"], "--epochs")
    expect_error(ctx, [DIGITS, "--data", d, "--log", ctx.path("no-dir/log.csv")], "log.csv", "no-dir")
    # none of these should have compiled anything: they are quick
    if time.time() - t > 30:
        raise Failure("flag errors took %.0f s: are they checked before compiling?" % (time.time() - t))


@case("train_bad_data")
def _bad(ctx):
    import numpy as np
    r = np.random.RandomState(0)
    x64 = r.rand(64, 1, 8, 8).astype("float32")

    def one(name, words, **kw):
        d = data(ctx, name, **kw)
        expect_error(ctx, [DIGITS, "--data", d], *[w.replace("DIR", d) for w in words])

    one("no_x", ["DIR/x.npy"], x=False)
    one("no_y", ["DIR/y.npy"], y=False)
    one("x_f64", ["DIR/x.npy", "float32"], xdtype="float64")
    one("x_shape", ["DIR/x.npy", "shape mismatch", "f32[1, 7, 7]", "f32[1, 8, 8]"],
        x=r.rand(64, 1, 7, 7).astype("float32"))
    one("x_flat", ["DIR/x.npy", "shape mismatch"], x=r.rand(64, 64).astype("float32"))
    one("y_float", ["DIR/y.npy", "int32 or int64"], y=np.zeros(64, "float32"))
    one("y_2d", ["DIR/y.npy", "one-dimensional"], y=np.zeros((64, 1), "int32"))
    one("lengths", ["DIR/x.npy", "64 samples", "DIR/y.npy", "63 labels"], y=np.zeros(63, "int32"))
    bad = np.arange(64, dtype="int64") % 10
    bad[37] = 10
    bad[50] = 11
    one("label_high", ["DIR/y.npy", "label 10 at index 37", "[0, 10)"], y=bad)
    neg = np.zeros(64, "int32")
    neg[5] = -1
    one("label_neg", ["DIR/y.npy", "label -1 at index 5"], y=neg)
    one("few", ["DIR/x.npy", "10 samples", "fewer than one batch of 32"], n=10)
    one("test_half", ["DIR/test_y.npy", "DIR/test_x.npy", "both or neither"], test=(x64[:8], None))
    one("test_label", ["DIR/test_y.npy", "label 12 at index 3"],
        test=(x64[:8], np.array([0, 1, 2, 12, 4, 5, 6, 7], "int32")))
    one("test_shape", ["DIR/test_x.npy", "shape mismatch"],
        test=(r.rand(8, 1, 8, 9).astype("float32"), np.zeros(8, "int32")))
    # a truncated file: the .npy reader's message, naming it
    d = data(ctx, "truncated")
    p = os.path.join(d, "x.npy")
    with open(p, "rb") as f:
        b = f.read()
    with open(p, "wb") as f:
        f.write(b[:len(b) - 100])
    expect_error(ctx, [DIGITS, "--data", d], p, "bytes")
    # not a .npy at all
    d = data(ctx, "garbage")
    with open(os.path.join(d, "y.npy"), "w") as f:
        f.write("0,1,2\n")
    expect_error(ctx, [DIGITS, "--data", d], os.path.join(d, "y.npy"), "not a .npy file")


@case("train_good_data")
def _good(ctx):
    import numpy as np
    r = np.random.RandomState(0)
    tx = r.rand(40, 1, 8, 8).astype("float32")
    for name, kw in (("i32", {}), ("i64", {"ydtype": "int64"}),
                     ("test", {"test": (tx, (np.arange(40) % 10).astype("int64"))}),
                     ("partial", {"n": 70})):
        d = data(ctx, name, **kw)
        passes_checks(ctx, [DIGITS, "--data", d, "--steps", "3", "--no-shuffle"])


@case("train_no_block")
def _noblock(ctx):
    import numpy as np
    net = ctx.write("plain.net", MLP_NO_TRAIN)
    d = ctx.path("plain")
    os.makedirs(d)
    np.save(os.path.join(d, "x.npy"), np.zeros((8, 8), "float32"))
    np.save(os.path.join(d, "y.npy"), np.zeros(8, "int32"))
    expect_error(ctx, [net, "--data", d], "plain.net", "no train")


if __name__ == "__main__":
    sys.exit(td.main())
