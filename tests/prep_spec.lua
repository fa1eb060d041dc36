-- End to end: a fire's process is forked ahead of the fire (src/plan/sched.c's
-- prepare, src/launch/runner.c's runner_prepare) and waits, doing nothing, until
-- the fire starts it; real `leash run` processes, singleton mode off.  When
-- the forks ahead happen is sched_spec's ("forking ahead", on a fake clock);
-- here: that the waiting process is the run, that nothing of it runs before
-- the fire, that it never outlives leash, and the descriptor limits.
local L = require "e2e"

-- The pids of leash's children that are not running a body: those forked
-- ahead wait in a futex ("S" in /proc/PID/stat), and have not exec'd.
local function waiting_children(pid)
  local out = {}
  for _, c in ipairs(L.children(pid)) do
    if L.alive(c) then out[#out + 1] = c end
  end
  return out
end

-- A job every second whose body records its pid, the fire it ran for and
-- when it started.
local function recording(out)
  return ([[
return { every = "1s", run = function(ctx)
  local f = io.open("/proc/self/stat")
  local pid = f:read("l"):match("^%%d+")
  f:close()
  f = io.open(%q, "a")
  f:write(("%%s %%d %%.6f %%d\n"):format(pid, ctx.scheduled_at, ctx.now(), ctx.run_id))
  f:close()
end }]]):format(out)
end

local function runs(path)
  local got = {}
  for _, l in ipairs(L.lines(path)) do
    local pid, at, now, id = l:match("^(%d+) (%d+) (%S+) (%d+)$")
    if pid then
      got[#got + 1] = { pid = tonumber(pid), at = tonumber(at), now = tonumber(now),
                        id = tonumber(id) }
    end
  end
  return got
end

describe("a fire's process forked ahead", function()
  it("is there before the fire, waiting, and is the fire's run; the log knows it from then", function()
    local d = L.dir { config = { leash = { grace = "1s" } } }
    local out = d.out "tick"
    d.write_job("tick", recording(out))
    local p = L.spawn(d)
    finally(function() p:stop(10) end)
    assert(p:wait_log("started pid=", 5), p:log_text())
    -- 25 ms before a whole second the process of its fire waits (forked at
    -- least 50 ms before it); once the second came, that pid ran it.  A
    -- look that ends past the second (a loaded machine) is not counted,
    -- and on a loaded machine a fork may come later than the look: up to
    -- 20 looks, until 3 of them saw the fire's process.
    local seen = {}
    local function matched()
      local n = 0
      for _, r in ipairs(runs(out)) do
        -- (A pid seen that ran an earlier fire was that fire's run, late.)
        if seen[r.pid] and seen[r.pid] == r.at then
          n = n + 1
          assert.is_true(r.now >= r.at, "nothing of the body ran before the fire")
          assert.matches("[tick run " .. r.id .. "] started pid=" .. r.pid, p:log_text(), 1, true)
        end
      end
      return n
    end
    for _ = 1, 20 do
      L.sleep_to_second(0.975)
      local t0 = L.now()
      local kids = waiting_children(p.pid)
      if math.floor(L.now()) == math.floor(t0) then
        for _, c in ipairs(kids) do seen[c] = math.floor(t0) + 1 end
      end
      L.sleep(0.2)
      if matched() >= 3 then break end
    end
    L.sleep(1.2)
    local n = matched()
    assert.is_true(n >= 3, ("%d fires ran in a process seen waiting before them\n%s")
      :format(n, p:log_text()))
    assert.is_nil(p:log_text():find("died before it", 1, true))
  end)

  it("is not there with [leash] prefork = false: each fire forks its run at its time, and runs", function()
    local d = L.dir { config = { leash = { grace = "1s", prefork = "false" } } }
    local out = d.out "tick"
    d.write_job("tick", recording(out))
    local p = L.spawn(d)
    finally(function() p:stop(10) end)
    assert(p:wait_log("started pid=", 5), p:log_text())
    -- 25 ms before whole seconds: any child there is a run of a fire that
    -- fell before the look (late on a loaded machine), never a later one's.
    local seen = {}
    for _ = 1, 4 do
      L.sleep_to_second(0.975)
      local t0 = L.now()
      for _, c in ipairs(waiting_children(p.pid)) do seen[c] = t0 end
    end
    L.sleep(1.2)
    local got = runs(out)
    assert.is_true(#got >= 4, ("only %d runs\n%s"):format(#got, p:log_text()))
    for _, r in ipairs(got) do
      assert.is_true(r.now >= r.at, "nothing of the body ran before the fire")
      if seen[r.pid] then
        assert.is_true(r.at <= seen[r.pid] * 1000, ("pid %d, seen before the fire %d, ran it"):format(r.pid, r.at))
      end
    end
  end)

  it("in singleton mode gets its start once the fire is claimed, and goes at the fire by itself", function()
    -- leash is stopped (SIGSTOP, its runs' processes are not) from 1 to 3
    -- ms before a fire to 300 ms after it, six times: when the stop came
    -- after the claim (the claim goes out at least 10 ms ahead), the run
    -- started at its time all the same, while leash was stopped; and
    -- every fire ran once, whether the run ended before leash's turn came
    -- or not.
    local d = L.dir { config = {
      leash = { grace = "1s" },
      singleton = { enabled = "true", lease = "5s" },
      store = { provider = "sqlite" },
      sqlite = { path = "leases.db" },
    } }
    local out = d.out "tick"
    d.write_job("tick", recording(out))
    local p = L.spawn(d)
    finally(function() p:stop(10) end)
    assert(p:wait_log("started pid=", 10), p:log_text())
    local stops = {}
    for k = 1, 6 do
      L.sleep_to_second(0.9994 - 0.0004 * k)
      local t0 = L.now()
      L.kill(p.pid, "STOP")
      L.sleep(0.3)
      local t1 = L.now()
      L.kill(p.pid, "CONT")
      stops[k] = { t0, t1 }
      L.sleep(0.4)
    end
    L.sleep(1.5)
    local alone, at = 0, {}
    for _, r in ipairs(runs(out)) do
      assert.is_nil(at[r.at], "the fire at " .. r.at .. " ran twice")
      at[r.at] = true
      assert.is_true(r.now >= r.at, "nothing of the body ran before the fire")
      for _, s in ipairs(stops) do
        if r.at > s[1] and r.now < s[2] then alone = alone + 1 end
      end
    end
    assert.is_true(alone >= 1, "no run started while leash was stopped:\n" .. p:log_text():sub(-3000))
    local finished = {}
    for _, l in ipairs(p:log_lines()) do
      local id = l:match("%[tick run (%d+)%] finished")
      if id then
        assert.is_nil(finished[id], "run " .. id .. " ended twice")
        finished[id] = true
      end
    end
    assert.is_nil(p:log_text():find("died before it", 1, true))
  end)

  it("waits, and runs its body, on every CPU leash may use", function()
    local function cpus(pid)
      local f = assert(io.open("/proc/" .. pid .. "/status"))
      local list = f:read("a"):match("Cpus_allowed_list:%s*(%S+)")
      f:close()
      return list
    end
    local all = cpus("self")
    local d = L.dir { config = { leash = { grace = "1s" } } }
    local out = d.out "tick"
    d.write_job("tick", ([[
return { every = "1s", run = function(ctx)
  local f = io.open("/proc/self/status")
  local list = f:read("a"):match("Cpus_allowed_list:%%s*(%%S+)")
  f:close()
  f = io.open(%q, "a")
  f:write(list, "\n")
  f:close()
end }]]):format(out))
    local p = L.spawn(d)
    finally(function() p:stop(10) end)
    assert(p:wait_log("started pid=", 5), p:log_text())
    local waited = 0
    for _ = 1, 3 do
      L.sleep_to_second(0.975)
      for _, c in ipairs(waiting_children(p.pid)) do
        local list = cpus(c)
        if list and not L.read("/proc/" .. c .. "/comm"):find("spawner", 1, true) then
          waited = waited + 1
          assert.equal(all, list, "a waiting process on every CPU leash may use")
        end
      end
    end
    assert.is_true(waited >= 2, "no process seen waiting")
    L.sleep(1.2)
    local bodies = L.lines(out)
    assert.is_true(#bodies >= 3, #bodies .. " runs")
    for _, list in ipairs(bodies) do assert.equal(all, list, "a body runs on every CPU leash may use") end
  end)

  it("goes with leash when leash is killed (SIGKILL) before the fire", function()
    local d = L.dir { config = { leash = { grace = "1s" } } }
    d.write_job("tick", recording(d.out "tick"))
    local p = L.spawn(d)
    assert(p:wait_log("started pid=", 5), p:log_text())
    local waiting = {}
    for _ = 1, 5 do
      L.sleep_to_second(0.975)
      waiting = waiting_children(p.pid)
      if #waiting > 0 then break end
    end
    assert.is_true(#waiting > 0, "no process was waiting for the next fire")
    p:signal("KILL")
    p:wait(5)
    -- It sees its parent gone within a second and leaves, running nothing.
    local n = #runs(d.out "tick")
    assert(L.wait_for(function()
      for _, c in ipairs(waiting) do if L.alive(c) then return false end end
      return true
    end, 3), "a process forked ahead outlived leash")
    assert.equal(n, #runs(d.out "tick"), "it ran the fire after leash died")
  end)

  it("leash raises its own open-files limit for a thousand runs' pipes; a run gets the soft one back", function()
    local d = L.dir { config = { leash = { grace = "1s" } } }
    local out = d.out "limits"
    d.write_job("limits", ([[
return { every = "1s", run = function(ctx)
  local _, _, out = ctx.exec { "sh", "-c", "ulimit -Sn" }
  local f = io.open(%q, "a")
  f:write(out)
  f:close()
end }]]):format(out))
    local p = L.spawn_cmd(("ulimit -Sn 512; exec %s run -c %s"):format(L.quote(L.bin), L.quote(d.config)))
    finally(function() p:stop(10) end)
    assert(L.wait_for(function() return L.exists(out) and #L.lines(out) > 0 end, 5), p:log_text())
    local limits = L.read(("/proc/%d/limits"):format(p.pid))
    local soft, hard = limits:match("Max open files%s+(%d+)%s+(%d+)")
    assert.equal(hard, soft, limits)
    assert.equal("512", L.lines(out)[1])
  end)
end)
