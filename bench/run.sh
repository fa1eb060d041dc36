#!/bin/sh
# bench/run.sh STORE_BENCH [N]: runs the store benchmark on sqlite (a file in a
# temporary directory) and postgres over loopback (a throwaway server from
# tests/support/services/10-postgres.sh unless LEASH_BENCH_PG_CONNINFO is
# set), plus mssql when LEASH_TEST_MSSQL is set.
set -eu
bin=$1
n=${2:-2000}
cd "$(dirname "$0")/.."
LEASH_TEST_TMP=$(mktemp -d /tmp/leash-bench.XXXXXX)
chmod 755 "$LEASH_TEST_TMP"
export LEASH_TEST_TMP
svc=tests/support/services/10-postgres.sh
started=
cleanup() {
	[ -n "$started" ] && "$svc" stop >/dev/null 2>&1
	rm -rf "$LEASH_TEST_TMP"
}
trap cleanup EXIT
pg=${LEASH_BENCH_PG_CONNINFO:-}
if [ -z "$pg" ]; then
	eval "$("$svc" start)"
	started=1
	pg=$LEASH_TEST_PG_CONNINFO
fi
set -- "sqlite=$LEASH_TEST_TMP/bench.db" "postgres=$pg"
[ -n "${LEASH_TEST_MSSQL:-}" ] && set -- "$@" "mssql=$LEASH_TEST_MSSQL"
"$bin" -n "$n" "$@"
