#!/bin/sh
# ptxas_train.sh — the training code of every example (examples/*.net with a
# train block), with its inference code: generated at -O0, -O3, -O3
# --precision=tf32 (the TF32 GEMMs) and -O3 --train --precision=fp16 (FP16
# GEMMs and the loss scaler's unscale kernel), compiled by ptxas for sm_80
# and sm_90 (ptxas_report.py --check): no kernel spills, and every kernel's
# NCC_KF_BARRIER flag agrees with ptxas's barrier count.  Each report must
# list the optimizer's kernel, so that the training step was really compiled
# (and at fp16 the unscale kernel).
#   ptxas_train.sh NCC PYTHON NVCC RUNTIME_DIR WORKDIR EXAMPLES_DIR
set -u
ncc=$1; py=$2; nvcc=$3; rt=$4; work=$5; ex=$6
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work" || exit 1
fail=0 n=0
for net in "$ex"/*.net; do
  grep -q '^train' "$net" || continue
  name=$(basename "$net" .net)
  for o in 0 3 3tf32 3fp16; do
    cu="$work/${name}_O$o.cu"
    flags="-O${o%%[tf]*}"
    [ "$o" = 3tf32 ] && flags="$flags --precision=tf32"
    [ "$o" = 3fp16 ] && flags="$flags --train --precision=fp16"
    # shellcheck disable=SC2086  # flags: two words
    if ! "$ncc" "$net" $flags -o "$cu"; then echo "FAIL $name $flags: ncc"; fail=1; continue; fi
    for arch in sm_80 sm_90; do
      rep="$work/${name}_O${o}_$arch.txt"
      if ! "$py" "$here/ptxas_report.py" --check --arch $arch --nvcc "$nvcc" -I "$rt" -I "$work" "$cu" > "$rep"; then
        echo "FAIL $name -O$o $arch:"; grep -E "FAIL|spill|disagree" "$rep" | head -20; fail=1; continue
      fi
      if ! grep -q "_optimizer " "$rep"; then echo "FAIL $name -O$o $arch: no optimizer kernel in the report"; fail=1; fi
      if [ "$o" = 3fp16 ] && ! grep -q "_unscale_grads " "$rep"; then
        echo "FAIL $name -O$o $arch: no unscale kernel in the report"; fail=1
      fi
      n=$((n + 1))
    done
  done
done
[ $n -gt 0 ] || { echo "FAIL: no example with a train block under $ex"; fail=1; }
[ $fail = 0 ] && echo "training code of the examples: $n compilations, no spills, barrier flags agree"
[ $fail = 1 ] || [ "${NCC_KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
exit $fail
