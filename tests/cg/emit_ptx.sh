#!/bin/sh
# emit_ptx.sh NCC EXAMPLES OUTDIR — generated models through the runtime's own
# NVRTC prelude (what --jit compiles at load time), by `ncc --emit=ptx` (the
# inference kernels): the digits network at fp16, ResNet-18 at bf16 and
# MobileNetV2 at tf32 must compile, and a GEMM epilogue's column pairs must
# be vector stores and loads in the PTX (ncc_st2f, ncc_ld2f:
# st.global.v2.f32, ld.global.nc.v2.f32).  NVRTC not loadable: skipped (77).
set -u
ncc=$1; ex=$2; out=$3
mkdir -p "$out"
run() {
  name=$1; shift
  if ! "$ncc" "$@" --emit=ptx -o "$out/$name.ptx" 2> "$out/$name.err"; then
    if grep -q "cannot load NVRTC" "$out/$name.err"; then
      echo "skipped: $(cat "$out/$name.err")"
      exit 77
    fi
    echo "FAIL $name: ncc $* --emit=ptx"
    cat "$out/$name.err"
    exit 1
  fi
  echo "$name: $(grep -c '\.entry' "$out/$name.ptx") kernels"
}
run digits_fp16 "$ex/digits.net" --precision=fp16
# one stream: the residual adds join the downsampling convolutions' kernels, whose
# epilogues read the other branch's column pairs (with two, the fuse pass computes
# those convolutions first and the adds join the split-K 3x3 convolutions' sums)
run resnet18_bf16 "$ex/resnet18.net" --set N=2 --set S=32 --precision=bf16 --streams=off
run mobilenet_v2_tf32 "$ex/mobilenet_v2.net" --set N=2 --precision=tf32
for v in st.global.v2.f32 ld.global.nc.v2.f32; do
  n=$(grep -c "$v" "$out/resnet18_bf16.ptx")
  echo "resnet18_bf16: $n $v"
  if [ "$n" -eq 0 ]; then
    echo "FAIL: no $v in ResNet-18's bf16 kernels (the epilogues' column pairs)"
    exit 1
  fi
done
rm -rf "$out"
