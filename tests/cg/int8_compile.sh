#!/bin/sh
# int8_compile.sh — an example model at --precision=int8 through every
# compiler (compile_model.sh: gcc -std=c11 for the emulation and the --jit
# host, nvcc sm_80 and sm_90, NVRTC) and ptxas: no spills (ptxas_report.py).
# The calibration first: `ncc bench` (emulation, PyTorch-style initial
# weights, seed 0) on ROWS random rows of the input shape, writing a
# calibration cache that the compile then reads (same model, same --set, the
# same initial weights: the cache's keys match).
# usage: int8_compile.sh NCC PYTHON MODEL.net OUTDIR RUNTIME_DIR NVCC|- NVRTC_CHECK|- ROWS "SHAPE" [--set ...]
set -eu
ncc=$1; py=$2; net=$3; out=$4; rt=$5; nvcc=$6; nvrtc=$7; rows=$8; shape=$9
shift 9
name=$(basename "$net" .net)
rm -rf "$out" && mkdir -p "$out"
"$py" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(0).uniform(-1, 1, ($rows,) + tuple(int(d) for d in sys.argv[2].split())).astype(np.float32))" \
  "$out/cal.npy" "$shape"
"$ncc" bench "$net" "$@" --device emu --iters 1 --warmup 0 --precision=int8 --calibrate="$out/cal.npy" \
  --calibration-cache="$out/cal.txt" --int8-max-error=1e9 > "$out/bench.txt"
grep -q "^layer " "$out/cal.txt"
flags="--precision=int8 --calibration-cache=$out/cal.txt --int8-max-error=1e9 $*"
NCC_KEEP_WORK=1 sh "$(dirname "$0")/compile_model.sh" "$out" "$rt" "$nvcc" "$nvrtc" --net "$ncc" "$net" "$flags" || rc=$?
rc=${rc:-0}
[ "$rc" = 0 ] || [ "$rc" = 77 ] || exit "$rc"
n8=$(grep -c "int8" "$out/$name.cu" || true)
[ "$n8" -gt 0 ] || { echo "no int8 kernel in $name.cu"; exit 1; }
if [ "$nvcc" != - ]; then
  "$py" "$(dirname "$0")/ptxas_report.py" --check --nvcc "$nvcc" -I "$rt" -I "$out" "$out/$name.cu"
fi
rm -rf "$out"
exit "$rc"
