-- Failure hooks without the election: a bad hook key is refused with its
-- file and line, and with singleton mode off each process runs its own
-- on_failure / on_recover once per change.  (The cluster-wide decision in
-- the store: hooks_spec.lua.)
local L = require "e2e"

describe("failure hooks", function()
  it("on_failure or on_recover that is not a function: leash check names the file, line and key", function()
    local d = L.dir { jobs = { bad = 'return {\n  every = "1s",\n  run = function() end,\n  on_failure = 3,\n'
      .. '  on_recover = "curl",\n}\n' } }
    local code, out = L.leash { "check", "-c", d.config }
    assert.equal(1, code)
    assert.matches("bad%.lua:4: on_failure: expected a function%(ctx, run%), got a number", out)
    assert.matches("bad%.lua:5: on_recover: expected a function%(ctx, run%), got a string", out)
  end)

  it("40 jobs failing at the same instant: every on_failure runs once, no lease is lost", function()
    local d = L.dir { config = { leash = { grace = "500ms" },
      -- (3 s: a busy disk's fsync may hold a SQLite renew up over a second)
      singleton = { enabled = "true", lease = "3s", retry = "200ms" },
      store = { provider = "sqlite" }, sqlite = { path = "leases.db" } } }
    local hooked = d.out "hooks"
    for i = 1, 40 do
      d.write_job(("j%02d"):format(i), ([[
local HOOKS = %q
return {
  every = "1s",
  run = function() error("down") end,
  on_failure = function(ctx, run)
    local f = assert(io.open(HOOKS, "a")); f:write(ctx.job, "\n"); f:close()
  end,
}
]]):format(hooked))
    end
    local proc = L.spawn(d)
    -- A failed assertion must not leave the replica running (it would load
    -- every later spec on the machine with 40 failing jobs a second).
    finally(function() if proc:alive() then proc:stop(10) end end)
    -- At most 16 changes are recorded a loop turn; the rest at their next run.
    assert(L.wait_for(function() return #L.lines(hooked) >= 40 end, 8),
      "only " .. #L.lines(hooked) .. " of 40 on_failure hooks ran")
    L.sleep(1.5)
    local seen = {}
    for _, name in ipairs(L.lines(hooked)) do
      assert.is_nil(seen[name], name .. ": on_failure twice")
      seen[name] = true
    end
    assert.equal(40, #L.lines(hooked))
    assert.is_nil(proc:log_text():find("lease lost", 1, true), "a lease was lost")
    assert.equal(0, proc:stop(10))
  end)

  it("singleton mode off: each change runs its hook once, with the run's fields", function()
    local d = L.dir { config = { leash = { grace = "500ms" }, singleton = { enabled = "false" } } }
    local mode, hooked = d.out "mode", d.out "hooks"
    d.write_job("flaky", ([[
local MODE, HOOKS = %q, %q
local function append(line)
  local f = assert(io.open(HOOKS, "a")); f:write(line, "\n"); f:close()
end
return {
  every = "1s",
  run = function(ctx)
    local f = io.open(MODE); local m = f and f:read("l"); if f then f:close() end
    if m == "fail" then error("nope") end
  end,
  on_failure = function(ctx, run)
    print("hook's run_id " .. ctx.run_id)
    append(("on_failure %%s %%s %%s %%s"):format(run.job, run.outcome, run.error, tostring(run.duration_ms)))
  end,
  on_recover = function(ctx, run) append("on_recover " .. run.outcome) end,
}
]]):format(mode, hooked))
    L.write(mode, "fail\n")
    local proc = L.spawn(d)
    -- A failed assertion must not leave the replica running (it would load
    -- every later spec on the machine with 40 failing jobs a second).
    finally(function() if proc:alive() then proc:stop(10) end end)
    assert(L.wait_for(function() return #L.lines(hooked) >= 1 end, 5), "on_failure never ran")
    L.sleep(2.2)
    assert.equal(1, #L.lines(hooked), "one on_failure for three failing runs")
    assert.matches("^on_failure flaky failed .*nope %d+$", L.lines(hooked)[1])
    L.write(mode, "ok\n")
    assert(L.wait_for(function() return #L.lines(hooked) >= 2 end, 5), "on_recover never ran")
    L.sleep(2.2)
    assert.same({ "on_recover ok" }, { L.lines(hooked)[2] })
    assert.equal(2, #L.lines(hooked))
    assert.equal(0, proc:stop(10))
    -- A hook is no run: logged as [flaky hook on_failure], its output too,
    -- with no run number of its own (ctx.run_id 0; the runs' numbers go on
    -- without a gap)
    local log = proc:log_text()
    assert.matches("%[flaky hook on_failure%] started pid=%d+", log)
    assert.matches("%[flaky hook on_failure%] hook's run_id 0 stream=stdout", log)
    assert.matches("%[flaky hook on_recover%] started pid=%d+", log)
    assert.is_nil(log:find("hook started", 1, true), log)
    local ids = {}
    for id in log:gmatch("%[flaky run (%d+)%] started") do ids[#ids + 1] = tonumber(id) end
    assert.is_true(#ids >= 5, log)
    for i = 2, #ids do assert.equal(ids[i - 1] + 1, ids[i], "a run number taken by a hook") end
  end)
end)
