#!/bin/sh
# banks.sh — the tile stores that codegen lays out for the banks meet each
# bank once (tests/cg/bank_report.py, worked out from the generated source; no
# GPU, no nvcc):
#   - a float32 k-contiguous operand's A tile (vec32_pieces) at fp16, bf16 and,
#     unpipelined, tf32: the 4096^3 GEMM of tests/gpu/gemm4096.net;
#   - int8's gathered B tile in padded slices (NJ >= 4): ResNet-18 at int8,
#     batch 2, 64 x 64, calibrated by `ncc bench` on 2 random rows;
#   - the convolutions' gathered B tile at tf32, fp16 and bf16, a warp 16
#     columns wide (b_warp16: the tap tile, the table's rows, the digits):
#     ResNet-18 (its training step's forward convolutions too) at the tile
#     model's choices, at 32 x 32 (4 threads a column) and 128 x 128 (256
#     threads), and VGG-16 at fp16;
#   - the CUDA-core kernels' tiles, every store of ResNet-18 at fp32 (the rows'
#     padding by the operand's order), and of its fp32 training step (the weight
#     gradients' float4 tiles, their columns swizzled: b_swz);
#   - a tensor-core tile stored a row at a time along n, a warp 16 columns wide
#     (load_tile): the 4096^3 GEMM's B at tf32; and the strided 3 x 3 data
#     gradients' B (dgrad_tile_taps) of ResNet-18's training step at tf32 and fp16.
# usage: banks.sh NCC PYTHON SRC_DIR WORKDIR
set -eu
ncc=$1; py=$2; src=$3; work=$4
rm -rf "$work" && mkdir -p "$work"
br() { "$py" "$src/tests/cg/bank_report.py" "$@"; }
for p in fp16 bf16; do
  "$ncc" "$src/tests/gpu/gemm4096.net" --precision=$p -o "$work/g_$p.cu"
  br "$work/g_$p.cu" --array As --max-ways 1
done
"$ncc" "$src/tests/gpu/gemm4096.net" --precision=tf32 --gemm-pipeline=off -o "$work/g_tf32.cu"
br "$work/g_tf32.cu" --array As --max-ways 1
"$py" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(0).uniform(-1, 1, (2, 3, 64, 64)).astype(np.float32))" \
  "$work/cal.npy"
set -- --set N=2 --set S=64 --precision=int8 --int8-max-error=1e9 --calibration-cache="$work/cal.txt"
"$ncc" bench "$src/examples/resnet18.net" "$@" --device emu --iters 1 --warmup 0 --calibrate="$work/cal.npy" >/dev/null
"$ncc" "$src/examples/resnet18.net" "$@" -o "$work/r8.cu"
# the convolutions whose lanes read 16 bytes of the B tile at once (a lane's slot of four 8-column blocks, NJ >= 4)
padded=$(awk '/^NCC_KERNEL void/ { match($0, /resnet18_k[0-9]+_conv2d_mma[a-z_]*/); k = substr($0, RSTART, RLENGTH) }
              /ncc_lds_u32x4\(q, \(const unsigned short \*\)&Bs\[/ { print k }' "$work/r8.cu" | sort -u)
[ -n "$padded" ] || { echo "no int8 convolution reads 16 bytes of its B tile a lane in $work/r8.cu"; exit 1; }
for k in $padded; do
  out=$(br "$work/r8.cu" --kernel "$k" --array Bs --max-ways 1) || { echo "$out"; exit 1; }
  echo "$out" | tail -n 1
done
# the gathered B tiles of the forward convolutions (conv2d_mma: not the gradients' kernels)
at1() {   # FILE [--kernel S --array A]: those stores at 1 wavefront a request, the report's last line
  out=$(br "$@" --max-ways 1) || { echo "$out"; exit 1; }
  echo "$out" | tail -n 1
}
gathered() { at1 "$1" --kernel conv2d_mma --array Bs; }
for p in tf32 fp16 bf16; do
  "$ncc" "$src/examples/resnet18.net" --precision=$p -o "$work/r_$p.cu"
  gathered "$work/r_$p.cu"
done
for t in 32x32 128x128; do
  for p in tf32 fp16; do
    "$ncc" "$src/examples/resnet18.net" --precision=$p --gemm-tile=$t -o "$work/r_${p}_$t.cu"
    gathered "$work/r_${p}_$t.cu"
  done
done
"$ncc" "$src/examples/vgg16.net" --precision=fp16 -o "$work/v_fp16.cu"
gathered "$work/v_fp16.cu"
"$ncc" "$src/examples/resnet18.net" --precision=fp32 -o "$work/r_fp32.cu"
at1 "$work/r_fp32.cu"
# the fp32 training step: every store, the weight gradients' swizzled float4 tiles among them (b_swz)
"$ncc" "$src/examples/resnet18.net" --precision=fp32 --train -o "$work/rt_fp32.cu"
grep -q 'Bs\[kk\]\[rr ^ ((kk & 8) >> 2)\] = v;' "$work/rt_fp32.cu" ||
  { echo "no weight gradient of ResNet-18's fp32 training step stores a swizzled float4 tile"; exit 1; }
at1 "$work/rt_fp32.cu"
# a tile stored a row at a time along n, a warp 16 columns wide (load_tile): the tf32 GEMM's n-contiguous B;
# the training step's strided 3 x 3 data gradients (dgrad_tile_taps; fused with the residual's sum and the relu)
"$ncc" "$src/tests/gpu/gemm4096.net" --precision=tf32 -o "$work/g_tf32p.cu"
at1 "$work/g_tf32p.cu" --array Bs
for p in tf32 fp16; do
  "$ncc" "$src/examples/resnet18.net" --precision=$p --train -o "$work/rt_$p.cu"
  at1 "$work/rt_$p.cu" --kernel conv2d_bwd_data_mma_add_act_grad --array Bs
done
rm -rf "$work"
echo "banks: every checked store meets each bank once"
