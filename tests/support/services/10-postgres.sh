#!/bin/sh
# A throwaway PostgreSQL 15 server for the suite (tests/run.sh runs this).
#   start   initdb into $LEASH_TEST_TMP/pg, start on a free 127.0.0.1 port with
#           its own socket directory (as the postgres user when root), and
#           print the environment the specs need:
#             LEASH_TEST_PG_CONNINFO  a libpq connection string
#             LEASH_TEST_PG_CTL       a command; append stop|start|pause|resume
#                                     (pause/resume: SIGSTOP/SIGCONT the server)
#   stop    stop it (immediate), whatever the specs did
# Each $LEASH_TEST_TMP gets a server of its own (tests/run.sh starts one per
# lane), and LEASH_TEST_PG_CTL names its directory, so the command reaches
# that server whatever LEASH_TEST_TMP says where it is run.
# fsync stays on for the server; only initdb's own final sync is skipped.
set -eu
BIN=${LEASH_PG_BIN:-/usr/lib/postgresql/15/bin}
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
: "${LEASH_TEST_TMP:?LEASH_TEST_TMP is not set}"
dir=$LEASH_TEST_TMP/pg
# ctl DIR ACTION: the server in DIR (as LEASH_TEST_PG_CTL says)
if [ "${1:-}" = ctl ] && [ $# -ge 3 ]; then
	dir=$2
	set -- ctl "$3"
fi

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

server_start() {
	as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30 -s \
		-o "-p $(cat "$dir/port") -k $dir/sock -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=100" \
		start >/dev/null
}

server_stop() {
	[ -f "$dir/data/postmaster.pid" ] || return 0
	as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate -w -t 30 -s stop >/dev/null 2>&1 || true
}

# The postmaster and its children.
server_pids() {
	pid=$(head -1 "$dir/data/postmaster.pid")
	echo "$pid"
	ps -o pid= --ppid "$pid"
}

case "${1:-}" in
start)
	[ -x "$BIN/initdb" ] || { echo "10-postgres.sh: $BIN/initdb not found (apt-get install postgresql)" >&2; exit 1; }
	mkdir -p "$dir/data" "$dir/sock"
	[ "$(id -u)" -eq 0 ] && chown -R postgres "$dir"
	as_pg "$BIN/initdb" -D "$dir/data" -U leash --auth=trust -E UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	# The port is free when picked, not when bound: another lane's server
	# (or anyone's) may take it in between; then pick again.
	tries=0
	while :; do
		free_port >"$dir/port"
		rm -f "$dir/log"
		server_start && break
		tries=$((tries + 1))
		if [ $tries -ge 3 ] || ! grep -q 'could not bind\|already in use' "$dir/log"; then
			cat "$dir/log" >&2
			exit 1
		fi
	done
	echo "export LEASH_TEST_PG_CONNINFO='host=127.0.0.1 port=$(cat "$dir/port") dbname=postgres user=leash'"
	echo "export LEASH_TEST_PG_CTL='$self ctl $dir'"
	;;
ctl)
	case "${2:-}" in
	start) server_start ;;
	stop) server_stop ;;
	pause) kill -STOP $(server_pids) ;;
	resume) kill -CONT $(server_pids) ;;
	*) echo "usage: $0 ctl [DIR] start|stop|pause|resume" >&2; exit 2 ;;
	esac
	;;
stop)
	if [ -f "$dir/data/postmaster.pid" ]; then
		kill -CONT $(server_pids) 2>/dev/null || true
	fi
	server_stop
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
