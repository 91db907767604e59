#!/bin/sh
# bench_frontend.sh — time of `ncc MODEL --emit=report` (parse, elaborate,
# shape inference, passes, report), best of 10 runs, in ms.
#   tests/bench_frontend.sh [NCC] [MODEL] [LIMIT_MS]
# With LIMIT_MS, exits 1 when the best run is slower (ctest uses 50 ms).
# Best-of rather than mean: the machine is shared, and the minimum is the
# figure least disturbed by other load.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ncc=${1:-$here/../build/ncc}
model=${2:-$here/../examples/resnet50.net}
limit=${3:-}
"$ncc" "$model" --emit=report > /dev/null || { echo "bench_frontend: $ncc failed on $model" >&2; exit 1; }
best=
i=0
while [ $i -lt 10 ]; do
  t0=$(date +%s%N)
  "$ncc" "$model" --emit=report > /dev/null
  t1=$(date +%s%N)
  us=$(( (t1 - t0) / 1000 ))
  if [ -z "$best" ] || [ "$us" -lt "$best" ]; then best=$us; fi
  i=$((i + 1))
done
ms=$(awk "BEGIN { printf \"%.2f\", $best / 1000 }")
echo "ncc $(basename "$model") --emit=report: best of 10: $ms ms"
if [ -n "$limit" ] && [ "$best" -gt $((limit * 1000)) ]; then
  echo "bench_frontend: slower than $limit ms" >&2
  exit 1
fi
