-- bench/burst_bench.lua: N jobs firing at the same instant on one replica.
-- PostgreSQL, 3 replicas: the first one takes every lease (the bench waits
-- for it) before the two others start, so each burst falls on one replica.
-- All N jobs have every = "1s"; each run writes, as the first thing its body
-- does, how late it started: ctx.now() - ctx.scheduled_at.  Per N it prints
-- p50/p99/max of that lateness over BURST_WINDOW seconds (the first burst
-- after the window opens included), and where the time goes, from the
-- holder's log ("started pid=" lines: when the parent had each run's pid)
-- and, with BURST_PERF=1 and perf(1) at hand, perf trace's syscall summary
-- of the holder's parent process over the same window.
-- Run with `make bench-elect` (after elect_bench.lua) or alone:
--   BURST_JOBS=100,1000 lua5.4 bench/burst_bench.lua  (LEASH_TEST_PG_CONNINFO set)
local L = require "e2e"
local core = require "leash.core"
local B = require "common"

local pg = assert(os.getenv("LEASH_TEST_PG_CONNINFO"), "LEASH_TEST_PG_CONNINFO is not set")
local COUNTS = {}
for n in (os.getenv("BURST_JOBS") or "100,1000"):gmatch("%d+") do COUNTS[#COUNTS + 1] = tonumber(n) end
local WINDOW = tonumber(os.getenv("BURST_WINDOW") or "10")
-- BURST_PERF=1: perf trace -s of the holder's parent; BURST_PERF=record:
-- perf record -g of it into $LEASH_TEST_TMP/burst-N.perf (for perf report)
local PERF = os.getenv("BURST_PERF")

local pct = B.pct

local function store(tbl)
  return assert(core.open_store { provider = "postgres", conninfo = pg, table = tbl })
end

local function setup(n, tbl)
  local d = L.dir { config = {
    leash = { grace = "1s" },
    singleton = { enabled = "true", spread = "false" },   -- every burst on one replica
    store = { provider = "postgres", table = tbl },
    postgres = { conninfo = pg },
  } }
  local out = d.out "burst"
  -- ctx.now when the job has it, else the same clock from leash.core
  local src = ([[
local core = require "leash.core"
return { every = "1s", run = function(ctx)
  local t = ctx.now and ctx.now() or core.now()
  local f = io.open(%q, "a")
  f:write(("%%d %%d %%.6f\n"):format(ctx.run_id, ctx.scheduled_at, t - ctx.scheduled_at))
  f:close()
end }]]):format(out)
  for i = 1, n do d.write_job(("b-%04d"):format(i), src) end
  return d, out
end

local function spawn(d)
  local p = L.spawn(d)
  p.owner = assert(L.wait_for(function() return p:log_text():match("replica (%S+),") end, 10))
  return p
end

-- Parent side: for each burst (scheduled second), the log time of each
-- "started" line minus the scheduled time (ms).
local function parent_starts(p, t0, t1)
  local got = {}
  for _, l in ipairs(p:log_lines()) do
    if l:find("started pid=", 1, true) then
      local t = L.log_time(l)
      if t and t >= t0 and t < t1 + 1 then
        local s = math.floor(t + 0.5 - 0.5)   -- the second it belongs to
        got[#got + 1] = { s = s, ms = (t - s) * 1000 }
      end
    end
  end
  return got
end

-- CPU seconds so far of the holder's parent itself, of its children reaped
-- (the runs: the spawner's are the parent's too, CLONE_PARENT), and of the
-- spawner(s) alive now.
local TICK = tonumber((select(2, L.sh("getconf CLK_TCK")) or ""):match("%d+") or "") or 100
local function stat(pid)
  local t = L.read("/proc/" .. pid .. "/stat") or ""   -- nil: it went as it was read
  local rest = t:match("%) (.*)$")
  if not rest then return nil end
  local f = {}
  for v in rest:gmatch("%S+") do f[#f + 1] = tonumber(v) or v end
  return f   -- f[1] is field 3 (state): utime is f[12], stime f[13], cutime f[14], cstime f[15]
end
local function cpu_of(pid)
  local f = stat(pid)
  if not f then return { self = 0, runs = 0, spawner = 0 } end
  local sp = 0
  for _, c in ipairs(L.children(pid)) do
    if (L.read("/proc/" .. c .. "/comm") or ""):match("^leash: spawner") then
      local g = stat(c)
      if g then sp = sp + (g[12] + g[13]) / TICK end
    end
  end
  return { self = (f[12] + f[13]) / TICK, runs = (f[14] + f[15]) / TICK, spawner = sp,
           faults = f[9] }   -- cminflt: the runs' page faults
end
local function cpu(pid)
  local ok, got = pcall(cpu_of, pid)
  if not ok then io.stderr:write("burst: CPU times not read: ", tostring(got), "\n") end
  return ok and got or { self = 0, runs = 0, spawner = 0, faults = 0 }
end

local function burst(n)
  local tbl = ("bench_burst_%d"):format(n)
  local d, out = setup(n, tbl)
  local s = store(tbl)
  local a = spawn(d)
  assert(L.wait_for(function()
    local rows = assert(s:list())
    if #rows < n then return false end
    for _, r in ipairs(rows) do if r.owner ~= a.owner then return false end end
    return true
  end, 120), "the first replica did not take every lease")
  local b, c = spawn(d), spawn(d)
  L.sleep(3)
  L.sleep_to_second(0.5)
  L.write(out, "")
  local t0 = L.now()
  local cpu0 = cpu(a.pid)
  local perf
  if PERF then
    perf = d.out "perf"
    if PERF == "record" then
      local keep = (os.getenv("BURST_PERF_DIR") or "/tmp") .. ("/burst-%d.perf"):format(n)
      L.sh(("(timeout -s INT %d perf record -g -p %d -o %s >/dev/null 2>&1 &)"):format(WINDOW, a.pid, L.quote(keep)))
    else
      L.sh(("(timeout -s INT %d perf trace -s -p %d -o %s >/dev/null 2>&1 &)"):format(WINDOW, a.pid, L.quote(perf)))
    end
  end
  L.sleep(WINDOW)
  local t1 = L.now()
  local cpu1 = cpu(a.pid)
  L.sleep(2)                            -- the last burst's runs end
  local late, bursts = {}, {}
  for _, l in ipairs(L.lines(out)) do
    local _, sched, dl = l:match("^(%d+) (%d+) (%S+)$")
    sched = tonumber(sched)
    if sched and sched >= t0 and sched < t1 then
      late[#late + 1] = tonumber(dl) * 1000
      bursts[sched] = (bursts[sched] or 0) + 1
    end
  end
  local pstarts = {}
  for _, e in ipairs(parent_starts(a, t0, t1)) do pstarts[#pstarts + 1] = e.ms end
  local rss = tonumber(L.read("/proc/" .. a.pid .. "/status"):match("VmRSS:%s*(%d+)")) or 0
  local nb = 0
  for _ in pairs(bursts) do nb = nb + 1 end
  for _, p in ipairs { b, c, a } do p:stop(30) end
  s:close()
  local ptxt = perf and L.exists(perf) and L.read(perf) or ""
  local started = math.max(#pstarts, 1)
  local per = {}
  for _, k in ipairs { "self", "runs", "spawner" } do
    per[k] = (cpu1[k] - cpu0[k]) * 1000 / started
  end
  per.faults = (cpu1.faults - cpu0.faults) / started
  return { late = late, pstarts = pstarts, bursts = nb, rss = rss, perf = ptxt, cpu = per }
end

print(("burst benchmark: PostgreSQL 15 on loopback, 3 replicas, N jobs every 1s all held by one, %ds window; %s"):format(
  WINDOW, os.date("!%Y-%m-%dT%H:%M:%SZ")))
print("start: ctx.now() - scheduled_at, first thing in the body (ms); parent: the holder's")
print("'started' log lines - scheduled_at (ms, log resolution 1 ms): when the parent knew each pid")
print("CPU ms/run: the holder's CPU time over the window per run it started (its parent's own,")
print("its runs' (reaped: the spawner's children are the parent's), the spawner's)")
print("faults/run: the page faults of the runs reaped over the window, per run started")
print(("%6s %7s %8s %22s %22s %9s %22s %11s"):format("N", "bursts", "runs", "start p50/p99/max ms",
  "parent p50/p99/max ms", "RSS (MB)", "CPU ms/run prnt/run/sp", "faults/run"))
for _, n in ipairs(COUNTS) do
  local r = burst(n)
  print(("%6d %7d %8d %22s %22s %9.1f %22s %11.0f"):format(n, r.bursts, #r.late,
    ("%.1f/%.1f/%.1f"):format(pct(r.late, 0.5), pct(r.late, 0.99), pct(r.late, 1)),
    ("%.0f/%.0f/%.0f"):format(pct(r.pstarts, 0.5), pct(r.pstarts, 0.99), pct(r.pstarts, 1)),
    r.rss / 1024, ("%.2f/%.2f/%.2f"):format(r.cpu.self, r.cpu.runs, r.cpu.spawner),
    r.cpu.faults))
  if r.perf ~= "" then
    print("  holder parent's syscalls over the window (perf trace -s):")
    for l in r.perf:gmatch("[^\n]+") do
      if l:match("^%s+%a[%w_]*%s+%d") then print("  " .. l) end
    end
  end
  io.stdout:flush()
end
