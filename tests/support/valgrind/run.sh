#!/usr/bin/env bash
# make valgrind: the short paths of the leash binary and of leash/core.so in
# $LEASH_BUILD (build-vg, a plain -O1 -g build) under valgrind memcheck with
# --leak-check=full.  Every process valgrind sees (forked runs included) logs
# to its own file; the run fails when any of them has an error, or a
# definite or possible leak in a process of its own, and prints those logs.
# A forked run ends with _exit() holding its copy of leash's memory, so only
# memory errors count there, not leaks.
set -u
cd "$(dirname "$0")/../../.."
root="$PWD"
: "${LEASH_BUILD:?LEASH_BUILD names the build to check (make valgrind sets it)}"
bin="$root/$LEASH_BUILD/leash"
supp="$root/tests/support/valgrind/valgrind.supp"

tmp="$(mktemp -d /tmp/leash-vg.XXXXXX)"
chmod 755 "$tmp"
# LEASH_VG_KEEP=1 keeps the logs and outputs for a look.
[ -n "${LEASH_VG_KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
logs="$tmp/logs"
mkdir -p "$logs"

vg() {
	local name="$1"
	shift
	valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,possible \
		--track-origins=yes --child-silent-after-fork=no --suppressions="$supp" \
		--log-file="$logs/$name.%p" "$@"
}

fails=0
step() {
	local name="$1" want="$2"
	shift 2
	"$@" >"$tmp/$name.out" 2>&1
	local rc=$?
	if [ "$rc" = "$want" ]; then
		echo "ok   $name"
	else
		echo "FAIL $name: exit $rc, expected $want"
		sed 's/^/     | /' "$tmp/$name.out"
		fails=$((fails + 1))
	fi
}

# A set-up: two jobs that run every second (one writes, one uses ctx.exec),
# on a temp SQLite file, singleton off and on.
mkdir -p "$tmp/jobs"
cat >"$tmp/jobs/tick.lua" <<'JOB'
return {
  every = "1s",
  run = function(ctx)
    ctx.log("info", "tick", { at = ctx.scheduled_at })
    io.write("tick\n")
  end,
}
JOB
cat >"$tmp/jobs/echo.lua" <<'JOB'
return {
  every = "1s",
  timeout = "2s",
  run = function(ctx)
    local ok, code, out = ctx.exec({ "echo", "hello" })
    ctx.log("info", "echo", { ok = ok, code = code, out = out })
  end,
}
JOB
# A job that fails every other run: its failure hooks run each time.
cat >"$tmp/jobs/flaky.lua" <<'JOB'
local n = 0
return {
  every = "1s",
  run = function(ctx)
    if ctx.scheduled_at % 2 == 0 then error("even second") end
  end,
  on_failure = function(ctx, run) ctx.log("warn", "hook", { outcome = run.outcome, error = run.error }) end,
  on_recover = function(ctx, run) ctx.log("info", "hook", { outcome = run.outcome }) end,
}
JOB
for single in off on; do
	enabled=false
	[ "$single" = on ] && enabled=true
	cat >"$tmp/leash-$single.ini" <<INI
[leash]
jobs = jobs
log_format = text
log_level = debug
# valgrind runs a job file's load 20-50 times slower, more on a busy machine
load_timeout = 60s

[singleton]
enabled = $enabled
lease = 3s
retry = 1s

[store]
provider = sqlite
table = leash_vg

[sqlite]
path = $tmp/leases.db
INI
done

# Whether a run log shows a run of tick ended and echo's ctx.exec logged (a
# run ends "failed: exit status 99" under valgrind: its leaks, see below).
ran() {
	grep -q '\[tick run [0-9]*\] \(finished\|failed\)' "$1" && grep -q '\[echo run [0-9]*\] echo' "$1"
}

# run until both jobs have run (at most 60 s: valgrind on a busy machine is
# slow to start), then SIGTERM; exit 0 and at least one run of each job.
run_for() {
	local ini="$1" name="$2"
	# exec: the pid is valgrind's (which passes the signal to leash), not a subshell's
	(exec valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,possible \
		--track-origins=yes --child-silent-after-fork=no --suppressions="$supp" \
		--log-file="$logs/$name.%p" "$bin" run -c "$ini") >"$tmp/$name.log" 2>&1 &
	local pid=$! waited=0
	until ran "$tmp/$name.log"; do
		[ "$waited" -ge 600 ] && break
		sleep 0.1
		waited=$((waited + 1))
	done
	kill -TERM "$pid"
	wait "$pid"
	local rc=$?
	ran "$tmp/$name.log" || {
		echo "no runs of both jobs in $name:"
		cat "$tmp/$name.log"
		return 98
	}
	return "$rc"
}

step version 0 vg version "$bin" version
step help 0 vg help "$bin" help
step check-example 0 vg check-example "$bin" check -c "$root/config/leash.ini" -o leash.load_timeout=60s
step check-next 0 vg check-next "$bin" check -c "$root/config/leash.ini" -o leash.load_timeout=60s --next 5
step check-tmp 0 vg check-tmp "$bin" check -c "$tmp/leash-on.ini" --next 3
step check-missing 2 vg check-missing "$bin" check -c "$tmp/nonexistent.ini"
step status-off 0 vg status-off "$bin" status -c "$tmp/leash-off.ini"
step run-off 0 run_for "$tmp/leash-off.ini" run-off
step run-on 0 run_for "$tmp/leash-on.ini" run-on
step status-on 0 vg status-on "$bin" status -c "$tmp/leash-on.ini"
step status-on-json 0 vg status-on-json "$bin" status -c "$tmp/leash-on.ini" --json

# leash/core.so from lua5.4: a SQLite store's calls, then the elector over
# a fake store (the election spec, whole, under valgrind).
export LUA_PATH="$root/lua/?.lua;$root/lua/?/init.lua;$root/tests/support/?.lua;;"
export LUA_CPATH="$root/$LEASH_BUILD/lua/?.so;;"
export LEASH_ROOT="$root" LEASH_TEST_TMP="$tmp"
step core-store 0 vg core-store lua5.4 -e '
local core = require "leash.core"
local s = assert(core.open_store{ provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/core.db", table = "vg" })
local ok, info = s:try_acquire("a", "me", 5000)
assert(ok == true and info.token == 1, "acquire")
ok = s:try_acquire("a", "other", 5000)
assert(ok == false, "held")
assert(s:try_acquire("b", "me", 5000))
local held = assert(s:renew_all("me", { "a", "b", "c" }, 5000))
assert(held.a and held.b and not held.c, "renew_all")
assert(s:release("a", "me"))
local rows, now = assert(s:list())
assert(#rows == 2 and now > 0, "list")
s:close()
local bad, err = core.open_store{ provider = "sqlite", path = "/nonexistent/dir/x.db", table = "vg" }
assert(bad == nil and err, "open of a bad path fails")
collectgarbage()
'
step core-elector 0 vg core-elector lua5.4 /usr/bin/busted --output=TAP "$root/tests/elect_spec.lua"
step core-sched 0 vg core-sched lua5.4 /usr/bin/busted --output=TAP "$root/tests/sched_spec.lua"

# Any process with an error fails the run, whatever its exit code (a forked
# run's exit only reaches leash's log).  A log whose "Parent PID" has a log
# here too is a forked run: its leaks are not, its memory errors are.
memerr='Invalid read\|Invalid write\|Invalid free\|uninitialised\|Conditional jump\|Syscall param\|Mismatched free\|overlap\|Use of uninit'
bad=0
for f in "$logs"/*; do
	[ -s "$f" ] || continue
	ppid="$(sed -n 's/^==[0-9]*== Parent PID: \([0-9]*\)$/\1/p' "$f")"
	if compgen -G "$logs/*.$ppid" >/dev/null; then
		grep -q "$memerr" "$f" || continue
	else
		grep -q 'ERROR SUMMARY: [1-9]' "$f" || continue
	fi
	bad=$((bad + 1))
	echo "==== valgrind: ${f##*/} ===="
	cat "$f"
done
if [ "$bad" -gt 0 ] || [ "$fails" -gt 0 ]; then
	echo "valgrind: $fails step(s) failed, $bad process log(s) with errors"
	exit 1
fi
echo "valgrind: all steps clean"
