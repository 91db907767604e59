#!/bin/sh
# run_cases.sh — every codegen test model: emit, compile as C with -DNCC_EMU
# (-Werror), run on the CPU emulation through the model's API, and compare
# with PyTorch (check_cases.py).  WORKDIR is removed when every case passed.
#   run_cases.sh BUILD_GRAPHS RUNTIME_DIR LIBDIR WORKDIR PYTHON [--cublas] [--fuse] [--fold] [CASE...]
set -u
bg=$1; rt=$2; lib=$3; work=$4; py=$5; shift 5
here=$(cd "$(dirname "$0")" && pwd)
flag=""
while [ "${1:-}" = --cublas ] || [ "${1:-}" = --fuse ] || [ "${1:-}" = --fold ]; do flag="$flag $1"; shift; done
cases=${*:-$("$bg" --list)}
rm -rf "$work" && mkdir -p "$work/src" || exit 1
"$bg" "$work/src" $flag $cases || exit 1
fail=0
for c in $cases; do
  mkdir -p "$work/$c"
  # shellcheck disable=SC2086  # CG_CFLAGS: extra flags (the sanitizers of a sanitized build)
  if ! cc ${CG_CFLAGS:-} -std=c11 -O1 -DNCC_EMU -Wall -Wextra -Werror -Werror=implicit-function-declaration \
       -I "$rt" -I "$work/src" -DMODEL="$c" -DMODEL_H="\"$c.h\"" \
       -x c "$work/src/$c.cu" -x c "$here/run_case.c" -L "$lib" -lnccrt -Wl,-rpath,"$lib" -lm \
       -o "$work/$c/run"; then
    echo "FAIL $c: does not compile"; fail=1; continue
  fi
  # barrier kernels run on fibers; the reverse order catches a missing barrier
  for order in forward reverse; do
    rm -f "$work/$c"/out_*.npy
    if ! NCC_FIBER_ORDER=$order "$work/$c/run" "$work/$c" >/dev/null; then
      echo "FAIL $c: run ($order)"; fail=1; continue
    fi
    if ! "$py" "$here/check_cases.py" "$work/$c" "$c"; then
      echo "FAIL $c: differs from PyTorch ($order fiber order)"; fail=1
    fi
  done
done
[ $fail = 0 ] && echo "all cases ok ${flag}"
# the working files go when everything passed (NCC_KEEP_WORK=1 keeps them)
[ $fail = 1 ] || [ "${NCC_KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
exit $fail
