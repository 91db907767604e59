#!/usr/bin/env bash
# gpu_check.sh — the checks that need a real GPU, in one command (never run by CI:
# CI machines have none).  Run on a machine with an NVIDIA GPU, the CUDA toolkit
# and python3 with torch, torchvision and numpy, from the repository root:
#
#   tests/gpu/gpu_check.sh [BUILD_OR_PREFIX] [LOG_DIR]
#
# BUILD_OR_PREFIX is a build folder (BUILD/ncc) or an installed prefix
# (PREFIX/bin/ncc, from `cmake --install BUILD --prefix PREFIX`); default build.
#
#  0. smoke: LeNet on the GPU built by nvcc with CUDA graphs, without them
#     (NCC_GRAPHS=0) and through NVRTC (--jit); if graphs fail and plain
#     launches pass, the rest runs with NCC_GRAPHS=0 and says so
#  1. runtime tests that run kernels (only from a build folder: ctest -R '^rt\.')
#  2. numeric oracle cases against PyTorch's float64 reference on the GPU, most
#     telling first: every precision case (tf32/fp16/bf16/int8, tensor cores,
#     split-K, GEMV) built by nvcc; every training case (train_oracle.py);
#     every model case; the precision cases again through NVRTC; the other
#     op and fusion cases.  One log per case, a summary, what the time left out
#  3. training on the GPU: the digits network, 10 epochs at fp32/fp16/bf16
#     (test accuracy); the first steps on the GPU and under emulation (loss
#     curves side by side); a run stopped on the GPU and resumed under emulation
#  4. ncc bench on the GPU: ResNet-50, MobileNetV2, VGG-16 at batch 1 and 32,
#     tiled kernels at fp32/tf32/fp16/bf16/int8 and cuBLAS at fp32/fp16; batch 1
#     with NCC_GRAPHS=0; VGG-16 at fp16 -O3 (its pooling prologues); training steps (VGG-16 -O0 against -O2, each
#     precision; ResNet-18); a 4096^3 GEMM (gemm4096.net) at each precision,
#     ncc's kernels and cuBLAS; three 4096-wide linear layers at batch 4096
#     (mlp4096.net) at each precision, and at fp16 without the pipelined tiles; ResNet-50, VGG-16 and the GEMM at fp16 with
#     the old 64x64 tile forced and with --autotune (docs/gpu.md, "Tile
#     choice"), and those two at fp16 without the storage pass (float32
#     between kernels), with --gemm-pipeline=off (no cp.async, ldmatrix or B prefetch; on is the default;
#     also at fp32 with the GEMM: the wide float32 tiles in one stage, not two; with --gemm-stages=2 the
#     64x64 ones in two; and --autotune at fp32)
#     and with --gemm-stages=3 (three cp.async stages; two the default; mlp4096 with four too).
#     VGG-16's and ResNet-18's fp16 training steps and ResNet-50's and VGG-16's fp16 inference with --profile: each
#     kernel timed alone beside the report's modeled time.  ResNet-50 inference (batch 1 and 32) and ResNet-18's
#     training steps with --streams=off (one stream; two are the default).  Each time is printed whole and for
#     the kernels alone.
#     Objects are compiled in parallel first (not the autotuned ones, whose
#     trials are timed), then timed one at a time
#  5. PyTorch eager on the same models, steps and GEMM (tests/gpu/torch_bench.py)
#
# Time limits a step, in seconds (0: none): NCC_GPU_ORACLE_S (step 2),
# NCC_GPU_TRAIN_S, NCC_GPU_BENCH_S, NCC_GPU_TORCH_S.  NCC_GPU_JOBS: parallel
# oracle cases and compiles (default: the cores).  NCC_GPU_STEPS: which of
# smoke,rt,oracle,train,bench,torch to run (default all).  NCC_GPU_QUEUE: a
# file of oracle cases to run instead ("cuda|jit oracle|train_oracle CASE" a
# line); NCC_GPU_BENCHES: a file of `ncc bench` argument lines instead.
# NCC_GPU_BASELINE: another build folder or prefix (an older commit's): step 4
# then times each bench with it and with this one alternately, twice ("A" the
# baseline, "B" this build), and prints a table of the two (the way the runs
# in docs/gpu.md compared builds: same machine, same minute).  NCC_GPU_DEVICE=emu
# runs the ncc steps on the CPU emulation instead (the oracle's cuda cases as
# emu, jit ones skipped): a dry run of this script on a machine with no GPU.
set -uo pipefail
src=${1:-build}
logs=${2:-$src/gpu-logs}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
src=$(cd "$src" && pwd)
if [ -x "$src/ncc" ]; then ncc=$src/ncc; else ncc=$src/bin/ncc; fi
[ -x "$ncc" ] || { echo "no ncc in $src or $src/bin"; exit 2; }
export NCC="$ncc"
base=
if [ -n "${NCC_GPU_BASELINE:-}" ]; then
  b=$(cd "$NCC_GPU_BASELINE" && pwd) || exit 2
  if [ -x "$b/ncc" ]; then base=$b/ncc; else base=$b/bin/ncc; fi
  [ -x "$base" ] || { echo "no ncc in $b or $b/bin (NCC_GPU_BASELINE)"; exit 2; }
fi
export base
jobs=${NCC_GPU_JOBS:-$(nproc)}
steps=${NCC_GPU_STEPS:-smoke,rt,oracle,train,bench,torch}
want() { case ",$steps," in *",$1,"*) return 0;; esac; return 1; }
limit() { local s=$1; shift; if [ "$s" -gt 0 ] 2>/dev/null; then timeout -k 5 "$s" "$@"; else "$@"; fi; }
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

dev=${NCC_GPU_DEVICE:-cuda}   # emu: the same steps on the CPU emulation, to try this script without a GPU
export dev
if [ "$dev" = cuda ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || { echo "no GPU answers"; exit 77; }
fi
nvcc --version 2>/dev/null | tail -n 2
python3 -c 'import torch, numpy; print("python3: torch", torch.__version__, "numpy", numpy.__version__)' || true

if want smoke; then
  stamp "== smoke: LeNet on the GPU"
  sm="$logs/smoke"; mkdir -p "$sm"
  ok_graphs=0; ok_plain=0
  for v in graphs plain jit; do
    case $v in
      graphs) env=(); flags=();;
      plain) env=(NCC_GRAPHS=0); flags=();;
      jit) env=(); flags=(--jit);;
    esac
    if env "${env[@]}" "$ncc" bench examples/lenet.net --set N=64 --device $dev --iters 5 "${flags[@]}" >"$sm/$v.log" 2>&1; then
      echo "smoke $v: ok: $(grep -h 'ms/batch' "$sm/$v.log")"
      [ $v = graphs ] && ok_graphs=1; [ $v = plain ] && ok_plain=1
    else
      echo "smoke $v: FAILED"; tail -n 15 "$sm/$v.log"
    fi
  done
  if [ $ok_graphs = 0 ] && [ $ok_plain = 1 ]; then
    echo "CUDA graphs failed where plain launches ran: the rest runs with NCC_GRAPHS=0"
    export NCC_GRAPHS=0
  fi
  # one oracle case in the open, so that a broken set-up shows at once
  NCC_ORACLE_DEVICE=$dev python3 tests/oracle/oracle.py conv_k3 --ncc "$ncc" --work "$sm/conv_k3" 2>&1 | tail -n 8
fi

if want rt && [ -f "$src/CTestTestfile.cmake" ]; then
  stamp "== runtime tests on the GPU"
  ctest --test-dir "$src" -R '^rt\.' --output-on-failure 2>&1 | tail -n 25
fi

if want oracle; then
  stamp "== oracle cases on the GPU"
  python3 tests/oracle/oracle.py --list --labels >"$logs/cases.txt"
  python3 tests/oracle/train_oracle.py --list --labels >"$logs/train_cases.txt"
  num='$2 ~ /(^|,)(op|fusion|model)(,|$)/ && $2 !~ /slow|check|fiber/'
  prec='$2 ~ /mma|tf32|fp16|bf16|int8|splitk|gemv/'
  if [ -n "${NCC_GPU_QUEUE:-}" ]; then cp "$NCC_GPU_QUEUE" "$logs/queue.txt"; else {
    awk "$num && $prec"' {print "cuda oracle " $1}' "$logs/cases.txt"
    awk '$2 !~ /slow|check|fiber/ {print "cuda train_oracle " $1}' "$logs/train_cases.txt"
    awk "$num && !($prec) && \$2 ~ /model/"' {print "cuda oracle " $1}' "$logs/cases.txt"
    [ "$dev" = emu ] || awk "$num && $prec"' {print "jit oracle " $1}' "$logs/cases.txt"
    awk "$num && !($prec) && \$2 !~ /model/"' {print "cuda oracle " $1}' "$logs/cases.txt"
  } >"$logs/queue.txt"; fi
  mkdir -p "$logs/cuda" "$logs/jit"
  one='d=$1; s=$2; c=$3; l="$LOGS/$d/$c.log";
       od=$d; [ "$dev" = emu ] && od=emu;
       NCC_ORACLE_DEVICE=$od python3 tests/oracle/$s.py "$c" --ncc "$NCC" --work "$LOGS/work/$d/$c" >"$l" 2>&1;
       case $? in 0) r=PASS;; 77) r=SKIP;; *) r=FAIL;; esac;
       echo "$r $d $c" >>"$LOGS/summary.txt"; rm -rf "$LOGS/work/$d/$c"'
  : >"$logs/summary.txt"
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} LOGS=$logs limit "${NCC_GPU_ORACLE_S:-0}" xargs -P "$jobs" -L 1 sh -c "$one" sh <"$logs/queue.txt"
  rm -rf "$logs/work"
  for d in cuda jit; do
    q=$(grep -c "^$d " "$logs/queue.txt"); p=$(grep -c "^PASS $d " "$logs/summary.txt")
    f=$(grep -c "^FAIL $d " "$logs/summary.txt"); s=$(grep -c "^SKIP $d " "$logs/summary.txt")
    echo "oracle --device $d: $p passed, $f failed, $s skipped, $((q - p - f - s)) not run (time) of $q"
  done
  grep '^FAIL' "$logs/summary.txt" | sort | head -n 60
fi

train_step() {
  tr="$logs/train"; mkdir -p "$tr"
  python3 examples/make_digits.py "$tr/data" >/dev/null || cp -r "${NCC_GPU_DIGITS:-none}" "$tr/data"
  for p in fp32 fp16 bf16; do
    echo "-- 10 epochs on the GPU at $p"
    "$ncc" train examples/digits.net --data "$tr/data" --epochs 10 --device $dev --precision=$p \
      --log "$tr/gpu_$p.csv" >"$tr/gpu_$p.log" 2>&1 || echo "FAILED (status $?)"
    grep -E "^epoch|accuracy|loss scaling|error" "$tr/gpu_$p.log" | tail -n 4
  done
  echo "-- 40 steps, GPU and emulation, same seed"
  "$ncc" train examples/digits.net --data "$tr/data" --steps 40 --device $dev --log "$tr/a_gpu.csv" >"$tr/a_gpu.log" 2>&1 || echo "GPU run FAILED"
  "$ncc" train examples/digits.net --data "$tr/data" --steps 40 --device emu --log "$tr/a_emu.csv" >"$tr/a_emu.log" 2>&1 || echo "emulated run FAILED"
  echo "-- 20 steps on the GPU, saved, resumed under emulation to 40"
  "$ncc" train examples/digits.net --data "$tr/data" --steps 20 --device $dev --checkpoint "$tr/b.safetensors" >"$tr/b1.log" 2>&1 || echo "GPU part FAILED"
  "$ncc" train examples/digits.net --data "$tr/data" --steps 40 --device emu --checkpoint "$tr/b.safetensors" --resume --log "$tr/b_emu.csv" >"$tr/b2.log" 2>&1 || { echo "emulated resume FAILED"; tail -n 5 "$tr/b2.log"; }
  python3 - "$tr" <<'EOF'
import csv, os, sys
d = sys.argv[1]
def losses(name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return {}
    with open(p) as f:
        return {int(r["step"]): float(r["loss"]) for r in csv.DictReader(f)}
g, e, b = losses("a_gpu.csv"), losses("a_emu.csv"), losses("b_emu.csv")
def cmp(what, x, y):
    ks = sorted(set(x) & set(y))
    if not ks:
        print("%s: nothing to compare" % what); return
    r = max(abs(x[k] - y[k]) / max(abs(y[k]), 1e-12) for k in ks)
    print("%s: steps %d..%d, losses %.5f..%.5f, max relative difference %.2e" % (what, ks[0], ks[-1], y[ks[0]], y[ks[-1]], r))
cmp("GPU against emulation", g, e)
cmp("resumed under emulation against the GPU's unbroken run", b, g)
EOF
}
if want train; then
  stamp "== training on the GPU (examples/digits.net)"
  export -f train_step; export logs ncc
  limit "${NCC_GPU_TRAIN_S:-0}" bash -c train_step 2>&1
fi

# times the objects of bench_list.txt one at a time, into $bl; with a
# baseline, each line with both builds alternately, twice, into $bl.ab too
time_one() {   # NCC_BIN env... args: the bench's lines into $bl, its kernels' median on stdout
  local n=$1; shift
  local e=(); case $1 in env:*) e=("${1#env:}"); shift;; esac
  local it=30; case "$*" in *--iters*) it=;; esac
  env "${e[@]}" "$n" bench "$@" --device $dev ${it:+--iters $it} --warmup 3 >"$logs/last_bench.log" 2>&1
  grep -E "^model|ms/|samples/s|speed|error|scaling|^profile|^modeled|^  " "$logs/last_bench.log" >>"$bl"
  grep -E '^ms/.* in the kernels' "$logs/last_bench.log" | sed 's/.*median \([0-9.]*\).*/\1/'
}
time_list() {
  while read -r line; do
    if [ -z "$base" ]; then
      echo "-- $line" >>"$bl"
      # shellcheck disable=SC2086
      time_one "$ncc" $line >/dev/null
      continue
    fi
    local a1 b1 a2 b2
    # shellcheck disable=SC2086
    { echo "-- A: $line" >>"$bl"; a1=$(time_one "$base" $line)
      echo "-- B: $line" >>"$bl"; b1=$(time_one "$ncc" $line)
      echo "-- A: $line" >>"$bl"; a2=$(time_one "$base" $line)
      echo "-- B: $line" >>"$bl"; b2=$(time_one "$ncc" $line); }
    printf '%-10s %-10s %-10s %-10s %s\n' "${a1:-ERR}" "${b1:-ERR}" "${a2:-ERR}" "${b2:-ERR}" "$line" >>"$bl.ab"
  done <"$logs/bench_list.txt"
}
if want bench; then
  stamp "== ncc bench on the GPU"
  bl="$logs/bench.txt"; : >"$bl"
  python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(0).uniform(-1, 1, (8, 3, 224, 224)).astype(np.float32))" \
    "$logs/cal224.npy"
  if [ -n "${NCC_GPU_BENCHES:-}" ]; then cp "$NCC_GPU_BENCHES" "$logs/bench_list.txt"; else {
    for n in 32 1; do
      for m in resnet50 mobilenet_v2 vgg16; do
        for p in fp32 tf32 fp16 bf16; do echo "examples/$m.net --set N=$n --precision=$p"; done
        # int8: calibrated on 8 random images (the cache keeps the scales for the timed run)
        echo "examples/$m.net --set N=$n --precision=int8 --calibrate=$logs/cal224.npy --calibration-cache=$logs/cal_${m}_$n.txt"
        echo "examples/$m.net --set N=$n --cublas"
        echo "examples/$m.net --set N=$n --cublas --precision=fp16"
      done
    done
    for p in fp32 tf32 fp16 bf16; do
      echo "tests/gpu/gemm4096.net --precision=$p"
      echo "tests/gpu/gemm4096.net --precision=$p --cublas"
      echo "tests/gpu/mlp4096.net --precision=$p"
    done
    echo "tests/gpu/mlp4096.net --precision=fp16 --gemm-pipeline=off"
    for st in 3 4; do echo "tests/gpu/mlp4096.net --precision=fp16 --gemm-stages=$st"; done
    # the tensor-core tiles: the old default forced, and each shape tried on this GPU (--autotune,
    # after the model's choice above; its trials run here, one at a time, not in the parallel compile)
    for m in resnet50 vgg16; do
      # float32 storage between kernels (no storage pass), against the default above
      echo "examples/$m.net --set N=32 --precision=fp16 --passes=prune,fold,precision,fuse,plan,batch"
      echo "examples/$m.net --set N=32 --precision=fp16 --gemm-tile=64x64"
      echo "examples/$m.net --set N=32 --precision=fp16 --gemm-pipeline=off"
      echo "examples/$m.net --set N=32 --precision=fp16 --gemm-stages=3"
      echo "examples/$m.net --set N=32 --precision=fp16 --autotune=300"
      # fp32 (docs/gpu.md, "The float32 GEMM double-buffered"): the wide tiles in one stage, against two by
      # default; the 64x64 tiles in two too; each shape's tile and stages timed (--autotune)
      echo "examples/$m.net --set N=32 --gemm-pipeline=off"
      echo "examples/$m.net --set N=32 --gemm-stages=2"
      echo "examples/$m.net --set N=32 --autotune=300"
    done
    echo "tests/gpu/gemm4096.net --gemm-pipeline=off"
    echo "tests/gpu/gemm4096.net --gemm-stages=2"
    # -O3: VGG-16's pooling prologues (a pooling computed in the next convolution's tile loads, which
    # the SASS puts at about three times a K tile's instructions) against -O2's pooling kernels
    echo "examples/vgg16.net --set N=32 --precision=fp16 -O3"
    echo "tests/gpu/gemm4096.net --precision=fp16 --gemm-tile=64x64"
    echo "tests/gpu/gemm4096.net --precision=fp16 --autotune=120"
    echo "examples/vgg16.net --set N=32 --train --compare --iters 10"
    for p in tf32 fp16 bf16; do echo "examples/vgg16.net --set N=32 --train --precision=$p --iters 10"; done
    echo "examples/vgg16.net --set N=32 --train --cublas --iters 10"
    echo "examples/resnet18.net --set N=32 --train --iters 10"
    echo "examples/resnet18.net --set N=32 --train --precision=fp16 --iters 10"
    # each kernel timed alone beside the report's model (--profile): where the time goes, and how far the model is
    echo "examples/vgg16.net --set N=32 --train --precision=fp16 --iters 5 --profile"
    echo "examples/resnet18.net --set N=32 --train --precision=fp16 --iters 5 --profile"
    echo "examples/resnet50.net --set N=32 --precision=fp16 --iters 10 --profile"
    echo "examples/vgg16.net --set N=32 --precision=fp16 --iters 10 --profile"
    for m in resnet50 mobilenet_v2 vgg16; do echo "env:NCC_GRAPHS=0 examples/$m.net --set N=1"; done
    # the second stream (docs/generated-code.md, "Streams"): off against on (the default above), at the
    # batches where kernels leave SMs idle; a training step's weight gradients beside its input gradients
    for n in 1 32; do echo "examples/resnet50.net --set N=$n --streams=off"; done
    echo "examples/resnet18.net --set N=32 --train --iters 10 --streams=off"
    echo "examples/resnet18.net --set N=32 --train --precision=fp16 --iters 10 --streams=off"
  } >"$logs/bench_list.txt"; fi
  # compile every object first, in parallel (the compile cache keeps them)
  bs=${NCC_GPU_BENCH_S:-0}
  grep -v '^env:' "$logs/bench_list.txt" | grep -v -- '--autotune' | sed 's/ --iters [0-9]*//' |
    awk '/--compare/ { sub(/ --compare/, ""); print $0 " -O0" } { print }' |
    awk -v b="$base" -v n="$ncc" '{ print n " " $0 } b != "" { print b " " $0 }' |
    limit $((bs / 3)) xargs -P "$jobs" -L 1 sh -c 'n=$1; shift; "$n" bench "$@" --device $dev --iters 1 --warmup 0 >/dev/null 2>&1' sh
  stamp "compiled; timing one at a time"
  : >"$bl.ab"
  export -f time_one time_list; export logs ncc bl
  limit $((bs - bs / 3)) bash -c time_list
  cat "$bl"
  if [ -n "$base" ]; then
    echo "kernels alone, ms (median): A = $base, B = $ncc, alternately"
    printf '%-10s %-10s %-10s %-10s %s\n' A B A B bench
    cat "$bl.ab"
  fi
fi

if want torch; then
  stamp "== PyTorch eager on the same GPU"
  limit "${NCC_GPU_TORCH_S:-0}" python3 tests/gpu/torch_bench.py --iters 30 2>&1 || echo "(PyTorch bench failed, stopped, or torchvision missing)"
fi
stamp "done"
