#!/bin/sh
# run_bad.sh NCC FILE.net OUTDIR — codegen refuses the model: exit status 1,
# the message on the file's `#! ` line on stderr, and no output file left.
set -u
ncc=$1; f=$2; out=$3
want=$(sed -n 's/^#! //p' "$f")
rm -rf "$out" && mkdir -p "$out"
"$ncc" "$f" -o "$out/m.cu" 2>"$out/err"
rc=$?
[ $rc = 1 ] || { echo "exit status $rc, want 1"; cat "$out/err"; exit 1; }
grep -qF -- "$want" "$out/err" || { echo "stderr lacks: $want"; cat "$out/err"; exit 1; }
[ -z "$(ls "$out" | grep -v '^err$')" ] || { echo "left output: $(ls "$out")"; exit 1; }
echo "ok: $(cat "$out/err" | head -1)"
