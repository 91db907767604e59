#!/bin/sh
# compile_model.sh — one model's generated code through every compiler that
# will meet it, warnings as errors:
#   gcc -std=c11 -DNCC_EMU (the CPU emulation build), the --jit host file as
#   C11, nvcc for sm_80 and sm_90 (one front-end pass, two back ends), and the
#   kernels section through NVRTC's front end (parsing and diagnostics) for
#   compute_80 and compute_90, and an op case (--case) to PTX for compute_90.
# CG_ARCHS (default "80 90") narrows the nvcc targets.
# NVCC or NVRTC_CHECK "-": that compiler was not found; the others still run,
# and the script then exits 77 (ctest SKIP_RETURN_CODE), since the test did
# not do all it says.  The model's files are removed when every compiler
# passed (NCC_KEEP_WORK=1 keeps them), and kept for a look when one failed.
# usage: compile_model.sh OUTDIR RUNTIME_DIR NVCC|- NVRTC_CHECK|- (--net NCC MODEL.net [--cublas] | --case BUILD_GRAPHS CASE [--cublas])
set -eu
out=$1; rt=$2; nvcc=$3; nvrtc=$4; mode=$5; tool=$6; what=$7; shift 7
flag=${1:-}
mkdir -p "$out"
cd "$out"
if [ "$mode" = --net ]; then
  name=$(basename "$what" .net)
  "$tool" "$what" -o "$name.cu" $flag
  mkdir -p jit && "$tool" "$what" --jit -o "jit/$name.c" $flag
else
  name=$what
  "$tool" . $flag "$name"
  mkdir -p jit && "$tool" jit --jit $flag "$name"
fi
cc -std=c11 -x c -DNCC_EMU -Wall -Wextra -Werror -Werror=implicit-function-declaration -I "$rt" -I . \
   -c "$name.cu" -o "$name.emu.o"
cc -std=c11 -Wall -Wextra -Werror -Werror=implicit-function-declaration -I "$rt" -I jit \
   -c "jit/$name.c" -o "$name.jit.o"
echo "$name: gcc -std=c11 (emulation and --jit host) ok"
if [ "$nvcc" != - ]; then
  gen=""
  for a in ${CG_ARCHS:-80 90}; do gen="$gen -gencode arch=compute_$a,code=sm_$a"; done
  "$nvcc" $gen -c --Werror all-warnings \
          -Xcompiler -Wall,-Wextra,-Werror -I "$rt" -I . "$name.cu" -o "$name.cuda.o"
  echo "$name: nvcc (sm_${CG_ARCHS:-80 90}) ok"
fi
if [ "$nvrtc" != - ]; then
  # a model through NVRTC's front end (parsing, NVRTC's headers and macros,
  # every diagnostic), not its code generation: that is nvcc's, which built
  # both archs above (0.4 s, not 6, for ResNet-18); an op case, small, to
  # PTX for compute_90 as well
  "$nvrtc" --syntax-only "$rt" compute_80 "$name.cu"
  if [ "$mode" = --net ]; then
    "$nvrtc" --syntax-only "$rt" compute_90 "$name.cu"
  else
    "$nvrtc" "$rt" compute_90 "$name.cu"
  fi
fi
[ "${NCC_KEEP_WORK:-0}" = 1 ] || rm -f "$name.cu" "$name.h" "$name".*.o "jit/$name.c" "jit/$name.h"
missing=""
[ "$nvcc" != - ] || missing="nvcc"
[ "$nvrtc" != - ] || missing="${missing:+$missing and }NVRTC"
if [ -n "$missing" ]; then
  echo "skipped: $missing not found when the tests were configured (the other compilers passed)"
  exit 77
fi
