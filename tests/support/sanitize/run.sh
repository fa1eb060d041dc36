#!/usr/bin/env bash
# make sanitize: the whole suite (tests/run.sh, arguments passed on) against
# the ASan+UBSan build in $LEASH_BUILD (build-asan).  Every sanitizer report,
# from any process (leash, a forked run, a lua5.4 loading core.so), goes to a
# file under a scratch dir; any such file fails the run even when no spec
# noticed, and is printed after the suite's closing line.  UBSan, linked
# beside ASan, ignores log_path: its reports go to the process's stderr and
# halt_on_error ends the process with exit 1, which the specs see.
#
# lua5.4 is not instrumented: bin/lua5.4 (first on PATH) preloads the ASan
# and UBSan runtimes into it and turns the leak check off for the
# interpreter; the leash binary keeps detect_leaks=1, so a leash that leaks
# on exit (check, status, run after SIGTERM) fails the run.
set -u
cd "$(dirname "$0")/../../.."
here="$PWD/tests/support/sanitize"

: "${LEASH_BUILD:?LEASH_BUILD names the sanitizer build (make sanitize sets it)}"
export LEASH_BUILD
unpreload="$PWD/$LEASH_BUILD/sanitize/unpreload.so"
[ -f "$unpreload" ] || { echo "$0: no $unpreload (run make sanitize)" >&2; exit 2; }
[ -f "$LEASH_BUILD/plain/lua/leash/core.so" ] || { echo "$0: no plain core.so (run make sanitize)" >&2; exit 2; }

reports="$(mktemp -d /tmp/leash-san.XXXXXX)"
chmod 755 "$reports"

common="abort_on_error=1:log_path=$reports/asan:log_exe_name=1:strict_string_checks=1:detect_invalid_pointer_pairs=0"
export ASAN_OPTIONS="$common:detect_leaks=1"
export LEASH_SAN_LUA_ASAN_OPTIONS="$common:detect_leaks=0"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:suppressions=$here/ubsan.supp"
export LEASH_SAN_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so) $unpreload"
export LEASH_SAN_PLAIN_CPATH="$PWD/$LEASH_BUILD/plain/lua/?.so"
export LEASH_SAN_PLAIN_BIN="$PWD/$LEASH_BUILD/plain/leash"
export PATH="$here/bin:$PATH"
export LEASH_SANITIZE=1

tests/run.sh "$@"
rc=$?

n=0
for f in "$reports"/*; do
	[ -e "$f" ] || continue
	n=$((n + 1))
	echo "==== sanitizer report ${f##*/} ===="
	cat "$f"
done
rm -rf "$reports"
if [ "$n" -gt 0 ]; then
	echo "sanitizer: $n report(s) above; the run fails"
	exit 1
fi
exit "$rc"
