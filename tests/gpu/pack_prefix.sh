#!/usr/bin/env bash
# pack_prefix.sh — an installed prefix to carry to a GPU machine that has the CUDA toolkit and PyTorch
# but not ncc's build dependencies: `cmake --install BUILD --prefix PREFIX`, then every shared library
# that ldd names for ncc and libnccrt (and for those libraries), but the C runtime's, copied into
# PREFIX/lib.  Stops if ldd cannot find one here.  There, run with the libraries on the path:
#
#   tests/gpu/pack_prefix.sh BUILD PREFIX
#   LD_LIBRARY_PATH=PREFIX/lib tests/gpu/gpu_check.sh PREFIX LOGS
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 BUILD PREFIX" >&2; exit 2; }
cmake --install "$1" --prefix "$2" >/dev/null
lib=$2/lib
# the C runtime (libc, libm, libpthread, libdl, librt, the loader, libgcc_s) is the GPU machine's own
base='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libgcc_s)\.'
todo=("$2/bin/ncc" "$lib/libnccrt.so.0") seen=" "
while [ ${#todo[@]} -gt 0 ]; do
  f=${todo[0]}; todo=("${todo[@]:1}")
  out=$(LD_LIBRARY_PATH=$lib ldd "$f") || { echo "ldd failed on $f" >&2; exit 1; }
  if grep -q 'not found' <<<"$out"; then echo "$f: a library is missing here:" >&2; grep 'not found' <<<"$out" >&2; exit 1; fi
  while read -r name _ path _; do
    [[ $name =~ $base ]] && continue
    if [ -z "$path" ] || [ ! -f "$path" ]; then continue; fi
    case $seen in *" $name "*) continue;; esac
    seen="$seen$name "
    [ -e "$lib/$name" ] || cp -L "$path" "$lib/$name"
    todo+=("$lib/$name")
  done < <(grep '=>' <<<"$out")
done
echo "packed $2: ncc, libnccrt and$(tr ' ' '\n' <<<"$seen" | grep -v -e '^$' -e '^libnccrt' | sed 's/^/ /' | tr -d '\n')"
