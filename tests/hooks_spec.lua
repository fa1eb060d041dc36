-- End to end, real `leash run` replicas on every provider: on_failure and
-- on_recover run once per change of the job's health for the whole
-- cluster (the store decides), a kill -9 of the holder neither repeats nor
-- loses one, and a hook that errors changes nothing for the job.
local L = require "e2e"
local R = require "replicas"

-- The body fails while MODE says "fail"; each hook appends a line to HOOKS.
local JOB = [[
local MODE, RUNS, HOOKS = %q, %q, %q
local function append(path, line)
  local f = assert(io.open(path, "a"))
  f:write(line, "\n")
  f:close()
end
return {
  every = "1s",
  run = function(ctx)
    local f = io.open(MODE)
    local mode = f and f:read("l") or "ok"
    if f then f:close() end
    append(RUNS, ctx.replica .. " " .. mode)
    if mode == "fail" then error("the body fails on purpose") end
  end,
  on_failure = function(ctx, run)
    append(HOOKS, ("on_failure %%s %%s %%s %%d %%s"):format(ctx.replica, ctx.hook, run.outcome,
      run.scheduled_at, run.error or "-"))
  end,
  on_recover = function(ctx, run)
    append(HOOKS, ("on_recover %%s %%s %%s %%d"):format(ctx.replica, ctx.hook, run.outcome,
      run.scheduled_at))
    error("this hook fails too")
  end,
}
]]

local function hooks(path)
  local out = {}
  for _, l in ipairs(L.lines(path)) do
    local kind, rep, rest = l:match("^(%S+) (%S+) (.*)$")
    out[#out + 1] = { kind = kind, replica = rep, rest = rest }
  end
  return out
end

local function count(list, kind)
  local n = 0
  for _, h in ipairs(list) do if h.kind == kind then n = n + 1 end end
  return n
end

-- Lines "replica mode" the bodies wrote since line from.
local function runs_since(path, from)
  local out = {}
  for i, l in ipairs(L.lines(path)) do
    if i > from then
      local rep, mode = l:match("^(%S+) (%a+)$")
      out[#out + 1] = { replica = rep, mode = mode }
    end
  end
  return out
end

for _, p in ipairs(R.list_of()) do
  describe("failure hooks end to end on " .. p.provider, function()
    local procs = {}
    after_each(function() R.stop_all(procs); procs = {} end)

    it("once per change for the cluster, across a kill -9 of the holder; a failing hook changes nothing", function()
      local tbl = ("hooks_%d"):format(math.random(1, 1e8))
      local c = R.config(p, tbl)
      c.singleton.lease, c.singleton.retry = "1s", "200ms"
      local d = L.dir { config = c }
      d.password = p.password
      local mode, runs, hooked = d.out "mode", d.out "runs", d.out "hooks"
      d.write_job("rec", JOB:format(mode, runs, hooked))
      L.write(mode, "ok\n")
      procs = R.start_replicas(d, 2)
      local h = R.wait_holder(procs, p, tbl)
      assert(L.wait_for(function() return #L.lines(runs) >= 2 end, 5), "nothing ran")
      assert.same({}, hooks(hooked), "no hook while the job is ok")

      L.write(mode, "fail\n")
      assert(L.wait_for(function() return count(hooks(hooked), "on_failure") >= 1 end, 5),
        "on_failure never ran")
      local first = hooks(hooked)[1]
      assert.equal(h.owner, first.replica)
      assert.matches("^on_failure failed %d+ .*the body fails on purpose", first.rest)
      -- More failing runs: no second on_failure.
      local n = #L.lines(runs)
      assert(L.wait_for(function() return #L.lines(runs) >= n + 2 end, 5))

      -- The holder dies while the job fails; the other takes over and
      -- fails too: the store says failing already.
      for _, pid in ipairs(R.tree(h.pid)) do L.kill(pid, "KILL") end
      h:wait(5)
      local other = procs[1] == h and procs[2] or procs[1]
      n = #L.lines(runs)
      assert(L.wait_for(function()
        local got = 0
        for _, r in ipairs(runs_since(runs, n)) do
          if r.replica == other.owner and r.mode == "fail" then got = got + 1 end
        end
        return got >= 2
      end, 8), "the new holder ran no failing run")
      assert.equal(1, count(hooks(hooked), "on_failure"), "on_failure ran again after the handover")

      L.write(mode, "ok\n")
      assert(L.wait_for(function() return count(hooks(hooked), "on_recover") >= 1 end, 5),
        "on_recover never ran")
      local rec
      for _, x in ipairs(hooks(hooked)) do if x.kind == "on_recover" then rec = x end end
      assert.equal(other.owner, rec.replica)
      assert.matches("^on_recover ok %d+", rec.rest)
      -- The hook raised: logged, and the job goes on; no second on_recover.
      n = #L.lines(runs)
      assert(L.wait_for(function() return #L.lines(runs) >= n + 2 end, 5), "the job stopped running")
      assert.equal(1, count(hooks(hooked), "on_recover"))
      assert.equal(1, count(hooks(hooked), "on_failure"))
      assert.truthy(other:log_text():find("on_recover failed: [^\n]*this hook fails too"))
      assert.truthy(other:log_text():find("hook on_recover%] started pid="))
    end)
  end)
end
