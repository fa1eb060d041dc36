-- End to end (issue 32 item 4): leash handoff JOB --to REPLICA moves a job to
-- the replica named and it stays there (pinned until the membership
-- changes), while every fire of an every-second job has exactly one ledger
-- row.  Three real replicas with spread on, on every provider (SQL Server
-- through the TDS test server).  Two moves, holder -> x then x -> y: one of
-- the two targets is not the next in line, which plain leash handoff would
-- pick.  The bounds are generous (a busy machine); no latency is asserted.
local L = require "e2e"
local R = require "replicas"

local LEASE, RETRY = 3000, 500

for _, p in ipairs(R.list_of()) do
  describe("leash handoff --to on " .. p.provider, function()
    local procs, d, tbl, cfgs, out = {}, nil, nil, nil, nil
    after_each(function() R.stop_all(procs); procs = {} end)

    local function env() return { env = { LEASH_TEST_MSSQL_PASSWORD = p.password or "" } } end
    local function handoff(to, i)
      return L.leash({ "handoff", "-c", cfgs[i or 1], "rec", "--to", to }, env())
    end

    -- Three replicas r1-r3 with spread on and rec every second, started.
    local function cluster()
      tbl = ("hto_%d"):format(math.random(1, 1e8))
      d = L.dir {}
      out = d.out "rec"
      d.write_job("rec", R.job_src(out, "1s", "ctx.sleep(0.05)"))
      cfgs = R.replica_configs(p, tbl, d, 3,
        { enabled = "true", lease = LEASE .. "ms", retry = RETRY .. "ms", spread = "true" })
      for i = 1, 3 do procs[i] = R.start(cfgs[i], p.password) end
    end

    -- The index of the replica holding rec, and the row.
    local function holder()
      local r = R.lease_row(p, tbl, "rec")
      if not r or r.owner == "" then return nil end
      for i, proc in ipairs(procs) do
        if proc.owner == r.owner and proc:alive() then return i, r end
      end
    end

    -- The holder once it has held rec for two leases (spread settled: a
    -- holder the placement does not prefer keeps a job a lease).
    local function settled()
      return assert(L.wait_for(function()
        local i, r = holder()
        if not i then return nil end
        L.sleep(2 * LEASE / 1000)
        local j, again = holder()
        return j == i and again.token == r.token and i
      end, 30, 0.2), "rec never settled on one replica")
    end

    -- leash handoff rec --to r<t>; it moves there, the old holder says it
    -- passed it on, and it stays for three leases.
    local function move_to(t)
      local from, row = holder()
      local code, text, err
      -- (a renew late on a loaded machine may leave the lease unheld, or a
      -- beat late make the target look not live, a moment: asked again)
      assert(L.wait_for(function()
        code, text, err = handoff("r" .. t)
        return code == 0
      end, 20, 0.5), ("handoff --to r%d: %s"):format(t, tostring(err)))
      assert.matches("handoff of rec to " .. procs[t].owner:gsub("%p", "%%%0") .. " asked", text)
      assert(L.wait_for(function() return holder() == t end, 20, 0.1),
        ("rec did not move from r%d to r%d"):format(from or 0, t))
      assert(procs[from]:wait_log("the lease passed to " .. procs[t].owner:gsub("%p", "%%%0"), 5),
        "the old holder did not pass the lease on: " .. procs[from]:log_text():sub(-3000))
      local stop = L.now() + 3 * LEASE / 1000
      while L.now() < stop do
        local h = holder()
        assert(h == t or h == nil, ("rec went from r%d to r%s"):format(t, tostring(h)))
        L.sleep(0.2)
      end
      assert(L.wait_for(function() return holder() == t end, 10, 0.1), "rec left r" .. t)
      return row
    end

    it("moves rec to the replica named, twice; it stays; every fire has one ledger row", function()
      cluster()
      local a = settled()
      local x = a % 3 + 1
      local y = 6 - a - x
      move_to(x)
      move_to(y)
      -- the new holder runs the fires
      local runs = R.runs(out)
      assert(L.wait_for(function()
        runs = R.runs(out)
        return #runs > 0 and runs[#runs].replica == procs[y].owner
      end, 10, 0.2), "r" .. y .. " ran nothing")
      R.assert_no_overlap(runs)
      -- every second from the first fire to the last has exactly one row
      local at, first, last = {}, math.huge, 0
      for _, r in ipairs(R.ledger(p, tbl, "rec")) do
        if r.outcome ~= "control" then
          at[r.scheduled_at] = (at[r.scheduled_at] or 0) + 1
          first, last = math.min(first, r.scheduled_at), math.max(last, r.scheduled_at)
        end
      end
      assert.is_true(last - first >= 15000, "too short a window: " .. (last - first) .. " ms")
      local bad = {}
      for t = first, last, 1000 do
        if at[t] ~= 1 and #bad < 5 then
          bad[#bad + 1] = ("%d: %d rows"):format(t, at[t] or 0)
        end
      end
      assert.same({}, bad)
    end)

    if p.provider == "sqlite" then
      it("refuses a replica that is unknown, draining or not live, and names it; the holder is a no-op", function()
        cluster()
        local a = settled()
        local b, c = a % 3 + 1, (a + 1) % 3 + 1
        local code, text, err = handoff("r9")
        assert.equal(2, code, text)
        assert.matches("%-%-to r9: no such replica", err)
        code, text = handoff("r" .. a)
        assert.equal(0, code)
        assert.matches("held by " .. procs[a].owner:gsub("%p", "%%%0") .. " already", text)
        code, text, err = L.leash({ "drain", "-c", cfgs[1], "r" .. b }, env())
        assert.equal(0, code, err)
        assert(L.wait_for(function()
          code, text, err = handoff("r" .. b)
          return code == 2 and err:match("draining")
        end, 10, 0.3), "a draining replica was not refused: " .. tostring(err))
        assert.matches("%-%-to r" .. b .. ": the replica is draining", err)
        procs[c]:signal("STOP")
        local ok, why = pcall(function()
          assert(L.wait_for(function()
            code, text, err = handoff("r" .. c)
            return code == 2 and err:match("not live")
          end, 10, 0.3), "a frozen replica was not refused: " .. tostring(err))
        end)
        procs[c]:signal("CONT")
        assert(ok, why)
        assert.matches("%-%-to r" .. c .. ": the replica is not live %(its last heartbeat was", err)
        assert.equal(a, holder())
      end)
    end
  end)
end
