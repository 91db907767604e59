#!/usr/bin/env bash
# The main job on a shipped example, from a fresh Debian machine:
# install dependencies, build ncc, compile LeNet to CUDA C, show the report,
# run the generated code under CPU emulation with weights from PyTorch and
# compare with PyTorch, then time ResNet-18 under emulation.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
out=build/demo
mkdir -p "$out"

echo "== ncc examples/lenet.net -o $out/lenet.cu"
build/ncc examples/lenet.net -o "$out/lenet.cu"
echo "   $(grep -c '^NCC_KERNEL void' "$out/lenet.cu") kernels, $(wc -l < "$out/lenet.cu") lines of CUDA C; API in $out/lenet.h"
echo
echo "== ncc examples/lenet.net --emit=report"
build/ncc examples/lenet.net --emit=report
echo
echo "== PyTorch makes weights and inputs"
/usr/bin/python3 examples/demo.py make "$out"
echo
echo "== ncc run (the same CUDA C, compiled as C against the emulator)"
build/ncc run examples/lenet.net --weights "$out/lenet.safetensors" \
  --input x="$out/x.npy" --output logits="$out/logits.npy" --device auto
/usr/bin/python3 examples/demo.py check "$out"
echo
echo "== ncc bench examples/resnet18.net --set N=2 --set S=64 (CPU emulation)"
build/ncc bench examples/resnet18.net --set N=2 --set S=64 --device auto --cublas
