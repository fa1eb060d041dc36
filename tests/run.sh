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

busted_run() {
	lua5.4 /usr/bin/busted --output=tests/support/summary.lua --pattern=_spec "$@"
}

# Spec files named on the command line (or busted options) run alone, as asked.
for a in "$@"; do
	case "$a" in *.lua | -*) busted_run "$@"; exit ;; esac
done

# The whole suite runs in two lanes at once, one per core: the specs that
# use the shared test databases (they stop, freeze and fault them, so they
# run one after another) and the specs that need none.  Each lane's output
# is shown whole, then one closing line for both.
db=() local_=()
for f in tests/*_spec.lua; do
	if grep -q 'require "providers"\|LEASH_TEST_PG\|LEASH_TEST_MSSQL' "$f"; then
		db+=("$f")
	else
		local_+=("$f")
	fi
done
# The local lane gets a directory of its own: busted seeds math.random with
# the time, so two lanes started in the same second would draw the same
# temporary names.  (The db lane keeps $LEASH_TEST_TMP: the services'
# control scripts find their state there.)
mkdir -p "$LEASH_TEST_TMP/local"
chmod 755 "$LEASH_TEST_TMP/local"
busted_run "${db[@]}" >"$LEASH_TEST_TMP/lane-db.out" 2>&1 &
db_pid=$!
LEASH_TEST_TMP="$LEASH_TEST_TMP/local" busted_run "${local_[@]}" >"$LEASH_TEST_TMP/lane-local.out" 2>&1
local_rc=$?
wait "$db_pid"
db_rc=$?
passed=0 failed=0 skipped=0
for lane in local db; do
	out="$LEASH_TEST_TMP/lane-$lane.out"
	cat "$out"
	last="$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)"
	if [ -z "$last" ]; then
		echo "tests/run.sh: the $lane lane ended without a summary" >&2
		failed=$((failed + 1))
		continue
	fi
	set -- $last
	passed=$((passed + $1))
	failed=$((failed + ${3%,}))
	[ "${5:-}" = "" ] || skipped=$((skipped + $5))
done
line="$passed passed, $failed failed"
[ "$skipped" -eq 0 ] || line="$line, $skipped skipped"
echo
echo "$line"
[ "$failed" -eq 0 ] && [ "$local_rc" -eq 0 ] && [ "$db_rc" -eq 0 ]
