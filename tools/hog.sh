#!/bin/sh
# tools/hog.sh COMMAND...: runs COMMAND while the machine is kept busy the way
# a shared CI host is: one CPU busy loop at nice 5 and a disk writer (256 MB
# with dd, sync, a second's pause, again) under $TMPDIR.  The load stops when
# COMMAND ends (or is interrupted); the exit status is COMMAND's.
#
#   sh tools/hog.sh bash .ci/run
#
# A spec that fails only under the hog asserts a latency or an order that a
# busy machine breaks: that figure belongs in bench/, not in the suite.
set -u
[ $# -gt 0 ] || { echo "usage: $0 COMMAND..." >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-hog.XXXXXX")
nice -n 5 sh -c 'while :; do :; done' &
cpu=$!
sh -c 'while :; do dd if=/dev/zero of="$1/fill" bs=1M count=256 2>/dev/null; sync; rm -f "$1/fill"; sleep 1; done' \
	hog "$tmp" &
disk=$!
stop() {
	kill "$cpu" "$disk" 2>/dev/null
	pkill -P "$disk" 2>/dev/null
	wait "$cpu" "$disk" 2>/dev/null
	rm -rf "$tmp"
}
trap 'stop; exit 130' INT TERM
"$@"
rc=$?
stop
exit $rc
