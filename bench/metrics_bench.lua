-- bench/metrics_bench.lua: what /metrics costs.
--  1. Rendering: N job records (core.metrics_job, every family filled in:
--     runs of each outcome, durations, lateness, skips, a lease), rendered
--     RENDERS times in this process; p50/p99/max of one render and the
--     text's size.
--  2. Memory: a real `leash run` (singleton mode off, SQLite not opened)
--     with 0 and with N jobs that fire hourly: the parent's RSS and its
--     RssShmem, which is the metrics mapping's touched pages alone (it is the
--     parent's one shared anonymous mapping), per job.
-- Run with `make bench-metrics` (METRICS_JOBS=1000 METRICS_RENDERS=50).
local L = require "e2e"
local core = require "leash.core"
local B = require "common"

local N = tonumber(os.getenv("METRICS_JOBS") or "1000")
local RENDERS = tonumber(os.getenv("METRICS_RENDERS") or "50")

local function render_bench()
  local jobs = {}
  for i = 1, N do
    local m = core.metrics_job(("bench-job-%04d"):format(i))
    for _, o in ipairs { "ok", "failed", "timeout", "lost", "killed", "manual" } do
      m:run(o, i * 7 % 5000, 1800000000000 + i)
    end
    m:fire(1000, 1000 + i % 40)
    m:skip("skipped-overlap")
    m:skip("missed")
    m:lease(true)
    jobs[i] = m
  end
  local t, size = {}, 0
  for k = 1, RENDERS do
    local t0 = core.monotonic()
    local text = core.metrics()
    t[k] = (core.monotonic() - t0) * 1000
    size = #text
  end
  for _, m in ipairs(jobs) do m:remove() end
  print(("render, %d jobs: p50 %.2f ms  p99 %.2f ms  max %.2f ms over %d renders; %d bytes (%.0f a job)")
    :format(N, B.median(t), B.pct(t, 0.99), B.pct(t, 1), RENDERS, size, size / N))
end

local function shmem_kb(pid)
  return tonumber(L.read("/proc/" .. pid .. "/status"):match("RssShmem:%s*(%d+)")) or 0
end

-- The parent's RSS and RssShmem (kB) once n jobs are loaded.
local function leash_with(n)
  local jobs = {}
  for i = 1, n do
    jobs[("job-%04d"):format(i)] = 'return { every = "1h", singleton = false, run = function() end }'
  end
  local d = L.dir { config = { leash = { log_level = "info" } }, jobs = jobs }
  local p = L.spawn(d)
  assert(p:wait_log("loaded", 30) or n == 0, "leash did not load its jobs")
  L.sleep(1.0)
  local rss, shm = B.rss_kb(p.pid), shmem_kb(p.pid)
  p:stop(10)
  return rss, shm
end

render_bench()
local rss0, shm0 = leash_with(0)
local rss1, shm1 = leash_with(N)
print(("leash run parent: %d kB RSS (%d kB metrics) with 0 jobs, %d kB (%d kB metrics) with %d")
  :format(rss0, shm0, rss1, shm1, N))
print(("per job: %.0f bytes of RSS in all, %.0f bytes of it the metrics record")
  :format((rss1 - rss0) * 1024 / N, (shm1 - shm0) * 1024 / N))
