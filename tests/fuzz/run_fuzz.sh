#!/usr/bin/env bash
# run_fuzz.sh — builds the frontend's libFuzzer target with clang and runs it
# for a bounded time (NCC_FUZZ_SECONDS, default 60), seeded from the examples,
# the golden tests and the malformed models.  Exit status 0 when nothing was
# found; a finding leaves crash-*/leak-*/timeout-* files in build-fuzz/.
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
cmake --build "$bdir" --target fuzz_frontend -j"${NCC_JOBS:-2}"
exec 9>&-   # the lock's end
seeds=$bdir/fuzz_seeds
corpus=$bdir/fuzz_corpus
mkdir -p "$seeds" "$corpus"
cp "$top"/examples/*.net "$top"/tests/golden/*.net "$top"/tests/bad/*.net "$seeds"/ 2>/dev/null || true
cd "$bdir"
fuzzer=$bdir/tests/fuzz_frontend
echo "fuzzing the frontend for $secs s"
"$fuzzer" "$corpus" "$seeds" -max_total_time="$secs" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
  -dict="$top/tests/fuzz/frontend.dict" -print_final_stats=1 -close_fd_mask=2
# -close_fd_mask=2 silences the diagnostics of the inputs; libFuzzer still
# reports findings (it hands the sanitizers a duplicate of stderr)
