#!/bin/sh
# The TDS test server that stands in for SQL Server (tests/run.sh runs this).
#   start   unless LEASH_TEST_MSSQL already names a real SQL Server, start
#           tests/support/tds_server.py on a free 127.0.0.1 port with its
#           SQLite file under $LEASH_TEST_TMP, and print the environment the
#           specs need:
#             LEASH_TEST_MSSQL      host:port:user:password:database
#             LEASH_TEST_TDS_CTL    the server's fault control file (see
#                                   tds_server.py); unset for a real server
#   stop    stop it
# Each $LEASH_TEST_TMP gets a server of its own (tests/run.sh starts one per
# lane); the server binds its port itself, so lanes never race for one.
set -eu
: "${LEASH_TEST_TMP:?LEASH_TEST_TMP is not set}"
dir=$LEASH_TEST_TMP/tds
server=$(cd "$(dirname "$0")/.." && pwd)/tds_server.py

case "${1:-}" in
start)
	if [ -n "${LEASH_TEST_MSSQL:-}" ]; then
		echo "export LEASH_TEST_MSSQL='$LEASH_TEST_MSSQL'"
		exit 0
	fi
	command -v python3 >/dev/null || { echo "20-tds.sh: python3 not found (tools/deps.sh)" >&2; exit 1; }
	mkdir -p "$dir"
	python3 "$server" --port-file "$dir/port" --db "$dir/leases.db" --ctl "$dir/ctl" \
		--user leash --password 'tds-Secret:1' --database leash \
		</dev/null >"$dir/log" 2>&1 &
	echo $! >"$dir/pid"
	i=0
	while [ ! -s "$dir/port" ]; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
			echo "20-tds.sh: the TDS test server did not start:" >&2
			cat "$dir/log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "export LEASH_TEST_MSSQL='127.0.0.1:$(cat "$dir/port"):leash:tds-Secret:1:leash'"
	echo "export LEASH_TEST_TDS_CTL='$dir/ctl'"
	;;
stop)
	[ -f "$dir/pid" ] || exit 0
	kill "$(cat "$dir/pid")" 2>/dev/null || true
	rm -f "$dir/pid"
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
