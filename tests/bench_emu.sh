#!/usr/bin/env bash
# bench_emu.sh — ResNet-18 at batch 2, 64x64, under CPU emulation: ncc bench
# prints ms/batch (median and min of the timed runs, warm-up excluded) and
# samples/s, for the default tiled conv kernels and for --cublas (convs as
# GEMMs through the CPU BLAS under emulation).  The aim is < 2 s per batch
# on a 2-core machine.
#   tests/bench_emu.sh [PATH/TO/ncc] [extra ncc bench flags]
# NCC_BENCH_ITERS (default 5) timed runs.  Exit 1 only when a run fails;
# the timing is reported, not enforced (shared CI machines vary).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ncc=${1:-$here/../build/ncc}
shift || true
for path in default --cublas; do
  flags=()
  [ "$path" = default ] || flags=("$path")
  out=$("$ncc" bench "$here/../examples/resnet18.net" --device emu --set N=2 --set S=64 \
          --iters "${NCC_BENCH_ITERS:-5}" --warmup 1 "${flags[@]}" "$@")
  echo "$out"
  ms=$(echo "$out" | sed -n 's/^ms\/batch: median \([0-9.]*\).*/\1/p')
  [ -n "$ms" ] || { echo "bench_emu: no ms/batch line in the output" >&2; exit 1; }
  awk -v ms="$ms" -v p="$path" 'BEGIN { printf "resnet18 N=2 64x64 emu (%s convs): %.0f ms/batch (aim < 2000 ms): %s\n\n", p, ms, ms < 2000 ? "met" : "NOT met" }'
done
