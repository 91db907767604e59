#!/bin/sh
# check_barrier_flags.sh NVCC INCLUDE_DIR FILE.cu [SKIP,LIST]
# ptxas reports "used N barriers" per kernel; a kernel flagged NCC_KF_BARRIER in
# its NCC_KERNEL_DESC (or NCC_KF_BARRIER_WARP: barriers and warp collectives)
# must use barriers, and an unflagged one must not (the emulator runs unflagged
# kernels as a plain loop over threads).  Kernels in the
# comma-separated SKIP list are deliberately wrong (test material).
set -eu
nvcc=$1 inc=$2 src=$3 skip=",${4:-},"
out=$(mktemp)
trap 'rm -f "$out" "$out.cubin"' EXIT
"$nvcc" -arch=sm_90 -cubin -Xptxas -v -I"$inc" "$src" -o "$out.cubin" >"$out" 2>&1 || { cat "$out"; exit 1; }
bad=0 n=0
for k in $(sed -n "s/^ptxas info *: Compiling entry function '\([A-Za-z0-9_]*\)'.*/\1/p" "$out"); do
  case "$skip" in *",$k,"*) continue ;; esac
  # ncc_kernel.h's own ncc_round_k (cuBLAS's rounded operands on a GPU) is no
  # model kernel: it has no descriptor and never runs under emulation
  case "$k" in *ncc_round_k*) continue ;; esac
  bars=$(awk -v k="$k" '$0 ~ "Compiling entry function \x27" k "\x27" {f=1} f && /used [0-9]+ barriers/ {
           for (i = 1; i <= NF; i++) if ($i == "barriers" || $i == "barriers,") { print $(i-1); exit } }' "$out")
  flag=$(tr -d '\n' <"$src" | sed 's/NCC_KERNEL_DESC(/\n&/g' | sed -n "s/^NCC_KERNEL_DESC($k, *\([A-Z0-9_]*\).*/\1/p")
  n=$((n + 1))
  if [ -z "$flag" ]; then echo "$k: no NCC_KERNEL_DESC"; bad=1; continue; fi
  case "$flag" in NCC_KF_BARRIER | NCC_KF_BARRIER_WARP) fb=1 ;; *) fb=0 ;; esac
  if [ "$bars" -gt 0 ] && [ $fb = 0 ]; then echo "$k: ptxas counts $bars barriers, flagged $flag"; bad=1; fi
  if [ "$bars" -eq 0 ] && [ $fb = 1 ]; then echo "$k: no barrier, but flagged $flag"; bad=1; fi
done
echo "$n kernels checked against ptxas"
[ "$n" -gt 0 ] && exit $bad
