-- bench/ledger_bench.lua: claims and the run ledger at steady state on
-- PostgreSQL, 3 replicas, 1,000 jobs every 1m plus 100 jobs every 1s (and a
-- 1 s probe among them).  Prints:
--   statements per second per replica (PostgreSQL's transaction count over
--     the window / 3, and each replica's store-wrapper count / its uptime)
--   distinct fire instants per second on the busiest replica (its claims)
--   start lateness p50/p99 of the 1 s jobs, inside the child, over the window
--     (the minute's burst of every = "1m" jobs included), and apart: in the
--     seconds when the 1m jobs fire too, and in the others
-- The replicas are named r1..r3, as three hosts would be, so that spread (on
-- by default) shares the jobs out; BENCH_SPREAD=0: the first one holds all.
-- (All three run on this machine's cores: a second's 100 fires start on the
-- same two cores however the leases are shared.)
--   parent RSS of each replica (the median of a sample every 5 s)
--   the claims that answered after their fires (the replicas' "a claim of"
--     lines)
--   ledger rows written per day (from the window) and the table's bytes per
--     row, so its size once pruning holds it at min(keep, keep_per_job)
--   this disk's fsync latency over the window (bench/fsync_probe.py, in
--     LEASH_TEST_TMP, where the throwaway PostgreSQL keeps its data): every
--     claim is a commit, so a slow fsync makes every replica's fires late at
--     once; each of the worst seconds shows the slowest fsync begun in the
--     second before it (until half a second into it)
-- BENCH_LATE_OUT=file keeps the children's lines ("second lateness").
-- Run with `make bench-ledger` (BENCH_WINDOW=75 seconds by default: the
-- window spans a minute boundary).  Starts its own PostgreSQL unless
-- LEASH_TEST_PG_CONNINFO is set.
local L = require "e2e"
local core = require "leash.core"
local B = require "common"

local pg = assert(os.getenv("LEASH_TEST_PG_CONNINFO"), "LEASH_TEST_PG_CONNINFO is not set")
local WINDOW = tonumber(os.getenv("BENCH_WINDOW") or "75")
local SLOW, FAST = tonumber(os.getenv("BENCH_SLOW") or "1000"), tonumber(os.getenv("BENCH_FAST") or "100")

local pct, rss_kb = B.pct, B.rss_kb
local SLOW_PHASE = 0   -- every = "1m" fires in each minute's first second (intervals count from the epoch)
local function psql(sql) return B.psql(pg, sql) end
local function xacts() return B.xacts(pg) end

local tbl = ("bench_ledger_%d"):format(os.time() % 100000)
local d = L.dir {}
-- Three replicas named as three hosts would be (r1..r3): with spread on (the
-- default) the jobs spread over them.  BENCH_SPREAD=0: one replica holds all.
local SPREAD = os.getenv("BENCH_SPREAD") ~= "0"
local cfgs = {}
for i = 1, 3 do
  cfgs[i] = d.dir .. "/r" .. i .. ".ini"
  L.write(cfgs[i], L.ini {
    leash = { jobs = d.jobs, replica = "r" .. i, grace = "1s" },
    singleton = { enabled = "true", spread = SPREAD and "true" or "false" },
    store = { provider = "postgres", table = tbl },
    postgres = { conninfo = pg },
  })
end
local lateness = d.out "late"
local FASTJOB = B.lateness_job(lateness)
for i = 1, FAST do d.write_job(("fast-%03d"):format(i), FASTJOB) end
for i = 1, SLOW do d.write_job(("slow-%04d"):format(i), 'return { every = "1m", run = function() end }') end

local procs = {}
for i = 1, 3 do
  local p = L.spawn(cfgs[i])
  p.owner = assert(L.wait_for(function() return p:log_text():match("replica (%S+),") end, 10))
  procs[i] = p
end
local s = assert(core.open_store { provider = "postgres", conninfo = pg, table = tbl })
assert(L.wait_for(function() return #assert(s:list()) >= FAST + SLOW end, 120), "not all jobs were taken")
if SPREAD then
  -- spread: until no replica holds more than 45% of the jobs
  assert(L.wait_for(function()
    local n = {}
    for _, r in ipairs(assert(s:list())) do n[r.owner] = (n[r.owner] or 0) + 1 end
    for _, c in pairs(n) do if c > 0.45 * (FAST + SLOW) then return false end end
    return true
  end, 180, 1), "the jobs did not spread")
end
L.sleep(5)
local function rows() return tonumber(psql(("SELECT count(*) FROM %s_runs"):format(tbl))) end
local x0, t0, r0 = xacts(), L.now(), rows()
L.write(lateness, "")
local fsyncs = d.out "fsync"
local probe = L.spawn_cmd(("python3 %s/bench/fsync_probe.py %s %d %s"):format(L.quote(os.getenv("LEASH_ROOT") or "."),
  L.quote(os.getenv("LEASH_TEST_TMP") or "/tmp"), WINDOW, L.quote(fsyncs)))
-- RSS: the median of a sample every 5 s (one sample swings with the runs
-- going at that moment); r1's parts at the middle of the window
local rss, parts, samples = {}, {}, { {}, {}, {} }
local t_end = L.now() + WINDOW
while L.now() < t_end - 5 do
  L.sleep(5)
  for i, p in ipairs(procs) do table.insert(samples[i], rss_kb(p.pid) / 1024) end
  if not parts[1] and L.now() >= t_end - WINDOW / 2 then
    for i, p in ipairs(procs) do parts[i] = { B.rss_parts_kb(p.pid) } end
  end
end
for i = 1, #procs do rss[i] = pct(samples[i], 0.5) end
L.sleep(math.max(0, t_end - L.now()))
local x1, t1, r1 = xacts(), L.now(), rows()
local held = {}
for _, r in ipairs(assert(s:list())) do held[r.owner] = (held[r.owner] or 0) + 1 end
local bytes = tonumber(psql(("SELECT pg_total_relation_size('%s_runs')"):format(tbl)))
s:close()
local life, slow = {}, {}
for i, p in ipairs(procs) do
  p:stop(60)
  local text = p:log_text()
  local calls, secs = text:match("lease store: (%d+) statements in ([%d.]+)s")
  life[i] = calls and tonumber(calls) / tonumber(secs) or 0 / 0
  for line in text:gmatch("[^\n]*a claim of %d+ fire[^\n]*") do
    slow[#slow + 1] = ("r%d: %s"):format(i, line:match("a claim of .*"))
  end
end
-- all of them, and apart: the seconds when the 1m jobs fire too, and the others
local late, at = B.lateness_ms(lateness)
if os.getenv("BENCH_LATE_OUT") then L.write(os.getenv("BENCH_LATE_OUT"), L.read(lateness)) end
local at_minute, other = {}, {}
for k, v in ipairs(late) do
  local t = at[k] % 60 == SLOW_PHASE and at_minute or other
  t[#t + 1] = v
end
local per_day = (r1 - r0) / (t1 - t0) * 86400
print(("ledger benchmark: PostgreSQL on loopback, 3 replicas, %d jobs every 1m + %d every 1s, %ds window; %s"):format(
  SLOW, FAST, WINDOW, os.date("!%Y-%m-%dT%H:%M:%SZ")))
print(("stmts/s/replica (PostgreSQL transactions / 3): %.2f"):format((x1 - x0 - 3) / (t1 - t0) / 3))
print(("stmts/s per replica (wrapper count / uptime): %.2f / %.2f / %.2f"):format(life[1], life[2], life[3]))
local shares = {}
for i, p in ipairs(procs) do shares[i] = tostring(held[p.owner] or 0) end
print(("leases held: %s; parent RSS (MB): %.1f / %.1f / %.1f"):format(table.concat(shares, " / "),
  rss[1], rss[2], rss[3]))
print(("  of r1's: anonymous %.1f, files' pages %.1f (the libraries', shared), shared memory %.1f"):format(
  parts[1][1] / 1024, parts[1][2] / 1024, parts[1][3] / 1024))
print(("1 s jobs' start lateness (child side) p50 / p99 / max ms: %.2f / %.2f / %.2f over %d runs"):format(
  pct(late, 0.5), pct(late, 0.99), pct(late, 1), #late))
print(("  in the seconds the 1m jobs fire too: %.2f / %.2f / %.2f over %d runs; the others: %.2f / %.2f / %.2f over %d"):format(
  pct(at_minute, 0.5), pct(at_minute, 0.99), pct(at_minute, 1), #at_minute,
  pct(other, 0.5), pct(other, 0.99), pct(other, 1), #other))
-- the worst seconds by their median, each with its second of the minute:
-- one bad second (a checkpoint, a handoff) looks unlike a slow floor
local by_sec, secs = {}, {}
for k, v in ipairs(late) do
  if not by_sec[at[k]] then by_sec[at[k]] = {}; secs[#secs + 1] = at[k] end
  table.insert(by_sec[at[k]], v)
end
table.sort(secs, function(a, b) return pct(by_sec[a], 0.5) > pct(by_sec[b], 0.5) end)
probe:wait(10)
local fs_at, fs_ms = {}, {}
for _, l in ipairs(L.lines(fsyncs)) do
  local t, v = l:match("^(%d+) (%S+)$")
  if t then fs_at[#fs_at + 1], fs_ms[#fs_ms + 1] = tonumber(t), tonumber(v) end
end
-- the slowest fsync begun in [sec - 1 s, sec + 0.5 s)
local function fsync_near(sec)
  local m = 0
  for k, t in ipairs(fs_at) do
    if t >= sec * 1000 - 1000 and t < sec * 1000 + 500 then m = math.max(m, fs_ms[k]) end
  end
  return m
end
local worst = {}
for k = 1, math.min(5, #secs) do
  local l = by_sec[secs[k]]
  worst[k] = (":%02d %.1f/%.1f (fsync %.0f)"):format(secs[k] % 60, pct(l, 0.5), pct(l, 1),
    fsync_near(secs[k]))
end
print(("  worst seconds (second of the minute, p50/max ms, the slowest fsync near it): %s"):format(
  table.concat(worst, ", ")))
local slow_fs = 0
for _, v in ipairs(fs_ms) do if v > 50 then slow_fs = slow_fs + 1 end end
print(("this disk's fsync (8 KB, every 20 ms): p50 / p99 / max ms %.2f / %.2f / %.1f over %d; %d over 50 ms"):format(
  pct(fs_ms, 0.5), pct(fs_ms, 0.99), pct(fs_ms, 1), #fs_ms, slow_fs))
-- not the goal's figure: what is left of the lateness once the seconds the
-- disk stalled are set aside
local calm, calm_secs = {}, {}
for k, v in ipairs(late) do
  local sec = at[k]
  if calm_secs[sec] == nil then calm_secs[sec] = fsync_near(sec) <= 50 end
  if calm_secs[sec] then calm[#calm + 1] = v end
end
print(("  1 s jobs' start lateness in the seconds no fsync over 50 ms came near: %.2f / %.2f / %.2f over %d runs"):format(
  pct(calm, 0.5), pct(calm, 0.99), pct(calm, 1), #calm))
print(("claims that made their fires late (a claim of ... took): %d%s"):format(#slow,
  #slow > 0 and "\n    " .. table.concat(slow, "\n    ", 1, math.min(#slow, 8)) or ""))
print(("ledger rows written: %.0f per day; %.0f bytes per row (%d rows, %d bytes)"):format(per_day,
  bytes / math.max(r1, 1), r1, bytes))
print(("size once pruned (keep 14d, keep_per_job 1000): %d rows, %.1f MB"):format(
  math.min(per_day * 14, (FAST + SLOW) * 1000), math.min(per_day * 14, (FAST + SLOW) * 1000) * bytes / math.max(r1, 1) / 1e6))
