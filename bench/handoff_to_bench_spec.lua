-- bench/handoff_to_bench_spec.lua: how long a service is down across
-- leash handoff JOB --to REPLICA (issue 32 item 4: "a service restarts there
-- within 1 s"): 3 replicas with spread on, lease 3s, retry 500ms, one
-- service writing a line every 20 ms; 5 moves a provider, each to another
-- replica named (alternating, so some targets had handed the job off a
-- moment before); the figure is the old worker's last line to the new
-- worker's first.  A figure, not a spec: run alone, on a quiet machine,
--   LEASH_BUILD=build tests/run.sh bench/handoff_to_bench_spec.lua
-- bench/handoff_results.txt has recorded runs.
local L = require "e2e"
local R = require "replicas"
for _, p in ipairs(R.list_of()) do
  describe("measure " .. p.provider, function()
    local procs = {}
    after_each(function() R.stop_all(procs) end)
    it("moves", function()
      local tbl = ("hme_%d"):format(math.random(1, 1e8))
      local d = L.dir {}
      local out = d.out "worker"
      d.write_job("worker", ([[
local core = require "leash.core"
return { run = function(ctx)
  while true do
    local f = assert(io.open(%q, "a"))
    f:write(("%%s %%.0f\n"):format(ctx.replica, core.now() * 1e9)); f:close()
    ctx.sleep(0.02)
  end
end }]]):format(out))
      local cfgs = R.replica_configs(p, tbl, d, 3, { enabled = "true", lease = "3s", retry = "500ms" })
      for i = 1, 3 do procs[i] = R.start(cfgs[i], p.password) end
      local function holder()
        local r = R.lease_row(p, tbl, "worker")
        for i, proc in ipairs(procs) do if r and proc.owner == r.owner then return i end end
      end
      assert(L.wait_for(function() return holder() end, 20))
      L.sleep(7)
      local gaps = {}
      for k = 1, 5 do
        local a = assert(L.wait_for(function() return holder() end, 10))
        local t = (a + k % 2) % 3 + 1
        if t == a then t = a % 3 + 1 end
        assert(L.wait_for(function()
          return L.leash({ "handoff", "-c", cfgs[1], "worker", "--to", "r" .. t },
            { env = { LEASH_TEST_MSSQL_PASSWORD = p.password or "" } }) == 0 end, 10, 0.3))
        assert(L.wait_for(function() return holder() == t end, 10, 0.05))
        L.sleep(2)
        local last_old, first_new = 0, math.huge
        local lines = L.lines(out)
        for _, l in ipairs(lines) do
          local o, ns = l:match("^(%S+) (%d+)$")
          if o == procs[a].owner then last_old = math.max(last_old, tonumber(ns) / 1e9) end
        end
        for _, l in ipairs(lines) do
          local o, ns = l:match("^(%S+) (%d+)$")
          if o == procs[t].owner and tonumber(ns) / 1e9 > last_old then first_new = math.min(first_new, tonumber(ns) / 1e9) end
        end
        gaps[#gaps + 1] = ("%.0f"):format((first_new - last_old) * 1000)
        L.sleep(1)
      end
      print(("\nMEASURE %s service down across handoff --to (ms): %s"):format(p.provider, table.concat(gaps, " ")))
    end)
  end)
end
