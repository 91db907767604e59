#!/bin/sh
# run_train.sh — the training ops' kernels (tests/cg/build_train.c): emit each
# model, compile it as C with -DNCC_EMU (-Werror), run it on the CPU emulation
# in checked mode in both fiber orders, and compare with PyTorch's autograd
# (check_train.py).  With nvcc given (not "-"), every .cu also compiles for
# sm_80 with warnings as errors.  WORKDIR is removed when every case passed.
#   run_train.sh BUILD_TRAIN RUNTIME_DIR LIBDIR WORKDIR PYTHON NVCC [CASE...]
set -u
bt=$1; rt=$2; lib=$3; work=$4; py=$5; nvcc=$6; shift 6
here=$(cd "$(dirname "$0")" && pwd)
cases=${*:-$("$bt" --list)}
rm -rf "$work" && mkdir -p "$work/src" || exit 1
"$bt" "$work/src" $cases || exit 1
fail=0
for c in $cases; do
  m=t_$c
  mkdir -p "$work/$c"
  # the dropout kernels take the model's seed and step; the test drives them
  # through two globals of run_train_case.c
  sed -e 's/m->seed32/ncc_test_seed32/g' -e 's/m->step32/ncc_test_step32/g' "$work/src/$m.cu" > "$work/$c/$m.cu"
  if grep -q ncc_test_seed32 "$work/$c/$m.cu"; then
    sed -i '/^#include "ncc_kernel.h"/a extern int ncc_test_seed32, ncc_test_step32;' "$work/$c/$m.cu"
  fi
  # shellcheck disable=SC2086  # CG_CFLAGS: extra flags (the sanitizers of a sanitized build)
  if ! cc ${CG_CFLAGS:-} -std=c11 -O1 -DNCC_EMU -Wall -Wextra -Werror -Werror=implicit-function-declaration \
       -I "$rt" -I "$work/src" -DMODEL="$m" -DMODEL_H="\"$m.h\"" \
       -x c "$work/$c/$m.cu" -x c "$here/run_train_case.c" -L "$lib" -lnccrt -Wl,-rpath,"$lib" -lm \
       -o "$work/$c/run"; then
    echo "FAIL $c: does not compile"; fail=1; continue
  fi
  if [ "$nvcc" != - ]; then
    if ! "$nvcc" -arch=sm_80 -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -I "$rt" -I "$work/src" \
         -c "$work/$c/$m.cu" -o "$work/$c/$m.o"; then
      echo "FAIL $c: nvcc"; fail=1
    fi
  fi
  for order in forward reverse; do
    rm -f "$work/$c"/*.npy
    if ! NCC_CHECK=1 NCC_FIBER_ORDER=$order "$work/$c/run" "$work/$c" >/dev/null; then
      echo "FAIL $c: run ($order)"; fail=1; continue
    fi
    if ! "$py" "$here/check_train.py" "$work/$c" "$work/src/$m.json"; then
      echo "FAIL $c: differs from PyTorch ($order fiber order)"; fail=1
    fi
  done
done
[ $fail = 0 ] && echo "all training cases ok"
[ $fail = 1 ] || [ "${NCC_KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
exit $fail
