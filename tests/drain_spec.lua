-- End to end, real `leash run` replicas: leash drain / undrain (issue 11
-- item 4).  A drained replica hands its leases to the others within a renew
-- interval + retry (a running job first ends), takes none while drained,
-- and takes its share back on undrain; --until-restart ends with the
-- process, a drain by name outlives it.  Short leases keep it fast: lease
-- 600ms, retry 200ms (renew 200ms), spread on, replicas r1, r2, r3.
local L = require "e2e"
local R = require "replicas"

local LEASE, RETRY = 600, 200
local RENEW = LEASE / 3

local function job_src(out, every, body_s)
  return R.job_src(out, every, ("ctx.sleep(%s)"):format(body_s))
end

-- job -> owner of every lease held unexpired now.
local function placement(s)
  local rows, now = assert(s:list())
  local at = {}
  for _, r in ipairs(rows) do
    if r.expires_at > now then at[r.name] = r.owner end
  end
  return at
end

local function held_by(s, owner)
  local n = 0
  for _, o in pairs(placement(s)) do if o == owner then n = n + 1 end end
  return n
end

local start = R.start

for _, p in ipairs(R.list_of()) do
  describe("leash drain end to end on " .. p.provider, function()
    local procs, d, cfgs, tbl, s
    after_each(function()
      if s then s:close(); s = nil end
      R.stop_all(procs)
    end)

    -- n replicas r1..rn, jobs { name = { every, body seconds } }.
    local function setup(n, jobs)
      procs = {}
      tbl = ("drain_%d"):format(math.random(1, 1e8))
      d = L.dir { config = R.config(p, tbl) }
      d.password = p.password
      cfgs = R.replica_configs(p, tbl, d, n,
        { enabled = "true", lease = LEASE .. "ms", retry = RETRY .. "ms" })
      for name, j in pairs(jobs) do d.write_job(name, job_src(d.out(name), j[1], j[2])) end
      s = R.open(p, tbl, 2000)
      for i = 1, n do procs[i] = start(cfgs[i], p.password) end
    end

    local function leash(...)
      return L.leash({ ... }, { env = { LEASH_TEST_MSSQL_PASSWORD = p.password or "", USER = "ops" } })
    end

    local function many(n)
      local jobs = {}
      for j = 1, n do jobs[("job-%02d"):format(j)] = { "1s", "0.05" } end
      return jobs
    end

    local host = select(2, L.sh("hostname")):match("^%s*(.-)%s*$")
    -- The actor is the system's name for the user, whatever $USER says
    -- (the commands run with USER=ops).
    local me = select(2, L.sh("id -un")):match("^%s*(.-)%s*$")

    it("moves the leases off, takes none while drained, takes its share back on undrain", function()
      setup(3, many(12))
      assert(L.wait_for(function()
        for i = 1, 3 do if held_by(s, procs[i].owner) < 2 then return nil end end
        return true
      end, 30, 0.05), "the 12 jobs never spread over the 3 replicas")
      local code, out, err = leash("drain", "-c", cfgs[1], "r2")
      local t0 = L.now()
      assert.equal(0, code, err)
      assert.matches("draining r2: 1 replica hands every lease off", out)
      assert(L.wait_for(function() return held_by(s, procs[2].owner) == 0 end, 15, 0.02),
        "r2 kept leases")
      local took = L.now() - t0
      -- a renew interval (r2 reads its row) + retry (the others try), and a
      -- run of 50 ms that may be going at the safe point, with room for a loaded machine
      assert.is_true(took <= (RENEW + RETRY) / 1000 + 0.6, ("r2 let go after %.2fs"):format(took))
      print(("\n[%s] drain: r2 held nothing %.0f ms after leash drain returned"):format(p.provider, took * 1000))
      assert(L.wait_for(function()
        local at = placement(s)
        local k = 0
        for _ in pairs(at) do k = k + 1 end
        return k == 12
      end, 10, 0.05), "the others did not take every job")
      assert(procs[2]:wait_log("draining %(leash drain%)", 1), "r2 did not log the drain")
      -- none comes back while drained (spread would want r2's share back)
      local t1 = L.now()
      while L.now() - t1 < 2 do
        assert.equal(0, held_by(s, procs[2].owner), "a lease went back to the drained r2")
        L.sleep(0.05)
      end
      code, out = leash("status", "-c", cfgs[1])
      assert.equal(0, code, out)
      assert.matches(procs[2].owner:gsub("%p", "%%%0") .. "%s+%S+%s+%S+%s+draining%s+0%s", out)
      code, out = leash("status", "-c", cfgs[1], "--json")
      assert.equal(0, code, out)
      assert.matches('"owner":"' .. procs[2].owner:gsub("%p", "%%%0") .. '"[^}]*"draining":true', out)
      assert.is_nil(out:find('"name":"@r2"'), "the drain's ledger row shows as a job")

      code, out, err = leash("undrain", "-c", cfgs[1], "r2")
      assert.equal(0, code, err)
      assert.matches("undrained r2: 1 replica takes leases again", out)
      assert(L.wait_for(function() return held_by(s, procs[2].owner) >= 2 end, 15, 0.05),
        "r2 did not take its share back")
      assert(procs[2]:wait_log("undrained %(leash undrain%)", 1), "r2 did not log the undrain")

      s:close(); s = nil
      R.stop_all(procs)
      local rows = R.ledger(p, tbl, "@r2")
      assert.equal(2, #rows)
      assert.equal("control", rows[1].outcome)
      assert.equal("drain r2", rows[1].error)
      assert.equal("undrain r2", rows[2].error)
      assert.equal(me .. "@" .. host, rows[1].actor)
      assert.equal(me .. "@" .. host, rows[1].owner)
      for j = 1, 12 do R.assert_no_overlap(R.runs(d.out(("job-%02d"):format(j)))) end
    end)

    if p.provider == "postgres" then
      it("a NOTIFY: the drained replica lets go within a round trip, not a renew interval", function()
        -- A 9 s lease renews (and beats) every 3 s: without the NOTIFY r2
        -- would read its drain 1.5 s after the command on average.
        procs = {}
        tbl = ("drain_%d"):format(math.random(1, 1e8))
        d = L.dir { config = R.config(p, tbl) }
        cfgs = R.replica_configs(p, tbl, d, 2, { enabled = "true", lease = "9s", retry = "200ms" })
        -- Hourly jobs: no fire near, so the safe point is at once.
        for j = 1, 6 do
          local name = ("job-%02d"):format(j)
          d.write_job(name, job_src(d.out(name), "1h", "0.05"))
        end
        s = R.open(p, tbl, 2000)
        for i = 1, 2 do procs[i] = start(cfgs[i], p.password) end
        assert(L.wait_for(function()
          return held_by(s, procs[1].owner) >= 1 and held_by(s, procs[2].owner) >= 1
        end, 15, 0.05), "the 6 jobs never spread over the 2 replicas")
        L.sleep(math.random() * 0.5)
        local code, _, err = leash("drain", "-c", cfgs[1], "r2")
        local t0 = L.now()
        assert.equal(0, code, err)
        assert(L.wait_for(function() return held_by(s, procs[2].owner) == 0 end, 15, 0.02),
          "r2 kept leases")
        local took = L.now() - t0
        -- a round trip for the beat, one for the release
        assert.is_true(took < 0.7, ("r2 let go after %.2fs"):format(took))
      end)
    end

    it("does not cut a running job: it moves after its run ends", function()
      setup(2, { slow = { "1s", "1.5" } })
      local out = d.out "slow"
      L.sleep(1.5)            -- spread settles where slow belongs
      -- a run going: drain its replica mid-run
      local n0 = #R.runs(out)
      local h = assert(L.wait_for(function()
        local list = R.runs(out)
        local r = list[#list]
        if #list <= n0 or r.ended then return nil end
        for i = 1, 2 do if procs[i].owner == r.replica then return i end end
      end, 6, 0.02), "no run started")
      local other = 3 - h
      local code, _, err = leash("drain", "-c", cfgs[1], procs[h].owner)
      assert.equal(0, code, err)
      assert(procs[h]:wait_log("handing the lease off %(leash drain%)", 5), "the holder never let go")
      local list = R.runs(out)
      local last = nil
      for _, r in ipairs(list) do if r.replica == procs[h].owner then last = r end end
      assert.is_true(last.ended, "the run was cut: it has no end record")
      assert(L.wait_for(function() return placement(s).slow == procs[other].owner end, 10, 0.05),
        "the other replica did not take slow")
      assert(L.wait_for(function()
        local l = R.runs(out)
        return l[#l].replica == procs[other].owner and l
      end, 4, 0.05), "the other replica ran nothing")
      s:close(); s = nil
      R.stop_all(procs)
      R.assert_no_overlap(R.runs(out))
    end)

    it("--until-restart ends with the process; a drain by name outlives it; an unknown replica is an error", function()
      setup(2, many(6))
      assert(L.wait_for(function()
        return held_by(s, procs[1].owner) >= 1 and held_by(s, procs[2].owner) >= 1
      end, 30, 0.05), "the jobs never spread over the 2 replicas")
      local code, out, err = leash("drain", "-c", cfgs[1], "nope")
      assert.equal(1, code)
      assert.matches("leash drain: no live replica nope in the store", err)
      code, _, err = leash("undrain", "-c", cfgs[1], "nope")
      assert.equal(1, code)
      assert.matches("leash undrain: no replica nope in the store, and no drain of that name", err)
      code = leash("drain", "-c", cfgs[1])
      assert.equal(2, code)

      code, out, err = leash("drain", "-c", cfgs[1], "r1", "--until-restart")
      assert.equal(0, code, err)
      assert.matches("until they restart", out)
      code, out, err = leash("drain", "-c", cfgs[1], "r2")
      assert.equal(0, code, err)
      assert.matches("its new processes too", out)
      assert(L.wait_for(function()
        return held_by(s, procs[1].owner) == 0 and held_by(s, procs[2].owner) == 0
      end, 15, 0.05), "the drained replicas kept leases")
      -- restart both (SIGTERM, start): r1 is not drained any more, r2 still is
      for i = 1, 2 do
        assert.equal(0, procs[i]:stop(10))
        procs[i] = start(cfgs[i], p.password)
      end
      assert(L.wait_for(function() return held_by(s, procs[1].owner) == 6 end, 15, 0.05),
        "the restarted r1 did not take the jobs")
      assert(procs[2]:wait_log("draining %(leash drain%)", 3), "the restarted r2 is not drained")
      assert.equal(0, held_by(s, procs[2].owner))
      code, out = leash("status", "-c", cfgs[1])
      assert.matches(procs[2].owner:gsub("%p", "%%%0") .. "%s+%S+%s+%S+%s+draining", out)
      assert.matches(procs[1].owner:gsub("%p", "%%%0") .. "%s+%S+%s+%S+%s+live", out)
      code, _, err = leash("undrain", "-c", cfgs[1], "r2")
      assert.equal(0, code, err)
      assert(L.wait_for(function() return held_by(s, procs[2].owner) >= 1 end, 15, 0.05),
        "r2 did not take its share after undrain")
    end)
  end)
end
