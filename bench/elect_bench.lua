-- bench/elect_bench.lua: the election on PostgreSQL, 3 replicas, for 1, 100
-- and 1,000 jobs.  Prints, per job count:
--   statements per second per replica (the store wrappers' count, from each
--     replica's log at exit, over a steady window with the default settings;
--     and PostgreSQL's own transaction count over the same window)
--   parent RSS of the holder
--   p99 and median of (run start - scheduled time) for a 1 s probe job
--   crash takeover: new acquired_at - old expires_at after kill -9 of the
--     holder (database time), median of 10
--   clean handover: new acquired_at - release time after SIGTERM of the
--     holder, median of 10
-- Run with `make bench-elect`; it starts its own PostgreSQL unless
-- LEASH_TEST_PG_CONNINFO is set.
local L = require "e2e"
local core = require "leash.core"
local B = require "common"

local pg = assert(os.getenv("LEASH_TEST_PG_CONNINFO"), "LEASH_TEST_PG_CONNINFO is not set")
local COUNTS = {}
for n in (os.getenv("BENCH_JOBS") or "1,100,1000"):gmatch("%d+") do COUNTS[#COUNTS + 1] = tonumber(n) end
local TRIALS = tonumber(os.getenv("BENCH_TRIALS") or "10")
local WINDOW = tonumber(os.getenv("BENCH_WINDOW") or "20")

local median, pct, rss_kb = B.median, B.pct, B.rss_kb
local function xacts() return B.xacts(pg) end

local function store(tbl)
  return assert(core.open_store { provider = "postgres", conninfo = pg, table = tbl })
end

local function lease_row(s, name)
  local rows = assert(s:list())
  for _, r in ipairs(rows) do if r.name == name then return r end end
end

local function setup(n, tbl, lease)
  local d = L.dir { config = {
    leash = { grace = "1s" },
    singleton = lease and { enabled = "true", lease = lease, retry = "500ms" } or { enabled = "true" },
    store = { provider = "postgres", table = tbl },
    postgres = { conninfo = pg },
  } }
  local probe = d.out "probe"
  d.write_job("probe", ([[
local core = require "leash.core"
return { every = "1s", run = function(ctx)
  local f = io.open(%q, "a"); f:write(("%%.6f %%d\n"):format(core.now() - ctx.scheduled_at, ctx.token)); f:close()
end }]]):format(probe))
  for i = 2, n do
    d.write_job(("idle-%04d"):format(i), 'return { every = "1h", run = function() end }')
  end
  return d, probe
end

local function spawn(d)
  local p = L.spawn(d)
  p.owner = assert(L.wait_for(function() return p:log_text():match("replica (%S+),") end, 10))
  return p
end

local function holder_of(procs, s, name)
  local r = lease_row(s, name)
  if not r then return nil end
  for i, p in ipairs(procs) do if p.owner == r.owner then return p, r, i end end
end

local function failover(n, how)
  local tbl = ("bench_%s_%d"):format(how, n)
  local d = setup(n, tbl, "3s")
  local s = store(tbl)
  local procs = { spawn(d), spawn(d), spawn(d) }
  local out = {}
  for _ = 1, TRIALS do
    local got = assert(L.wait_for(function()
      local p, row, idx = holder_of(procs, s, "probe")
      return p and { p, row, idx }
    end, 20), "nobody holds probe")
    local h, i = got[1], got[3]
    -- every job held (1,000 take a few renewals to settle); then a pause
    L.sleep(1.2)
    local old, from = lease_row(s, "probe"), nil
    if how == "kill" then
      L.kill(h.pid, "KILL")
      from = lease_row(s, "probe").expires_at   -- its last renewal's expiry
    else
      h:signal("TERM")
      assert(h:wait(20), "the holder did not stop")
      -- the release's time, from its log line (same host as the database)
      -- (at shutdown every held lease goes in one release_all: "released N leases")
      local line = assert(h:grep("released %d+ leases?")[1], "probe was not released")
      from = math.floor(L.log_time(line) * 1000)
    end
    local new = assert(L.wait_for(function()
      local row = lease_row(s, "probe")
      return row and row.owner ~= old.owner and row
    end, 30), "nobody took over")
    out[#out + 1] = new.acquired_at - from
    procs[i] = spawn(d)
    if h:alive() then h:stop(10) end
  end
  for _, p in ipairs(procs) do p:stop(20) end
  s:close()
  return out
end

local function steady(n)
  local tbl = ("bench_steady_%d"):format(n)
  local d, probe = setup(n, tbl, nil)
  local s = store(tbl)
  local procs = { spawn(d), spawn(d), spawn(d) }
  -- all jobs held by someone, then the window
  assert(L.wait_for(function() return #assert(s:list()) >= n end, 60), "not all jobs were taken")
  L.sleep(5)
  local x0, t0 = xacts(), L.now()
  L.write(probe, "")
  L.sleep(WINDOW)
  local x1, t1 = xacts(), L.now()
  local h = holder_of(procs, s, "probe")
  local rss = h and rss_kb(h.pid) or 0
  local per = {}
  local logs = {}
  for _, p in ipairs(procs) do
    p:stop(30)
    local calls, secs = p:log_text():match("lease store: (%d+) statements in ([%d.]+)s")
    per[#per + 1] = calls and tonumber(calls) / tonumber(secs) or 0 / 0
    logs[#logs + 1] = p.log
  end
  s:close()
  local delays = {}
  for _, l in ipairs(L.lines(probe)) do
    local dl = tonumber(l:match("^(%S+)"))
    if dl then delays[#delays + 1] = dl * 1000 end
  end
  table.sort(per)
  return {
    stmts = per, pg_rate = (x1 - x0 - 2) / (t1 - t0) / 3, rss = rss,
    p99 = pct(delays, 0.99), p50 = median(delays), runs = #delays,
  }
end

print(("election benchmark: PostgreSQL 15 on loopback, 3 replicas, %d trials, %ds window; %s"):format(
  TRIALS, WINDOW, os.date("!%Y-%m-%dT%H:%M:%SZ")))
print("steady state uses the defaults (lease 15s, renew 5s, retry 2s); failover trials use lease 3s, retry 500ms")
print("stmts/s: PostgreSQL's own transaction count over the window / 3 (each store call is one autocommit")
print("statement); lifetime: each replica's store-wrapper count / its uptime, start-up and the")
print("releases at exit included (min/median/max of the 3 replicas)")
print(("%6s %24s %14s %10s %16s %16s %16s"):format("jobs", "lifetime stmts/s", "stmts/s/rep",
  "RSS (MB)", "start p50/p99 ms", "takeover ms", "handover ms"))
for _, n in ipairs(COUNTS) do
  local st = steady(n)
  local kill = failover(n, "kill")
  local term = failover(n, "term")
  print(("%6d %24s %14.2f %10.1f %16s %16s %16s"):format(n,
    ("%.2f/%.2f/%.2f"):format(st.stmts[1], st.stmts[2], st.stmts[3]), st.pg_rate, st.rss / 1024,
    ("%.2f/%.2f"):format(st.p50, st.p99),
    ("%d (max %d)"):format(median(kill), pct(kill, 1)),
    ("%d (max %d)"):format(median(term), pct(term, 1))))
  io.stdout:flush()
end

-- Spread (issue 12): handovers per membership change, time until balanced.
if os.getenv("BENCH_SPREAD") ~= "0" then dofile("bench/spread_bench.lua") end
