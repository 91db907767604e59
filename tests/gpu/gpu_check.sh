#!/usr/bin/env bash
# gpu_check.sh — the checks that need a real GPU, in one command (never run by CI:
# CI machines have none).  Run on a machine with an NVIDIA GPU, the CUDA toolkit
# and python3 with torch and numpy, from the repository root, after a build:
#
#   tests/gpu/gpu_check.sh [BUILD_DIR] [LOG_DIR]
#
# 1. the runtime tests that run kernels (cudart backend built by nvcc; NVRTC + driver API)
# 2. every numeric oracle case (op, fusion, model labels; PyTorch float64 reference)
#    with the model built by nvcc (--device cuda), then with kernels compiled by
#    NVRTC at load time (--jit)
# 3. ncc bench of the example models on the GPU, tiled kernels (fp32 and tf32 on
#    tensor cores) and --cublas
set -uo pipefail
build=${1:-build}
logs=${2:-$build/gpu-logs}
mkdir -p "$logs"
build=$(cd "$build" && pwd)
ncc=$build/ncc
jobs=${NCC_GPU_JOBS:-8}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || { echo "no GPU answers"; exit 77; }

echo "== runtime tests on the GPU"
ctest --test-dir "$build" -R '^rt\.' --output-on-failure 2>&1 | tail -n 25

cases=$(python3 tests/oracle/oracle.py --list --labels | awk '$2 ~ /(^|,)(op|fusion|model)(,|$)/ && $2 !~ /slow|check|fiber/ {print $1}')
for dev in cuda jit; do
  echo "== oracle cases on the GPU (--device $dev)"
  mkdir -p "$logs/$dev"
  printf '%s\n' $cases | NCC_ORACLE_DEVICE=$dev xargs -P "$jobs" -I{} sh -c \
    'python3 tests/oracle/oracle.py {} --ncc "$0" --work "$1/work/{}" >"$1/{}.log" 2>&1 && echo "PASS {}" || echo "FAIL {}"' \
    "$ncc" "$logs/$dev" | sort > "$logs/$dev/summary.txt"
  p=$(grep -c '^PASS' "$logs/$dev/summary.txt"); f=$(grep -c '^FAIL' "$logs/$dev/summary.txt")
  echo "$dev: $p passed, $f failed"
  grep '^FAIL' "$logs/$dev/summary.txt" | head -n 40
  rm -rf "$logs/$dev/work"
done

echo "== ncc bench on the GPU"
bench() { echo "-- $*"; "$ncc" bench "$@" --device cuda --iters 30 2>&1 | tail -n 3; }
for m in resnet18 resnet50 mobilenet_v2 vgg16; do
  for n in 1 32; do
    bench examples/$m.net --set N=$n
    bench examples/$m.net --set N=$n --precision=tf32   # tensor cores (mma.sync)
    bench examples/$m.net --set N=$n --cublas
  done
done
bench examples/lenet.net --set N=64

echo "== PyTorch eager on the same GPU (the figures to compare with)"
python3 tests/gpu/torch_bench.py --iters 30 || echo "(PyTorch bench failed or torchvision missing)"
