#!/bin/sh
# bench/run.sh STORE_BENCH [N]: runs the store benchmark on sqlite (a file in a
# temporary directory), postgres over loopback (a throwaway server from
# tests/support/services/10-postgres.sh unless LEASH_BENCH_PG_CONNINFO is
# set) and mssql: the SQL Server that LEASH_TEST_MSSQL names, or else the TDS
# test server of tests/support/services/20-tds.sh (Python + SQLite: a stand-in
# for the protocol, whose figures say nothing about SQL Server).
set -eu
bin=$1
n=${2:-2000}
cd "$(dirname "$0")/.."
LEASH_TEST_TMP=$(mktemp -d /tmp/leash-bench.XXXXXX)
chmod 755 "$LEASH_TEST_TMP"
export LEASH_TEST_TMP
pgsvc=tests/support/services/10-postgres.sh
tdssvc=tests/support/services/20-tds.sh
pg_started=
tds_started=
cleanup() {
	[ -n "$tds_started" ] && "$tdssvc" stop >/dev/null 2>&1
	[ -n "$pg_started" ] && "$pgsvc" stop >/dev/null 2>&1
	rm -rf "$LEASH_TEST_TMP"
}
trap cleanup EXIT
pg=${LEASH_BENCH_PG_CONNINFO:-}
if [ -z "$pg" ]; then
	eval "$("$pgsvc" start)"
	pg_started=1
	pg=$LEASH_TEST_PG_CONNINFO
fi
if [ -n "${LEASH_TEST_MSSQL:-}" ]; then
	ms="mssql@mssql (SQL Server from LEASH_TEST_MSSQL)=$LEASH_TEST_MSSQL"
else
	eval "$("$tdssvc" start)"
	tds_started=1
	ms="mssql@mssql (TDS test server: Python + SQLite, not SQL Server)=$LEASH_TEST_MSSQL"
fi
"$bin" -n "$n" "sqlite=$LEASH_TEST_TMP/bench.db" "postgres=$pg" "$ms"
