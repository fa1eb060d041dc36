-- Owner ids are unique per process, whatever [leash] replica says: replicas
-- that share a config with a fixed name never hold a lease as one, a process
-- restarted while its predecessor's lease runs does not resume that lease,
-- and a name that could not fit the store is refused before anything runs.
local L = require "e2e"
local R = require "replicas"

local sqlite = { provider = "sqlite", path = (os.getenv("LEASH_TEST_TMP") or "/tmp") .. "/owner.db" }
local n = 0
local function fresh_table()
  n = n + 1
  return ("owner_%d_%d"):format(n, math.random(1, 1e6))
end

local function named(replica, tbl)
  local c = R.config(sqlite, tbl)
  c.leash.replica = replica
  return c
end

describe("owner ids", function()
  local procs = {}
  after_each(function() R.stop_all(procs); procs = {} end)

  it("three replicas sharing replica = shared: distinct owner ids, every fire once, no overlap", function()
    local tbl = fresh_table()
    local d = L.dir { config = named("shared", tbl) }
    d.write_job("rec", R.job_src(d.out "rec"))
    procs = R.start_replicas(d, 3)
    local seen = {}
    for _, p in ipairs(procs) do
      assert.truthy(p.owner:match("^shared:%d+:%x%x%x%x%x%x%x%x$"), p.owner)
      assert.is_nil(seen[p.owner], "two processes with owner id " .. p.owner)
      seen[p.owner] = true
    end
    L.sleep(4.5)
    local list = R.runs(d.out "rec")
    assert.is_true(#list >= 3, "ran " .. #list .. " fires")
    R.assert_no_overlap(list)
    local fires, owners = {}, {}
    for _, r in ipairs(list) do
      assert.is_nil(fires[r.scheduled_at], "fire " .. r.scheduled_at .. " ran twice")
      fires[r.scheduled_at] = true
      owners[r.replica] = true
    end
    local h = R.holder(procs, sqlite, tbl)
    assert.is_table(h, "nobody holds the lease")
    assert.same({ [h.owner] = true }, owners)
    -- and a follower says whom it follows, once at info
    for _, p in ipairs(procs) do
      if p ~= h then
        local said = p:grep(" info  %[rec%] following: held by ")
        assert.equal(1, #said, p:log_text())
        assert.truthy(said[1]:find("held by " .. h.owner .. " until 20", 1, true), said[1])
      end
    end
  end)

  it("kill -9 of the parent and a restart 0.2 s later: the new process waits out the old lease", function()
    local tbl = fresh_table()
    local d = L.dir { config = named("fixed", tbl) }
    -- a service: its body runs until something stops it, so the old body
    -- (orphaned, until its fence strikes) and a new one would overlap
    d.write_job("rec", (R.job_src(d.out "rec"):gsub('every = "1s",', ""):gsub(
      "for _ = 1, 10 do", "for _ = 1, 1000 do")))
    procs = R.start_replicas(d, 1)
    local _, before = R.wait_holder(procs, sqlite, tbl)
    L.sleep(0.5)
    procs[1]:signal("KILL")                 -- the parent only: its body goes on
    assert(procs[1]:wait(5))
    L.sleep(0.2)
    local again = R.start_replicas(d, 1)
    procs[#procs + 1] = again[1]
    assert.are_not.equal(procs[1].owner, again[1].owner)
    local after = assert(L.wait_for(function()
      local r = R.lease_row(sqlite, tbl, "rec")
      return r and r.owner == again[1].owner and r
    end, 10), "the restarted process never took the lease")
    assert.is_true(after.token > before.token, "the token did not grow")
    local old = before.expires_at
    assert.is_true(after.acquired_at >= old - 1,
      ("taken %d ms before the old lease could expire"):format(old - after.acquired_at))
    assert(L.wait_for(function()
      for _, r in ipairs(R.runs(d.out "rec")) do
        if r.replica == again[1].owner then return true end
      end
    end, 5), "the restarted process never ran the service")
    L.sleep(0.3)
    R.assert_no_overlap(R.runs(d.out "rec"))
  end)

  describe("a name that cannot fit the store, or none", function()
    local function try(replica)
      local d = L.dir { config = ("[leash]\njobs = jobs\nreplica = %s\n[singleton]\nenabled = true\n"):format(replica) }
      d.write_job("ok", 'return { every = "1s", run = function() end }')
      local cc, _, cerr = L.leash { "check", "-c", d.config }
      -- bounded: a run that accepted the name would go on until stopped
      local rc, _, rerr = L.exec { "timeout", "10", L.bin, "run", "-c", d.config }
      return d, cc, cerr, rc, rerr
    end

    it("is refused by check and run with file:line:key", function()
      for _, bad in ipairs { "", string.rep("r", 184), string.rep("é", 100) } do
        local d, cc, cerr, rc, rerr = try(bad)
        assert.equal(2, cc)
        assert.equal(2, rc)
        local want = d.config .. ":3: [leash] replica: "
        assert.truthy(cerr:find(want, 1, true), cerr)
        assert.truthy(rerr:find(want, 1, true), rerr)
      end
    end)

    it("183 bytes fit: the owner id is the name, the pid and 8 hex, within 200 bytes", function()
      local name = string.rep("r", 183)
      local tbl = fresh_table()
      local d = L.dir { config = named(name, tbl) }
      d.write_job("rec", R.job_src(d.out "rec"))
      procs = R.start_replicas(d, 1)
      local _, row = R.wait_holder(procs, sqlite, tbl)
      assert.truthy(#row.owner <= 200, #row.owner .. " bytes")
      assert.equal(name, row.owner:match("^(r+):%d+:%x+$"))
    end)
  end)
end)
