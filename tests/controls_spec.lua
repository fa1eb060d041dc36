-- End to end, real `leash run` processes: the controls (leash pause,
-- resume, trigger, handoff) written to the store from the command line and
-- acted on by the holder on its renew round trip, each recorded in the run
-- ledger with who ran it.
local L = require "e2e"
local R = require "replicas"

local JOB = [[
local OUT = %q
return {
  %s,
  overlap = %q,
  run = function(ctx)
    local f = assert(io.open(OUT, "a"))
    f:write(("%%s %%s %%d\n"):format(ctx.replica, tostring(ctx.manual), math.floor(ctx.scheduled_at * 1000 + 0.5)))
    f:close()
    %s
  end,
}
]]

-- The bodies' records: { replica, manual, at } in order.
local function bodies(out)
  local list = {}
  for _, l in ipairs(L.lines(out)) do
    local rep, m, at = l:match("^(%S+) (%a+) (%d+)$")
    if rep then list[#list + 1] = { replica = rep, manual = m == "true", at = tonumber(at) } end
  end
  return list
end

local function open(p, tbl) return R.open(p, tbl, 2000) end

-- A schedule that does not fire while a spec runs (every = "1h" fired at the
-- top of the hour, and a trigger spec then counted two runs): 00:00 on
-- 29 February.
local QUIET = 'cron = "0 0 29 2 *"'


local ledger = R.ledger

-- A Lua pattern matching s as it is.
local function esc(s) return (s:gsub("%p", "%%%0")) end

local function of(rows, outcome)
  local out = {}
  for _, r in ipairs(rows) do if r.outcome == outcome then out[#out + 1] = r end end
  return out
end

for _, p in ipairs(R.list_of()) do
  describe("controls end to end on " .. p.provider, function()
    local procs, tbl, d, out
    before_each(function()
      procs = {}
      tbl = ("ctl_%d"):format(math.random(1, 1e8))
    end)
    after_each(function() R.stop_all(procs) end)

    local function setup(sched, overlap, body)
      local c = R.config(p, tbl)
      c.singleton = { enabled = "true", lease = "1s", retry = "200ms", spread = "false" }
      d = L.dir { config = c }
      d.password = p.password
      out = d.out "rec"
      d.write_job("rec", JOB:format(out, sched, overlap or "skip", body or ""))
    end

    local function leash(...) return R.leash_in(d, p, ...) end

    local host = select(2, L.sh("hostname")):match("^%s*(.-)%s*$")
    -- The actor is the system's name for the user, whatever $USER says
    -- (the commands run with USER=ops).
    local me = select(2, L.sh("id -un")):match("^%s*(.-)%s*$")

    it("pause keeps the lease and records fires skipped-paused; resume runs them again", function()
      setup('every = "1s"')
      procs = R.start_replicas(d, 1)
      local h, row = R.wait_holder(procs, p, tbl)
      assert(L.wait_for(function() return #bodies(out) >= 2 end, 5), "rec never ran")
      -- pause waits until the holder took it (renewed after it), and says so
      local code, stdout, stderr = leash("pause", "rec")
      local took = L.now() * 1000
      assert.equal(0, code, stderr)
      assert.matches("^paused rec: " .. esc(h.owner) .. " took it at %d+%-[%d%-T:.]+Z %(%d+%.%ds%)\n$", stdout)
      assert(h:wait_log("paused %(leash pause%)", 3), "the holder did not see the pause")
      local _, st = leash("status")
      assert.matches("\npaused%s+rec%s", st)
      -- no fire due after it said so runs (a claim goes out at most 100 ms early)
      L.sleep(2.5)
      for _, b in ipairs(bodies(out)) do
        assert.is_true(b.at <= took + 200, ("a fire due %.0f ms after pause returned ran"):format(b.at - took))
      end
      local n = #bodies(out)
      local now = R.lease_row(p, tbl, "rec")
      assert.equal(row.owner, now.owner)                 -- kept the lease
      assert.equal(row.token, now.token)
      code, stdout, stderr = leash("resume", "rec")
      local resumed = L.now() * 1000
      assert.equal(0, code, stderr)
      assert.matches("^resumed rec: " .. esc(h.owner) .. " took it at ", stdout)
      assert(L.wait_for(function() return #bodies(out) >= n + 2 end, 10), "rec did not run after resume")
      R.stop_all(procs)
      local rows = ledger(p, tbl)
      assert.is_true(#of(rows, "skipped-paused") >= 2, "no skipped-paused rows")
      -- the next fire after resume returned runs: none due after it is skipped-paused
      for _, r in ipairs(of(rows, "skipped-paused")) do
        assert.is_true(r.scheduled_at <= resumed + 200, "a fire due after resume was skipped-paused")
      end
      for _, r in ipairs(of(rows, "skipped-paused")) do assert.equal(h.owner, r.owner) end
      local ctl = of(rows, "control")
      assert.equal(2, #ctl)
      assert.equal("pause", ctl[1].error)
      assert.equal("resume", ctl[2].error)
      assert.equal(me .. "@" .. host, ctl[1].actor)
      assert.equal(me .. "@" .. host, ctl[1].owner)
      -- no fire twice, and the cursor went through the skipped ones
      local seen = {}
      for _, r in ipairs(rows) do
        if r.outcome ~= "control" then
          assert.is_nil(seen[r.scheduled_at], "fire " .. r.scheduled_at .. " has two rows")
          seen[r.scheduled_at] = true
        end
      end
    end)

    it("a job taken over while paused runs nothing, not even its catch-up", function()
      setup('every = "1s", missed = "all"')
      procs = R.start_replicas(d, 2)
      local h = R.wait_holder(procs, p, tbl)
      assert(L.wait_for(function() return #bodies(out) >= 1 end, 5), "rec never ran")
      assert.equal(0, (leash("pause", "rec")))
      assert(h:wait_log("paused %(leash pause%)", 3), "the holder did not see the pause")
      local n = #bodies(out)
      for _, pid in ipairs(R.tree(h.pid)) do L.kill(pid, "KILL") end
      h:wait(5)
      local other = procs[1] == h and procs[2] or procs[1]
      assert(other:wait_log("holding the lease", 5), "nobody took the lease over")
      assert(other:wait_log("paused %(leash pause%)", 3), "the new holder did not see the pause")
      L.sleep(1.5)
      assert.equal(n, #bodies(out), "a paused job ran on the new holder")
      R.stop_all(procs)
      local mine = 0
      for _, r in ipairs(of(ledger(p, tbl), "skipped-paused")) do
        if r.owner == other.owner then mine = mine + 1 end
      end
      assert.is_true(mine >= 2, "the new holder recorded " .. mine .. " skipped-paused fires")
    end)

    it("pause --for D ends by itself", function()
      setup('every = "1s"')
      procs = R.start_replicas(d, 1)
      local h = R.wait_holder(procs, p, tbl)
      assert(L.wait_for(function() return #bodies(out) >= 1 end, 5), "rec never ran")
      local code, stdout, stderr = leash("pause", "rec", "--for", "2500ms")
      assert.equal(0, code, stderr)
      assert.matches("paused rec until %d%d%d%d%-", stdout)
      assert(h:wait_log("paused %(leash pause%) until", 3), "the holder did not see the pause")
      L.sleep(0.4)
      local n = #bodies(out)
      assert(h:wait_log("resumed: fires run again", 4), "the pause did not end by itself")
      assert(L.wait_for(function() return #bodies(out) > n end, 3), "rec did not run after the pause")
      local rows = ledger(p, tbl)
      assert.matches("^pause for 2500ms %(until ", of(rows, "control")[1].error)
    end)

    it("trigger runs the job once now on the holder, recorded as manual, the cursor left alone", function()
      setup(QUIET)
      procs = R.start_replicas(d, 2)
      local h = R.wait_holder(procs, p, tbl)
      local before = R.lease_row(p, tbl, "rec")
      local code, stdout, stderr = leash("trigger", "rec")
      assert.equal(0, code, stderr)
      assert.matches("triggered rec: " .. h.owner:gsub("%p", "%%%0"), stdout)
      assert(L.wait_for(function() return #bodies(out) >= 1 end, 3), "the trigger ran nothing")
      L.sleep(1)
      local b = bodies(out)
      assert.equal(1, #b, "the trigger ran more than once")
      assert.equal(h.owner, b[1].replica)
      assert.is_true(b[1].manual)
      assert.equal(before.last_fire, R.lease_row(p, tbl, "rec").last_fire)
      R.stop_all(procs)
      local rows = ledger(p, tbl)
      local m = of(rows, "manual")
      assert.equal(1, #m)
      assert.equal(h.owner, m[1].owner)
      assert.is_number(m[1].ended_at)
      assert.equal("trigger", of(rows, "control")[1].error)
    end)

    -- Issue 38 item 6: history names each run as the log does, and a trigger's run as manual.
    it("history shows each run's number as the log's [rec run N], and the trigger's run as manual", function()
      -- (queue: on a busy machine a run may still go when the trigger comes)
      setup('every = "1s"', "queue")
      procs = R.start_replicas(d, 1)
      assert(L.wait_for(function() return #bodies(out) >= 1 end, 10), "rec never ran")
      assert.equal(0, (leash("trigger", "rec")))
      assert(L.wait_for(function()
        for _, r in ipairs(ledger(p, tbl)) do if r.outcome == "manual" and r.ended_at then return true end end
      end, 10), "the trigger's run has no ended row")
      assert(L.wait_for(function() return #of(ledger(p, tbl), "ok") >= 2 end, 10), "too few ok rows")
      R.stop_all(procs)
      local code, text, err = leash("history", "rec", "--wide")
      assert.equal(0, code, err)
      local log = procs[1]:log_text()
      local seen = { ok = 0, manual = 0 }
      for line in text:gmatch("[^\n]+") do
        local state, n = line:match("^(%S+)%s+rec%s+(%d+)%s")
        if state == "ok" or state == "manual" then
          seen[state] = seen[state] + 1
          assert.truthy(log:find("[rec run " .. n .. "] ", 1, true), "no [rec run " .. n .. "] in the log for: " .. line)
        end
      end
      assert.is_true(seen.ok >= 2, text)
      assert.equal(1, seen.manual, text)
      local m = of(ledger(p, tbl), "manual")[1]
      assert.equal("manual", m.how)
      assert.matches("\ncontrol%s+rec%s+%-%s+%-%s+[^\n]*trigger by " .. me:gsub("%p", "%%%0") .. "@", text)
    end)

    it("trigger goes through the overlap rule: skip drops it while a run goes, queue runs it after", function()
      setup(QUIET, "queue", "os.execute('sleep 1')")
      procs = R.start_replicas(d, 1)
      R.wait_holder(procs, p, tbl)
      assert.equal(0, (leash("trigger", "rec")))
      assert(L.wait_for(function() return #bodies(out) >= 1 end, 3), "the trigger ran nothing")
      assert.equal(0, (leash("trigger", "rec")))         -- while the first goes: queued
      assert(procs[1]:wait_log("trigger queued", 3), "the second trigger was not queued")
      assert(L.wait_for(function() return #bodies(out) >= 2 end, 4), "the queued trigger did not run")
    end)

    it("handoff releases the lease at a safe point and another replica takes it", function()
      setup('every = "1s"')
      procs = R.start_replicas(d, 2)
      local h, row = R.wait_holder(procs, p, tbl)
      local code, stdout, stderr = leash("handoff", "rec")
      assert.equal(0, code, stderr)
      assert.matches("handoff of rec asked", stdout)
      assert(h:wait_log("handing the lease off %(leash handoff%)", 3), "the holder did not hand off")
      local other = assert(L.wait_for(function()
        local now = R.lease_row(p, tbl, "rec")
        return now.owner ~= h.owner and now.expires_at > 0 and now.owner ~= "" and now
      end, 4), "nobody else took the lease")
      assert.is_true(other.token > row.token)
      -- the new holder runs the fires, each once
      local n = #bodies(out)
      assert(L.wait_for(function()
        local b = bodies(out)
        return #b > n and b[#b].replica == other.owner
      end, 4), "the new holder ran nothing")
      local seen = {}
      for _, r in ipairs(bodies(out)) do
        assert.is_nil(seen[r.at], "fire " .. r.at .. " ran twice")
        seen[r.at] = true
      end
      assert.equal("handoff", of(ledger(p, tbl), "control")[1].error)
    end)

    if p.provider == "postgres" then
      it("a NOTIFY wakes the holder: a trigger runs within a round trip, not a renew interval", function()
        setup(QUIET)
        -- A 60 s lease renews every 20 s: without the NOTIFY a trigger
        -- would wait 10 s on average for the holder's next renew. How soon
        -- it runs with one is a bench figure; 5 s is a bound that a loaded
        -- machine keeps and that three triggers without it would all meet
        -- only by a chance of 1 in 64.
        local c = R.config(p, tbl)
        c.singleton = { enabled = "true", lease = "60s", retry = "200ms", spread = "false" }
        L.write(d.config, L.ini(c))
        procs = R.start_replicas(d, 2)
        local h = R.wait_holder(procs, p, tbl)
        for i = 1, 3 do
          L.sleep(math.random() * 0.5)
          local t0 = L.now()
          local code, _, stderr = leash("trigger", "rec")
          assert.equal(0, code, stderr)
          assert(L.wait_for(function() return #bodies(out) >= i end, 20), "the trigger ran nothing")
          local took = L.now() - t0
          assert.is_true(took < 5, ("trigger %d ran after %.3f s"):format(i, took) .. "\n" .. h:log_text())
          assert.equal(h.owner, bodies(out)[i].replica)
        end
      end)
    end

    it("bad input: an unknown job, a bad --for, nobody holding the job", function()
      setup(QUIET)
      open(p, tbl):close()          -- the tables, as leash run makes them: the controls make none
      local code, _, stderr = leash("pause", "nope")
      assert.equal(1, code)
      assert.matches("no job nope in the store or in ", stderr)
      -- history of a job nobody knows fails as the controls do; of a known one with no runs, not
      code, _, stderr = leash("history", "nope")
      assert.equal(1, code)
      assert.matches("leash history: no job nope in the store or in ", stderr)
      code, _, stderr = leash("history", "rec")
      assert.equal(0, code, stderr)
      code, _, stderr = leash("pause", "rec", "--for", "3x")
      assert.equal(2, code)
      assert.matches("%-%-for: \"3x\" is not a duration", stderr)
      -- no replica runs: no live replica defines rec, so a control is refused ...
      code, _, stderr = leash("trigger", "rec")
      assert.equal(2, code)
      assert.matches("leash trigger: no live replica defines job rec .*%-%-force", stderr)
      assert.is_nil(R.lease_row(p, tbl, "rec"), "a refused control wrote a row")
      -- ... unless --force; a trigger still needs a holder
      code, _, stderr = leash("trigger", "rec", "--force")
      assert.equal(1, code)
      assert.matches("no replica holds rec now", stderr)
      code = leash("pause")
      assert.equal(2, code)
      code, _, stderr = leash("pause", "rec", "--no-such-option")
      assert.equal(2, code)
      -- a forced pause of a job nobody holds yet: nobody takes it within the lease (1 s), so
      -- it exits 1 saying so, and the pause is kept for the first holder
      local t0 = L.monotonic()
      code, _, stderr = leash("pause", "rec", "--force")
      assert.equal(1, code)
      assert.matches("leash pause: rec: no replica took it within 1%.0s %(the lease%)", stderr)
      assert.is_true(L.monotonic() - t0 >= 1, "pause gave up before the lease")
      assert.equal("", R.lease_row(p, tbl, "rec").owner)
      assert.is_truthy(R.lease_row(p, tbl, "rec").paused_until)
      -- --no-wait returns once it is written
      code, stdout = leash("pause", "rec", "--force", "--no-wait")
      assert.equal(0, code)
      assert.matches("paused rec: no replica holds it now", stdout)
      -- a job no file and no store knows: --force writes it all the same, for a replica yet to start
      code = leash("pause", "newjob", "--force", "--no-wait")
      assert.equal(0, code)
      assert.equal("", R.lease_row(p, tbl, "newjob").owner)
    end)

    it("--no-wait returns at once; a replica that does not define the job makes it unknown to controls", function()
      setup(QUIET)
      procs = R.start_replicas(d, 1)
      local h = R.wait_holder(procs, p, tbl)
      local code, stdout, stderr = leash("trigger", "rec", "--no-wait")
      assert.equal(0, code, stderr)
      assert.matches("^triggered rec: its holder runs it once at its next renew\n$", stdout)
      assert(L.wait_for(function() return #bodies(out) >= 1 end, 10), "the trigger ran nothing")
      code, stdout, stderr = leash("pause", "rec", "--no-wait")
      assert.equal(0, code, stderr)
      assert.matches("paused rec: its holder skips its fires from its next renew", stdout)
      assert(h:wait_log("paused %(leash pause%)", 10), "the holder did not see the pause")
      code, stdout, stderr = leash("resume", "rec")
      assert.equal(0, code, stderr)
      assert.matches("^resumed rec: " .. esc(h.owner) .. " took it at ", stdout)
      -- a job file only this host has, that no running replica loaded
      d.write_job("other", 'return { cron = "0 0 29 2 *", run = function() end }')
      code, _, stderr = leash("pause", "other")
      assert.equal(2, code)
      assert.matches("no live replica defines job other", stderr)
    end)
  end)
end
