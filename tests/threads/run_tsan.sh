#!/bin/sh
# run_tsan.sh PROGRAM ARGS... — runs a -fsanitize=thread program; its output is
# shown, its status is the test's: ThreadSanitizer's own on a report (66).
# A libtsan that cannot start under this kernel's address-space layout (gcc 12's
# with vm.mmap_rnd_bits above 28: "unexpected memory mapping") makes the test
# skip (77), since it then checked nothing.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1} "$@" >"$out" 2>&1
rc=$?
cat "$out"
if grep -q "FATAL: ThreadSanitizer: unexpected memory mapping" "$out"; then
  echo "skipped: this libtsan cannot run under the kernel's address-space layout (try: sysctl vm.mmap_rnd_bits=28)"
  exit 77
fi
exit $rc
