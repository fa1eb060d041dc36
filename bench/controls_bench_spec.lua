-- bench/controls_bench_spec.lua: how soon a control takes effect, and what
-- the controls' version poll costs (issue 38 item 2: "controls take effect
-- within a second on every provider").  Per provider and job count
-- (BENCH_JOBS, default 100): 3 replicas with the default lease (15 s,
-- renew 5 s), one job firing every second and the rest hourly; after 20 s
-- (BENCH_WINDOW) of steady state, 5 triggers of a job that never fires,
-- 0-1 s apart.  Prints the statements per second of each replica over its
-- whole run (its log's count at exit: the start's acquisitions included)
-- and each trigger's delay, the ledger's manual run's start minus its
-- control row (both on the database's clock).  A figure, not a spec: run
-- alone, on a quiet machine, with a build before and after the change:
--   LEASH_BUILD=build tests/run.sh bench/controls_bench_spec.lua
-- bench/elect_results.txt has recorded runs.
local L = require "e2e"
local R = require "replicas"

local COUNTS = {}
for n in (os.getenv("BENCH_JOBS") or "100"):gmatch("%d+") do COUNTS[#COUNTS + 1] = tonumber(n) end
local WINDOW = tonumber(os.getenv("BENCH_WINDOW") or "20")

local function of(rows, outcome, job)
  local out = {}
  for _, r in ipairs(rows) do
    if r.outcome == outcome and r.job == job then out[#out + 1] = r end
  end
  table.sort(out, function(a, b) return a.scheduled_at < b.scheduled_at end)
  return out
end

for _, p in ipairs(R.list_of()) do
  describe("measure " .. p.provider, function()
    local procs = {}
    after_each(function() R.stop_all(procs) end)
    for _, n in ipairs(COUNTS) do
      it(n .. " jobs", function()
        local tbl = ("cbe_%d"):format(math.random(1, 1e8))
        local c = R.config(p, tbl)
        c.leash.log_level = "info"
        c.singleton = { enabled = "true", retry = "500ms", spread = "false" }
        local d = L.dir { config = c }
        d.password = p.password
        d.write_job("probe", 'return { every = "1s", run = function() end }')
        d.write_job("trig", 'return { cron = "0 0 29 2 *", run = function() end }')
        for i = 3, n do
          d.write_job(("idle-%04d"):format(i), 'return { every = "1h", run = function() end }')
        end
        local t0 = L.now()
        procs = R.start_replicas(d, 3)
        assert(L.wait_for(function() return #R.rows(p, tbl) >= math.max(n, 2) end, 60),
          "not all jobs were taken")
        L.sleep(WINDOW)
        for _ = 1, 5 do
          L.sleep(math.random())
          R.leash_in(d, p, "trigger", "trig")
        end
        L.sleep(3)
        local stmts = {}
        for _, proc in ipairs(procs) do
          proc:stop(20)
          local got, secs = proc:log_text():match("lease store: (%d+) statements in ([%d.]+)s")
          stmts[#stmts + 1] = got and ("%.2f"):format(tonumber(got) / tonumber(secs)) or "?"
        end
        local rows = R.ledger(p, tbl, "trig")
        local ctl, man, delays = of(rows, "control", "trig"), of(rows, "manual", "trig"), {}
        for k = 1, math.min(#ctl, #man) do
          delays[#delays + 1] = tostring(man[k].started_at - ctl[k].scheduled_at)
        end
        print(("\nMEASURE %s %d jobs: statements/s per replica %s (%.0f s runs); trigger -> "
          .. "run start (ms): %s"):format(p.provider, n, table.concat(stmts, " "),
          L.now() - t0, table.concat(delays, " ")))
      end)
    end
  end)
end
