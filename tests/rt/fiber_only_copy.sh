#!/bin/sh
# fiber_only_copy.sh — the emulation build compiles a kernel with barriers or
# warp collectives once: its descriptor has no whole-block function (those
# kernels always run on fibers), so the C compiler drops that second inlined
# copy (runtime/ncc_kernel.h).  LeNet's training code at -O2: a _block
# function for each barrier-free kernel and for no other.
#   fiber_only_copy.sh NCC RUNTIME_DIR WORKDIR EXAMPLES_DIR
set -u
ncc=$1; rt=$2; work=$3; ex=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
"$ncc" "$ex/lenet.net" --set N=4 -o "$work/lenet.cu" || { echo "FAIL: ncc"; exit 1; }
cc -std=gnu11 -O2 -fPIC -DNCC_EMU -I "$rt" -I "$work" -x c -c "$work/lenet.cu" -o "$work/lenet.o" ||
  { echo "FAIL: the emulation build does not compile"; exit 1; }
free=$(grep -c '^NCC_KERNEL_DESC(lenet_[a-z0-9_]*, 0,' "$work/lenet.cu")
fibers=$(grep -c '^NCC_KERNEL_DESC(lenet_[a-z0-9_]*, NCC_KF_' "$work/lenet.cu")
blocks=$(nm "$work/lenet.o" | grep -c ' t lenet_[a-z0-9_]*_block$')
threads=$(nm "$work/lenet.o" | grep -c ' t lenet_[a-z0-9_]*_thread$')
echo "kernels: $free barrier-free, $fibers on fibers; compiled: $blocks whole-block functions, $threads per-thread"
if [ "$fibers" -lt 1 ] || [ "$free" -lt 1 ]; then echo "FAIL: expected kernels of both kinds"; exit 1; fi
if [ "$blocks" != "$free" ] || [ "$threads" != $((free + fibers)) ]; then
  echo "FAIL: a whole-block function for each barrier-free kernel only, a per-thread one for every kernel"; exit 1
fi
[ "${NCC_KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
echo "PASS"
