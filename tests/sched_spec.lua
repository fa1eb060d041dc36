-- The job table (src/plan/sched.c) on a fake clock, through leash.core.sched:
-- fire times, jitter, overlap (skip, queue, replace), services' backoff,
-- reloads and the election's gate, in milliseconds.  Runs are not processes here: a start is an event
-- and the spec ends a run when it likes.  What only real processes show
-- (forks, signals, pipes) stays in run_spec.lua and election_spec.lua.
local L = require "e2e"
local core = require "leash.core"

local T0 = 1800000000000                -- a whole second, 2027-01-15T08:00:00Z

-- A job table over a fresh jobs/ with a clock the spec moves.
local function table_of(jobs, opts)
  opts = opts or {}
  local d = L.dir { jobs = jobs }
  local t = { wall = T0 + (opts.at or 500), mono = 1000000 }
  local held = opts.held or {}
  local s = core.sched {
    jobs = d.jobs,
    wall = function() return t.wall end,
    mono = function() return t.mono end,
    holds = opts.singleton and function(name) return held[name] == true end or nil,
    claim = opts.claim,
    paused = opts.paused,
    unclaim = opts.unclaim,
    prepare = opts.prepare and function(name, fire) return opts.prepare(name, fire, t) end,
    take_back = opts.take_back,
  }
  s:load(false)
  local o = { s = s, d = d, t = t, held = held, log = {} }
  -- Moves both clocks by ms and runs the table; returns what it started.
  function o.advance(ms)
    t.wall, t.mono = t.wall + ms, t.mono + ms
    return o.due()
  end
  function o.due()
    o.sleep = s:due()
    return o.take()
  end
  -- Events since the last call: starts as { name = scheduled_ms or true }.
  function o.take()
    local starts, other = {}, {}
    for _, e in ipairs(s:events()) do
      if e[1] == "start" then
        starts[#starts + 1] = { name = e[2], at = e[3], catchup = e[4] == "catchup" or nil,
                                manual = e[4] == "manual" or nil,
                                prepared = e[4] == "prepared" or nil }
      elseif e[1] == "log" then
        o.log[#o.log + 1] = e[2]
      else
        other[#other + 1] = e
      end
    end
    o.other = other
    return starts
  end
  function o.logged(pat)
    for _, l in ipairs(o.log) do
      if l:find(pat) then return l end
    end
  end
  return o
end

local function every(d, extra)
  return ('return { every = %q, %s run = function() end }'):format(d, extra or "")
end

describe("the job table", function()
  describe("fire times", function()
    it("every = 1s fires at each whole second, and sleeps exactly until the next", function()
      local o = table_of { tick = every("1s") }
      assert.same({}, o.due())
      assert.equal(500, o.sleep)
      local starts = o.advance(500)
      assert.same({ { name = "tick", at = T0 + 1000 } }, starts)
      o.s:ended("tick", false, 3)
      assert.equal(1000, o.sleep)
      assert.same({ { name = "tick", at = T0 + 2000 } }, o.advance(1000))
    end)

    it("a late turn starts the fire it missed once, then goes on from now", function()
      local o = table_of { tick = every("1s") }
      o.due()
      local starts = o.advance(3700)         -- the loop was held up 3.2 s
      assert.same({ { name = "tick", at = T0 + 1000 } }, starts)
      o.s:ended("tick", false, 1)
      assert.equal(T0 + 5000, o.s:jobs().tick.next_fire_ms)
    end)

    it("every = 1m30s fires on multiples of 90 s since the epoch", function()
      local o = table_of { slow = every("1m30s") }
      local next = o.s:jobs().slow.next_fire_ms
      assert.equal(0, next % 90000)
      assert.is_true(next > T0 and next - T0 <= 90000)
    end)

    it("a cron job fires at the expression's times", function()
      local o = table_of { c = 'return { cron = "*/10 * * * * *", run = function() end }' }
      assert.equal(T0 + 10000, o.s:jobs().c.next_fire_ms)
      assert.same({ { name = "c", at = T0 + 10000 } }, o.advance(9500))
    end)
  end)

  describe("skip if running", function()
    it("a fire while the run goes on is skipped and logged; the next one runs", function()
      local o = table_of { slow = every("1s") }
      o.due()
      assert.equal(1, #o.advance(500))
      assert.same({}, o.advance(1000))
      assert.truthy(o.logged("%[slow%] skipped the fire at 2027%-01%-15T08:00:02Z: run 1 is still going"))
      o.s:ended("slow", false, 1600)
      assert.same({ { name = "slow", at = T0 + 3000 } }, o.advance(1000))
    end)
  end)

  describe("overlap", function()
    -- A job of every = 1s whose first run starts at T0 + 1 s.
    local function running(policy, opts)
      local o = table_of({ j = every("1s", ("overlap = %q,"):format(policy)) }, opts)
      o.due()
      assert.same({ { name = "j", at = T0 + 1000 } }, o.advance(500))
      return o
    end

    it("queue: the fire while the run goes waits and starts the moment the run ends", function()
      local o = running("queue")
      assert.same({}, o.advance(1000))
      assert.truthy(o.logged("%[j%] queued the fire at 2027%-01%-15T08:00:02Z: run 1 is still going"))
      assert.equal(T0 + 2000, o.s:jobs().j.pending_ms)
      o.t.wall = o.t.wall + 300
      o.s:ended("j", false, 1300)
      assert.same({ { name = "j", at = T0 + 2000 } }, o.take())
      assert.truthy(o.logged("%[j%] starting the queued fire at 2027%-01%-15T08:00:02Z"))
      assert.equal(0, o.s:jobs().j.pending_ms)
      o.s:ended("j", false, 100)
      assert.same({ { name = "j", at = T0 + 3000 } }, o.advance(700))
    end)

    it("queue: at most one waits; the later fires are skipped", function()
      local o = running("queue")
      o.advance(1000)
      assert.same({}, o.advance(1000))
      assert.truthy(o.logged("skipped the fire at 2027%-01%-15T08:00:03Z: run 1 is still going "
        .. "and the fire at 2027%-01%-15T08:00:02Z is queued"))
      o.s:ended("j", false, 2100)
      assert.same({ { name = "j", at = T0 + 2000 } }, o.take())
      o.s:ended("j", false, 10)
      assert.same({}, o.take(), "a second queued fire")
    end)

    it("replace: the fire stops the run, and its own run starts only once that one ended", function()
      local o = running("replace")
      assert.same({}, o.advance(1000))
      assert.same({ { "stop", "j", "replaced by the fire at 2027-01-15T08:00:02Z" } }, o.other)
      assert.is_true(o.s:jobs().j.running, "started beside the run it replaces")
      o.t.wall = o.t.wall + 50
      o.s:ended("j", true, 1050)
      assert.same({ { name = "j", at = T0 + 2000 } }, o.take())
      assert.truthy(o.logged("%[j%] starting the fire at 2027%-01%-15T08:00:02Z: run 1 was replaced"))
    end)

    it("replace: a fire while the old run is still stopping takes the waiting one's place", function()
      local o = running("replace")
      o.advance(1000)
      assert.same({}, o.advance(1000))
      assert.same({}, o.other, "stopped twice")
      assert.truthy(o.logged("skipped the fire at 2027%-01%-15T08:00:02Z: the fire at "
        .. "2027%-01%-15T08:00:03Z replaces it %(run 1 is still stopping%)"))
      o.s:ended("j", true, 2000)
      assert.same({ { name = "j", at = T0 + 3000 } }, o.take())
    end)

    it("skip stays the default", function()
      local o = table_of { j = every("1s") }
      assert.equal("skip", o.s:jobs().j.overlap)
    end)

    it("a waiting fire survives a reload that keeps the schedule, not one that changes it", function()
      local o = running("queue")
      o.advance(1000)
      o.d.write_job("j", every("1s", 'overlap = "queue", description = "edited",'))
      o.s:load(true)
      assert.equal(T0 + 2000, o.s:jobs().j.pending_ms)
      o.d.write_job("j", every("2s", 'overlap = "queue",'))
      o.s:load(true)
      o.take()
      assert.equal(0, o.s:jobs().j.pending_ms)
      assert.truthy(o.logged("%[j%] dropped the fire at 2027%-01%-15T08:00:02Z that waited for run 1: "
        .. "the schedule changed"))
      o.s:ended("j", false, 1200)
      assert.same({}, o.take())
    end)

    it("a removed job's waiting fire never starts", function()
      local o = running("queue")
      o.advance(1000)
      o.d.remove_job("j")
      o.s:load(true)
      o.s:ended("j", false, 1200)
      assert.same({}, o.take())
    end)

    it("a replica that lost the lease meanwhile drops the waiting fire", function()
      local o = running("queue", { singleton = true, held = { j = true } })
      o.advance(1000)
      o.held.j = false
      o.s:ended("j", false, 1200)
      assert.same({}, o.take())
      assert.truthy(o.logged("dropped the fire at 2027%-01%-15T08:00:02Z that waited for run 1: "
        .. "this replica no longer holds the lease"))
    end)

    it("after the stop a waiting fire does not start", function()
      local o = running("replace")
      o.advance(1000)
      o.s:stop()
      o.s:ended("j", true, 1000)
      assert.same({}, o.take())
    end)
  end)

  describe("jitter", function()
    local job = require "leash.job"

    it("shifts every fire by the name's offset in [0, jitter), the same in every table", function()
      local off = job.offset("spread", 30000)
      assert.is_true(off >= 0 and off < 30000)
      local src = every("1m", 'jitter = "30s",')
      local o = table_of { spread = src }
      -- The first shifted minute after T0 + 500 ms: T0's own when the offset is past 500 ms.
      local base = off > 500 and T0 or T0 + 60000
      assert.equal(base + off, o.s:jobs().spread.next_fire_ms)
      assert.same({}, o.advance(base + off - 1 - o.t.wall))
      assert.same({ { name = "spread", at = base + off } }, o.advance(1))
      o.s:ended("spread", false, 5)
      assert.equal(base + 60000 + off, o.s:jobs().spread.next_fire_ms)
      local again = table_of { spread = src }
      assert.equal(base + off, again.s:jobs().spread.next_fire_ms)
    end)

    it("a fire already shifted past is not repeated: the next is one period later", function()
      local off = job.offset("late", 20000)
      -- Just after the shifted fire of the minute T0 + 60 s.
      local o = table_of({ late = every("1m", 'jitter = "20s",') }, { at = 60000 + off + 1 })
      assert.equal(T0 + 120000 + off, o.s:jobs().late.next_fire_ms)
    end)

    it("leash run logs a job's check warnings when it loads it", function()
      local o = table_of { drift = every("7m") }
      o.take()
      assert.truthy(o.logged("%[drift%] .*drift%.lua:1: every: warning: 7m does not divide a day"))
    end)

    it("a thousand names spread over the jitter", function()
      local seen, buckets = {}, 0
      for i = 1, 1000 do
        local b = job.offset(("job-%04d"):format(i), 60000) // 1000
        if not seen[b] then seen[b], buckets = true, buckets + 1 end
      end
      assert.is_true(buckets >= 55, buckets .. " of 60 seconds used")
    end)

    it("a cron job's fires are shifted too, and the log shows their milliseconds", function()
      local off = job.offset("c", 10000)
      local o = table_of { c = 'return { cron = "*/10 * * * * *", jitter = "10s", run = function() end }' }
      local first = o.s:jobs().c.next_fire_ms
      assert.equal(off, (first - T0) % 10000)
      assert.equal(1, #o.advance(first - o.t.wall))
      o.advance(10000)
      if off % 1000 ~= 0 then
        assert.truthy(o.logged("skipped the fire at 2027%-01%-15T08:00:%d%d%.%d%d%dZ"))
      end
    end)
  end)

  describe("services", function()
    it("start at once and restart after 1 s, 2 s, 4 s ... up to 60 s", function()
      local o = table_of { svc = "return { run = function() end }" }
      assert.same({ { name = "svc" } }, (function()
        local s = o.due(); s[1].at = nil; return s
      end)())
      local waits = {}
      for _ = 1, 8 do
        o.s:ended("svc", true, 10)
        waits[#waits + 1] = o.s:jobs().svc.backoff_ms
        local b = waits[#waits]
        assert.same({}, o.advance(b - 1), "restarted before its backoff")
        assert.equal(1, #o.advance(1))
      end
      assert.same({ 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000 }, waits)
      assert.truthy(o.logged("%[svc%] service failed; restarting in 60%.0s"))
    end)

    it("a run of 60 s or more starts the backoff again at 1 s", function()
      local o = table_of { svc = "return { run = function() end }" }
      o.due()
      o.s:ended("svc", false, 10)
      o.advance(1000)
      o.s:ended("svc", false, 10)
      assert.equal(2000, o.s:jobs().svc.backoff_ms)
      o.advance(2000)
      o.s:ended("svc", false, 60000)
      assert.equal(1000, o.s:jobs().svc.backoff_ms)
      assert.truthy(o.logged("service returned; restarting in 1%.0s"))
    end)

    it("a service that gains its lease starts at once, its backoff forgotten", function()
      local o = table_of({ svc = "return { run = function() end }" }, { singleton = true })
      assert.same({}, o.due())
      o.held.svc = true
      assert.equal(1, #o.due())
      o.s:ended("svc", true, 5)
      assert.equal(1000, o.s:jobs().svc.backoff_ms)
      o.s:gained("svc")                  -- lost and taken again meanwhile
      assert.equal(0, o.s:jobs().svc.backoff_ms)
      assert.equal(1, #o.due())
    end)
  end)

  describe("reload", function()
    it("an added file starts; a changed one takes its new schedule; an edit alone keeps it", function()
      local o = table_of { a = every("1s"), b = every("1s") }
      o.due()
      o.d.write_job("c", every("2s"))
      o.d.write_job("a", every("5s"))
      o.d.write_job("b", every("1s", "description = 'edited',"))
      o.s:load(true)
      o.take()
      assert.truthy(o.logged("%[c%] added: every 2s"))
      assert.truthy(o.logged("%[a%] reloaded: every 5s"))
      assert.truthy(o.logged("%[b%] reloaded: every 1s %(the next run uses the new file%)"))
      local j = o.s:jobs()
      assert.equal(T0 + 5000, j.a.next_fire_ms)
      assert.equal(T0 + 1000, j.b.next_fire_ms)
      assert.equal(T0 + 2000, j.c.next_fire_ms)
    end)

    it("the broken files a replica publishes: since when (kept across reloads), whether the last good definition runs", function()
      local o = table_of { a = every("1s"), nope = 'return { every = "3x" }' }
      local text = o.s:broken()
      assert.matches("^nope\t" .. (T0 + 500) .. "\t0\t[^\t\n]*nope%.lua:1: every: \"3x\"[^\n]*\n$", text)
      o.t.wall = o.t.wall + 60000
      o.d.write_job("a", "return { every = 1s }\n\tgarbage")
      o.s:load(true)
      text = o.s:broken()
      -- a first, sorted; tabs in the error are spaces; nope keeps its since
      assert.matches("^a\t" .. (T0 + 60500) .. "\t1\t[^\t\n]*a%.lua[^\t\n]*\n"
        .. "nope\t" .. (T0 + 500) .. "\t0\t[^\n]+\n$", text)
      assert.is_true(o.s:jobs().a ~= nil)              -- the last good definition stays
      o.d.write_job("a", every("1s"))
      o.d.remove_job("nope")
      o.s:load(true)
      assert.is_nil(o.s:broken())
      -- broken again later: a new since
      o.t.wall = o.t.wall + 1000
      o.d.write_job("a", "return {")
      o.s:load(true)
      assert.matches("^a\t" .. (T0 + 61500) .. "\t1\t", o.s:broken())
    end)

    it("the broken files text stays within its bound, counting the files left out", function()
      local jobs = {}
      for i = 1, 60 do jobs[("bad-%02d"):format(i)] = "error(" .. ("%q"):format(("x"):rep(400)) .. ")" end
      local o = table_of(jobs)
      local text = o.s:broken()
      assert.is_true(#text <= 8192, #text)
      local lines, more = 0, text:match("\n%+\t0\t0\t(%d+)\n$")
      for _ in text:gmatch("\n") do lines = lines + 1 end
      assert.equal(60, lines - 1 + tonumber(more))
      for l in text:gmatch("[^\n]+") do
        if l:sub(1, 1) ~= "+" then assert.is_true(#l < 200 + 300 + 40, #l) end
      end
    end)

    it("a run going on finishes under its old definition, and the new one never starts beside it", function()
      local o = table_of { a = every("1s") }
      o.due()
      assert.equal(1, #o.advance(500))
      o.d.write_job("a", every("1s", "timeout = '10s',"))
      o.s:load(true)
      assert.is_true(o.s:jobs().a.running)
      assert.same({}, o.advance(1000))
      o.s:ended("a", false, 1500)
      assert.equal(1, #o.advance(1000))
    end)

    it("a run that outlives two reloads still belongs to its job", function()
      local o = table_of { a = every("1s") }
      o.due()
      assert.equal(1, #o.advance(500))
      o.d.write_job("a", every("1s", "timeout = '10s',"))
      o.s:load(true)
      o.d.remove_job("a")
      o.s:load(true)
      o.take()
      assert.same({ { "stop", "a", "job file removed" } }, o.other)
      o.s:ended("a", false, 800)
      o.s:drop_removed()
      assert.is_nil(o.s:jobs().a)
    end)

    it("a removed file's run is stopped and the job dropped once it ended; back before that, it is the same job", function()
      local o = table_of { gone = every("1s"), back = every("1s") }
      o.due()
      assert.equal(2, #o.advance(500))
      o.d.remove_job("gone")
      o.d.remove_job("back")
      o.s:load(true)
      o.take()
      local stops = {}
      for _, e in ipairs(o.other) do
        if e[1] == "stop" then stops[e[2]] = e[3] end
      end
      assert.same({ gone = "job file removed", back = "job file removed" }, stops)
      o.d.write_job("back", every("1s"))
      o.s:load(true)
      o.take()
      assert.truthy(o.logged("%[back%] back: "))
      assert.same({}, o.advance(1000), "a new run beside the stopping one")
      o.s:ended("gone", false, 600)
      o.s:ended("back", false, 600)
      o.s:drop_removed()
      local j = o.s:jobs()
      assert.is_nil(j.gone)
      assert.is_table(j.back)
      assert.same({ { name = "back", at = T0 + 3000 } }, o.advance(1000))
    end)

    it("a file that broke keeps its last good definition, and the log says why", function()
      local o = table_of { b = every("1s") }
      o.d.write_job("b", 'return { every = "1s", oops = 1, run = function() end }')
      o.s:load(true)
      o.take()
      assert.truthy(o.logged("b%.lua:1: oops: unknown key"))
      assert.truthy(o.logged("%[b%] keeps its last good definition: .*b%.lua has problems"))
      assert.equal(1, #o.advance(500))
    end)

    it("a job file that loops forever is a load error and the others load", function()
      local o = table_of { loops = "while true do end", ok = every("1s") }
      assert.is_table(o.s:jobs().ok)
      assert.is_nil(o.s:jobs().loops)
      o.take()
      assert.truthy(o.logged("loops%.lua"))
    end)
  end)

  describe("the election's gate", function()
    it("a follower's fire times pass, so the new holder neither repeats nor catches up", function()
      local o = table_of({ tick = every("1s") }, { singleton = true })
      assert.same({}, o.advance(2400))       -- the fires at :01 and :02 pass
      assert.equal(T0 + 3000, o.s:jobs().tick.next_fire_ms)
      o.held.tick = true
      assert.same({}, o.due())
      assert.same({ { name = "tick", at = T0 + 3000 } }, o.advance(100))
    end)

    it("a job's weight reaches the table (1 by default), for spread's presence row", function()
      local o = table_of({ heavy = every("1s", "weight = 7,"), light = every("1s") }, { singleton = true })
      assert.equal(7, o.s:jobs().heavy.weight)
      assert.equal(1, o.s:jobs().light.weight)
    end)

    it("singleton = false runs without the election", function()
      local o = table_of({ everywhere = every("1s", "singleton = false,") }, { singleton = true })
      o.take()
      assert.same({}, o.other)
      assert.is_false(o.s:jobs().everywhere.elected)
      assert.equal(1, #o.advance(500))
    end)

    it("a reload to singleton = false leaves the election once the run is over, and runs everywhere", function()
      local o = table_of({ j = every("1s") }, { singleton = true, held = { j = true } })
      assert.is_true(o.s:jobs().j.elected)
      assert.equal(1, #o.advance(500))
      o.d.write_job("j", every("1s", "singleton = false,"))
      o.s:load(true)
      o.take()
      assert.is_true(o.s:jobs().j.elected, "left while its run goes on")
      o.s:ended("j", false, 100)
      o.take()
      assert.same({ { "leave", "j", 0 } }, o.other)
      o.held.j = false
      assert.is_false(o.s:jobs().j.elected)
      assert.equal(1, #o.advance(1000))
    end)
  end)

  describe("claims and catch-up", function()
    -- A table in singleton mode whose claims the spec answers: answer(list)
    -- returns the list of booleans (default: all accepted) or nil, err.
    local function claiming(jobs, answer, held)
      local calls = {}
      local o
      o = table_of(jobs, { singleton = true, held = held or {}, claim = function(list)
        calls[#calls + 1] = list
        if answer then return answer(list) end
        local ok = {}
        for i = 1, #list do ok[i] = true end
        return ok
      end })
      o.calls = calls
      return o
    end

    -- j's lease is taken with cursor (nil: none), the fires before T0 + 500 passed.
    local function gained(o, cursor)
      o.due()
      o.held.j = true
      o.s:gained("j", cursor)
    end

    -- The catch-up runs of j start one at a time, each as the last ended.
    local function one_by_one(o, ats)
      for i, at in ipairs(ats) do
        assert.same({ { name = "j", at = at, catchup = true } }, i == 1 and o.due() or o.take())
        if i == 1 then assert.same({}, o.due(), "one at a time") end
        o.s:ended("j", false, 10)
      end
      assert.same({}, o.take())
    end

    it("claims all the fires due at one instant in one call, a few ms ahead, and starts them on time", function()
      local o = claiming({ a = every("1s"), b = every("1s") }, nil, { a = true, b = true })
      assert.same({}, o.due())
      assert.equal(490, o.sleep)
      assert.same({}, o.advance(490))
      assert.equal(1, #o.calls)
      local names = {}
      for _, c in ipairs(o.calls[1]) do
        names[#names + 1] = c.name
        assert.equal(T0 + 1000, c.fire)
      end
      table.sort(names)
      assert.same({ "a", "b" }, names)
      assert.equal(10, o.sleep)
      local starts = o.advance(10)
      table.sort(starts, function(x, y) return x.name < y.name end)
      assert.same({ { name = "a", at = T0 + 1000 }, { name = "b", at = T0 + 1000 } }, starts)
      assert.equal(1, #o.calls, "no second claim for a claimed fire")
    end)

    it("a claim that took 30 ms sends the next ones 60 ms ahead, and never more than 100 ms", function()
      local took = 30
      local o
      o = claiming({ a = every("1s") }, function(list)
        o.t.wall = o.t.wall + took     -- the store's round trip
        local ok = {}
        for i = 1, #list do ok[i] = true end
        return ok
      end, { a = true })
      o.due()
      assert.equal(490, o.sleep, "10 ms ahead until a claim was measured")
      -- Claimed at 990 ms, answered at 1020: it starts then, late, and says why.
      assert.same({ { name = "a", at = T0 + 1000 } }, o.advance(490))
      assert.truthy(o.logged("a claim of 1 fire took 30ms: the fire at 2027%-01%-15T08:00:01Z starts 20ms late"))
      o.s:ended("a", false, 1)
      o.due()
      assert.equal(T0 + 2000 - 60, o.t.wall + o.sleep)
      took = 80
      assert.same({ { name = "a", at = T0 + 2000 } }, o.advance(o.sleep))
      assert.truthy(o.logged("a claim of 1 fire took 80ms: the fire at 2027%-01%-15T08:00:02Z starts 20ms late"))
      o.s:ended("a", false, 1)
      o.due()
      assert.equal(T0 + 3000 - 100, o.t.wall + o.sleep, "160 ms capped")
      took = 30
      assert.same({}, o.advance(o.sleep))
      assert.falsy(o.logged("took 30ms: the fire at 2027%-01%-15T08:00:03Z"), "answered 70 ms ahead: not late")
    end)

    it("a claim goes out as far ahead as its instant's fires take: the last claims' time, scaled", function()
      -- 4 jobs every second and 16 every 10 s; the store takes 2 ms a fire.
      local jobs = {}
      for i = 1, 4 do jobs["s" .. i] = every("1s") end
      for i = 1, 16 do jobs["t" .. i] = every("10s") end
      local held = {}
      for name in pairs(jobs) do held[name] = true end
      local at = {}
      local o
      o = table_of(jobs, { singleton = true, held = held, claim = function(list)
        at[list[1].fire] = { o.t.wall, #list }
        o.t.wall = o.t.wall + 2 * #list
        local ok = {}
        for i = 1, #list do ok[i] = true end
        return ok
      end })
      o.due()
      while o.t.wall < T0 + 11000 do
        local starts = o.advance(o.sleep)
        for _, st in ipairs(starts) do o.s:ended(st.name, false, 1) end
        if #starts > 0 then o.due() end
      end
      assert.same({ T0 + 1000 - 10, 4 }, at[T0 + 1000], "10 ms ahead until a claim was measured")
      assert.same({ T0 + 9000 - 16, 4 }, at[T0 + 9000], "4 fires took 8 ms: twice that ahead")
      assert.same({ T0 + 10000 - 80, 20 }, at[T0 + 10000], "20 fires: five times as long")
      assert.same({ T0 + 11000 - 16, 4 }, at[T0 + 11000], "and 4 again")
    end)

    it("a refused claim starts nothing and says why", function()
      local o = claiming({ j = every("1s") }, function() return { false } end, { j = true })
      o.due()
      assert.same({}, o.advance(500))
      assert.same({}, o.advance(100))
      assert.truthy(o.logged("%[j%] fire at 2027%-01%-15T08:00:01Z not started: the claim was refused "
        .. "%(another replica holds the lease, or the fire ran already%)"))
      assert.equal(1, #o.calls, "a refusal is not retried")
      assert.same({}, o.advance(895))
      assert.equal(2, #o.calls, "the next fire is claimed")
    end)

    it("an erring claim is retried, and the fire starts late with its own time once one succeeds", function()
      local down = true
      local o = claiming({ j = every("10s") }, function(list)
        if down then return nil, "database is down" end
        return { true }
      end, { j = true })
      o.due()
      assert.same({}, o.advance(9500))
      assert.truthy(o.logged("%[j%] fire at 2027%-01%-15T08:00:10Z not started yet: its claim failed"))
      assert.equal(1000, o.sleep)
      assert.same({}, o.advance(500))
      assert.equal(1, #o.calls, "not before the retry period")
      down = false
      assert.same({ { name = "j", at = T0 + 10000 } }, o.advance(500))
      assert.equal(2, #o.calls)
    end)

    it("an erring claim is missed once missed_within passed", function()
      local o = claiming({ j = every("10s", 'missed_within = "2s",') },
        function() return nil, "database is down" end, { j = true })
      o.due()
      o.advance(9500)
      for _ = 1, 3 do assert.same({}, o.advance(1000)) end
      assert.truthy(o.logged("%[j%] fire at 2027%-01%-15T08:00:10Z missed: no claim succeeded within missed_within"))
      local n = #o.calls
      assert.same({}, o.advance(1000))
      assert.equal(n, #o.calls, "no more tries")
    end)

    it("missed = once (the default): the latest fire after the cursor runs now as a catch-up", function()
      local o = claiming({ j = every("1s") })
      gained(o, T0 - 5000)
      assert.same({ { name = "j", at = T0, catchup = true } }, o.due())
      assert.same({ { { name = "j", fire = T0 } } }, o.calls)
      assert.truthy(o.logged("%[j%] 4 fires from 2027%-01%-15T07:59:56Z to 2027%-01%-15T07:59:59Z missed: "
        .. 'no replica held the lease %(missed = "once" runs the latest%)'))
      o.s:ended("j", false, 10)
      assert.same({ { name = "j", at = T0 + 1000 } }, o.advance(500), "then the regular fires")
    end)

    it("missed = all: the latest missed_max, oldest first, one at a time", function()
      local o = claiming({ j = every("1s", 'missed = "all", missed_max = 3,') })
      gained(o, T0 - 5000)
      one_by_one(o, { T0 - 2000, T0 - 1000, T0 })
      assert.truthy(o.logged("2 fires from 2027%-01%-15T07:59:56Z to 2027%-01%-15T07:59:57Z missed: no replica held the lease %(more than missed_max%)"))
      assert.same({ { name = "j", at = T0 + 1000 } }, o.advance(500))
      assert.equal(4, #o.calls, "each fire claimed")
    end)

    it("a reload that changes the schedule drops the rest of a catch-up", function()
      local o = claiming({ j = every("1s", 'missed = "all", missed_max = 3,') })
      gained(o, T0 - 5000)
      assert.same({ { name = "j", at = T0 - 2000, catchup = true } }, o.due())
      o.d.write_job("j", every("2s", 'missed = "all",'))
      o.s:load(true)
      o.s:ended("j", false, 10)
      assert.same({}, o.take())
      assert.truthy(o.logged("2 missed fires from 2027%-01%-15T07:59:59Z to before 2027%-01%-15T08:00:00.501Z "
        .. "not caught up: the schedule changed"))
    end)

    it("missed = skip runs none and logs them missed", function()
      local o = claiming({ j = every("1s", 'missed = "skip",') })
      gained(o, T0 - 3000)
      assert.same({}, o.due())
      assert.truthy(o.logged('3 fires from 2027%-01%-15T07:59:58Z to 2027%-01%-15T08:00:00Z missed: no replica held the lease %(missed = "skip" runs none%)'))
      assert.equal(0, #o.calls)
    end)

    it("fires older than missed_within never run", function()
      local o = claiming({ j = every("1s", 'missed = "all", missed_within = "3s",') })
      gained(o, T0 - 10000)
      one_by_one(o, { T0 - 2000, T0 - 1000, T0 })
      assert.truthy(o.logged("fires from 2027%-01%-15T07:59:51Z to before 2027%-01%-15T07:59:57.500Z missed: "
        .. "older than missed_within"))
    end)

    it("a refused catch-up (the fire ran already) starts nothing", function()
      local o = claiming({ j = every("1s") }, function() return { false } end)
      gained(o, T0 - 2000)
      assert.same({}, o.due())
      assert.truthy(o.logged("fire at 2027%-01%-15T08:00:00Z not started: the claim was refused"))
    end)

    it("a job with no cursor (new) catches up nothing", function()
      local o = claiming({ j = every("1s") })
      o.due()
      o.held.j = true
      o.s:gained("j")
      assert.same({}, o.due())
      assert.equal(0, #o.calls)
    end)

    it("services and singleton = false jobs never claim", function()
      local o = claiming({ svc = "return { run = function() end }", everywhere = every("1s", "singleton = false,") })
      o.held.svc = true
      o.s:gained("svc", T0 - 5000)
      assert.same({ { name = "svc", at = 0 } }, o.due())
      assert.same({ { name = "everywhere", at = T0 + 1000 } }, o.advance(500))
      assert.equal(0, #o.calls)
    end)

    -- The fires the table accounted for (o.other's "account" events) since
    -- the last take: { "<outcome> <at - T0> <claimed|unclaimed>", ... }.
    local function accounts(o)
      local out = {}
      for _, e in ipairs(o.other) do
        if e[1] == "account" then out[#out + 1] = ("%s %d %s"):format(e[4], e[3] - T0, e[5]) end
      end
      return out
    end

    -- Issue 32 item 6: a catch-up after a takeover never pushes out a present fire.
    it('missed = "all": a fire that comes while the catch-up runs queues behind it and runs once', function()
      local o = claiming({ j = every("1s", 'missed = "all",') })
      gained(o, T0 - 3000)
      assert.same({ { name = "j", at = T0 - 2000, catchup = true } }, o.due())
      -- The catch-up's first run is slow: two present fires come meanwhile.
      assert.same({}, o.advance(1000))
      assert.same({}, o.advance(1000))
      assert.same({}, accounts(o), "no fire skipped or missed")
      assert.truthy(o.logged("%[j%] queued the fire at 2027%-01%-15T08:00:02Z behind the catch%-up"))
      local ran = {}
      for _ = 1, 5 do
        o.s:ended("j", false, 10)
        for _, st in ipairs(o.take()) do ran[#ran + 1] = st.at - T0 end
      end
      assert.same({ -1000, 0, 1000, 2000 }, ran, "every fire once, oldest first")
      assert.same({ { name = "j", at = T0 + 3000 } }, o.advance(1000), "then the regular fires")
      assert.same({}, accounts(o))
    end)

    it('missed = "all": fires passed over by a stall during a catch-up queue too, each once', function()
      local o = claiming({ j = every("1s", 'missed = "all",') })
      gained(o, T0 - 2000)
      assert.same({ { name = "j", at = T0 - 1000, catchup = true } }, o.due())
      assert.same({}, o.advance(3200))          -- the loop was held up: 1, 2 and 3 s passed
      local ran = {}
      for _ = 1, 5 do
        o.s:ended("j", false, 10)
        for _, st in ipairs(o.take()) do ran[#ran + 1] = st.at - T0 end
      end
      assert.same({ 0, 1000, 2000, 3000 }, ran)
      assert.same({}, accounts(o))
    end)

    it('missed = "once": the present fire wins over the catch-up run: it runs right after, not skipped', function()
      local o = claiming({ j = every("1s") })
      gained(o, T0 - 5000)
      assert.same({ { name = "j", at = T0, catchup = true } }, o.due())
      assert.same({}, o.advance(600))           -- T0 + 1 s comes while the catch-up runs
      assert.same({}, accounts(o))
      o.s:ended("j", false, 10)
      assert.same({ { name = "j", at = T0 + 1000 } }, o.take())
      -- Two come during a long catch-up run: the newer wins, the older is missed.
      local p = claiming({ j = every("1s") })
      gained(p, T0 - 5000)
      p.due()
      p.advance(1000)
      p.advance(1000)
      assert.same({ "missed 1000 unclaimed" }, accounts(p))
      p.s:ended("j", false, 10)
      assert.same({ { name = "j", at = T0 + 2000 } }, p.take())
    end)

    it("accounts for every fire after the cursor that it does not run", function()
      local o = claiming({ j = every("1s", 'missed = "all", missed_max = 2, missed_within = "4s",') })
      gained(o, T0 - 8000)
      assert.same({ { name = "j", at = T0 - 1000, catchup = true } }, o.due())
      -- 7 s..5 s back: older than missed_within; 4 s..2 s back: more than missed_max.
      assert.same({ "missed -7000 unclaimed", "missed -6000 unclaimed", "missed -5000 unclaimed",
                    "missed -4000 unclaimed", "missed -3000 unclaimed", "missed -2000 unclaimed" },
        accounts(o))
    end)

    -- Issue 38 item 6: a missed fire says what happened, not the policy's name.
    it("a missed fire's row says its cause in words, the policy only where it chose", function()
      local o = claiming({ j = every("1s", 'missed = "all", missed_max = 1, missed_within = "3s",') })
      o.due()
      o.held.j = true
      o.s:gained("j", T0 - 5000, "the holder r1:42:ab stopped renewing at 2027-01-15T07:59:55Z")
      assert.same({ { name = "j", at = T0, catchup = true } }, o.due())
      local why = {}
      for _, e in ipairs(o.other) do
        if e[1] == "account" then why[#why + 1] = ("%d %s"):format(e[3] - T0, e[6]) end
      end
      assert.same({
        "-4000 the holder r1:42:ab stopped renewing at 2027-01-15T07:59:55Z (older than missed_within)",
        "-3000 the holder r1:42:ab stopped renewing at 2027-01-15T07:59:55Z (older than missed_within)",
        "-2000 the holder r1:42:ab stopped renewing at 2027-01-15T07:59:55Z (more than missed_max)",
        "-1000 the holder r1:42:ab stopped renewing at 2027-01-15T07:59:55Z (more than missed_max)",
      }, why)
      assert.truthy(o.logged("2 fires from 2027%-01%-15T07:59:58Z to 2027%-01%-15T07:59:59Z missed: the holder "
        .. "r1:42:ab stopped renewing at 2027%-01%-15T07:59:55Z %(more than missed_max%)"))
      o = claiming({ j = every("1s", 'missed = "skip",') })
      o.due()
      o.held.j = true
      o.s:gained("j", T0 - 2000, "the store did not answer")
      assert.same({}, o.due())
      why = {}
      for _, e in ipairs(o.other) do if e[1] == "account" then why[#why + 1] = e[6] end end
      assert.same({ 'the store did not answer (missed = "skip" runs none)',
                    'the store did not answer (missed = "skip" runs none)' }, why)
    end)

    it("jobs taken at once after an outage account 1,000 missed fires each and 10,000 a turn at most", function()
      local jobs, held = {}, {}
      for i = 1, 15 do
        jobs[("j%02d"):format(i)] = every("1s")
        held[("j%02d"):format(i)] = true
      end
      local o = claiming(jobs, nil, held)
      o.due()
      -- Each missed 1,800 fires (30 minutes); one runs, 1,000 are accounted
      -- each until the turn's 10,000 are gone.
      for name in pairs(jobs) do o.s:gained(name, T0 - 1800 * 1000) end
      o.take()
      local n = 0
      for _, e in ipairs(o.other) do if e[1] == "account" then n = n + 1 end end
      assert.equal(10000, n)
      local cut = 0
      for _, l in ipairs(o.log) do
        if l:find("1799 fires from", 1, true) then
          assert.truthy(l:find("the ledger records the first %d+ of them") or l:find("missed = \"once\" runs the latest%)$"), l)
          if l:find("the ledger records the first 0 of them", 1, true) then cut = cut + 1 end
        end
      end
      assert.equal(5, cut, "the jobs past the turn's share account none")
    end)

    it("a paused job claims nothing, accounts each fire skipped-paused, and runs again once resumed", function()
      local pause = { j = true }
      local o = table_of({ j = every("1s") }, { singleton = true, held = { j = true },
        paused = function(name) return pause[name] end,
        claim = function(list) local ok = {} for i = 1, #list do ok[i] = true end return ok end })
      assert.same({}, o.advance(500))
      local got = accounts(o)
      assert.same({}, o.advance(1000))
      for _, a in ipairs(accounts(o)) do got[#got + 1] = a end
      assert.same({ "skipped-paused 1000 unclaimed", "skipped-paused 2000 unclaimed" }, got)
      assert.truthy(o.logged("skipped the fire at .*: the job is paused"))
      pause.j = false
      assert.same({ { name = "j", at = T0 + 3000 } }, o.advance(1000))
    end)

    it("trigger starts one manual run now, unclaimed, and leaves the fires alone", function()
      local o = claiming({ j = every("1h") }, nil, { j = true })
      o.due()
      assert.is_true(o.s:trigger("j"))
      assert.same({ { name = "j", at = T0 + 500, manual = true } }, o.take())
      assert.equal(0, #o.calls)                         -- no claim: the cursor stays
      o.s:ended("j", false, 10)
      assert.same({}, o.advance(1000))
    end)

    it("trigger follows overlap: skip drops it, queue starts it after the run, replace stops the run", function()
      local o = claiming({ s = every("1h"), q = every("1h", 'overlap = "queue",'),
                           r = every("1h", 'overlap = "replace",') }, nil, { s = true, q = true, r = true })
      o.due()
      for _, n in ipairs({ "s", "q", "r" }) do assert.is_true(o.s:trigger(n)) end
      assert.equal(3, #o.take())
      assert.is_false(o.s:trigger("s"))
      o.take()
      assert.truthy(o.logged("trigger skipped: run %d+ is still going"))
      assert.is_true(o.s:trigger("q"))
      assert.same({}, o.take())
      assert.is_true(o.s:trigger("r"))
      local stops = {}
      o.take()
      for _, e in ipairs(o.other) do if e[1] == "stop" then stops[#stops + 1] = e[2] end end
      assert.same({ "r" }, stops)
      o.s:ended("q", false, 10)
      assert.same({ { name = "q", at = T0 + 500, manual = true } }, o.take())
      o.s:ended("r", true, 10)
      assert.same({ { name = "r", at = T0 + 500, manual = true } }, o.take())
      o.s:ended("s", false, 10)
      assert.same({}, o.take())
    end)

    it("trigger between a fire's claim and its start runs after that fire's run, even under skip", function()
      local o = claiming({ s = every("1s") }, nil, { s = true })
      o.due()
      assert.same({}, o.advance(490))               -- claimed, 10 ms ahead
      assert.equal(1, #o.calls)
      assert.is_true(o.s:trigger("s"))
      assert.same({}, o.take(), "nothing starts before the fire")
      assert.truthy(o.logged("trigger queued: it runs after the fire about to start"))
      assert.same({ { name = "s", at = T0 + 1000 } }, o.advance(10))
      o.s:ended("s", false, 10)
      assert.same({ { name = "s", at = T0 + 1000, manual = true } }, o.take())
    end)

    it("trigger on a replica that does not hold the lease is dropped", function()
      local o = claiming({ j = every("1h") }, nil, { j = false })
      o.due()
      assert.is_false(o.s:trigger("j"))
      assert.same({}, o.take())
    end)

    it("accounts for a fire skipped because the run still goes, and one that waited in vain", function()
      local o = claiming({ j = every("1s") }, nil, { j = true })
      assert.same({ { name = "j", at = T0 + 1000 } }, o.advance(500))
      o.advance(1000)
      assert.same({ "skipped-overlap 2000 unclaimed" }, accounts(o))
      -- A fire claimed ahead, then the lease goes before it starts.
      o.s:ended("j", false, 1000)
      o.t.wall = T0 + 2998
      o.due()
      o.held.j = false
      o.advance(1)
      assert.same({ "missed 3000 claimed" }, accounts(o))
    end)

    it("the stop gives back the fires claimed ahead of their time; refused or unanswered, they are missed", function()
      for _, case in ipairs { "answered", "down" } do
        local given = {}
        local o = table_of({ a = every("1s"), b = every("1s"), c = every("1s"), d = every("1h") }, {
          singleton = true, held = { a = true, b = true, c = true, d = true },
          claim = function(list)
            local ok = {}
            for i = 1, #list do ok[i] = true end
            return ok
          end,
          unclaim = function(list)
            given[#given + 1] = list
            if case == "down" then return nil, "the store is down" end
            local ok = {}
            for i, c in ipairs(list) do ok[i] = c.name ~= "b" end   -- b's lease moved on
            return ok
          end,
        })
        o.t.wall = T0 + 998             -- within the claim's lead: claimed, not started
        assert.same({}, o.due())
        o.s:stop()
        assert.same({}, o.advance(10), "no start after the stop")
        o.s:stopped()
        o.take()
        assert.equal(1, #given, "one call for all")
        table.sort(given[1], function(x, y) return x.name < y.name end)
        assert.same({ { name = "a", fire = T0 + 1000 }, { name = "b", fire = T0 + 1000 },
                      { name = "c", fire = T0 + 1000 } }, given[1], "only the claimed fires")
        if case == "answered" then
          assert.same({ "missed 1000 claimed" }, accounts(o))
          assert.truthy(o.logged("fire at 2027%-01%-15T08:00:01Z given back: leash is stopping"))
        else
          assert.same({ "missed 1000 claimed", "missed 1000 claimed", "missed 1000 claimed" }, accounts(o))
          assert.is_nil(o.logged("given back"))
        end
      end
    end)

    it("accounts for the fires the loop came too late for", function()
      local o = claiming({ j = every("1s") }, nil, { j = true })
      assert.same({ { name = "j", at = T0 + 1000 } }, o.advance(500))
      o.s:ended("j", false, 10)
      assert.same({ { name = "j", at = T0 + 4000 } }, o.advance(3000), "the latest starts")
      assert.same({ "missed 2000 unclaimed", "missed 3000 unclaimed" }, accounts(o))
    end)

    it("a fire whose claim kept failing is accounted missed once missed_within passed", function()
      local o = claiming({ j = every("10s", 'missed_within = "2s",') },
        function() return nil, "down" end, { j = true })
      o.advance(9500)
      o.advance(2500)
      assert.same({ "missed 10000 unclaimed" }, accounts(o))
    end)

    -- A holder that takes the lease with cursor T0 - 3000 at T0 + gain
    -- (a follower until then; turn_first: the follower's turn at that
    -- instant comes before the election's), claims against a cursor as the
    -- store does, and runs each start to its end at once: by T0 + 4000 every
    -- fire after the cursor was started or accounted for, exactly once.
    local function fires_once(missed, overlap, gain, turn_first)
      local cursor = T0 - 3000
      local o = claiming({ j = every("1s", ("missed = %q, overlap = %q,"):format(missed, overlap)) }, function(list)
        local ok = {}
        for i, c in ipairs(list) do
          ok[i] = c.fire > cursor
          if ok[i] then cursor = c.fire end
        end
        return ok
      end)
      local seen, where = {}, ("missed = %s, overlap = %s, lease taken at T0%+d%s"):format(missed, overlap, gain,
        turn_first and " after the follower's turn" or "")
      local function note(f, what)
        assert(not seen[f], ("%s: fire %d %s and %s"):format(where, f - T0, seen[f], what))
        seen[f] = what
      end
      -- A turn, and the runs that start as others end.
      local function turn()
        local starts = o.due()
        repeat
          for _, e in ipairs(o.other) do
            if e[1] == "account" and e[5] ~= "claimed" then note(e[3], "accounted " .. e[4]) end
          end
          for _, st in ipairs(starts) do
            note(st.at, "started")
            o.s:ended("j", false, 0)
          end
          local more = #starts > 0
          starts = o.take()
        until not more and #starts == 0
      end
      o.due()
      while o.t.wall + o.sleep < T0 + gain do o.advance(o.sleep) end
      o.t.wall = T0 + gain
      if turn_first then turn() end
      o.held.j = true
      o.s:gained("j", T0 - 3000)
      repeat
        turn()
        o.t.wall = o.t.wall + math.max(o.sleep, 1)
      until o.t.wall > T0 + 4100
      for f = T0 - 2000, T0 + 4000, 1000 do
        assert(seen[f], ("%s: fire %d neither started nor accounted for"):format(where, f - T0))
      end
    end

    it("every fire after the cursor starts or is accounted for once, wherever the lease is taken", function()
      for _, missed in ipairs({ "all", "once", "skip" }) do
        for _, overlap in ipairs({ "skip", "queue", "replace" }) do
          for _, gain in ipairs({ 500, 990, 994, 995, 996, 999, 1000, 1001, 1004, 1005, 1006 }) do
            fires_once(missed, overlap, gain, false)
            fires_once(missed, overlap, gain, true)
          end
        end
      end
    end)

    it("losing the lease drops a fire waiting for its claim", function()
      local o = claiming({ j = every("10s") }, function() return nil, "down" end, { j = true })
      o.due()
      o.advance(9500)
      o.held.j = false
      o.advance(100)
      assert.truthy(o.logged("fire at 2027%-01%-15T08:00:10Z not started: this replica no longer holds the lease"))
    end)
  end)

  describe("forking ahead", function()
    -- A table whose env forks ahead: prepare(name, fire, clocks) answers
    -- 1 (made), 0 (not in this turn) or -1 (failed); by default 1, taking
    -- 1 ms of the monotonic clock.
    local function ahead(jobs, opts)
      opts = opts or {}
      opts.prepare = opts.prepare or function(_, _, t)
        t.mono = t.mono + 1
        return 1
      end
      local o = table_of(jobs, opts)
      function o.kinds(what)
        local got = {}
        for _, e in ipairs(o.other) do
          if e[1] == what then got[#got + 1] = { e[2], e[3] } end
        end
        return got
      end
      return o
    end

    it("forks a fire's process as late as it can (twice the cost, 50 ms more, before its claim may go out) and starts it at the fire", function()
      local o = ahead { tick = every("1s") }
      assert.same({}, o.due())
      assert.same({}, o.kinds("prepare"))
      assert.equal(1000 - 152 - 500, o.sleep, "1 ms a fork until measured: 2 ms + 50 ms + 100 ms before")
      assert.same({}, o.advance(o.sleep))
      assert.same({ { "tick", T0 + 1000 } }, o.kinds("prepare"))
      assert.same({ { name = "tick", at = T0 + 1000, prepared = true } }, o.advance(152))
      o.s:ended("tick", false, 3)
      -- The next one: measured at 1 ms, still 152 ms before its fire.
      assert.same({}, o.advance(1000 - 152 - 1))
      assert.same({}, o.kinds("prepare"))
      o.advance(1)
      assert.same({ { "tick", T0 + 2000 } }, o.kinds("prepare"))
    end)

    it("forks a burst's processes early enough for all, at most 5 ms of forks a turn", function()
      local jobs = {}
      for i = 1, 100 do jobs[("j%03d"):format(i)] = every("1s") end
      local o = ahead(jobs)
      o.due()
      -- 100 forks at 1 ms: from 350 ms before the fire.
      assert.equal(1000 - 350 - 500, o.sleep)
      o.advance(o.sleep)
      local made, turns = #o.kinds("prepare"), 1
      assert.equal(5, made, "5 ms of forks in a turn")
      assert.equal(0, o.sleep, "the rest next turn")
      -- Then as late as the rest can be forked in time, 5 ms a turn.
      while made < 100 and turns < 200 do
        o.advance(o.sleep)
        assert.is_true(#o.kinds("prepare") <= 5)
        made, turns = made + #o.kinds("prepare"), turns + 1
      end
      assert.equal(100, made)
      assert.is_true(o.t.wall <= T0 + 1000 - 150, "all forked 150 ms before the fire")
      local starts = o.advance(T0 + 1000 - o.t.wall)
      assert.equal(100, #starts)
      for _, st in ipairs(starts) do assert.is_true(st.prepared, st.name) end
    end)

    it("an instant's forking starts early enough for all its fires, those still ending their last run too", function()
      local jobs = {}
      for i = 1, 100 do jobs[("j%03d"):format(i)] = every("1s") end
      local o = ahead(jobs)
      o.due()
      while #o.advance(o.sleep) == 0 do end           -- all 100 started at T0 + 1000
      assert.equal(T0 + 1000, o.t.wall)
      for i = 1, 20 do o.s:ended(("j%03d"):format(i), false, 5) end
      o.kinds("prepare")
      -- The 80 others still run: the 20 free to fork wait for the lead of
      -- all 100 (100 forks at 1 ms, twice, 150 ms more), not of 20 (190 ms).
      o.advance(1000 - 350 - 1)
      assert.same({}, o.kinds("prepare"))
      o.advance(1)
      assert.equal(5, #o.kinds("prepare"), "from 350 ms before the fire, 5 ms of forks a turn")
    end)

    it("forks nothing into a fire's time: a fire 5 ms away starts with a fresh fork", function()
      local o = ahead { tick = every("1s") }
      o.due()
      o.advance(496)                  -- a long turn: the fire is 4 ms away
      assert.same({}, o.kinds("prepare"))
      assert.same({ { name = "tick", at = T0 + 1000 } }, o.advance(4))
    end)

    it("a fork that failed is not tried again for that fire; one put off is, next turn", function()
      local answers = { -1 }
      local o = ahead({ tick = every("1s") }, { prepare = function()
        return table.remove(answers, 1) or 1
      end })
      o.due()
      o.advance(o.sleep)
      assert.same({}, o.kinds("prepare"))
      assert.same({ { name = "tick", at = T0 + 1000 } }, o.advance(160), "forked at the fire")
      o.s:ended("tick", false, 3)
      answers = { 0 }
      o.due()
      o.advance(o.sleep)
      assert.same({}, o.kinds("prepare"))
      assert.equal(1, o.sleep, "tried again a moment later")
      o.advance(1)
      assert.same({ { "tick", T0 + 2000 } }, o.kinds("prepare"))
    end)

    it("a run going forks nothing ahead for the next fire until it ended", function()
      local o = ahead { tick = every("1s") }
      o.due()
      assert.equal(1, #o.advance(500))
      o.advance(950)                  -- the run still goes 50 ms before the next fire
      assert.same({}, o.kinds("prepare"))
      o.s:ended("tick", false, 10)
      o.due()
      assert.same({ { "tick", T0 + 2000 } }, o.kinds("prepare"))
    end)

    it("a run whose body is over, its process only exiting, lets the next fire's process be forked", function()
      local o = ahead { tick = every("1s") }
      o.due()
      assert.equal(1, #o.advance(500))        -- T0 + 1000
      o.advance(950)                          -- 50 ms before the next fire
      assert.same({}, o.kinds("prepare"), "not while the body goes")
      o.s:body_over("tick")
      o.due()
      assert.same({ { "tick", T0 + 2000 } }, o.kinds("prepare"))
      -- The fire itself still waits for the run's end: skipped, its
      -- process goes.
      assert.same({}, o.advance(50))
      o.due()
      assert.same({ { "tick", T0 + 2000 } }, o.kinds("discard"))
      o.s:ended("tick", false, 10)
      o.advance(o.sleep)
      assert.same({ { name = "tick", at = T0 + 3000, prepared = true } }, o.advance(o.sleep))
    end)

    it("a claimed fire's start goes to its process ahead; taken back when it may not start, or it ran", function()
      local held = { a = true, b = true, c = true, d = true }
      local late = {}                 -- take_back: too late for these
      local o = ahead({ a = every("1s"), b = every("1s"), c = every("1s"), d = every("1s") }, {
        singleton = true, held = held,
        claim = function(list)
          local ok = {}
          for i = 1, #list do ok[i] = true end
          return ok
        end,
        take_back = function(name) return not late[name] end,
      })
      o.due()
      o.advance(o.sleep)              -- the forks, 58 ms before the fire
      assert.equal(4, #o.kinds("prepare"))
      o.advance(o.sleep)              -- the claims, 10 ms before it
      assert.equal(T0 + 990, o.t.wall)
      local gone = {}
      for _, e in ipairs(o.kinds("ahead")) do gone[#gone + 1] = e[1] .. " " .. (e[2] - T0) end
      table.sort(gone)
      assert.same({ "a 1000", "b 1000", "c 1000", "d 1000" }, gone, "each start ahead, once claimed")
      -- Before the fire: b's and c's leases go; b's start is taken back,
      -- c's process had read its start (its time came first there).
      held.b, held.c, late.c = false, false, true
      local starts = o.advance(2)
      assert.same({ { name = "c", at = T0 + 1000, prepared = true } }, starts)
      local back = {}
      for _, e in ipairs(o.other) do
        if e[1] == "take_back" then back[e[2]] = e[4] end
        if e[1] == "account" then
          assert.equal("b", e[2], "only the fire taken back is missed")
          assert.equal("missed", e[4])
        end
      end
      assert.same({ b = "taken", c = "too late" }, back)
      assert.same({ { "b", T0 + 1000 } }, o.kinds("discard"))
      -- d's process read its start and ended before this turn came: it
      -- is the fire's run, started once.
      o.s:prep_started("d")
      assert.same({ { name = "d", at = T0 + 1000, prepared = true } }, o.take())
      -- a starts at its time, as any.
      starts = o.advance(T0 + 1000 - o.t.wall)
      assert.same({ { name = "a", at = T0 + 1000, prepared = true } }, starts)
      assert.same({}, o.kinds("take_back"), "nothing taken back of a fire that starts")
      for _, n in ipairs { "a", "c", "d" } do o.s:ended(n, false, 1) end
      -- The stop between the claims and the fire: taken back and given
      -- back (no unclaim here: missed), or too late: it runs.
      held.b, held.c, late.c = true, true, nil
      o.due()
      o.advance(o.sleep)              -- the forks
      o.advance(o.sleep)              -- the claims
      assert.equal(T0 + 1990, o.t.wall)
      assert.equal(4, #o.kinds("ahead"))
      late.a = true
      o.s:stop()
      o.s:stopped()
      local after = o.take()
      assert.same({ { name = "a", at = T0 + 2000, prepared = true } }, after)
      assert.same({}, o.advance(100), "nothing else starts")
    end)

    it("what will not start goes: a refused claim, a lost lease, a pause, a reload, a removal, the stop", function()
      local held, refuse, paused = { a = true, b = true, c = true, d = true, e = true }, {}, {}
      local o = ahead({ a = every("1s"), b = every("1s"), c = every("1s"), d = every("1s"),
                        e = every("1s") }, {
        singleton = true, held = held,
        claim = function(list)
          local ok = {}
          for i, c in ipairs(list) do ok[i] = not refuse[c.name] end
          return ok
        end,
        paused = function(name) return paused[name] == true end,
      })
      o.due()
      o.advance(o.sleep)
      assert.equal(5, #o.kinds("prepare"))
      refuse.a = true                 -- another replica ran it
      held.b = false                  -- the lease moved
      paused.c = true
      o.d.write_job("d", every("1s", "timeout = '5s',"))
      o.s:load(true)
      o.take()
      local gone = {}
      local function went()
        for _, e in ipairs(o.kinds("discard")) do gone[e[1]] = true end
      end
      went()
      assert.same({ d = true }, gone, "the reload: forked from the old definition")
      gone = {}
      local starts = o.advance(200)
      went()
      table.sort(starts, function(x, y) return x.name < y.name end)
      assert.same({ { name = "d", at = T0 + 1000 }, { name = "e", at = T0 + 1000, prepared = true } },
        starts, "the reloaded job forks at its fire")
      o.due()
      went()
      assert.same({ a = true, b = true, c = true }, gone)
      -- The next second's: the removal and the stop.
      o.s:ended("d", false, 3)
      o.s:ended("e", false, 3)
      refuse.a, held.b, paused.c = nil, true, nil
      o.advance(900)
      local made = {}
      for _, e in ipairs(o.kinds("prepare")) do made[e[1]] = true end
      assert.same({ a = true, b = true, c = true, d = true, e = true }, made)
      os.remove(o.d.jobs .. "/a.lua")
      o.s:load(true)
      o.take()
      assert.same({}, o.kinds("discard"), "not yet: at the next turn")
      o.due()
      o.s:drop_removed()
      assert.same({ { "a", T0 + 2000 } }, o.kinds("discard"))
      o.s:stop()
      o.due()
      assert.equal(4, #o.kinds("discard"))
      assert.same({}, o.advance(200))
    end)
  end)

  it("after the stop no run starts, and a service is not restarted", function()
    local o = table_of { tick = every("1s"), svc = "return { run = function() end }" }
    assert.equal(1, #o.due())
    o.s:stop()
    o.s:ended("svc", false, 10)
    assert.same({}, o.advance(5000))
  end)
end)
