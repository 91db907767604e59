#!/usr/bin/env bash
# Installs what ncc needs to build and test on Debian 12 (apt-get; root or sudo).
# Packages already present are left alone, so this is quick on a set-up machine.
set -euo pipefail
pkgs=(build-essential cmake ninja-build flex bison pkg-config clang libclang-rt-14-dev
      libopenblas-dev libcjson-dev python3-numpy python3-torch
      python3-sklearn      # sklearn: the digits data set (examples/make_digits.py)
      libprotobuf-c-dev protobuf-c-compiler python3-onnx)   # ONNX import (docs/onnx.md)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "note: no CUDA toolkit found: the nvcc/NVRTC compile tests will be skipped" >&2
fi
