-- Rendezvous hashing, the preferred holder over presence rows, and the
-- hand-off decision (src/presence.c), through leash.core: pure functions,
-- made-up rows and an injected clock, no store and no process.
local core = require "leash.core"

local function names(n, prefix)
  local t = {}
  for i = 1, n do t[i] = { name = (prefix or "r") .. i, owner = (prefix or "r") .. i .. ":1:00" } end
  return t
end

local function jobs(n)
  local t = {}
  for i = 1, n do t[i] = ("job-%04d"):format(i) end
  return t
end

local function placement(js, cands)
  local at = {}
  for _, j in ipairs(js) do at[j] = cands[core.rendezvous(j, cands)].name end
  return at
end

describe("rendezvous", function()
  it("is deterministic and the same whatever the order of the candidates", function()
    local c = names(5)
    local rev = {}
    for i = #c, 1, -1 do rev[#rev + 1] = c[i] end
    for _, j in ipairs(jobs(200)) do
      assert.equal(c[core.rendezvous(j, c)].name, rev[core.rendezvous(j, rev)].name)
    end
    assert.equal(core.rendezvous_score("a", "b"), core.rendezvous_score("a", "b"))
    assert.is_nil(core.rendezvous("a", {}))
  end)

  it("spreads 3,000 jobs over 3 replicas within 15% of a third each", function()
    local count = {}
    for _, r in pairs(placement(jobs(3000), names(3))) do count[r] = (count[r] or 0) + 1 end
    for _, r in ipairs({ "r1", "r2", "r3" }) do
      assert.is_true(math.abs(count[r] - 1000) < 150, r .. " has " .. count[r])
    end
  end)

  it("moves only the leaving replica's jobs, and a joining one takes about 1/n", function()
    local js = jobs(1000)
    local ten = names(10)
    local before = placement(js, ten)
    local nine = {}
    for i = 1, 9 do nine[i] = ten[i] end
    local after = placement(js, nine)
    local moved = 0
    for _, j in ipairs(js) do
      if before[j] ~= after[j] then
        moved = moved + 1
        assert.equal("r10", before[j])      -- only r10's jobs move
      end
    end
    assert.is_true(moved > 60 and moved < 140, "moved " .. moved)
    -- r10 back: exactly the same jobs return (sticky placement).
    local again = placement(js, ten)
    for _, j in ipairs(js) do assert.equal(before[j], again[j]) end
  end)

  it("breaks a tie between two replicas of one name by the smaller owner id", function()
    local c = { { name = "same", owner = "same:20:bb" }, { name = "same", owner = "same:10:aa" } }
    for _, j in ipairs(jobs(20)) do assert.equal(2, core.rendezvous(j, c)) end
  end)
end)

describe("presence_prefer", function()
  local now = 100000
  local function row(owner, t)
    t = t or {}
    return { owner = owner, host = "h", pid = 1, version = "x", jobs_hash = t.hash or "H",
             started_at = t.started or now - 60000, heartbeat = t.beat or now - 100,
             draining = t.draining or false, jobs = t.jobs }
  end
  local function pref(rows, job, me)
    return core.presence_prefer(rows, now, me or "a:1:00", 600, 400, job)
  end
  local function prefer_among(owners, job)
    local c = {}
    for i, o in ipairs(owners) do c[i] = { name = o:match("^[^:]*"), owner = o } end
    return owners[core.rendezvous(job, c)]
  end

  it("prefers by rendezvous over the live replicas only", function()
    local rows = { row("a:1:00"), row("b:1:00"), row("c:1:00", { beat = now - 600 }) }
    for _, j in ipairs(jobs(50)) do
      local o, settled = pref(rows, j)
      assert.equal(prefer_among({ "a:1:00", "b:1:00" }, j), o)
      assert.is_true(settled)
    end
  end)

  it("leaves out draining replicas, and a joining one until it has been up for settle", function()
    local rows = { row("a:1:00"), row("b:1:00", { draining = true }),
                   row("c:1:00", { started = now - 399 }) }
    for _, j in ipairs(jobs(20)) do assert.equal("a:1:00", (pref(rows, j))) end
    rows[3].started_at = now - 400
    local seen = {}
    for _, j in ipairs(jobs(40)) do seen[pref(rows, j)] = true end
    assert.is_true(seen["c:1:00"] and seen["a:1:00"])
  end)

  it("falls back to the live replicas when none is settled, and to nobody without rows", function()
    local rows = { row("a:1:00", { started = now }), row("b:1:00", { started = now }) }
    local o, settled = pref(rows, "job-0001")
    assert.equal(prefer_among({ "a:1:00", "b:1:00" }, "job-0001"), o)
    assert.is_false(settled)
    assert.is_nil((pref({}, "job-0001")))
  end)

  it("prefers a job only among the replicas that define it", function()
    -- b's jobs differ from mine (another hash) and lack job-0002.
    local rows = { row("a:1:00"), row("b:1:00", { hash = "other", jobs = "job-0001\njob-0003\n" }) }
    for _, j in ipairs({ "job-0001", "job-0003" }) do
      assert.equal(prefer_among({ "a:1:00", "b:1:00" }, j), (pref(rows, j)))
    end
    assert.equal("a:1:00", (pref(rows, "job-0002")))
  end)

  it("shows a garbled hash or an unknown version without failing", function()
    local rows = { row("a:1:00"), row("b:1:00", { hash = "\1\2not hex", jobs = "" }) }
    rows[2].version = "99.garbled"
    assert.equal("a:1:00", (pref(rows, "job-0001")))     -- b defines nothing
  end)
end)

describe("safe_point", function()
  local base = { now = 10000, handover = 240 }
  local function sp(t)
    local a = {}
    for k, v in pairs(base) do a[k] = v end
    for k, v in pairs(t) do a[k] = v end
    return core.safe_point(a)
  end

  it("hands a service off at once, stopping its run first", function()
    assert.equal("stop", sp { service = true, busy = true })
    assert.equal("release", sp { service = true, busy = false })
  end)

  it("never while a run goes or a claimed fire waits", function()
    assert.equal("wait", sp { busy = true, next_fire = 60000, after_next = 120000 })
  end)

  it("releases when no fire is due within the handover time", function()
    assert.equal("release", sp { next_fire = 10241, after_next = 70241 })
    assert.equal("wait", sp { next_fire = 10240, after_next = 70240 })
  end)

  it("hands a job that fires more often than the handover off as soon as it is idle", function()
    assert.equal("release", sp { handover = 2400, next_fire = 10500, after_next = 11500 })
  end)
end)

describe("presence_jobs", function()
  it("hashes names and definitions whatever their order, and lists the names sorted", function()
    local h1, t1 = core.presence_jobs { { "b", "d2" }, { "a", "d1" } }
    local h2, t2 = core.presence_jobs { { "a", "d1" }, { "b", "d2" } }
    assert.equal(h1, h2)
    assert.equal("a\nb\n", t1)
    assert.equal(t1, t2)
    assert.matches("^%x+$", h1)
    assert.are_not.equal(h1, (core.presence_jobs { { "a", "d1" }, { "b", "changed" } }))
    local h0, t0 = core.presence_jobs {}
    assert.equal("", t0)
    assert.equal(16, #h0)
  end)
end)
