-- bench/spread_bench.lua: [singleton] spread on PostgreSQL, R replicas (3 and
-- 10) x 1,000 jobs (every 1h, so only the election works).  Prints, per R:
--   start: time from the last replica's start until every job is held by the
--     replica it prefers, and the handovers that took (token steps)
--   kill -9 of one replica: time until its jobs are all held again, and how
--     many jobs moved (ideal: its share, nothing else)
--   its restart (same name): time until balanced again, jobs moved (ideal:
--     about 1000/R, its old share)
--   statements per replica per second at steady state (PostgreSQL's own
--     transaction count over BENCH_WINDOW s / R)
-- Lease 3s, retry 500ms (renew 1s, settle 1s).  Run by make bench-elect
-- (BENCH_SPREAD=0 skips it), or alone with LEASH_TEST_PG_CONNINFO set.
local L = require "e2e"
local core = require "leash.core"
local B = require "common"

local pg = assert(os.getenv("LEASH_TEST_PG_CONNINFO"), "LEASH_TEST_PG_CONNINFO is not set")
local NJOBS = tonumber(os.getenv("BENCH_SPREAD_JOBS") or "1000")
local WINDOW = tonumber(os.getenv("BENCH_WINDOW") or "20")
local SIZES = {}
for n in (os.getenv("BENCH_REPLICAS") or "3,10"):gmatch("%d+") do SIZES[#SIZES + 1] = tonumber(n) end

local function xacts() return B.xacts(pg) end

local function placement(s)
  local rows, now = assert(s:list())
  local at, tokens = {}, 0
  for _, r in ipairs(rows) do
    if r.expires_at > now then at[r.name] = r.owner end
    tokens = tokens + r.token
  end
  return at, tokens
end

-- Balanced: every job held by the replica rendezvous hashing prefers for
-- it (the replicas are named r1..rR, so no tie needs the owner ids).
local function balanced(s, owners)
  local at, tokens = placement(s)
  local cands = {}
  for i, o in ipairs(owners) do cands[i] = { name = "r" .. i, owner = o } end
  for i = 1, NJOBS do
    local job = ("job-%04d"):format(i)
    if at[job] ~= owners[core.rendezvous(job, cands)] then return nil end
  end
  return { at = at, tokens = tokens }
end

local function run(R)
  local tbl = ("bench_spread_%d_%d"):format(R, math.random(1e6))
  local d = L.dir {}
  for i = 1, NJOBS do
    d.write_job(("job-%04d"):format(i), 'return { every = "1h", run = function() end }')
  end
  local cfgs = {}
  for i = 1, R do
    cfgs[i] = d.dir .. "/r" .. i .. ".ini"
    L.write(cfgs[i], L.ini {
      leash = { jobs = d.jobs, replica = "r" .. i, grace = "1s" },
      singleton = { enabled = "true", lease = "3s", retry = "500ms" },
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
  local b0 = assert(L.wait_for(function() return balanced(s, owners) end, 120, 0.1), "never balanced")
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
  local alive = {}
  for i = 1, R - 1 do alive[i] = owners[i] end
  local b1 = assert(L.wait_for(function()
    local at, tokens = placement(s)
    local held = 0
    for _, o in pairs(at) do
      if o == owners[R] then return nil end
      held = held + 1
    end
    return held == NJOBS and { at = at, tokens = tokens }
  end, 60, 0.1), "its jobs were not taken")
  local kill_s, kill_moves = L.now() - t1, b1.tokens - steady_tokens
  L.sleep(2)
  local _, tk = placement(s)

  -- restart it
  start(R)
  local t2 = L.now()
  local b2 = assert(L.wait_for(function() return balanced(s, owners) end, 120, 0.1), "never balanced again")
  local back_s = L.now() - t2
  L.sleep(3)
  local _, tb = placement(s)
  for _, p in ipairs(procs) do p:stop(20) end
  s:close()
  return { start_s = start_s, start_moves = start_moves, rate = rate, share = share,
           kill_s = kill_s, kill_moves = kill_moves, settle_moves = tk - b1.tokens,
           back_s = back_s, back_moves = tb - tk, b2 = b2 }
end

print(("spread benchmark: PostgreSQL 15 on loopback, %d jobs (every 1h), lease 3s, retry 500ms; %s"):format(
  NJOBS, os.date("!%Y-%m-%dT%H:%M:%SZ")))
print(("%4s %16s %14s %12s %20s %20s"):format("R", "start: s, moves", "stmts/s/rep", "dead's share",
  "kill -9: s, moves", "restart: s, moves"))
for _, R in ipairs(SIZES) do
  local r = run(R)
  print(("%4d %9.2f %6d %14.2f %12d %13.2f %6d %13.2f %6d"):format(R, r.start_s, r.start_moves,
    r.rate, r.share, r.kill_s, r.kill_moves + r.settle_moves, r.back_s, r.back_moves))
  io.stdout:flush()
end
