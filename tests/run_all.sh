#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine:
#   1. dependencies (tests/install-deps.sh)
#   2. release build + every ctest test (numeric tests against PyTorch, golden IR,
#      malformed models, generated code compiled by gcc, nvcc and NVRTC, emulation)
#   3. an AddressSanitizer + UndefinedBehaviorSanitizer build running the suite
#      again (tests labelled `slow`, and the example matrix `matrix`, the batch cases `batch`, the
#      forced tensor-core tiles `tile` (the emulator paths of the other tensor-core cases), and the
#      compilers' runs over the generated examples and op cases `compilers` and the SASS reports
#      `sass` (nvcc, NVRTC and gcc over code the release stage compiles too), excluded)
#   4. the libFuzzer targets, each for a bounded time (NCC_FUZZ_SECONDS, here
#      default 30, for CI's time budget; the scripts alone default to 60), the
#      scripts tests/fuzz/run_*.sh as many at a time as there are cores
#   5. examples/demo.sh, the README's first command
# The whole run, on a clean clone on a 2-core CI machine: 26 to 28 min
# (2026-11-27: the release stage 18 to 20 min, the sanitizer stage 6, fuzzing
# and the demo 2); the same machine has run the suite twice as fast on other days.
# The training oracle (label train, tests/oracle/train_oracle.py) runs in the
# release stage but for its big models (label train-slow: ResNet-50, VGG-16,
# VGG-19, minutes each on 2 cores; `ctest -L train-slow` runs them by hand);
# the sanitizer stage leaves the whole oracle out, for CI's time budget.
# The Python tests of both ctest stages run through tests/pyserve.py, a fork
# server that imports PyTorch once a stage (docs/architecture.md, Tests).
# Set NCC_QUICK=1 to stop after step 2.  NCC_CTEST_ARGS adds ctest options to
# both ctest stages (e.g. "-R oracle").
#
# Each stage's heading gives the seconds since the start: [N s].
# The last line counts the tests of both ctest stages, skipped ones apart:
#   tests: N passed, N failed, N skipped
# (CI reads it.)  A test skips itself (exit 77, SKIP_RETURN_CODE) when its tool
# is missing, e.g. nvcc; ctest itself counts skipped tests among the passed, so
# they are subtracted here.  A failing stage does not stop the later ones: the
# count covers everything, and the exit status is 1 when anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)

log=$(mktemp)
failed_list=$(mktemp)
fuzz_out=$(mktemp -d)
trap 'rm -f "$log" "$failed_list"; rm -rf "$fuzz_out"' EXIT
passed=0 failed=0 skipped=0 bad_stage=0

# ctest's summary "NN% tests passed, F tests failed out of T" and its list of
# tests that did not run ("  12 - rt.nvrtc (Skipped)") -> adds to the totals
count() {
  local f t s
  read -r f t <<<"$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$log" | tail -n 1)"
  s=$(grep -c '^[[:space:]]*[0-9][0-9]* - .* (Skipped)$' "$log" || true)
  f=${f:-0} t=${t:-0}
  passed=$((passed + t - f - s)) failed=$((failed + f)) skipped=$((skipped + s))
  echo "-- this stage: $((t - f - s)) passed, $f failed, $s skipped"
}

# runs ctest with the given arguments, logging to $log; a failure is counted, not fatal
stage() {
  set +e
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  count
  # the names of the tests that failed, for the closing lines (CI shows the tail)
  sed -n '/The following tests FAILED:/,/^Errors while running CTest/p' "$log" |
    grep -E '^[[:space:]]+[0-9]+ - ' | sed "s/^[[:space:]]*/  ${stage_name:-ctest}: /" >>"$failed_list" || true
  [ "$rc" = 0 ] || bad_stage=1
}

summary() {
  if [ -s "$failed_list" ]; then
    echo "== failed tests:"
    cat "$failed_list"
  fi
  echo "== ${SECONDS} s in all"
  echo "tests: $passed passed, $failed failed, $skipped skipped"
  [ "$bad_stage" = 0 ] && [ "$failed" = 0 ]
}

echo "== release build [${SECONDS} s]"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
echo "== tests [${SECONDS} s]"
# shellcheck disable=SC2086  # NCC_CTEST_ARGS: several options
stage_name=release stage ctest --test-dir build --output-on-failure -j"$jobs" -LE train-slow ${NCC_CTEST_ARGS:-}
if [ "${NCC_QUICK:-0}" = 1 ]; then summary; exit; fi

echo "== AddressSanitizer + UBSan build [${SECONDS} s]"
# its tests take the compiled models from the release stage's cache (the
# generated code is not sanitized; ncc links the objects against the sanitized
# libnccrt): the sanitizers watch ncc and the runtime, and gcc does not build
# every model twice
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNCC_SANITIZE=ON \
      -DNCC_TEST_CACHE_DIR="$PWD/build/ncc-cache" >/dev/null
cmake --build build-asan -j"$jobs"
# shellcheck disable=SC2086
ASAN_OPTIONS=detect_leaks=0 stage_name=sanitizers stage ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE "slow|train|matrix|batch|tile|compilers|sass" ${NCC_CTEST_ARGS:-}

echo "== fuzzing (${NCC_FUZZ_SECONDS:-30} s per target, $jobs scripts at a time) [${SECONDS} s]"
# libFuzzer uses one core, so the scripts run $jobs at a time (they take turns
# at building build-fuzz, under a lock).  run_fuzz_readers.sh fuzzes two
# targets one after the other: it starts first, and the others run beside it.
# Each script's output is kept apart and shown when all are done.
fuzz_scripts=tests/fuzz/run_fuzz_readers.sh
for f in tests/fuzz/run_*.sh; do [ "$f" = tests/fuzz/run_fuzz_readers.sh ] || fuzz_scripts="$fuzz_scripts $f"; done
for f in $fuzz_scripts; do
  [ -x "$f" ] || continue
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  n=$(basename "$f")
  ( rc=0; NCC_FUZZ_SECONDS=${NCC_FUZZ_SECONDS:-30} "$f" >"$fuzz_out/$n.log" 2>&1 || rc=$?; echo $rc >"$fuzz_out/$n.rc" ) &
done
wait
for f in tests/fuzz/run_*.sh; do
  n=$(basename "$f")
  [ -f "$fuzz_out/$n.rc" ] || continue
  echo "== $f"
  cat "$fuzz_out/$n.log"
  [ "$(cat "$fuzz_out/$n.rc")" = 0 ] || { echo "== $f: a finding (see build-fuzz/)"; echo "  fuzzing: $f" >>"$failed_list"; bad_stage=1; }
done
echo "== examples/demo.sh (the README's first command) [${SECONDS} s]"
examples/demo.sh || { echo "== examples/demo.sh failed"; echo "  demo: examples/demo.sh" >>"$failed_list"; bad_stage=1; }
if [ "$bad_stage" = 0 ] && [ "$failed" = 0 ]; then
  echo "== all test stages passed (release, sanitizers, fuzzing, demo)"
fi
summary
