#!/bin/sh
# run_bad.sh NCC FILE.net
# A malformed model must be rejected cleanly: `ncc FILE -o OUT.cu` exits with
# status 1 (not 0, not 2 = internal error, not a signal), within 10 seconds,
# writes no output file, and prints each expected diagnostic.
# Expectations are "# expect: LINE:COL: FRAGMENT" lines in the file (or, for
# a file that cannot hold comments, lines "LINE:COL: FRAGMENT" in FILE.expect):
# stderr must hold a line starting "FILE:LINE:COL: error: " or "...: note: " and containing FRAGMENT.
# "# expect: FRAGMENT" without a position matches any stderr line
# (errors about the command line have no position).  "# args: ..." adds flags;
# "# errors: N" demands exactly N errors (no cascades).
set -u
ncc=$1 file=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
if [ -f "$file.expect" ]; then cp "$file.expect" "$tmp/expect"
else sed -n 's/^# expect: //p' "$file" >"$tmp/expect"; fi
if [ ! -s "$tmp/expect" ]; then echo "FAIL: $file states no expectation (# expect: LINE:COL: text)" >&2; exit 1; fi
args=$(sed -n 's/^# args: //p' "$file" 2>/dev/null | head -n 1)
start=$(date +%s)
# shellcheck disable=SC2086
timeout 10 "$ncc" "$file" -o "$tmp/out.cu" $args >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
end=$(date +%s)
fail=0
if [ $rc -eq 124 ]; then echo "FAIL: $file: ncc did not finish within 10 s" >&2; fail=1
elif [ $rc -ge 128 ]; then echo "FAIL: $file: ncc died of signal $((rc - 128))" >&2; fail=1
elif [ $rc -ne 1 ]; then echo "FAIL: $file: exit status $rc, expected 1" >&2; fail=1; fi
if [ -e "$tmp/out.cu" ] || [ -e "$tmp/out.h" ]; then echo "FAIL: $file: an output file was written" >&2; fail=1; fi
if [ $((end - start)) -gt 5 ]; then echo "FAIL: $file: took $((end - start)) s (more than 5)" >&2; fail=1; fi
if grep -q 'internal error\|AddressSanitizer\|runtime error:' "$tmp/stderr"; then
  echo "FAIL: $file: ncc reported an internal error or a sanitizer finding" >&2; fail=1
fi
while IFS= read -r exp; do
  case $exp in
    [0-9]*:[0-9]*:\ *)
      pos=${exp%%: *}; frag=${exp#*: }
      if ! grep -F -- "$file:$pos: " "$tmp/stderr" | grep -E -- ": (error|note): " | grep -q -F -- "$frag"; then
        echo "FAIL: $file: expected a diagnostic at $file:$pos containing: $frag" >&2; fail=1
      fi ;;
    *)
      if ! grep -q -F -- "$exp" "$tmp/stderr"; then
        echo "FAIL: $file: expected a diagnostic containing: $exp" >&2; fail=1
      fi ;;
  esac
done <"$tmp/expect"
want=$(sed -n 's/^# errors: //p' "$file" 2>/dev/null | head -n 1)
got=$(grep -c ': error: ' "$tmp/stderr")
if [ -n "$want" ] && [ "$want" != "$got" ]; then
  echo "FAIL: $file: $got errors reported, expected exactly $want (a cascade, or a missed error)" >&2; fail=1
fi
if [ $fail -ne 0 ]; then echo "--- stderr:" >&2; head -c 4000 "$tmp/stderr" >&2; exit 1; fi
echo "ok: $file ($(grep -c ': error: ' "$tmp/stderr") errors)"
