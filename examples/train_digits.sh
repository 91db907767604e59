#!/usr/bin/env bash
# The training job on a shipped example, from a fresh Debian machine: install
# dependencies, build ncc, convert scikit-learn's 8x8 handwritten digits to
# .npy (a fixed train/test split), and train the LeNet-style network of
# examples/digits.net with `ncc train` under CPU emulation: progress, test
# loss and accuracy after every epoch, a checkpoint at the end of each.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
out=build/digits
mkdir -p "$out"
/usr/bin/python3 examples/make_digits.py "$out"
echo "== ncc train examples/digits.net --data $out --epochs ${EPOCHS:-10}"
build/ncc train examples/digits.net --data "$out" --epochs "${EPOCHS:-10}" \
  --checkpoint "$out/digits.safetensors" --log "$out/digits.csv"
echo "checkpoint: $out/digits.safetensors (weights, Adam state, step); per-step log: $out/digits.csv"
