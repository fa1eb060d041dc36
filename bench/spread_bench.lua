-- bench/spread_bench.lua: [singleton] spread on PostgreSQL, R replicas (3 and
-- 10) x 1,000 jobs (every 1h, so only the election works), placed by
-- rendezvous hashing with bounded loads (src/cluster/place.c).  First, from the map
-- alone (core.placement over made-up rows of the same replicas and jobs):
--   shares (min/max jobs a replica), jobs moved by the last replica's leave
--   and by its join back (ideal: 1000/R), and what it costs a replica: a
--   beat whose rows changed nothing (the map kept), the map made again, and
--   the per-beat look-ups of 1,000 jobs (prefer and runner_up)
-- then, with real `leash run` replicas, per R:
--   start: time from the last replica's start until every job is held where
--     the map of the presence rows says, and the handovers that took
--   kill -9 of one replica: time until its jobs are all held again, then
--     until every job is where the map of the live replicas says; how many
--     jobs moved (ideal: its share, 1000/R)
--   its restart (same name): time until balanced again, jobs moved (ideal:
--     about 1000/R, its old share; the map is the one before the kill)
--   statements per replica per second at steady state (PostgreSQL's own
--     transaction count over BENCH_WINDOW s / R)
-- Lease 3s, retry 500ms (renew 1s, settle 1s).  Run by make bench-spread
-- (and make bench-elect unless BENCH_SPREAD=0), or alone with
-- LEASH_TEST_PG_CONNINFO set.
local L = require "e2e"
local core = require "leash.core"
local B = require "common"

local pg = assert(os.getenv("LEASH_TEST_PG_CONNINFO"), "LEASH_TEST_PG_CONNINFO is not set")
local NJOBS = tonumber(os.getenv("BENCH_SPREAD_JOBS") or "1000")
local WINDOW = tonumber(os.getenv("BENCH_WINDOW") or "20")
local SIZES = {}
for n in (os.getenv("BENCH_REPLICAS") or "3,10"):gmatch("%d+") do SIZES[#SIZES + 1] = tonumber(n) end
local LEASE, RETRY = 3000, 500

local function xacts() return B.xacts(pg) end

local function job_name(i) return ("job-%04d"):format(i) end

-- ---- the map alone ----

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function map_figures(R)
  local names = {}
  for i = 1, NJOBS do names[i] = { job_name(i), "" } end
  local _, text = core.presence_jobs(names)
  local now = 1800000000000
  local function rows(n, pid)
    local t = {}
    for i = 1, n do
      t[i] = { owner = ("r%d:%d:00"):format(i, i == R and pid or 1), host = "h", pid = 1,
               version = "x", jobs_hash = "H", started_at = now - 60000, heartbeat = now - 100 }
    end
    return t
  end
  local opts = { now = now, me = "r1:1:00", live_ms = LEASE, settle_ms = 2 * RETRY, jobs = text }
  local p = core.placement()
  p:set(rows(R, 1), opts)
  local map, load = p:map()
  local lo, hi = math.huge, 0
  for _, l in pairs(load) do lo, hi = math.min(lo, l), math.max(hi, l) end
  p:set(rows(R - 1, 1), opts)
  local left = p:map()
  p:set(rows(R, 2), opts)
  local back = p:map()
  local leave, join = 0, 0
  for j, o in pairs(map) do
    if left[j] ~= o then leave = leave + 1 end
    if left[j] ~= back[j] then join = join + 1 end
  end
  -- What a replica pays: the same rows again (a beat that changes
  -- nothing), the map made again, and its 1,000 look-ups a beat.
  local N = 200
  local same = rows(R, 2)
  local t0 = os.clock()
  for _ = 1, N do p:set(same, opts) end
  local kept_us = (os.clock() - t0) / N * 1e6
  t0 = os.clock()
  for i = 1, N do
    same[1].draining = i % 2 == 1
    p:set(same, opts)
    p:prefer(job_name(1))
  end
  local remade_ms = (os.clock() - t0) / N * 1e3
  same[1].draining = false
  p:set(same, opts)
  t0 = os.clock()
  for i = 1, NJOBS do p:prefer(job_name(i)) end
  for i = 1, NJOBS do p:runner_up(job_name(i)) end       -- the first time: R maps more
  local first_us = (os.clock() - t0) * 1e6
  t0 = os.clock()
  for _ = 1, 10 do
    for i = 1, NJOBS do p:prefer(job_name(i)) end
    for i = 1, NJOBS do p:runner_up(job_name(i)) end
  end
  local lookup_us = (os.clock() - t0) / 10 * 1e6
  return { lo = lo, hi = hi, leave = leave, join = join, kept_us = kept_us, remade_ms = remade_ms,
           first_us = first_us, lookup_us = lookup_us, count = count(map) }
end

-- ---- real replicas ----

local function placement(s)
  local rows, now = assert(s:list())
  local at, tokens = {}, 0
  for _, r in ipairs(rows) do
    if r.expires_at > now then at[r.name] = r.owner end
    tokens = tokens + r.token
  end
  return at, tokens
end

-- Balanced: the presence rows' map (as every replica computes it) spreads
-- the jobs over want replicas (every one up and settled), and every job is
-- held by the replica it puts it on.
local function balanced(s, want)
  local rows, now = assert(s:replicas())
  local p = core.placement()
  p:set(rows, { now = now, live_ms = LEASE, settle_ms = 2 * RETRY })
  local map, load = p:map()
  if count(load) ~= want then return nil end
  local at, tokens = placement(s)
  for i = 1, NJOBS do
    local job = job_name(i)
    if not map[job] or at[job] ~= map[job] then return nil end
  end
  return { at = at, tokens = tokens }
end

local function run(R)
  local tbl = ("bench_spread_%d_%d"):format(R, math.random(1e6))
  local d = L.dir {}
  for i = 1, NJOBS do
    d.write_job(job_name(i), 'return { every = "1h", run = function() end }')
  end
  local cfgs = {}
  for i = 1, R do
    cfgs[i] = d.dir .. "/r" .. i .. ".ini"
    L.write(cfgs[i], L.ini {
      leash = { jobs = d.jobs, replica = "r" .. i, grace = "1s" },
      singleton = { enabled = "true", lease = LEASE .. "ms", retry = RETRY .. "ms" },
      store = { provider = "postgres", table = tbl },
      postgres = { conninfo = pg },
    })
  end
  local s = assert(core.open_store { provider = "postgres", conninfo = pg, table = tbl })
  local procs, owners = {}, {}
  local function start(i)
    local p = L.spawn(cfgs[i])
    p.owner = assert(L.wait_for(function() return p:log_text():match("replica (%S+),") end, 20))
    procs[i], owners[i] = p, p.owner
  end
  for i = 1, R do start(i) end
  local t0 = L.now()
  local b0 = assert(L.wait_for(function() return balanced(s, R) end, 120, 0.1), "never balanced")
  local start_s, start_moves = L.now() - t0, b0.tokens - NJOBS   -- first grants are token 1
  L.sleep(3)
  local x0, w0 = xacts(), L.now()
  L.sleep(WINDOW)
  local rate = (xacts() - x0 - 2) / (L.now() - w0) / R
  local steady_at, steady_tokens = placement(s)

  -- kill -9 of the last replica
  L.kill(procs[R].pid, "KILL")
  local share = 0
  for _, o in pairs(steady_at) do if o == owners[R] then share = share + 1 end end
  local t1 = L.now()
  assert(L.wait_for(function()
    local at = placement(s)
    local held = 0
    for _, o in pairs(at) do
      if o == owners[R] then return nil end
      held = held + 1
    end
    return held == NJOBS
  end, 60, 0.1), "its jobs were not taken")
  local taken_s = L.now() - t1
  assert(L.wait_for(function() return balanced(s, R - 1) end, 120, 0.1), "never balanced without it")
  local kill_s = L.now() - t1
  L.sleep(3)
  local _, tk = placement(s)

  -- restart it
  start(R)
  local t2 = L.now()
  assert(L.wait_for(function() return balanced(s, R) end, 120, 0.1), "never balanced again")
  local back_s = L.now() - t2
  L.sleep(3)
  local back_at, tb = placement(s)
  local same = 0
  for job, o in pairs(steady_at) do
    if back_at[job] and back_at[job]:match("^[^:]*") == o:match("^[^:]*") then same = same + 1 end
  end
  for _, p in ipairs(procs) do p:stop(20) end
  s:close()
  return { start_s = start_s, start_moves = start_moves, rate = rate, share = share,
           taken_s = taken_s, kill_s = kill_s, kill_moves = tk - steady_tokens,
           back_s = back_s, back_moves = tb - tk, same = same }
end

local commit = (select(2, L.sh("git rev-parse --short HEAD 2>/dev/null")) or ""):gsub("%s+", "")
print(("spread benchmark: %d jobs (job-0001...), lease %ds, retry %dms, commit %s; %s"):format(
  NJOBS, LEASE // 1000, RETRY, commit ~= "" and commit or "?", os.date("!%Y-%m-%dT%H:%M:%SZ")))
print("from the map alone (core.placement): shares, jobs moved by a leave and a join back,")
print("and a replica's cost: a beat that changes nothing, the map made again, a beat's look-ups")
print(("%4s %12s %14s %14s %12s %12s %22s"):format("R", "shares", "leave: moved", "join: moved",
  "beat, kept", "map remade", ("%d prefer+runner_up"):format(NJOBS)))
for _, R in ipairs(SIZES) do
  local f = map_figures(R)
  assert(f.count == NJOBS)
  print(("%4d %5d..%-5d %7d (%.2fx) %7d (%.2fx) %9.1f us %9.2f ms %9.0f us (first %.0f)"):format(R,
    f.lo, f.hi, f.leave, f.leave / (NJOBS / R), f.join, f.join / (NJOBS / R), f.kept_us,
    f.remade_ms, f.lookup_us, f.first_us))
end
io.stdout:flush()
print(("real replicas on PostgreSQL 15 over loopback (moves: token steps; ideal %s)"):format(
  "the dead's share"))
print(("%4s %16s %12s %12s %28s %20s %14s"):format("R", "start: s, moves", "stmts/s/rep",
  "dead's share", "kill -9: taken s, bal s, moves", "restart: s, moves", "same as before"))
for _, R in ipairs(SIZES) do
  local r = run(R)
  print(("%4d %9.2f %6d %12.2f %12d %9.2f %7.2f %7d %13.2f %6d %14s"):format(R, r.start_s,
    r.start_moves, r.rate, r.share, r.taken_s, r.kill_s, r.kill_moves, r.back_s, r.back_moves,
    r.same .. "/" .. NJOBS))
  io.stdout:flush()
end
