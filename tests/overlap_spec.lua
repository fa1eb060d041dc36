-- overlap = "queue" and "replace" with real processes: one `leash run`, two
-- every = "1s" jobs whose bodies sleep 1.5 s, so every other fire comes while
-- a run goes.  Each body records its start (and whether the previous run's
-- process is still alive then) and its end; the specs check from those
-- records and the log that runs never overlap and that each policy does what
-- it says.  The fake-clock rules are in sched_spec.lua.
local L = require "e2e"

-- A recorder job (e2e.recorder_job: "start" and "end" lines with the fire's
-- scheduled_at and the pid) whose body first looks at the previous run's
-- process: still there and not a zombie, it records an "overlap" line.  Then
-- it sleeps 1.5 s.
local function job_src(out, policy)
  return L.recorder_job(out, { every = "1s", extra = ("  overlap = %q,"):format(policy), body = [[
    local prev, starts = nil, {}
    for line in io.lines(OUT) do starts[#starts + 1] = line:match("^start %S+ (%d+)") end
    prev = starts[#starts - 1]
    local p = prev and io.open("/proc/" .. prev .. "/stat")
    if p then
      if not p:read("l"):match("^%d+ %b() Z") then
        record(("overlap %s %s %.3f"):format(tostring(ctx.scheduled_at), prev, core.now()))
      end
      p:close()
    end
    ctx.sleep(1.5)
  ]] })
end

-- The starts in order, the ends by pid, and the overlaps seen.
local function parse(path)
  local starts, ends, overlaps = {}, {}, {}
  for _, r in ipairs(L.records(path)) do
    if r.what == "start" then starts[#starts + 1] = r
    elseif r.what == "end" then ends[r.pid] = r
    else overlaps[#overlaps + 1] = r end
  end
  return starts, ends, overlaps
end

describe("overlap with real processes", function()
  local d, p, q_starts, q_ends, q_overlaps, r_starts, r_ends, r_overlaps

  lazy_setup(function()
    local dir = L.tmpdir("ovl")
    d = L.dir {
      config = { leash = { grace = "1s" } },
      jobs = { q = job_src(dir .. "/q.out", "queue"), r = job_src(dir .. "/r.out", "replace") },
    }
    d.q, d.r = dir .. "/q.out", dir .. "/r.out"
    L.sleep_to_second(0.2)
    p = L.spawn(d)
    assert(L.wait_for(function()
      return #parse(d.q) >= 4 and #parse(d.r) >= 4
    end, 8), "not enough runs:\n" .. p:log_text())
    assert.equal(0, p:stop(10))
    q_starts, q_ends, q_overlaps = parse(d.q)
    r_starts, r_ends, r_overlaps = parse(d.r)
  end)

  local function logged(pat) return p:grep(pat)[1] end

  lazy_teardown(function()
    if p and p:alive() then p:signal("KILL") end
  end)

  it("queue: each run starts after the last one ended, a queued fire the moment it did", function()
    assert.same({}, q_overlaps, "a run started beside the previous one")
    local queued = 0
    for i = 2, #q_starts do
      local prev, cur = q_starts[i - 1], q_starts[i]
      local prev_end = assert(q_ends[prev.pid], "a queued job's run was stopped").t
      assert.is_true(cur.t >= prev_end, "started before the previous run ended")
      assert.is_true(cur.scheduled_at > prev.scheduled_at)
      if cur.t - cur.scheduled_at > 0.3 then
        -- Late by design: it waited for the run before it, and started at once.
        queued = queued + 1
        assert.is_true(cur.t - prev_end < 0.5, ("queued fire started %.3fs after the run ended")
          :format(cur.t - prev_end))
      end
    end
    assert.is_true(queued >= 1, "no fire was queued")
    assert.truthy(logged("%[q%] queued the fire at [%dT:Z-]+: run %d+ is still going"))
    assert.truthy(logged("%[q%] starting the queued fire at "))
    assert.is_nil(logged("%[q run %d+%] stopping %(replaced"))
  end)

  it("replace: each fire stops the run before and starts once it is gone", function()
    assert.same({}, r_overlaps, "a run started beside the one it replaced")
    for i = 2, #r_starts do
      local prev, cur = r_starts[i - 1], r_starts[i]
      assert.equal(prev.scheduled_at + 1, cur.scheduled_at, "a fire did not run")
      assert.is_nil(r_ends[prev.pid], "a replaced run went on to its end")
      assert.is_true(cur.t - cur.scheduled_at < 0.5, ("started %.3fs after its fire")
        :format(cur.t - cur.scheduled_at))
    end
    assert.truthy(logged("%[r run %d+%] stopping %(replaced by the fire at [%dT:Z-]+%)"))
    assert.truthy(logged("%[r run %d+%] stopped %(replaced by the fire at [%dT:Z-]+%) after"))
    assert.truthy(logged("%[r%] starting the fire at [%dT:Z-]+: run %d+ was replaced"))
  end)
end)
