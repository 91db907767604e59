#!/usr/bin/env bash
# Installs what ncc needs to build and test on Debian 12 (apt-get; root or sudo).
# Packages already present are left alone, so this is quick on a set-up machine.
set -euo pipefail
pkgs=(build-essential cmake ninja-build flex bison pkg-config clang libclang-rt-14-dev
      libopenblas-dev libcjson-dev python3-numpy python3-torch
      python3-venv         # the disassemblers' venv below
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
elif [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvdisasm" ] && ! command -v nvdisasm >/dev/null; then
  # nvdisasm and cuobjdump for the SASS report (tests/cg/sass_report.py,
  # docs/gpu.md): a toolkit without them gets NVIDIA's pip wheels in a venv,
  # 6 MB, a few seconds.  Without PyPI the sass.report test reports itself skipped.
  venv=${NCC_SASS_VENV:-$HOME/.cache/ncc/sass-venv}
  if [ ! -e "$venv" ]; then     # one that exists is left alone, tools or not
    if /usr/bin/python3 -m venv "$venv" &&
       "$venv/bin/pip" install -q --disable-pip-version-check --timeout 30 --retries 1 \
         "nvidia-cuda-nvdisasm>=13,<14" "nvidia-cuda-cuobjdump>=13,<14" >/dev/null; then
      echo "nvdisasm and cuobjdump installed in $venv"
    else
      rm -rf "$venv"
      echo "note: could not install nvdisasm/cuobjdump from PyPI: the SASS report test will be skipped" >&2
    fi
  fi
fi
