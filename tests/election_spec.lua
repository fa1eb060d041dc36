-- End to end: several real `leash run` replicas elect one executor per job
-- through SQLite, PostgreSQL and SQL Server (the TDS test server in CI).  The
-- recording job and the helpers are in tests/support/replicas.lua.
local L = require "e2e"
local providers = require "providers"

local R = require "replicas"
local LEASE, RETRY = R.LEASE, R.RETRY
local job_src, runs, assert_no_overlap, config = R.job_src, R.runs, R.assert_no_overlap, R.config
local rows, lease_row, holder, wait_holder = R.rows, R.lease_row, R.holder, R.wait_holder
local start_replicas, stop_all, tree, list_of = R.start_replicas, R.stop_all, R.tree, R.list_of

local n = 0
local function fresh_table()
  n = n + 1
  return ("elect_%d_%d"):format(n, math.random(1, 1e6))
end

describe("election end to end", function()
  for _, missing in ipairs(providers.missing) do
    if missing:match("^postgres") then
      it("has PostgreSQL to run against", function() error(missing) end)
    end
  end

  for _, p in ipairs(list_of()) do
    describe("on " .. p.provider, function()
      local procs = {}
      after_each(function() stop_all(procs); procs = {} end)

      it("3 replicas for 5 s: every fire ran exactly once, by the holder, with no overlapping runs", function()
        local tbl = fresh_table()
        local d = L.dir { config = config(p, tbl) }; d.password = p.password
        d.write_job("rec", job_src(d.out "rec"))
        procs = start_replicas(d, 3)
        -- From the first fire run (three replicas start and elect in a few
        -- seconds on a busy machine), 5 s of fires.
        assert(L.wait_for(function() return #runs(d.out "rec") >= 1 end, 30), "nothing ran")
        local first = runs(d.out "rec")[1].scheduled_at
        L.sleep(5.5)
        local last = math.floor(L.now()) - 1
        local list = runs(d.out "rec")
        assert_no_overlap(list)
        local seen, holders = {}, {}
        for _, r in ipairs(list) do
          assert.is_nil(seen[r.scheduled_at], "fire " .. r.scheduled_at .. " ran twice")
          seen[r.scheduled_at] = true
          holders[r.replica] = true
          assert.is_true(r.ended or r.scheduled_at > last, "a run did not end")
        end
        for t = first, last do
          assert.is_true(seen[t], ("fire %d did not run (ran: %d fires)"):format(t, #list))
        end
        local h = holder(procs, p, tbl)
        assert.is_table(h, "nobody holds the lease")
        assert.same({ [h.owner] = true }, holders)
      end)

      it("kill -9 of the holder: another replica holds within lease + 100 ms of the old expiry, token grows", function()
        local tbl = fresh_table()
        local d = L.dir { config = config(p, tbl) }; d.password = p.password
        d.write_job("rec", job_src(d.out "rec"))
        procs = start_replicas(d, 3)
        local h, before = wait_holder(procs, p, tbl)
        L.sleep(0.5)
        for _, pid in ipairs(tree(h.pid)) do L.kill(pid, "KILL") end
        local old = lease_row(p, tbl, "rec")
        local after = assert(L.wait_for(function()
          local r = lease_row(p, tbl, "rec")
          return r and r.owner ~= old.owner and r
        end, 10), "nobody took over")
        assert.is_true(after.token > before.token)
        -- measured in the database's own time: the old lease's last expiry
        -- against the new holder's acquire
        local excess = after.acquired_at - old.expires_at
        assert.is_true(excess >= 0, "taken before the old lease expired: " .. excess .. " ms")
        assert.is_true(excess <= 100, "took over " .. excess .. " ms after the old expiry")
        L.sleep(1.5)
        assert_no_overlap(runs(d.out "rec"))
      end)

      it("SIGTERM of the holder: it releases and exits 0, another holds it", function()
        local tbl = fresh_table()
        local d = L.dir { config = config(p, tbl) }; d.password = p.password
        d.write_job("rec", job_src(d.out "rec"))
        procs = start_replicas(d, 3)
        local h, before = wait_holder(procs, p, tbl)
        L.sleep(0.7)
        h:signal("TERM")
        assert.equal(0, h:wait(10))
        -- the release's time: its log line (this host's clock, which is the
        -- database's too: both run here)
        -- (one batch at shutdown: one line for all its leases)
        local line = assert(h:grep("released 1 lease")[1], "the holder did not release")
        local released_ms = math.floor(L.log_time(line) * 1000)
        local after = assert(L.wait_for(function()
          local r = lease_row(p, tbl, "rec")
          return r and r.owner ~= before.owner and r
        end, 10), "nobody took over")
        -- How soon is a bench figure (bench/handoff_results.txt): a busy
        -- machine delays the taker's retry, and the log line is stamped
        -- after the release's commit, so the taker may even come first.
        local took = after.acquired_at - released_ms
        assert.is_true(took <= 10000, ("handover took %d ms"):format(took))
        assert.is_true(after.token > before.token)
        L.sleep(1.2)
        assert_no_overlap(runs(d.out "rec"))
      end)

      it("SIGSTOP of the holder's whole process tree for 2 x lease: no overlap, it comes back a follower", function()
        local tbl = fresh_table()
        local d = L.dir { config = config(p, tbl) }; d.password = p.password
        d.write_job("rec", job_src(d.out "rec"))
        procs = start_replicas(d, 3)
        local h = wait_holder(procs, p, tbl)
        -- freeze it in the middle of a run
        L.sleep_to_second(0.2)
        local frozen = R.freeze(h.pid, p)     -- (on SQLite: outside a write)
        L.sleep(2 * LEASE / 1000)
        for _, pid in ipairs(frozen) do L.kill(pid, "CONT") end
        L.sleep(2)
        assert.is_true(h:alive(), "the frozen replica died")
        local now_holder = holder(procs, p, tbl)
        assert.is_table(now_holder)
        assert.are_not.equal(h.owner, now_holder.owner)
        assert.truthy(h:log_text():match("lease"), "the resumed replica logged nothing about its lease")
        local list = runs(d.out "rec")
        assert_no_overlap(list)
        -- and it did run before the freeze, so the check above means something
        local ran = false
        for _, r in ipairs(list) do ran = ran or r.replica == h.owner end
        assert.is_true(ran)
      end)

      if p.provider == "postgres" then
        it("PostgreSQL stopped for 2 x lease: bodies stop by the deadline, nothing crashes, one holds again after", function()
          local ctl = assert(os.getenv("LEASH_TEST_PG_CTL"))
          local tbl = fresh_table()
          local d = L.dir { config = config(p, tbl) }; d.password = p.password
          d.write_job("rec", job_src(d.out "rec"))
          procs = start_replicas(d, 3)
          local h = wait_holder(procs, p, tbl)
          L.sleep_to_second(0.1)
          local stopped_at = L.now()
          assert.equal(0, (L.sh(ctl .. " stop")))
          L.sleep(2 * LEASE / 1000)
          -- the holder's last run ended (or was stopped) by lease - margin
          -- after its last renew, which was before the outage
          local list = runs(d.out "rec")
          for _, r in ipairs(list) do
            assert.is_true(r.to <= stopped_at + LEASE / 1000,
              ("a run went on %.3fs into the outage"):format(r.to - stopped_at))
          end
          assert.equal(0, (L.sh(ctl .. " start")))
          local restarted = L.now()
          local back = assert(L.wait_for(function()
            local ok, r = pcall(holder, procs, p, tbl)
            return ok and r and r.state ~= "free" and r
          end, 10))
          assert.is_table(back)
          for _, proc in ipairs(procs) do assert.is_true(proc:alive(), "a replica crashed") end
          local fired = assert(L.wait_for(function()
            for _, r in ipairs(runs(d.out "rec")) do
              if r.from > restarted then return r end
            end
          end, (LEASE + RETRY) / 1000 + 2), "no run after the restart")
          assert.is_true(fired.from - restarted <= (LEASE + RETRY) / 1000 + 1.2)
          assert_no_overlap(runs(d.out "rec"))
          -- The outage is logged once when it starts and once when it
          -- ends, on every replica, not once per try.  The first run after
          -- the restart may be a catch-up that starts at once, before a
          -- follower's next try: wait for that try.  (A statement that
          -- times out after the return, on a loaded machine, is a new
          -- failure, logged as one: only lines up to the first return
          -- count.)
          for _, proc in ipairs(procs) do
            proc:wait_log("lease store: answering again after", 15)
          end
          for _, proc in ipairs(procs) do
            local back = proc:grep("lease store: answering again after")
            local down = proc:grep("lease store: .*failed") or {}
            for _, l in ipairs(proc:grep("lease store: cannot open") or {}) do down[#down + 1] = l end
            local until_back = {}
            for _, l in ipairs(down) do
              if L.log_time(l) <= L.log_time(back[1]) then until_back[#until_back + 1] = l end
            end
            assert.equal(1, #until_back, proc:log_text())
            assert.is_true(L.log_time(back[1]) > L.log_time(until_back[1]))
            assert.equal(#down, #back, "a failure without its return, or the other way:\n" .. proc:log_text())
          end
        end)
      end
    end)
  end

  describe("singleton mode off", function()
    it("never opens the store: jobs run, and the configured database is neither created nor contacted", function()
      local dbdir = L.tmpdir("nodb")
      local d = L.dir { config = {
        leash = { grace = "500ms" },
        singleton = { enabled = "false" },
        store = { provider = "sqlite" },
        sqlite = { path = dbdir .. "/never/leash.db" },
      } }
      d.write_job("rec", job_src(d.out "rec"))
      local proc = L.spawn(d)
      assert(L.wait_for(function() return #runs(d.out "rec") >= 2 end, 5))
      proc:stop(10)
      assert.is_false(L.exists(dbdir .. "/never"))
      for _, r in ipairs(runs(d.out "rec")) do assert.equal(0, r.token) end
      assert.is_nil(proc:log_text():match("lease store"))
    end)

    it("never connects to a postgres that does not exist", function()
      local d = L.dir { config = {
        leash = { grace = "500ms" },
        singleton = { enabled = "false" },
        store = { provider = "postgres" },
        postgres = { conninfo = "host=127.0.0.1 port=1 dbname=nowhere connect_timeout=1" },
      } }
      d.write_job("rec", job_src(d.out "rec"))
      local proc = L.spawn(d)
      assert(L.wait_for(function() return #runs(d.out "rec") >= 2 end, 5))
      proc:stop(10)
      assert.is_nil(proc:log_text():match("lease store"))
      assert.is_nil(proc:log_text():match("error"))
    end)
  end)

  it("a job with singleton = false runs on every replica with token 0", function()
    local p = list_of()[1]
    local tbl = fresh_table()
    local d = L.dir { config = config(p, tbl) }; d.password = p.password
    d.write_job("rec", job_src(d.out "rec"):gsub('every = "1s",', 'every = "1s", singleton = false,'))
    local procs = start_replicas(d, 2)
    assert(L.wait_for(function()
      local reps = {}
      for _, r in ipairs(runs(d.out "rec")) do
        assert.equal(0, r.token)
        reps[r.replica] = true
      end
      return reps[procs[1].owner] and reps[procs[2].owner]
    end, 5), "not every replica ran it")
    stop_all(procs)
    assert.is_nil(lease_row(p, tbl, "rec"))
  end)

  it("self-fencing: with the parent frozen, the body and what its ctx.exec started die before the lease expires", function()
    local p = list_of()[1]
    local tbl = fresh_table()
    local d = L.dir { config = config(p, tbl) }
    local pidfile = d.dir .. "/exec.pid"
    d.write_job("fenced", ([[
return { run = function(ctx)
  ctx.exec({ "sh", "-c", "echo $$ > %s.tmp; mv %s.tmp %s; exec sleep 60" })
end }]]):format(pidfile, pidfile, pidfile))
    local procs = start_replicas(d, 1)
    local found = assert(L.wait_for(function() return L.read(pidfile):match("%d+") end, 5),
      "the service did not start its program")
    local pid = tonumber(found)
    local body = assert(L.children(procs[1].pid)[1], "no body process")
    assert.is_true(L.alive(pid) and L.alive(body))
    procs[1]:signal("STOP")                     -- the parent only: its children go on
    -- the lease runs out at most LEASE after the last renew, which came
    -- before the freeze; the fence must have struck before that
    L.sleep(LEASE / 1000 - 0.1)
    assert.is_false(L.alive(body), "the body outlived the fence")
    assert.is_false(L.alive(pid), "the program ctx.exec started outlived the fence")
    procs[1]:signal("CONT")
    stop_all(procs)
  end)

  it("a job file removed and reloaded (SIGHUP) leaves the election on every replica", function()
    local p = list_of()[1]
    local tbl = fresh_table()
    local d = L.dir { config = config(p, tbl) }
    d.write_job("gone", 'return { every = "1s", run = function() end }')
    d.write_job("stays", 'return { every = "1s", run = function() end }')
    local procs = start_replicas(d, 2)
    assert(L.wait_for(function()
      local r = lease_row(p, tbl, "gone")
      return r and r.expires_at > rows(p, tbl)[1].acquired_at
    end, 5), "gone was never held")
    d.remove_job("gone")
    for _, proc in ipairs(procs) do proc:signal("HUP") end
    -- released by its holder, and nobody takes it again
    assert(L.wait_for(function()
      local list, now = rows(p, tbl)
      for _, r in ipairs(list) do
        if r.name == "gone" then return r.expires_at <= now end
      end
    end, 5), "the removed job's lease is still held")
    L.sleep(LEASE / 1000 + 0.5)
    local list, now = rows(p, tbl)
    for _, r in ipairs(list) do
      if r.name == "gone" then assert.is_true(r.expires_at <= now, "taken again") end
    end
    -- the holder of what stays hands over to the other without a crash
    procs[1]:stop(10)
    procs[2]:stop(10)
    for _, proc in ipairs(procs) do
      assert.is_nil(proc:log_text():match("Segmentation"))
      assert.is_truthy(proc:log_text():match("stopped\n?$") or proc:log_text():match("stopped"))
    end
    assert.equal(0, procs[2]:wait(1))
  end)

  it("a reload that makes a job singleton = false releases its lease and runs it everywhere", function()
    local p = list_of()[1]
    local tbl = fresh_table()
    local d = L.dir { config = config(p, tbl) }
    d.write_job("rec", job_src(d.out "rec"))
    local procs = start_replicas(d, 2)
    local h = wait_holder(procs, p, tbl)
    d.write_job("rec", (job_src(d.out "rec"):gsub('every = "1s",', 'every = "1s", singleton = false,')))
    for _, proc in ipairs(procs) do proc:signal("HUP") end
    assert(L.wait_for(function()
      local list, now = rows(p, tbl)
      return list[1] and list[1].expires_at <= now
    end, 5), "the lease was not released")
    assert(h:wait_log("released the lease", 1), h:log_text())
    local since = L.now()
    assert(L.wait_for(function()
      local reps = {}
      for _, r in ipairs(runs(d.out "rec")) do
        if r.from > since then
          assert.equal(0, r.token)
          reps[r.replica] = true
        end
      end
      return reps[procs[1].owner] and reps[procs[2].owner]
    end, 5), "not every replica ran it after the reload")
    stop_all(procs)
  end)

  it("ctx.token is the lease's token and ctx.lease_left() counts down to the stop", function()
    local p = list_of()[1]
    local tbl = fresh_table()
    local d = L.dir { config = config(p, tbl) }; d.password = p.password
    local out = d.out "ctx"
    d.write_job("ctx", ([[
return { every = "1s", run = function(ctx)
  local a = ctx.lease_left(); ctx.sleep(0.2); local b = ctx.lease_left()
  local f = io.open(%q, "a"); f:write(("%%d %%.3f %%.3f\n"):format(ctx.token, a, b)); f:close()
end }]]):format(out))
    local procs = start_replicas(d, 1)
    assert(L.wait_for(function() return #L.lines(out) >= 2 end, 5))
    stop_all(procs)
    local r = lease_row(p, tbl, "ctx")
    for _, l in ipairs(L.lines(out)) do
      local token, a, b = l:match("^(%d+) ([%d.]+) ([%d.]+)$")
      assert.equal(r.token, tonumber(token))
      a, b = tonumber(a), tonumber(b)
      assert.is_true(a > 0 and a <= (LEASE - LEASE / 5) / 1000, "lease_left " .. a)
      assert.is_true(b < a or b > a + 0.3, "lease_left did not count down (or was renewed)")
    end
  end)
end)
