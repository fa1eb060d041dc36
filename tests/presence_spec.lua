-- Rendezvous hashing, the preferred holder over presence rows, and the
-- hand-off decision (src/cluster/presence.c), through leash.core: pure functions,
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

-- A presence row at db time now (as a beat reads it back).
local now = 100000
local function row(owner, t)
  t = t or {}
  return { owner = owner, host = "h", pid = 1, version = "x", jobs_hash = t.hash or "H",
           started_at = t.started or now - 60000, heartbeat = t.beat or now - 100,
           draining = t.draining or false, jobs = t.jobs }
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

-- Placement (src/cluster/place.c through core.placement): rendezvous hashing with
-- bounded loads over made-up rows, 100 random name sets a size, each from
-- its own seed so that a failure names the set that broke.
describe("placement", function()
  local LIVE, SETTLE = 600, 400
  local CHARS = "abcdefghijklmnopqrstuvwxyz0123456789._-"

  -- k distinct job names of any shape leash allows, from seed.
  local function random_names(k, seed)
    math.randomseed(seed)
    local out, seen = {}, {}
    while #out < k do
      local len, c = math.random(1, 40), {}
      for i = 1, len do
        local n = math.random(1, i == 1 and 36 or #CHARS)
        c[i] = CHARS:sub(n, n)
      end
      local s = table.concat(c)
      if not seen[s] then seen[s], out[#out + 1] = true, s end
    end
    return out
  end

  -- A jobs text as presence_jobs writes it: sorted, "name" or "name weight".
  local function text_of(list, weights)
    local t = {}
    for i, n in ipairs(list) do t[i] = { n, "", weights and weights[n] } end
    return select(2, core.presence_jobs(t))
  end


  local function owner(i, pid) return ("r%d:%d:00"):format(i, pid or 1) end

  -- The replicas' rows as replica me sees them: all define my jobs.
  local function rows_of(list)
    local t = {}
    for i, o in ipairs(list) do t[i] = row(o) end
    return t
  end

  local function set(p, rows, jobs, me)
    return p:set(rows, { now = now, me = me or rows[1].owner, live_ms = LIVE, settle_ms = SETTLE,
                         jobs = jobs })
  end

  local function count(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n
  end

  local function moved(a, b)
    local n = 0
    for j, o in pairs(a) do if b[j] ~= o then n = n + 1 end end
    return n
  end

  -- The first job on which maps a and b differ, or nil.
  local function differ(a, b)
    for j, o in pairs(a) do if b[j] ~= o then return j end end
    for j, o in pairs(b) do if a[j] ~= o then return j end end
  end

  -- n replicas x k jobs over 100 name sets: every share within tol of the
  -- mean; every replica's leave, and its join back, moves at most 1.5 x
  -- k/n jobs, and the map after the leave is the one runner_up uses; a
  -- restart of each (same name, new owner id) gets the same jobs back.
  local function bounds(n, k, tol)
    local worst_share, worst_move = 0, 0
    for seed = 1, 100 do
      local jobs = text_of(random_names(k, seed))
      local owners = {}
      for i = 1, n do owners[i] = owner(i) end
      local p = core.placement()
      assert.is_true(set(p, rows_of(owners), jobs))
      local map, load = p:map()
      assert.equal(k, count(map), "seed " .. seed)
      for _, o in ipairs(owners) do
        local d = math.abs((load[o] or 0) - k / n)
        worst_share = math.max(worst_share, d)
        assert.is_true(d <= tol, ("seed %d: %s has %d of %d jobs"):format(seed, o, load[o] or 0, k))
      end
      local without = {}
      for x = 1, n do without[x] = p:map(owners[x]) end
      for x = 1, n do
        local rest = {}
        for i = 1, n do if i ~= x then rest[#rest + 1] = owners[i] end end
        -- x leaves: the map made again from the others' rows
        assert.is_true(set(p, rows_of(rest), jobs))
        local left = p:map()
        assert.is_nil(differ(without[x], left), "seed " .. seed .. ": the runner-up map is not the leave's")
        local m = moved(map, left)
        worst_move = math.max(worst_move, m / (k / n))
        assert.is_true(m <= 1.5 * k / n, ("seed %d: %s leaving moved %d jobs"):format(seed, owners[x], m))
        assert.equal(k, count(left))
        -- x restarts (a new owner id, the same name) and joins again
        local again = {}
        for i = 1, n do again[i] = i == x and owner(i, 2) or owners[i] end
        assert.is_true(set(p, rows_of(again), jobs))
        local back = p:map()
        for j, o in pairs(map) do
          if back[j] ~= (o == owners[x] and again[x] or o) then
            error(("seed %d: after %s restarted, %s is on %s, not %s"):format(seed, owners[x], j,
              tostring(back[j]), o))
          end
        end
      end
    end
    return worst_share, worst_move
  end

  it("3 replicas x 30 jobs of any names: 10 each; a join or leave moves at most 15; a restart gets its jobs back", function()
    local s, m = bounds(3, 30, 1)
    print(("\n[placement 3 x 30] worst share deviation %d, worst move %.2f x ideal"):format(s, m))
  end)

  it("10 replicas x 1,000 jobs of any names: within 10% of the mean; a join or leave moves at most 150", function()
    local s, m = bounds(10, 1000, 10)
    print(("\n[placement 10 x 1000] worst share deviation %d, worst move %.2f x ideal"):format(s, m))
  end)

  it("runner_up is where the job goes in the map without its preferred replica", function()
    local names = random_names(200, 7)
    local jobs = text_of(names)
    local owners = { owner(1), owner(2), owner(3), owner(4) }
    local p = core.placement()
    set(p, rows_of(owners), jobs)
    local map = p:map()
    local without = {}
    for _, o in ipairs(owners) do without[o] = p:map(o) end
    for _, j in ipairs(names) do
      local first, settled = p:prefer(j)
      assert.equal(map[j], first)
      assert.is_true(settled)
      assert.equal(without[first][j], p:runner_up(j))
      assert.are_not.equal(first, p:runner_up(j))
    end
  end)

  it("weights count in the bound: a replica with a weight-5 job gets fewer others", function()
    for seed = 1, 100 do
      local names = random_names(30, 1000 + seed)
      local heavy = names[1 + seed % 30]
      local p = core.placement()
      local owners = { owner(1), owner(2), owner(3) }
      set(p, rows_of(owners), text_of(names, { [heavy] = 5 }))
      local map, load = p:map()
      local jobs = {}
      for _, o in pairs(map) do jobs[o] = (jobs[o] or 0) + 1 end
      -- 34 in all: 12, 11, 11 (the heavy one and 7 others; 11 each)
      for _, o in ipairs(owners) do
        assert.is_true(load[o] >= 11 and load[o] <= 12, ("seed %d: %s carries %d"):format(seed, o, load[o]))
        if o ~= map[heavy] then
          assert.is_true(jobs[o] > jobs[map[heavy]], ("seed %d: %d jobs beside the heavy one, %d on %s")
            :format(seed, jobs[map[heavy]], jobs[o], o))
        end
      end
    end
  end)

  it("every replica computes the same map from its own view of the rows", function()
    -- r3 has an extra job and gives one a weight the others lack; a
    -- row whose hash is mine comes back without its jobs text.
    local base = random_names(40, 99)
    local texts = { text_of(base), text_of(base), nil, text_of(base) }
    local extra = { table.unpack(base) }
    extra[#extra + 1] = "only-on-r3"
    texts[3] = text_of(extra, { [base[1]] = 4 })
    local hash = { "A", "A", "B", "A" }
    local first
    for me = 1, 4 do
      local rows = {}
      for i = 1, 4 do
        rows[i] = row(owner(i), { hash = hash[i], jobs = hash[i] ~= hash[me] and texts[i] or nil })
      end
      local p = core.placement()
      set(p, rows, texts[me], owner(me))
      local map = p:map()
      assert.equal(41, count(map))
      assert.equal(owner(3), map["only-on-r3"])
      if first then assert.same(first, map, "seen from r" .. me) else first = map end
    end
  end)

  it("reads a row of an older version (no weights) or a garbled weight as 1 a job, never failing", function()
    local p = core.placement()
    local rows = { row(owner(1)), row(owner(2), { hash = "old", jobs = "a\nb\nc\nd\n" }),
                   row(owner(3), { hash = "bad", jobs = "a x\nb 0\nc 1001\nd 5 6\ne  \nf 3\n\n" }) }
    set(p, rows, "a\nb\nc\nd\n")
    local map, load = p:map()
    assert.equal(6, count(map))
    local total = 0
    for _, l in pairs(load) do total = total + l end
    assert.equal(8, total)          -- a-e 1 each, f 3
    assert.equal(owner(3), map.e)
    assert.equal(owner(3), map.f)
  end)

  it("is made again only when its inputs change, not on every beat", function()
    local owners = { owner(1), owner(2), owner(3) }
    local jobs = text_of(random_names(30, 5))
    local p = core.placement()
    assert.is_true(set(p, rows_of(owners), jobs))
    local map = p:map()
    local rows = rows_of(owners)
    for i = 1, 3 do rows[i].heartbeat = now - 10 * i end     -- the next beat: new heartbeats
    assert.is_false(set(p, rows, jobs))
    assert.same(map, (p:map()))
    rows[2].draining = true
    assert.is_true(set(p, rows, jobs))
    for j, o in pairs(p:map()) do assert.are_not.equal(owner(2), o, j) end
    rows[2].draining = false
    assert.is_true(set(p, rows, jobs))
    assert.same(map, (p:map()))
    assert.is_false(set(p, rows, jobs))
    assert.is_true(set(p, rows, jobs .. "new-job\n"))
    rows[3].heartbeat = now - LIVE                         -- r3 is no longer live
    assert.is_true(set(p, rows, jobs))
    for j, o in pairs(p:map()) do assert.are_not.equal(owner(3), o, j) end
  end)

  it("prefers settled replicas, else live ones; never a draining one; a job only where defined", function()
    local jobs = text_of(random_names(30, 11))
    local p = core.placement()
    -- r3 joined 399 ms ago: not settled yet, so it gets nothing
    local rows = { row(owner(1)), row(owner(2)), row(owner(3), { started = now - 399 }) }
    set(p, rows, jobs)
    local _, load = p:map()
    assert.is_nil(load[owner(3)])
    assert.equal(30, load[owner(1)] + load[owner(2)])
    assert.is_true(math.abs(load[owner(1)] - 15) <= 1, load[owner(1)])
    -- none settled: the live ones share
    rows = { row(owner(1), { started = now }), row(owner(2), { started = now }), row(owner(3), { started = now }) }
    set(p, rows, jobs)
    _, load = p:map()
    assert.same({ [owner(1)] = 10, [owner(2)] = 10, [owner(3)] = 10 }, load)
    local _, settled = p:prefer((next((p:map()))))
    assert.is_false(settled)
    -- a job only r2 defines goes to r2, whatever the bound
    rows = { row(owner(1)), row(owner(2), { hash = "X", jobs = jobs .. "zz-only-r2\n" }), row(owner(3)) }
    set(p, rows, jobs)
    assert.equal(owner(2), (p:prefer("zz-only-r2")))
  end)

  it("a job the map does not know yet (a reload before the next beat) is placed by pure rendezvous", function()
    local owners = { owner(1), owner(2), owner(3) }
    local p = core.placement()
    set(p, rows_of(owners), text_of(random_names(30, 3)))
    local c = {}
    for i, o in ipairs(owners) do c[i] = { name = o:match("^[^:]*"), owner = o } end
    for _, j in ipairs(random_names(20, 4)) do
      assert.equal(owners[core.rendezvous(j, c)], (p:prefer(j)))
    end
  end)
end)
