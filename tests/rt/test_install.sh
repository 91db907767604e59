#!/bin/sh
# test_install.sh BUILD_DIR — installs the build into a temporary prefix, then
# builds and runs tests/rt/consumer with find_package(ncc) from there.
set -eu
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for h in ncc_rt.h ncc_kernel.h ncc_emu.h ncc_cudart.h; do
  [ -f "$tmp/prefix/include/ncc/$h" ] || { echo "missing include/ncc/$h"; exit 1; }
done
[ -x "$tmp/prefix/bin/ncc" ] || { echo "missing bin/ncc"; exit 1; }
cmake -S "$here/consumer" -B "$tmp/b" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/b" >/dev/null
"$tmp/b/consumer" --quick
# the installed compiler runs and finds its libnccrt through its RPATH
env -u LD_LIBRARY_PATH "$tmp/prefix/bin/ncc" --help >/dev/null 2>&1 || env -u LD_LIBRARY_PATH "$tmp/prefix/bin/ncc" --version >/dev/null 2>&1 || {
  ldd "$tmp/prefix/bin/ncc" | grep -q "libnccrt.*$tmp/prefix" || { echo "installed ncc does not find libnccrt"; ldd "$tmp/prefix/bin/ncc"; exit 1; }
}
echo "install + find_package(ncc): ok"
