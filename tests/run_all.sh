#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine:
#   1. dependencies (tests/install-deps.sh)
#   2. release build + every ctest test (numeric tests against PyTorch, golden IR,
#      malformed models, generated code compiled by gcc, nvcc and NVRTC, emulation)
#   3. an AddressSanitizer + UndefinedBehaviorSanitizer build running the suite
#      again (tests labelled `slow` excluded)
#   4. the libFuzzer targets, each for a bounded time (NCC_FUZZ_SECONDS, default 60)
# Set NCC_QUICK=1 to stop after step 2.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
tests/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)

echo "== release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
echo "== tests"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ctest --test-dir build --output-on-failure -j"$jobs" ${NCC_CTEST_ARGS:-} | tee "$log"
# the closing line counts every test run by both ctest stages
count() { sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$log" | tail -n 1; }
read -r f1 n1 <<<"$(count)"
if [ "${NCC_QUICK:-0}" = 1 ]; then echo "tests: $((n1 - f1)) passed, $f1 failed"; exit 0; fi

echo "== AddressSanitizer + UBSan build"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNCC_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE slow | tee "$log"
read -r f2 n2 <<<"$(count)"

echo "== fuzzing (${NCC_FUZZ_SECONDS:-60} s per target)"
for f in tests/fuzz/run_*.sh; do
  [ -x "$f" ] || continue
  NCC_FUZZ_SECONDS=${NCC_FUZZ_SECONDS:-60} "$f"
done
echo "== all test stages passed (release, sanitizers, fuzzing)"
echo "tests: $((n1 + n2 - f1 - f2)) passed, $((f1 + f2)) failed"
