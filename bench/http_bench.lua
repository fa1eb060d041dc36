-- bench/http_bench.lua: what the HTTP server costs the scheduler, on
-- PostgreSQL, one replica with [http] listen, 1,000 jobs every 1m plus 20
-- jobs every 1s (their start lateness recorded inside the child), lease 3s
-- (renew every 1s).  Two windows of BENCH_WINDOW seconds (at most 50), each
-- from second 5 of a minute so that neither holds the minute's burst of
-- 1,000 fires: without requests, then with 50 requests/s on / and /metrics
-- (bench/http_load.py).  Prints for each: fire lateness p50/p99/max, the
-- renewal interval's overshoot past renew (read from the lease row's
-- renewed_at, polled every 100 ms) p50/p99, and the ratios loaded / idle;
-- the parent's and the server's RSS (medians of one sample a second); then
-- the parent's RSS with [http] listen empty, the same jobs, for comparison.
-- Run with `make bench-http` (BENCH_WINDOW=45 BENCH_ROUNDS=2).  Starts its own PostgreSQL
-- unless LEASH_TEST_PG_CONNINFO is set.
local L = require "e2e"
local core = require "leash.core"
local B = require "common"
local H = require "http"

local pg = assert(os.getenv("LEASH_TEST_PG_CONNINFO"), "LEASH_TEST_PG_CONNINFO is not set")
local WINDOW = math.min(50, tonumber(os.getenv("BENCH_WINDOW") or "45"))
local SLOW, FAST = tonumber(os.getenv("BENCH_SLOW") or "1000"), tonumber(os.getenv("BENCH_FAST") or "20")
local RATE = tonumber(os.getenv("BENCH_RATE") or "50")
local ROOT = os.getenv("LEASH_ROOT") or "."
local LEASE, RENEW = 3000, 1000
local pct, rss_kb = B.pct, B.rss_kb

local port = H.free_port()
local tbl = ("bench_http_%d"):format(os.time() % 100000)
local function config(listen)
  return L.ini {
    leash = { grace = "1s", jobs = "jobs" },
    singleton = { enabled = "true", lease = LEASE .. "ms", renew = RENEW .. "ms" },
    store = { provider = "postgres", table = tbl },
    postgres = { conninfo = pg },
    http = { listen = listen },
  }
end
local d = L.dir { config = config("127.0.0.1:" .. port) }
local lateness = d.out "late"
local FASTJOB = B.lateness_job(lateness)
for i = 1, FAST do d.write_job(("fast-%03d"):format(i), FASTJOB) end
for i = 1, SLOW do d.write_job(("slow-%04d"):format(i), 'return { every = "1m", run = function() end }') end

local s = assert(core.open_store { provider = "postgres", conninfo = pg, table = tbl })
local function start()
  local p = L.spawn(d)
  p.owner = assert(L.wait_for(function() return p:log_text():match("replica (%S+),") end, 10))
  assert(L.wait_for(function()
    local n = 0
    for _, r in ipairs(assert(s:list())) do if r.owner == p.owner then n = n + 1 end end
    return n >= FAST + SLOW
  end, 180), "not all jobs were taken")
  return p
end
local proc = start()
local server = assert(tonumber(assert(L.wait_for(function()
  return proc:log_text():match("server pid (%d+)")
end, 10))))
L.sleep(3)

-- Sleeps until second 5 of the next minute: a window from there holds no
-- burst of the every = "1m" jobs.
local function align()
  L.sleep((65 - os.time() % 60) % 60 + 0.01)
end

-- The parent's side of lateness: when its log says a fast job's run
-- started, past the whole second it was due at (every = "1s" fires on whole
-- seconds), for the lines logged between t0 and t1.
local function parent_late(t0, t1)
  local out = {}
  for _, l in ipairs(proc:grep("%[fast%-%d+ run %d+%] started pid=")) do
    local t = L.log_time(l)
    if t and t >= t0 and t <= t1 and t % 1 < 0.5 then out[#out + 1] = t % 1 * 1000 end
  end
  return out
end

-- One window: lateness in the child and in the parent (ms), renewal
-- overshoots (ms), RSS, and what the load generator said.
local function window(load)
  align()
  L.write(lateness, "")
  local gen
  if load then
    gen = L.spawn_cmd(("exec python3 %s %d %d %d / /metrics"):format(
      L.quote(ROOT .. "/bench/http_load.py"), port, RATE, WINDOW))
  end
  local t0 = L.now()
  local t_end, last, over, rp, rs, next_rss = t0 + WINDOW, nil, {}, {}, {}, 0
  while L.now() < t_end do
    for _, r in ipairs(assert(s:list())) do
      if r.name == "fast-001" then
        if last and r.renewed_at ~= last then over[#over + 1] = r.renewed_at - last - RENEW end
        last = r.renewed_at
      end
    end
    if L.now() >= next_rss then
      rp[#rp + 1], rs[#rs + 1], next_rss = rss_kb(proc.pid), rss_kb(server), L.now() + 1
    end
    L.sleep(0.1)
  end
  local said = ""
  if gen then gen:wait(30); said = L.read(gen.log):gsub("\n$", "") end
  local late = B.lateness_ms(lateness)
  return { late = late, plate = parent_late(t0, t_end), over = over, said = said,
           rss = { B.median(rp), B.median(rs) } }
end

-- BENCH_ROUNDS rounds of an idle window then a loaded one, pooled: the
-- machine's own noise (other work on it) falls on both alike.
local function pool(into, w)
  for k, v in pairs(w) do
    if type(v) == "table" and k ~= "rss" then
      into[k] = into[k] or {}
      for _, x in ipairs(v) do into[k][#into[k] + 1] = x end
    else
      into[k] = v
    end
  end
end
local idle, busy = {}, {}
for _ = 1, tonumber(os.getenv("BENCH_ROUNDS") or "2") do
  pool(idle, window(false))
  pool(busy, window(true))
end
proc:stop(60)
-- The same jobs without the server.
L.write(d.config, config(""))
proc = start()
align()
local off = {}
for _ = 1, WINDOW do off[#off + 1] = rss_kb(proc.pid); L.sleep(1) end
proc:stop(60)
s:close()

print(("http benchmark: PostgreSQL on loopback, 1 replica, %d jobs every 1m + %d every 1s, lease %dms renew %dms, %ds windows; %s"):format(
  SLOW, FAST, LEASE, RENEW, WINDOW, os.date("!%Y-%m-%dT%H:%M:%SZ")))
print(("load: %d requests/s on / and /metrics: %s"):format(RATE, busy.said))
for _, w in ipairs { { "idle", idle }, { "load", busy } } do
  local x = w[2]
  print(("%s: fire lateness in the child p50 / p99 / max ms: %.2f / %.2f / %.2f over %d runs; in the parent (fork) p50 / p99: %.0f / %.0f over %d; renewal overshoot p50 / p99 ms: %.0f / %.0f over %d renewals"):format(
    w[1], pct(x.late, 0.5), pct(x.late, 0.99), pct(x.late, 1), #x.late, pct(x.plate, 0.5),
    pct(x.plate, 0.99), #x.plate, pct(x.over, 0.5), pct(x.over, 0.99), #x.over))
end
print(("ratio load / idle: fire lateness p99 %.2f in the child, %.2f in the parent; renewal overshoot p99 %.2f (renewal interval p99 %.3f)"):format(
  pct(busy.late, 0.99) / pct(idle.late, 0.99), pct(busy.plate, 0.99) / math.max(pct(idle.plate, 0.99), 1),
  pct(busy.over, 0.99) / math.max(pct(idle.over, 0.99), 1),
  (RENEW + pct(busy.over, 0.99)) / (RENEW + pct(idle.over, 0.99))))
print(("RSS (medians), %d jobs: parent with HTTP on %.1f MB (idle) / %.1f MB (load), with HTTP off %.1f MB; server %.1f MB (idle) / %.1f MB (load)"):format(
  SLOW + FAST, idle.rss[1] / 1024, busy.rss[1] / 1024, B.median(off) / 1024, idle.rss[2] / 1024,
  busy.rss[2] / 1024))
