#!/bin/sh
# run_graphs.sh — CUDA graphs under emulation (tests/cg/graphs_check.c): one
# example compiled by ncc with the given flags, built as C with -DNCC_EMU
# (-Werror) beside graphs_check.c, and run in checked mode: inference and
# training bit-identical with graphs on and off, and the replay path taken.
# WORKDIR is removed when the check passes (NCC_KEEP_WORK=1 keeps it).
# WHAT: train (the training step too, when the model has one) or infer.
#   run_graphs.sh NCC RUNTIME_DIR LIBDIR WORKDIR train|infer MODEL.net [NCC FLAGS...]
set -u
ncc=$1; rt=$2; lib=$3; work=$4; what=$5; net=$6; shift 6
here=$(cd "$(dirname "$0")" && pwd)
m=$(basename "$net" .net)
rm -rf "$work" && mkdir -p "$work" || exit 1
build() {   # ncc flags...: $work/check
  "$ncc" "$net" "$@" -o "$work/$m.cu" || { echo "FAIL: ncc $net $*"; exit 1; }
  train=""
  case " $* " in *" --max-memory="*) train="-DGRAPHS_SLICED" ;; esac
  [ "$what" = train ] && grep -q "_train_step_io(" "$work/$m.h" && train="$train -DNCC_HAVE_TRAIN"
  # shellcheck disable=SC2086  # CG_CFLAGS: extra flags (the sanitizers of a sanitized build)
  cc ${CG_CFLAGS:-} -std=c11 -O1 -DNCC_EMU -Wall -Wextra -Werror -Werror=implicit-function-declaration \
     -I "$rt" -I "$work" -DMODEL="$m" -DMODEL_H="\"$m.h\"" $train \
     -x c "$work/$m.cu" -x c "$here/graphs_check.c" -L "$lib" -lnccrt -Wl,-rpath,"$lib" -lm -o "$work/check" ||
    { echo "FAIL: does not compile"; exit 1; }
}
case " $* " in
  *" --freeze "*)   # the weights first, from a build without the flags
    build || exit 1
    "$work/check" "$work" --weights-only || exit 1
    build "$@" --weights "$work/weights.safetensors" || exit 1 ;;
  *) build "$@" || exit 1 ;;
esac
NCC_CHECK=1 "$work/check" "$work" || { echo "FAIL: $net $*"; exit 1; }
[ "${NCC_KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
