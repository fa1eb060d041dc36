-- End to end: a holder killed with kill -9 leaves fires nobody ran; the
-- replica that takes the lease over reads the fire cursor and runs them as
-- catch-up runs (missed = "all"), and no fire runs twice.  SQLite only: the
-- claim and the cursor are the same statement's on every provider
-- (store_conformance_spec.lua), the scheduler's decisions are specced on a
-- fake clock in sched_spec.lua.
local L = require "e2e"
local R = require "replicas"

local JOB = [[
local OUT = %q
return {
  every = "1s",
  missed = "all",
  run = function(ctx)
    local f = assert(io.open(OUT, "a"))
    f:write(("%%s %%d %%s\n"):format(ctx.replica, ctx.scheduled_at, tostring(ctx.catchup)))
    f:close()
  end,
}
]]

-- The runs recorded: { replica, at, catchup } in the order they started.
local function runs(out)
  local list = {}
  for _, l in ipairs(L.lines(out)) do
    local rep, at, c = l:match("^(%S+) (%d+) (%a+)$")
    if rep then list[#list + 1] = { replica = rep, at = tonumber(at), catchup = c == "true" } end
  end
  return list
end

describe("catch-up end to end on sqlite", function()
  local procs = {}
  after_each(function() R.stop_all(procs); procs = {} end)

  it("kill -9 of the holder: the fires in the gap run as catch-up runs on the new holder, none twice", function()
    local p = { provider = "sqlite", path = (os.getenv("LEASH_TEST_TMP") or "/tmp") .. "/catchup.db" }
    local tbl = ("catchup_%d"):format(math.random(1, 1e6))
    local d = L.dir { config = R.config(p, tbl) }
    local out = d.out "rec"
    d.write_job("rec", JOB:format(out))
    procs = R.start_replicas(d, 2)
    local h = R.wait_holder(procs, p, tbl)
    -- Kill it just after one of its runs started: with a 2 s lease renewed
    -- every 667 ms, the next fire falls before the takeover.
    local n0 = #runs(out)
    assert(L.wait_for(function() return #runs(out) >= n0 + 2 end, 5), "the holder ran nothing")
    L.sleep(0.05)
    for _, pid in ipairs(R.tree(h.pid)) do L.kill(pid, "KILL") end
    local killed_at = math.floor(L.now())
    local other
    for _, proc in ipairs(procs) do if proc ~= h then other = proc end end
    assert(L.wait_for(function()
      for _, r in ipairs(runs(out)) do
        if r.replica == other.owner and r.at > killed_at + 2 and not r.catchup then return true end
      end
    end, 8), "the new holder ran no regular fire")
    local list, seen, catchups = runs(out), {}, 0
    for _, r in ipairs(list) do
      assert.is_nil(seen[r.at], "fire " .. r.at .. " ran twice")
      seen[r.at] = true
      if r.catchup then
        catchups = catchups + 1
        assert.equal(other.owner, r.replica, "a catch-up run on the old holder")
        assert.is_true(r.at > killed_at - 1, "a catch-up of a fire before the kill")
      end
    end
    assert.is_true(catchups >= 1, "no catch-up run")
    for t = list[1].at, list[#list].at do
      assert.is_true(seen[t], ("fire %d did not run"):format(t))
    end
    assert.truthy(other:log_text():find("catching up %d+ missed fire"))
  end)

  it("a new job's first fire, passed while its first holder was dead, runs once on the next", function()
    local p = { provider = "sqlite", path = (os.getenv("LEASH_TEST_TMP") or "/tmp") .. "/catchup.db" }
    local tbl = ("fresh_%d"):format(math.random(1, 1e6))
    local c = R.config(p, tbl)
    c.singleton.lease, c.singleton.retry = "1s", "200ms"
    local d = L.dir { config = c }
    local out = d.out "rec"
    local first = L.spawn(d)
    -- The job appears just after a second begins; its first fire is at the next.
    L.sleep_to_second(0.05)
    d.write_job("rec", JOB:format(out))
    first:signal("HUP")
    assert(first:wait_log("holding the lease", 0.5), "the first replica took nothing")
    local fire = math.floor(L.now()) + 1
    L.sleep(0.1)
    for _, pid in ipairs(R.tree(first.pid)) do L.kill(pid, "KILL") end
    first:wait(5)
    assert.is_true(L.now() < fire, "too slow: the first fire came before the kill")
    local other = L.spawn(d)
    procs = { other }
    assert(L.wait_for(function() return #runs(out) >= 2 end, 6), "the new holder ran too little")
    local list = runs(out)
    assert.equal(fire, list[1].at, "the first fire did not run")
    assert.is_true(list[1].catchup, "the first fire ran, but not as a catch-up")
    for i = 2, #list do assert.is_true(list[i].at > fire) end
  end)
end)
