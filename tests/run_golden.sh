#!/bin/sh
# run_golden.sh NCC FILE.net [--update]
# Golden-IR test: FILE holds a model and, at its end, the expected output of
# `ncc FILE --emit=ir` in comment lines starting with "#> ".  An optional line
# "# args: ..." gives extra flags (e.g. --set N=3, or --passes=prune,fuse -v
# --emit=report: the last --emit wins).  What ncc prints on stderr (-v
# statistics, "not fused" lines, --print-after listings) is expected too, after
# the stdout lines, each prefixed with "stderr: "; timings ("in 0.12 ms") read
# "in (time)".  The test fails on any difference (shown as a unified diff) and
# when ncc does not exit 0.
# --update rewrites the expected lines from ncc's output: review the diff
# before committing it, the expected text is the test's truth.
set -u
ncc=$1 file=$2 mode=${3:-}
args=$(sed -n 's/^# args: //p' "$file" | head -n 1)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
timeout 20 "$ncc" "$file" --emit=ir $args >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL: $file: ncc exited with $rc" >&2
  cat "$tmp/stderr" >&2
  exit 1
fi
{
  cat "$tmp/stdout"
  sed 's/ in [0-9.]* ms$/ in (time)/; s/^/stderr: /' "$tmp/stderr"
} >"$tmp/actual"
if [ "$mode" = "--update" ]; then
  grep -v '^#>' "$file" >"$tmp/model"
  sed 's/^/#> /; s/ $//' "$tmp/actual" >>"$tmp/model"
  cp "$tmp/model" "$file"
  echo "updated $file"
  exit 0
fi
sed -n 's/^#> \{0,1\}//p' "$file" >"$tmp/expected"
sed 's/ $//' "$tmp/actual" >"$tmp/actual.trim"
if [ ! -s "$tmp/expected" ]; then
  echo "FAIL: $file holds no expected lines (#> ...)" >&2
  exit 1
fi
if ! diff -u "$tmp/expected" "$tmp/actual.trim" >"$tmp/diff"; then
  echo "FAIL: $file: the output differs from the expected text (- expected, + actual):" >&2
  cat "$tmp/diff" >&2
  exit 1
fi
echo "ok: $file ($(wc -l <"$tmp/expected") lines)"
