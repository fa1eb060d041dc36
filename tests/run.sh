#!/usr/bin/env bash
# Runs the whole suite: starts every service in tests/support/services/ (each
# prints the environment its specs need), runs every spec with busted, and
# stops the services again even when specs fail.  Extra arguments go to busted.
#
# The whole suite runs in lanes at once (see "Lanes" below); spec files or
# busted options named on the command line run in one lane, as asked.
set -u
cd "$(dirname "$0")/.."

root="$(mktemp -d /tmp/leash-test.XXXXXX)"
chmod 755 "$root"
export LEASH_TEST_TMP="$root"
export LUA_PATH="lua/?.lua;lua/?/init.lua;tests/support/?.lua;;"
export LEASH_BUILD="${LEASH_BUILD:-build}"
export LUA_CPATH="$LEASH_BUILD/lua/?.so;;"
export LEASH_ROOT="$PWD"

svcs=()
for svc in tests/support/services/*.sh; do
	[ -x "$svc" ] && svcs+=("$svc")
done

# services_start DIR [SPEC...]: every service, its state under DIR (the
# services put it under $LEASH_TEST_TMP), so each DIR has servers of its
# own; the environment they print goes to DIR/env.  The specs that will run
# go to the services as LEASH_TEST_SPECS, so that a costly one can stay off
# where none of them needs it.  A service is noted in DIR/started before it
# starts, so one that fails half-way is stopped too.
services_start() {
	local dir="$1" svc out
	shift
	: >"$dir/env"
	for svc in "${svcs[@]}"; do
		echo "$svc" >>"$dir/started"
		if ! out="$(LEASH_TEST_TMP="$dir" LEASH_TEST_SPECS="$*" "$svc" start)"; then
			echo "tests/run.sh: $svc failed to start" >&2
			return 1
		fi
		printf '%s\n' "$out" >>"$dir/env"
	done
}

# services_stop DIR: stops DIR's services, last started first (stopping
# twice is harmless: each service's stop checks its pid file).
services_stop() {
	local dir="$1" svc
	[ -f "$dir/started" ] || return 0
	tac "$dir/started" | while read -r svc; do
		LEASH_TEST_TMP="$dir" "$svc" stop >/dev/null 2>&1
	done
	rm -f "$dir/started"
}

lane_pids=()
finish() {
	local pid d
	# Interrupted: each lane is a process group of its own (set -m below),
	# so its busted and the leash processes its specs started all go, then
	# every lane's servers.
	for pid in "${lane_pids[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null
	done
	for d in "$root" "$root"/*/; do
		services_stop "${d%/}"
	done
	rm -rf "$root"
}
trap finish EXIT
trap 'exit 130' INT TERM
trap 'exit 129' HUP

busted_run() {
	lua5.4 /usr/bin/busted --output=tests/support/summary.lua --pattern=_spec "$@"
}

# Spec files named on the command line (or busted options) run alone, as asked.
for a in "$@"; do
	case "$a" in
	*.lua | -*)
		if ! services_start "$root" "$@"; then
			echo "0 passed, 1 failed"
			exit 1
		fi
		eval "$(cat "$root/env")"
		busted_run "$@"
		exit
		;;
	esac
done

# Lanes.  The specs that use the test databases stop, freeze and fault them,
# so the specs of one lane run one after another; but each db lane has a
# PostgreSQL and a TDS server of its own (and Babelfish, when one of its
# specs proves the T-SQL: tests/support/services/30-babelfish.sh), so the
# db specs are dealt over
# LEASH_TEST_LANES lanes (default 5: they mostly wait on leash processes'
# sleeps and leases, not on the CPU), and one more lane runs the specs that
# need no database.  A real SQL Server named by LEASH_TEST_MSSQL would be
# shared, so then the db specs keep one lane.
#
# Each lane has its own LEASH_TEST_TMP: busted seeds math.random with the
# time, so lanes started in the same second would draw the same temporary
# names, and the services keep their state there.
#
# The db specs are dealt by their wall time, slowest first, each to the
# lane with the least so far.  The seconds are the summary's "wall time per
# spec file" (tests/support/summary.lua) of a whole suite on 2 cores, a
# busy one (Dec 2026); a spec not listed counts as $new_secs and so goes to
# the lightest lane: add it here once measured.
#
# A long spec that runs the same tests on each provider is dealt as one
# unit per provider, FILE@KEY (a line NAME@KEY SECONDS here for each key),
# which runs FILE with LEASH_TEST_PROVIDERS=KEY (tests/support/providers.lua):
# so no lane waits on one spec's three providers in a row (the ledger spec
# alone took 227 s).  KEY is a provider's name, or mssql-real for Babelfish
# (tests/support/services/30-babelfish.sh starts it only where a unit needs
# it).
db_secs="
ledger@sqlite 75
ledger@postgres 75
ledger@mssql 77
service_handoff@sqlite 76
service_handoff@postgres 76
service_handoff@mssql 76
handoff_to@sqlite 38
handoff_to@postgres 37
handoff_to@mssql 38
store_conformance@sqlite 15
store_conformance@postgres 20
store_conformance@mssql 25
store_conformance@mssql-real 100
corrupt_rows@sqlite 12
corrupt_rows@postgres 14
corrupt_rows@mssql 12
corrupt_rows@mssql-real 60
controls@sqlite 17
controls@postgres 17
controls@mssql 18
election 76
store_fault 97
hooks 30
owner 7
catchup 8
spread 50
mssql 70
drain 38
status_jobs_cli 6
client_lib 9
store_outage 3
presence_conformance 9
status_cli 1
secrets 4
readonly_store 10
broken_files 9
"
new_secs=20
nlanes="${LEASH_TEST_LANES:-5}"
case "$nlanes" in
'' | *[!0-9]* | 0*)
	echo "tests/run.sh: LEASH_TEST_LANES=$nlanes: expected a whole number of db lanes, 1 or more" >&2
	echo "0 passed, 1 failed"
	exit 2
	;;
esac
[ -z "${LEASH_TEST_MSSQL:-}" ] || nlanes=1

db=() local_=()
for f in tests/*_spec.lua; do
	if grep -q 'require "providers"\|require "replicas"\|LEASH_TEST_PG\|LEASH_TEST_MSSQL' "$f"; then
		db+=("$f")
	else
		local_+=("$f")
	fi
done

# A unit's name in db_secs: tests/ledger_spec.lua@sqlite -> ledger@sqlite.
unit_name() {
	local file="${1%@*}" name
	name="${file##*/}"
	name="${name%_spec.lua}"
	[ "$file" = "$1" ] || name="$name@${1##*@}"
	echo "$name"
}

secs_of() {
	awk -v n="$(unit_name "$1")" -v d="$new_secs" '$1 == n { print $2; f = 1 } END { if (!f) print d }' <<<"$db_secs"
}

# The units: each db spec, or its providers' shares where db_secs lists them.
units=()
for f in "${db[@]}"; do
	keys="$(awk -v n="$(unit_name "$f")@" 'index($1, n) == 1 { print substr($1, length(n) + 1) }' <<<"$db_secs")"
	if [ -z "$keys" ]; then
		units+=("$f")
	else
		for k in $keys; do
			units+=("$f@$k")
		done
	fi
done

declare -a lane_files lane_load
for ((i = 0; i < nlanes; i++)); do
	lane_files[i]="" lane_load[i]=0
done
while read -r s f; do
	[ -n "$f" ] || continue
	best=0
	for ((i = 1; i < nlanes; i++)); do
		[ "${lane_load[i]}" -lt "${lane_load[best]}" ] && best=$i
	done
	lane_files[best]+="$f "
	lane_load[best]=$((lane_load[best] + s))
done < <(for u in "${units[@]}"; do echo "$(secs_of "$u") $u"; done | sort -k1,1nr -k2,2)

# add_summary FILE WHAT: adds FILE's last "N passed, N failed[, N skipped]"
# line to $passed, $failed and $skipped (the caller's); without one, WHAT
# counts as a failure.
add_summary() {
	local last
	last="$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)"
	if [ -z "$last" ]; then
		echo "tests/run.sh: $2 ended without a summary" >&2
		failed=$((failed + 1))
		return
	fi
	set -- $last
	passed=$((passed + $1))
	failed=$((failed + ${3%,}))
	[ "${5:-}" = "" ] || skipped=$((skipped + $5))
}

# lane_busted UNITS...: the whole files in one busted run, then each
# provider's share (FILE@KEY) in one of its own; one closing line for all.
lane_busted() {
	local files=() shares=() u rc=0 out="$LEASH_TEST_TMP/busted.out"
	local passed=0 failed=0 skipped=0 line
	for u in "$@"; do
		case "$u" in
		*.lua@*) shares+=("$u") ;;
		*) files+=("$u") ;;
		esac
	done
	if [ "${#files[@]}" -gt 0 ]; then
		busted_run "${files[@]}" | tee "$out"
		[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
		add_summary "$out" "busted ${files[*]}"
	fi
	for u in "${shares[@]}"; do
		LEASH_TEST_PROVIDERS="${u##*@}" busted_run "${u%@*}" | tee "$out"
		[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
		add_summary "$out" "busted $u"
	done
	line="$passed passed, $failed failed"
	[ "$skipped" -eq 0 ] || line="$line, $skipped skipped"
	echo "$line"
	[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]
}

# run_lane NAME SERVICES FILES...: runs FILES in the background in lane
# NAME (SERVICES 1: with servers of its own), output to $root/lane-NAME.out.
lane_names=()
run_lane() {
	local name="$1" with_svcs="$2" dir="$root/$1"
	shift 2
	(
		SECONDS=0
		mkdir -p "$dir"
		chmod 755 "$dir"
		export LEASH_TEST_TMP="$dir"
		if [ "$with_svcs" = 1 ]; then
			if ! services_start "$dir" "$@"; then
				services_stop "$dir"
				echo "0 passed, 1 failed"
				exit 1
			fi
			eval "$(cat "$dir/env")"
		fi
		lane_busted "$@"
		rc=$?
		services_stop "$dir"
		echo "tests/run.sh: lane $name took ${SECONDS}s"
		exit $rc
	) </dev/null >"$root/lane-$name.out" 2>&1 &
	lane_pids+=($!)
	lane_names+=("$name")
}

# Job control gives each lane (a background job) a process group of its
# own, for finish to end whole; it is off again once they are started, or
# bash would print a line for each job that ends.
set -m
run_lane local 0 "${local_[@]}"
for ((i = 0; i < nlanes; i++)); do
	# shellcheck disable=SC2086 # a list of spec paths, no spaces
	[ -n "${lane_files[i]}" ] && run_lane "db$((i + 1))" 1 ${lane_files[i]}
done
set +m

rcs=0
for pid in "${lane_pids[@]}"; do
	wait "$pid" || rcs=1
done
lane_pids=()

# Each lane's output whole, then one closing line for all; a lane that
# ended without its summary line counts as a failure.
passed=0 failed=0 skipped=0
for lane in "${lane_names[@]}"; do
	out="$root/lane-$lane.out"
	cat "$out"
	add_summary "$out" "the $lane lane"
done
# What failed, again just above the closing line, for a reader who sees
# only the end of the output (a CI log's tail).
if [ "$failed" -gt 0 ]; then
	echo
	echo "tests/run.sh: what failed, from each lane's summary:"
	for lane in "${lane_names[@]}"; do
		awk -v l="$lane" '/(FAILED|ERROR) *\] [0-9]+ (tests?|errors?), listed below:/ { p = 1 }
			p && n++ < 80 { print "[" l "] " $0 }' "$root/lane-$lane.out"
	done
fi
line="$passed passed, $failed failed"
[ "$skipped" -eq 0 ] || line="$line, $skipped skipped"
echo
echo "$line"
[ "$failed" -eq 0 ] && [ "$rcs" -eq 0 ]
