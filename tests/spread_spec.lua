-- End to end: [singleton] spread with real `leash run` replicas (issues 12
-- and 32): 3 replicas x 30 jobs every second share the leases evenly, a
-- kill -9 moves the dead replica's share and at most half as many others
-- (bounded loads), the holders end where the map made from the presence
-- rows says, its restart gets exactly the same jobs back, and the bodies'
-- own records show no overlap through all of it.  Short leases keep it
-- fast: lease 600ms, retry 200ms (renew 200ms, settle 400ms).
local L = require "e2e"
local core = require "leash.core"
local R = require "replicas"

local LEASE, RETRY = 600, 200
-- SQLite's commits wait for the disk (fsync): on a busy host's disk a
-- 600 ms lease lapses while a renew waits, and a lease lost is a job moved
-- or a fire lost, which is what a lease means, not what these specs are
-- after.  A lease of 2 s rides out such a stall.
local function lease_of(p) return p.provider == "sqlite" and 2000 or LEASE end
local NJOBS = 30

local function job_src(out) return R.job_src(out, "1s", "ctx.sleep(0.05)") end

local function open(p, tbl)
  return assert(core.open_store { provider = p.provider, path = p.path, conninfo = p.conninfo,
    host = p.host, port = p.port, user = p.user, password = p.password, database = p.database,
    table = tbl, connect_timeout_ms = 1000, statement_timeout_ms = 1000 })
end

-- job -> { owner =, token = } of every lease held unexpired now.
local function placement(s)
  local rows, now = assert(s:list())
  local at = {}
  for _, r in ipairs(rows) do
    if r.expires_at > now then at[r.name] = { owner = r.owner, token = r.token } end
  end
  return at
end

local function shares(at)
  local n = {}
  for _, h in pairs(at) do n[h.owner] = (n[h.owner] or 0) + 1 end
  return n
end

local function count(t)
  local k = 0
  for _ in pairs(t) do k = k + 1 end
  return k
end

local function balanced(s, owners, want)
  local at = placement(s)
  if count(at) ~= NJOBS then return nil end
  local n = shares(at)
  for _, o in ipairs(owners) do
    if math.abs((n[o] or 0) - want) > 1 then return nil end
  end
  return at
end

local start = R.start

-- job -> replica name of a placement.
local function names_of(at)
  local t = {}
  for job, h in pairs(at) do t[job] = h.owner:match("^[^:]*") end
  return t
end

-- The placement the presence rows in the store call for (core.placement,
-- as every replica computes it), when every lease is held where it says.
local function as_mapped(s, lease)
  local rows, now = assert(s:replicas())
  local p = core.placement()
  p:set(rows, { now = now, live_ms = lease or LEASE, settle_ms = 2 * RETRY })
  local map, at = p:map(), placement(s)
  if count(map) ~= NJOBS then return nil end
  for job, o in pairs(map) do
    if not at[job] or at[job].owner ~= o then return nil end
  end
  return at
end

-- How many jobs a different replica holds (or none does) in b than in a.
-- A lease its holder took again (after an expiry on a busy machine) has
-- a new token but did not move.
local function moves(a, b)
  local n = 0
  for job, h in pairs(a) do if not b[job] or b[job].owner ~= h.owner then n = n + 1 end end
  return n
end

-- Once no lease moved for a second: the placement then.
local function steady(s)
  local last, since = placement(s), L.now()
  return L.wait_for(function()
    local now = placement(s)
    if moves(last, now) > 0 then last, since = now, L.now() end
    return L.now() - since >= 1 and last
  end, 20, 0.05)
end

describe("[singleton] spread", function()
  it("refuses a value that is not a boolean, with file and line", function()
    local d = L.dir { config = "[leash]\njobs = jobs\n[singleton]\nenabled = true\nspread = maybe\n" }
    local code, out, err = L.leash({ "check", "-c", d.config })
    assert.equal(2, code)
    assert.matches("leash.ini:5: %[singleton%] spread: \"maybe\" is not a boolean", out .. err)
  end)
end)

describe("spread end to end", function()
  for _, p in ipairs(R.list_of()) do
    describe("on " .. p.provider, function()
      local procs = {}
      after_each(function() R.stop_all(procs); procs = {} end)

      it("3 replicas x 30 jobs: 10 each, kill -9 moves its 10 and at most 5 others, a restart takes them back, no overlap", function()
        local tbl = ("spread_%d"):format(math.random(1, 1e6))
        local d = L.dir { config = R.config(p, tbl) }
        local cfgs = R.replica_configs(p, tbl, d, 3,
          { enabled = "true", lease = lease_of(p) .. "ms", retry = RETRY .. "ms" })
        for j = 1, NJOBS do
          local name = ("job-%02d"):format(j)
          d.write_job(name, job_src(d.out(name)))
        end
        local s = open(p, tbl)
        for i = 1, 3 do procs[i] = start(cfgs[i], p.password) end
        local t0 = L.now()
        local owners = { procs[1].owner, procs[2].owner, procs[3].owner }

        -- Each holds 10 +- 1 (bench/spread_results.txt has how soon).
        assert(L.wait_for(function() return balanced(s, owners, 10) end, 60, 0.05),
          "never balanced: " .. require("pl.pretty").write(shares(placement(s))))
        print(("\n[%s] balanced after %.2fs"):format(p.provider, L.now() - t0))
        -- 10 +- 1 may leave the last hand-off still under way (slow under
        -- ASan): once no lease moved for a second, none moves any more,
        -- and every job is where the map says.
        local p0 = assert(steady(s), "the leases kept moving")
        assert(L.wait_for(function() return as_mapped(s, lease_of(p)) end, 30, 0.05), "not where the map says")
        -- leash status shows the three, each with a third, no drift (asked
        -- again while a stalled replica's leases lapse and come back).
        local out
        assert(L.wait_for(function()
          local code
          code, out = L.leash({ "status", "-c", cfgs[1] },
            { env = { LEASH_TEST_MSSQL_PASSWORD = p.password or "" } })
          if code ~= 0 then return nil end
          for i = 1, 3 do
            if not out:match(owners[i]:gsub("%p", "%%%0") .. "%s+%S+%s+%S+%s+live%s+%d+%s+3%d%%") then
              return nil
            end
          end
          return true
        end, 30, 0.2), out)
        assert.is_nil(out:find("warning"), out)
        L.sleep(1)
        local steady0 = placement(s)
        for job, h in pairs(p0) do                                        -- no flapping
          assert.equal(h.owner, (steady0[job] or {}).owner, job .. " moved after the balance")
        end

        -- kill -9 of r3: its jobs go to r1 and r2, and a few of theirs
        -- between them (the bound is 15 of 30 each now), no more.
        for _, pid in ipairs(R.tree(procs[3].pid)) do L.kill(pid, "KILL") end
        local t1 = L.now()
        local mine = {}
        for job, h in pairs(steady0) do if h.owner == owners[3] then mine[job] = true end end
        assert(L.wait_for(function()
          local at = placement(s)
          for job in pairs(mine) do
            if not at[job] or at[job].owner == owners[3] then return nil end
          end
          return at
        end, 30, 0.05), "r3's jobs did not move")
        print(("[%s] r3's jobs taken %.2fs after its kill"):format(p.provider, L.now() - t1))
        assert(L.wait_for(function() return as_mapped(s, lease_of(p)) end, 30, 0.05),
          "after the kill, not where the map of r1 and r2 says")
        local p1 = assert(steady(s), "the leases kept moving after the kill")
        local m1 = moves(steady0, p1)
        assert.is_true(m1 <= 15, m1 .. " jobs moved for r3's 10")

        -- r3 again (a new process, the same name): exactly its jobs come back.
        procs[3] = start(cfgs[3], p.password)
        owners[3] = procs[3].owner
        assert(L.wait_for(function() return balanced(s, owners, 10) end, 30, 0.05),
          "never balanced again: " .. require("pl.pretty").write(shares(placement(s))))
        assert(L.wait_for(function() return as_mapped(s, lease_of(p)) end, 30, 0.05),
          "after the restart, not where the map says")
        local p2 = assert(steady(s), "the leases kept moving after the restart")
        if os.getenv("SPREAD_DEBUG") then
          for i = 1, 3 do io.stderr:write(procs[i]:log_text(), "\n----\n") end
        end
        assert.same(names_of(steady0), names_of(p2))
        local m2 = moves(p1, p2)
        assert.is_true(m2 <= 15, m2 .. " jobs moved for r3's return")

        s:close()
        R.stop_all(procs)
        -- The bodies' records: no two runs of one job ever overlap.
        for j = 1, NJOBS do
          local name = ("job-%02d"):format(j)
          R.assert_no_overlap(R.runs(d.out(name)))
        end
      end)

      it("a holder's beat rides on its renew: one statement per renew interval, a follower's its own", function()
        local tbl = ("spread_rb_%d"):format(math.random(1, 1e6))
        local d = L.dir { config = R.config(p, tbl) }
        local cfgs = R.replica_configs(p, tbl, d, 2,
          { enabled = "true", lease = LEASE .. "ms", retry = RETRY .. "ms", spread = "false" })
        -- one job that never fires in the window: the holder renews, the follower tries
        d.write_job("idle", 'return { every = "1h", run = function() end }')
        procs[1] = start(cfgs[1], p.password)
        assert(procs[1]:wait_log("holding the lease", 5), "r1 took nothing")
        procs[2] = start(cfgs[2], p.password)
        L.sleep(4)
        local rate = {}
        for i = 1, 2 do
          assert.equal(0, procs[i]:stop(10))
          local calls, secs = procs[i]:log_text():match("lease store: (%d+) statements in ([%d.]+)s")
          rate[i] = tonumber(calls) / tonumber(secs)
        end
        procs = {}
        local per_renew = 1000 / (LEASE / 3)
        print(("\n[%s] statements/s: holder %.2f, follower %.2f (renew every %dms, retry %dms)"):format(
          p.provider, rate[1], rate[2], LEASE / 3, RETRY))
        -- the holder: renew_beat once per renew, plus its start and stop; with the
        -- beat apart it would be twice that.  Where no NOTIFY tells it of a
        -- control (SQLite, SQL Server) it reads the controls' version once a second.
        local polls = p.provider == "postgres" and 0 or 1
        assert.is_true(rate[1] < 1.4 * (per_renew + polls), ("holder: %.2f statements/s"):format(rate[1]))
        -- the follower: its own beat once per renew, and its tries once per retry
        assert.is_true(rate[2] < 1.4 * (per_renew + 1000 / RETRY), ("follower: %.2f statements/s"):format(rate[2]))
      end)

      it("a rolling restart (SIGTERM, start, next) loses no fire and shows no overlap", function()
        local tbl = ("spread_roll_%d"):format(math.random(1, 1e6))
        local d = L.dir { config = R.config(p, tbl) }
        local cfgs = R.replica_configs(p, tbl, d, 3,
          { enabled = "true", lease = lease_of(p) .. "ms", retry = RETRY .. "ms" })
        for j = 1, NJOBS do
          local name = ("job-%02d"):format(j)
          d.write_job(name, job_src(d.out(name)))
        end
        local s = open(p, tbl)
        for i = 1, 3 do procs[i] = start(cfgs[i], p.password) end
        local owners = { procs[1].owner, procs[2].owner, procs[3].owner }
        assert(L.wait_for(function() return balanced(s, owners, 10) end, 60, 0.05), "never balanced")
        -- A job whose cursor is still NULL (no fire claimed yet) catches up
        -- nothing on a takeover, by design: the window opens once every
        -- job has claimed a fire.
        assert(L.wait_for(function()
          local rows = assert(s:list())
          local n = 0
          for _, r in ipairs(rows) do if r.last_fire then n = n + 1 end end
          return n == NJOBS
        end, 5, 0.05), "not every job claimed a fire")
        local first = math.floor(L.now()) + 1
        for i = 1, 3 do
          assert.equal(0, procs[i]:stop(10))
          procs[i] = start(cfgs[i], p.password)
          owners[i] = procs[i].owner
          assert(L.wait_for(function() return balanced(s, owners, 10) end, 30, 0.05),
            "not balanced after restarting r" .. i)
        end
        L.sleep(1.5)
        local last = math.floor(L.now()) - 2
        s:close()
        R.stop_all(procs)
        -- Every fire ran once, or the ledger says missed = "once" caught up
        -- a later one in its place (a hand-off gap of more than a second).
        local passed_by = 0
        for j = 1, NJOBS do
          local name = ("job-%02d"):format(j)
          local list = R.runs(d.out(name))
          R.assert_no_overlap(list)
          local seen, rowed = {}, {}
          for _, r in ipairs(list) do seen[r.scheduled_at] = (seen[r.scheduled_at] or 0) + 1 end
          for _, r in ipairs(R.ledger(p, tbl, name)) do rowed[r.scheduled_at // 1000] = r end
          for t = first, last do
            local row = rowed[t]
            if not seen[t] and row and row.outcome == "missed" and
                tostring(row.error):find('missed = "once" runs the latest', 1, true) then
              passed_by = passed_by + 1
            elseif not seen[t] and row and row.outcome == "skipped-overlap" then
              -- the run before was still going (a busy machine's slow end):
              -- accounted in the ledger, the overlap rule kept
              passed_by = passed_by + 1
            elseif (seen[t] or 0) <= 1 and row and (row.outcome == "stopped" and row.error == "shutdown"
                or row.outcome == "killed") then
              -- started, and stopped by the SIGTERM of its replica before
              -- (or after) its body wrote a line: the restart's, once (killed:
              -- on a busy machine its process outlived the grace)
              passed_by = passed_by + 1
            else
              assert.equal(1, seen[t], ("%s: fire %d ran %s times (ledger: %s %s)"):format(name, t,
                seen[t] or 0, row and row.outcome or "no row", row and tostring(row.error) or ""))
            end
          end
        end
        -- Three restarts move about 20 jobs each: a few long gaps at most.
        assert.is_true(passed_by <= NJOBS, passed_by .. " fires passed by")
      end)
    end)
  end
end)
