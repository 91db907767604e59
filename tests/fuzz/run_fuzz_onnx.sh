#!/usr/bin/env bash
# run_fuzz_onnx.sh — builds the ONNX importer's libFuzzer target (fuzz_onnx)
# with clang and runs it for a bounded time (NCC_FUZZ_SECONDS, default 60),
# seeded with models torch.onnx and ONNX's helper write (a small conv net, a
# Linear/Gemm, a view chain folded from Shape/Gather, pools, a model with a
# symbolic batch dimension) and truncated and garbled copies of them.  Exit
# status 0 when nothing was found (or when this ncc builds without ONNX
# support: it says so); a finding leaves crash-*/leak-*/timeout-* files in
# build-fuzz/.
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
# grep without -q: -q stops reading at the match, and ninja, still writing,
# then dies of SIGPIPE, which pipefail turns into "no fuzz_onnx" (seen under load)
if ! ninja -C "$bdir" -t targets all 2>/dev/null | grep '^fuzz_onnx:' >/dev/null; then
  echo "skipped: ncc builds without ONNX support here (protobuf-c, onnx.proto), so there is no fuzz_onnx"
  exit 0
fi
cmake --build "$bdir" --target fuzz_onnx -j"${NCC_JOBS:-2}"
exec 9>&-   # the lock's end
seeds=$bdir/fuzz_seeds_onnx
corpus=$bdir/fuzz_corpus_onnx
mkdir -p "$seeds" "$corpus"
/usr/bin/python3 "$top/tests/fuzz/onnx_seeds.py" "$seeds"
cd "$bdir"
echo "fuzzing the ONNX importer for $secs s"
"$bdir/tests/fuzz_onnx" "$corpus" "$seeds" "$top/tests/fuzz/onnx_findings" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -dict="$top/tests/fuzz/onnx.dict" -print_final_stats=1 -close_fd_mask=2
# -close_fd_mask=2 silences the importer's diagnostics; libFuzzer still
# reports findings (it hands the sanitizers a duplicate of stderr)
