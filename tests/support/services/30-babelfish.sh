#!/bin/sh
# A real T-SQL engine for the specs that prove the mssql provider's T-SQL
# (tests/run.sh runs this): Babelfish for PostgreSQL, from the project's
# shared folder beside the repository (../shared/babelfish, or the folder
# LEASH_TEST_BABELFISH names; LEASH_TEST_BABELFISH=0: none).
#   start   unless LEASH_TEST_MSSQL already names a real SQL Server, there
#           is no such folder, or none of the specs to run (LEASH_TEST_SPECS,
#           from tests/run.sh) proves the T-SQL (uses providers.proof_list or
#           providers.real): start it under $LEASH_TEST_TMP with the
#           folder's start.sh (as root: it runs the server as postgres) and
#           print the environment the specs need:
#             LEASH_TEST_MSSQL_REAL   host:port:user:password:database
#           (the TDS test server keeps LEASH_TEST_MSSQL for the specs that
#           need its faults or time them: tests/support/providers.lua)
#   stop    stop it and remove its files
# Each $LEASH_TEST_TMP gets a server of its own (tests/run.sh starts one per
# lane): the specs name their tables uniquely, but a lane's servers are its
# own to stop and fault.
set -eu
: "${LEASH_TEST_TMP:?LEASH_TEST_TMP is not set}"
dir=$LEASH_TEST_TMP/babelfish
repo=$(cd "$(dirname "$0")/../../.." && pwd)
bf=${LEASH_TEST_BABELFISH:-$repo/../shared/babelfish}

# Whether a spec to run needs the engine (any, when none is named).  A
# provider's share of a spec (FILE@KEY, tests/run.sh) needs it for
# mssql-real only.
needed() {
	named=0
	for f in ${LEASH_TEST_SPECS:-}; do
		case "$f" in
		*.lua@mssql-real)
			return 0
			;;
		*.lua@*)
			named=1
			;;
		*.lua)
			named=1
			grep -q 'providers\.proof_list\|providers\.real' "$f" 2>/dev/null && return 0
			;;
		esac
	done
	[ $named = 0 ]
}

case "${1:-}" in
start)
	if [ -n "${LEASH_TEST_MSSQL:-}" ] || [ "$bf" = 0 ] || [ ! -x "$bf/start.sh" ] || ! needed; then
		exit 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "30-babelfish.sh: $bf needs root to start (LEASH_TEST_BABELFISH=0 to go without)" >&2
		exit 1
	fi
	# start.sh picks its ports free when it looks, not when the server
	# binds them: another lane's server may take one in between; then again.
	tries=0
	while :; do
		# nice: its server (parsing T-SQL is most of its work) yields the
		# CPUs to the other lanes' leash processes, whose specs watch times.
		if out=$(nice -n 10 sh "$bf/start.sh" "$dir" 2>"$LEASH_TEST_TMP/babelfish.log"); then
			break
		fi
		tries=$((tries + 1))
		[ -d "$dir/data" ] && cat "$dir/server.log" >>"$LEASH_TEST_TMP/babelfish.log" 2>/dev/null
		sh "$bf/stop.sh" "$dir" >/dev/null 2>&1 || true
		if [ $tries -ge 3 ]; then
			echo "30-babelfish.sh: $bf/start.sh failed:" >&2
			cat "$LEASH_TEST_TMP/babelfish.log" >&2
			exit 1
		fi
	done
	value=$(printf '%s\n' "$out" | tail -n 1)
	case "$value" in
	*:*:*:*:*) ;;
	*)
		echo "30-babelfish.sh: $bf/start.sh printed no host:port:user:password:database" >&2
		exit 1
		;;
	esac
	echo "export LEASH_TEST_MSSQL_REAL='$value'"
	;;
stop)
	[ -d "$dir" ] || exit 0
	if [ -x "$bf/stop.sh" ]; then
		sh "$bf/stop.sh" "$dir" >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
