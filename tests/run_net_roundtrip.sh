#!/bin/sh
# run_net_roundtrip.sh NCC FILE.net — `--emit=net` round trip (docs/language.md,
# "Translating to .net"): the translation of FILE compiles to the same IR
# (`--emit=ir` equal, names and order included), and translating the
# translation gives the same text again (after the banner's comment lines).
# The --set flags of a golden file's "# args:" line apply to both.
set -u
ncc=$1 file=$2
sets=$(sed -n 's/^# args: //p' "$file" | head -n 1 | grep -o -- '--set [^ ]*' | tr '\n' ' ')
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $file: $*" >&2; exit 1; }
# shellcheck disable=SC2086
"$ncc" "$file" $sets --emit=net -o "$tmp/t.net" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "--emit=net exited $?"; }
# shellcheck disable=SC2086
"$ncc" "$file" $sets --emit=ir >"$tmp/a.ir" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "--emit=ir exited $?"; }
"$ncc" "$tmp/t.net" --emit=ir >"$tmp/b.ir" 2>"$tmp/err" || { cat "$tmp/err" "$tmp/t.net" >&2; fail "the translation does not compile"; }
diff -u "$tmp/a.ir" "$tmp/b.ir" >&2 || fail "the translation's IR differs (above: - the source's, + the translation's)"
"$ncc" "$tmp/t.net" --emit=net -o "$tmp/t2.net" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "translating the translation failed"; }
grep -v '^#' "$tmp/t.net" >"$tmp/t.body"
grep -v '^#' "$tmp/t2.net" >"$tmp/t2.body"
diff -u "$tmp/t.body" "$tmp/t2.body" >&2 || fail "translating the translation changes it"
echo "ok: $file ($(grep -c '' "$tmp/t.net") lines of .net, $(grep -c '^%' "$tmp/a.ir") nodes)"
