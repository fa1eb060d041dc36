#!/usr/bin/env bash
# Runs the whole suite: starts every service in tests/support/services/ (each
# prints the environment its specs need), runs every spec with busted, and
# stops the services again even when specs fail.  Extra arguments go to busted.
set -u
cd "$(dirname "$0")/.."

export LEASH_TEST_TMP="$(mktemp -d /tmp/leash-test.XXXXXX)"
chmod 755 "$LEASH_TEST_TMP"
export LUA_PATH="lua/?.lua;lua/?/init.lua;tests/support/?.lua;;"
export LEASH_BUILD="${LEASH_BUILD:-build}"
export LUA_CPATH="$LEASH_BUILD/lua/?.so;;"
export LEASH_ROOT="$PWD"

started=()
finish() {
	local i
	for ((i = ${#started[@]} - 1; i >= 0; i--)); do
		"${started[$i]}" stop >/dev/null 2>&1
	done
	rm -rf "$LEASH_TEST_TMP"
}
trap finish EXIT
trap 'exit 130' INT TERM

for svc in tests/support/services/*.sh; do
	[ -x "$svc" ] || continue
	if ! env_out="$("$svc" start)"; then
		echo "tests/run.sh: $svc failed to start" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	started+=("$svc")
	eval "$env_out"
done

# Spec files named on the command line run alone; otherwise every spec runs.
specs=(tests)
for a in "$@"; do
	case "$a" in *.lua) specs=() ;; esac
done
lua5.4 /usr/bin/busted --output=tests/support/summary.lua --pattern=_spec "$@" "${specs[@]}"
