#!/usr/bin/env bash
# run_fuzz_readers.sh — builds the libFuzzer targets of libnccrt's two file
# readers (safetensors, .npy) with clang and runs each for a bounded time
# (NCC_FUZZ_SECONDS, default 60), seeded with valid and malformed files that
# PyTorch/NumPy and the runtime's own writer produce.  Exit status 0 when
# nothing was found; a finding leaves crash-* files in the build directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
secs=${NCC_FUZZ_SECONDS:-60}
bdir=${NCC_FUZZ_BUILD:-$top/build-fuzz}
mkdir -p "$bdir"
# tests/run_all.sh runs the fuzz scripts two at a time: the lock keeps their
# cmake and ninja runs in the shared build directory one at a time
exec 9>"$bdir/.build.lock"
flock 9
cmake -S "$top" -B "$bdir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNCC_FUZZ=ON >/dev/null
cmake --build "$bdir" --target fuzz_safetensors fuzz_npy -j"${NCC_JOBS:-2}"
exec 9>&-   # the lock's end
seeds=$bdir/fuzz_seeds_readers
mkdir -p "$seeds/st" "$seeds/npy" "$bdir/fuzz_corpus_st" "$bdir/fuzz_corpus_npy"
/usr/bin/python3 - "$seeds" <<'PY'
import json, struct, sys
import numpy as np
d = sys.argv[1]
def st(name, header, data):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    open(f"{d}/st/{name}", "wb").write(struct.pack("<Q", len(h)) + h + data)
st("ok", {"__metadata__": {"format": "pt"},
          "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
          "b": {"dtype": "F16", "shape": [4], "data_offsets": [24, 32]},
          "c": {"dtype": "I64", "shape": [1], "data_offsets": [32, 40]}}, bytes(range(40)))
st("bf16", {"a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
            "b": {"dtype": "F64", "shape": [4], "data_offsets": [12, 44]},
            "x.num_batches_tracked": {"dtype": "I64", "shape": [], "data_offsets": [44, 52]}}, bytes(52))
st("overlap", {"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
               "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, bytes(24))
for i, (dt, shape) in enumerate([("<f4", (2, 3)), ("<i8", (5,)), ("<f2", ()), ("|i1", (3, 1, 2)), ("<f8", (2, 2))]):
    np.save(f"{d}/npy/s{i}.npy", np.zeros(shape, dtype=dt))
with open(f"{d}/npy/v2.npy", "wb") as f:
    np.lib.format.write_array(f, np.ones((3, 4), np.float32), version=(2, 0))
with open(f"{d}/npy/v3.npy", "wb") as f:
    np.lib.format.write_array(f, np.ones((2,), np.int32), version=(3, 0))
PY
cd "$bdir"
status=0
for t in safetensors npy; do
  s=$([ $t = safetensors ] && echo st || echo npy)
  echo "fuzzing the $t reader for $secs s"
  ./fuzz_$t "fuzz_corpus_$s" "$seeds/$s" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 || status=1
done
exit $status
