#!/usr/bin/env bash
# bench_emu.sh — ResNet-18 at batch 2, 64x64, under CPU emulation: ncc bench
# prints ms/batch (median and min of the timed runs, warm-up excluded) and
# samples/s.  The aim is < 2 s per batch on a 2-core machine.
#   tests/bench_emu.sh [PATH/TO/ncc] [extra ncc bench flags, e.g. --cublas]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ncc=${1:-$here/../build/ncc}
shift || true
out=$("$ncc" bench "$here/../examples/resnet18.net" --device emu --set N=2 --set S=64 \
        --iters "${NCC_BENCH_ITERS:-5}" --warmup 1 "$@")
echo "$out"
ms=$(echo "$out" | sed -n 's/^ms\/batch: median \([0-9.]*\).*/\1/p')
[ -n "$ms" ] || { echo "bench_emu: no ms/batch line in the output" >&2; exit 1; }
awk -v ms="$ms" 'BEGIN { printf "resnet18 N=2 64x64 emu: %.0f ms/batch (aim < 2000 ms): %s\n", ms, ms < 2000 ? "met" : "NOT met" }'
