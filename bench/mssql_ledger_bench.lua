-- bench/mssql_ledger_bench.lua: how the mssql provider's ledger writes grow
-- with their rows, on the SQL Server (or Babelfish) that LEASH_TEST_MSSQL
-- names (host:port:user:password:database).  For each row count N
-- (BENCH_ROWS, default 400,800,1600), on one connection already warm (each
-- statement run once: a real engine's first run on a connection is slow),
-- the seconds of:
--   record_runs N new rows (one job, N fires), then the same N again (updates)
--   claim_runs of one claim carrying N rows (a catch-up's missed fires:
--     each row its own time, all else shared)
--   claim_runs of N claims (N jobs) carrying one row each
-- each the median of BENCH_TRIALS (default 3) tries, and the statements each
-- took (the store's call count).  Run by hand:
--   LEASH_TEST_MSSQL=... LUA_PATH="lua/?.lua;tests/support/?.lua;;" \
--   LUA_CPATH="build/lua/?.so;;" lua5.4 bench/mssql_ledger_bench.lua
local core = require "leash.core"
local providers = require "providers"
local system = require "system"

local cfg = assert(providers.parse_mssql(assert(os.getenv("LEASH_TEST_MSSQL"),
  "LEASH_TEST_MSSQL is not set")))
cfg.table = ("bench_ms_%d_%d"):format(os.time() % 100000, math.random(0, 9999))
cfg.statement_timeout_ms = 300000
local trials = tonumber(os.getenv("BENCH_TRIALS") or "3")
local sizes = {}
for n in (os.getenv("BENCH_ROWS") or "400,800,1600"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(n) end

local s = assert(core.open_store(cfg))
local function median(t)
  table.sort(t)
  return t[math.ceil(#t / 2)]
end

-- Seconds and statements of one call (asserted to succeed).
local function timed(f, ...)
  local calls, t0 = s:calls(), system.monotime()
  assert(f(s, ...))
  return system.monotime() - t0, s:calls() - calls
end

-- Leases held by "A" on n fresh names, and their tokens.
local seq = 0
local function held(n)
  local names, tokens = {}, {}
  for i = 1, n do
    seq = seq + 1
    names[i] = ("j%06d"):format(seq)
  end
  local got = assert(s:acquire_all("A", names, 600000))
  for i, name in ipairs(names) do
    assert(got[name].ok)
    tokens[i] = got[name].token
  end
  return names, tokens
end

local base = 1700000000000
local function rows_of(job, n, outcome)
  local rows = {}
  for i = 1, n do
    base = base + 1000
    rows[i] = { job = job, scheduled_at = base, owner = "A", token = 1, outcome = outcome,
                started_at = base + 3, ended_at = base + 50, duration_ms = 47, exit_code = 0 }
  end
  return rows
end

-- warm: each statement once
do
  local names, tokens = held(1)
  assert(s:record_runs(rows_of("warm", 1, "ok")))
  assert(s:claim_runs("A", { { name = names[1], token = tokens[1], fire = 1 } },
    { { claim = 1, scheduled_at = 1, owner = "A", outcome = "running" } }))
end

io.write(("%s, table %s, %d trial(s) each, seconds (statements)\n"):format(
  os.getenv("LEASH_TEST_MSSQL"):gsub(":[^:]*:([^:]*)$", ":***:%1"), cfg.table, trials))
io.write(("%6s %18s %18s %18s %18s\n"):format("rows", "record (insert)", "record (update)",
  "claim 1 x N rows", "claim N x 1 row"))
for _, n in ipairs(sizes) do
  local t = { {}, {}, {}, {} }
  local st = {}
  for _ = 1, trials do
    local job = ("rec%06d"):format(seq)
    seq = seq + 1
    local rows = rows_of(job, n, "ok")
    t[1][#t[1] + 1], st[1] = timed(s.record_runs, rows)
    for _, r in ipairs(rows) do r.outcome, r.exit_code = "failed", 1 end
    t[2][#t[2] + 1], st[2] = timed(s.record_runs, rows)

    local names, tokens = held(1)
    local fire = base + 1000 * (n + 1)
    local runs = {}             -- as a catch-up accounts them: a time each, the rest shared
    for i = 1, n do
      runs[i] = { claim = 1, scheduled_at = fire - 1000 * i, owner = "A", token = tokens[1],
                  outcome = "missed", error = "older than missed_within" }
    end
    t[3][#t[3] + 1], st[3] = timed(s.claim_runs, "A",
      { { name = names[1], token = tokens[1], fire = fire } }, runs)

    names, tokens = held(n)
    local claims, one = {}, {}
    for i = 1, n do
      claims[i] = { name = names[i], token = tokens[i], fire = fire }
      one[i] = { claim = i, scheduled_at = fire, owner = "A", outcome = "running" }
    end
    t[4][#t[4] + 1], st[4] = timed(s.claim_runs, "A", claims, one)
  end
  local cols = {}
  for k = 1, 4 do cols[k] = ("%.3f (%d)"):format(median(t[k]), st[k]) end
  io.write(("%6d %18s %18s %18s %18s\n"):format(n, cols[1], cols[2], cols[3], cols[4]))
  io.flush()
end
s:close()
