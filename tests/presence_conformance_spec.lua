-- Presence conformance (store.h "presence"): beat, leave and replicas,
-- unchanged on every provider of tests/support/providers.lua.  Beside the
-- lease conformance spec so the two grow apart without conflicts.
local core = require "leash.core"
local L = require "e2e"
local providers = require "providers"
local system = require "system"

local function sleep_ms(ms) system.sleep(ms / 1000) end
local root = os.getenv("LEASH_ROOT") or "."
local tmp = os.getenv("LEASH_TEST_TMP") or "/tmp"

local function uniq(prefix)
  return ("%s_%d_%d"):format(prefix, os.time() % 100000, math.random(0, 999999))
end

local function me(owner, t)
  t = t or {}
  return { owner = owner, host = t.host or "host-a", pid = t.pid or 42, version = t.version or "0.9.0",
           draining = t.draining or false, jobs_hash = t.hash or "h1", jobs = t.jobs or "a\nb\n",
           name = t.name, broken = t.broken }
end

local function by_owner(rows)
  local t = {}
  for _, r in ipairs(rows) do t[r.owner] = r end
  return t
end

for _, p in ipairs(providers.proof_list) do
  local pname = p.key or p.provider

  describe("presence conformance [" .. pname .. "]", function()
    local s, tbl

    setup(function()
      math.randomseed(os.time())
      tbl = uniq("pres")
      s = assert(core.open_store(providers.get(pname, tbl)))
    end)

    teardown(function()
      if s then s:close() end
    end)

    it("a first beat inserts the row on the database's clock, and reads it back", function()
      local rows, now = assert(s:beat(me("A:1:aa"), 60000))
      assert.equal(1, #rows)
      local r = rows[1]
      assert.equal("A:1:aa", r.owner)
      assert.equal("A", r.name)
      assert.equal("host-a", r.host)
      assert.equal(42, r.pid)
      assert.equal("0.9.0", r.version)
      assert.equal("h1", r.jobs_hash)
      assert.is_false(r.draining)
      assert.is_nil(r.jobs)                   -- my own hash: my own jobs
      assert.equal(r.started_at, r.heartbeat)
      assert.is_true(math.abs(now - r.heartbeat) < 1000)
      assert.is_true(math.abs(now - os.time() * 1000) < 5000)
    end)

    it("a later beat moves the heartbeat and keeps started_at", function()
      local rows = assert(s:beat(me("A:1:aa"), 60000))
      local first = by_owner(rows)["A:1:aa"]
      sleep_ms(30)
      -- draining is leash drain's: a replica's own value is not written
      rows = assert(s:beat(me("A:1:aa", { draining = true, version = "1.0.0" }), 60000))
      local r = by_owner(rows)["A:1:aa"]
      assert.equal(first.started_at, r.started_at)
      assert.is_true(r.heartbeat >= first.heartbeat + 20)
      assert.is_false(r.draining)
      assert.equal("1.0.0", r.version)
    end)

    it("reads another replica's jobs only when its hash differs from the reader's", function()
      assert(s:beat(me("B:2:bb", { hash = "h2", jobs = "a\nc\n" }), 60000))
      local rows = by_owner(assert(s:beat(me("A:1:aa"), 60000)))
      assert.equal("a\nc\n", rows["B:2:bb"].jobs)
      assert(s:beat(me("C:3:cc"), 60000))                 -- same hash as A
      rows = by_owner(assert(s:beat(me("A:1:aa"), 60000)))
      assert.is_nil(rows["C:3:cc"].jobs)
      -- replicas() (leash status) reads every row's jobs and writes nothing.
      local all, now = assert(s:replicas())
      local t = by_owner(all)
      assert.equal("a\nb\n", t["A:1:aa"].jobs)
      assert.equal("a\nc\n", t["B:2:bb"].jobs)
      assert.equal("a\nb\n", t["C:3:cc"].jobs)
      assert.is_true(now > 0)
      local sorted = {}
      for i, r in ipairs(all) do sorted[i] = r.owner end
      local want = { table.unpack(sorted) }
      table.sort(want)
      assert.same(want, sorted)
    end)

    it("leave deletes the owner's row only", function()
      assert.is_true(s:leave("C:3:cc"))
      local t = by_owner(assert(s:replicas()))
      assert.is_nil(t["C:3:cc"])
      assert.is_not_nil(t["A:1:aa"])
      assert.is_true(s:leave("nobody:1:00"))               -- no row: nothing to do
    end)

    it("a beat prunes rows older than its bound, never its own", function()
      assert(s:beat(me("D:4:dd"), 60000))
      sleep_ms(120)
      local rows = by_owner(assert(s:beat(me("A:1:aa"), 100)))
      assert.is_nil(rows["D:4:dd"])
      assert.is_nil(rows["B:2:bb"])
      assert.is_not_nil(rows["A:1:aa"])
    end)

    it("keeps a long jobs text whole, and takes an empty one", function()
      local names = {}
      for i = 1, 1000 do names[i] = ("job-%04d-with-a-longer-name"):format(i) end
      local text = table.concat(names, "\n") .. "\n"
      assert(s:beat(me("E:5:ee", { hash = "h5", jobs = text }), 60000))
      assert(s:beat(me("F:6:ff", { hash = "h6", jobs = "" }), 60000))
      local t = by_owner(assert(s:replicas()))
      assert.equal(text, t["E:5:ee"].jobs)
      assert.equal("", t["F:6:ff"].jobs)
    end)

    it("a beat writes the broken files text, every read returns it, a beat without clears it", function()
      local text = "bad\t1700000000000\t1\tjobs/bad.lua:3: every: \"3x\" is not a duration \u{e9}\n"
        .. "worse\t1700000000001\t0\tjobs/worse.lua:1: unexpected symbol\n"
      local long = ("x"):rep(8192)
      local rows = by_owner(assert(s:beat(me("BR:1:01", { hash = "hb", broken = text }), 60000)))
      assert.equal(text, rows["BR:1:01"].broken)
      assert(s:beat(me("BS:1:01", { hash = "hb" }), 60000))
      local t = by_owner(assert(s:replicas()))
      assert.equal(text, t["BR:1:01"].broken)
      assert.is_nil(t["BS:1:01"].broken)                 -- none: NULL, not ""
      t = by_owner(assert(s:beat(me("BS:1:01", { hash = "hb", broken = long }), 60000)))
      assert.equal(text, t["BR:1:01"].broken)            -- the others' too
      assert.equal(long, t["BS:1:01"].broken)
      local ok, err = s:beat(me("BS:1:01", { hash = "hb", broken = long .. "x" }), 60000)
      assert.is_nil(ok)
      assert.matches("broken files text of 8193 bytes %(at most 8192%)", err)
      -- renew_beat carries it the same way, and an empty text is none
      local _, rrows = assert(s:renew_beat("BR:1:01", { "br-x" }, 7000,
        me("BR:1:01", { hash = "hb", broken = "" }), 60000))
      t = by_owner(rrows)
      assert.is_nil(t["BR:1:01"].broken)
      assert.equal(long, t["BS:1:01"].broken)
      assert(s:leave("BR:1:01"))
      assert(s:leave("BS:1:01"))
    end)

    it("drain sets the listed owners' draining, the beats keep it, undrain clears it", function()
      assert(s:beat(me("G:7:01", { name = "G" }), 60000))
      assert(s:beat(me("G:8:02", { name = "G" }), 60000))
      local changed, now = assert(s:drain(nil, { "G:7:01", "nobody:1:00" }, true))
      assert.equal(1, changed)
      assert.is_true(math.abs(now - os.time() * 1000) < 5000)
      local t = by_owner(assert(s:beat(me("G:7:01", { name = "G" }), 60000)))
      assert.is_true(t["G:7:01"].draining)                 -- kept by its own beat
      assert.is_false(t["G:8:02"].draining)
      assert.equal(1, (s:drain(nil, { "G:7:01" }, false)))
      t = by_owner(assert(s:beat(me("G:7:01", { name = "G" }), 60000)))
      assert.is_false(t["G:7:01"].draining)
    end)

    -- leash handoff --to (store.h handoff): the lease passes to the named
    -- replica while its row is live and not draining, else it is freed.
    it("handoff passes the lease to the live replica handoff_to names, else frees it", function()
      local function row(name)
        for _, r in ipairs(assert(s:list())) do if r.name == name then return r end end
      end
      local job = uniq("ho")
      assert(s:beat(me("T:1:01", { name = "T" }), 60000))
      local ok, a = s:try_acquire(job, "S:1:01", 60000)
      assert.is_true(ok)
      assert.is_false((s:handoff(job, "X:9:99", 5000, 10000)))   -- not the holder: nothing
      -- directed at a live replica: it holds it, one token up, for ms
      assert.is_true(s:control(job, "handoff", nil, "T:1:01"))
      local done, to = s:handoff(job, "S:1:01", 5000, 10000)
      assert.is_true(done)
      assert.equal("T:1:01", to)
      local r = row(job)
      assert.same({ "T:1:01", a.token + 1, 5000 }, { r.owner, r.token, r.expires_at - r.renewed_at })
      assert.equal(r.acquired_at, r.renewed_at)
      -- held: a read of which leases an owner holds (a follower's probe)
      assert.same({ [job] = a.token + 1 }, assert(s:held("T:1:01", { job, "nope" })))
      assert.same({}, assert(s:held("S:1:01", { job })))
      assert.equal(r.expires_at, row(job).expires_at)            -- nothing renewed
      ok = s:try_acquire(job, "S:1:01", 5000)
      assert.is_false(ok)                                       -- held by T now
      local got, b = s:try_acquire(job, "T:1:01", 5000)
      assert.is_true(got)
      assert.equal(a.token + 1, b.token)                        -- T's own: no new token
      -- handoff_to was cleared: a handoff without a new target frees it
      done, to = s:handoff(job, "T:1:01", 5000, 10000)
      assert.same({ true, "" }, { done, to })
      r = row(job)
      assert.is_true(r.expires_at <= r.renewed_at + 5000 and r.owner == "T:1:01")
      assert.is_true((s:try_acquire(job, "S:1:01", 60000)))
      -- a plain handoff clears a target set before
      assert.is_true(s:control(job, "handoff", nil, "T:1:01"))
      assert.is_true(s:control(job, "handoff"))
      assert.same({ true, "" }, { s:handoff(job, "S:1:01", 5000, 10000) })
      -- a draining target, a stale one, an unknown one, the holder itself: freed
      assert(s:drain(nil, { "T:1:01" }, true))
      for _, target in ipairs({ "T:1:01", "nobody:1:00", "S:1:01" }) do
        assert.is_true((s:try_acquire(job, "S:1:01", 60000)))
        assert.is_true(s:control(job, "handoff", nil, target))
        assert.same({ true, "" }, { s:handoff(job, "S:1:01", 5000, 10000) }, target)
      end
      assert(s:drain(nil, { "T:1:01" }, false))
      assert(s:beat(me("T:1:01", { name = "T" }), 60000))
      sleep_ms(150)
      assert.is_true((s:try_acquire(job, "S:1:01", 60000)))
      assert.is_true(s:control(job, "handoff", nil, "T:1:01"))
      assert.same({ true, "" }, { s:handoff(job, "S:1:01", 5000, 100) })   -- beat 150 ms ago
      assert.equal("S:1:01", row(job).owner)
    end)

    it("a drain marker drains the name's beats, new rows too; never read, never pruned", function()
      assert(s:beat(me("H:1:01", { name = "H" }), 60000))
      local changed = assert(s:drain("H", {}, true))
      assert.equal(1, changed)                             -- the marker
      assert.equal(1, (s:drain("H", {}, true)))            -- written again: still one
      local t = by_owner(assert(s:beat(me("H:1:01", { name = "H" }), 60000)))
      assert.is_true(t["H:1:01"].draining)                 -- its next beat
      assert.is_nil(t["H"])                                -- the marker is no replica
      t = by_owner(assert(s:beat(me("H:2:02", { name = "H" }), 60000)))
      assert.is_true(t["H:2:02"].draining)                 -- a new process of the name
      t = by_owner(assert(s:beat(me("Hx:3:03", { name = "Hx" }), 60000)))
      assert.is_false(t["Hx:3:03"].draining)               -- another name
      sleep_ms(120)
      assert(s:beat(me("Hx:3:03", { name = "Hx" }), 100))  -- prunes H's rows, not the marker
      assert.is_nil(by_owner(assert(s:replicas()))["H"])
      t = by_owner(assert(s:beat(me("H:4:04", { name = "H" }), 60000)))
      assert.is_true(t["H:4:04"].draining)
      -- undrain: the marker and the rows listed; a new process starts undrained
      assert.equal(2, (s:drain("H", { "H:4:04" }, false)))
      assert.equal(0, (s:drain("H", {}, false)))           -- nothing left to undrain
      t = by_owner(assert(s:beat(me("H:5:05", { name = "H" }), 60000)))
      assert.is_false(t["H:5:05"].draining)
      assert.is_false(t["H:4:04"].draining)
    end)

    -- A beat that read the name's marker before an undrain committed must
    -- not keep the replica drained (it did on PostgreSQL: the upsert's
    -- EXCLUDED came from the old snapshot, its GREATEST from the new row,
    -- and every later beat kept the 1).
    it("an undrain that meets a beat in flight leaves the row undrained by the next beat (100 rounds)", function()
      local stop = ("%s/%s.stop"):format(tmp, uniq("beat"))
      assert(s:beat(me("U:1:01", { name = "U" }), 60000))
      local w = L.spawn_cmd(("lua5.4 %s/tests/support/beat_worker.lua %s %s U:1:01 U %s 60")
        :format(L.quote(root), pname, tbl, L.quote(stop)))
      local ok, why = pcall(function()
        -- the worker beating first (a real T-SQL engine's first statements
        -- on a connection take a second)
        local first = by_owner(assert(s:replicas()))["U:1:01"].heartbeat
        assert(L.wait_for(function()
          return by_owner(assert(s:replicas()))["U:1:01"].heartbeat > first
        end, 30, 0.005), "the worker never beat")
        for i = 1, 100 do
          local n, err = s:drain("U", { "U:1:01" }, true)
          assert.equal(2, n, "drain " .. i .. ": " .. tostring(err))
          sleep_ms(math.random(0, 3))
          assert.is_true(by_owner(assert(s:replicas()))["U:1:01"].draining, "drained, round " .. i)
          n, err = s:drain("U", { "U:1:01" }, false)
          assert.equal(2, n, "undrain " .. i .. ": " .. tostring(err))
          -- a beat that read the marker first may drain it until the next
          -- beat (store.h), which the worker sends at once
          assert(L.wait_for(function()
            return not by_owner(assert(s:replicas()))["U:1:01"].draining
          end, 2, 0.002), "undrained in round " .. i .. ", and drained again by the beats")
        end
      end)
      L.write(stop, "")
      local rc = w:wait(10)
      os.remove(stop)
      assert(ok, why)
      assert.equal(0, rc, "the beating worker failed: " .. w:log_text())
      local beats = tonumber(w:log_text():match("(%d+)%s*$"))
      assert.is_true(beats > 100, "the worker beat only " .. tostring(beats) .. " times")
    end)

    it("renew_beat renews as renew_ctl and beats as beat, in one statement", function()
      local ok, a = s:try_acquire("rb-1", "R:1:01", 5000)
      assert.is_true(ok)
      assert.is_true((s:try_acquire("rb-2", "X:1:01", 5000)))
      assert(s:control("rb-1", "trigger"))
      assert(s:beat(me("S:1:01", { hash = "h2", jobs = "z\n" }), 60000))
      local c0 = s:calls()
      local got, rows, now = assert(s:renew_beat("R:1:01", { "rb-1", "rb-2", "rb-none" }, 7000,
        me("R:1:01", { name = "R", hash = "h9" }), 60000))
      assert.equal(1, s:calls() - c0)
      assert.same({ "rb-1" }, (function() local k = {}; for n in pairs(got) do k[#k + 1] = n end; return k end)())
      assert.equal(a.token, got["rb-1"].token)
      assert.is_number(got["rb-1"].trigger_at)
      assert.is_nil(got["rb-1"].paused_until)
      assert.is_true(math.abs(now - os.time() * 1000) < 5000)
      local t = by_owner(rows)
      assert.is_not_nil(t["R:1:01"])
      assert.is_nil(t["R:1:01"].jobs)                      -- my own hash
      assert.equal("h9", t["R:1:01"].jobs_hash)
      assert.is_false(t["R:1:01"].draining)
      assert.equal("z\n", t["S:1:01"].jobs)               -- and the others' rows
      assert.is_nil(t["R"])
      local list, lnow = assert(s:list())
      for _, r in ipairs(list) do
        if r.name == "rb-1" then assert.is_true(math.abs(r.expires_at - (lnow + 7000)) < 1000) end
      end
      -- the drain marker applies as in beat; prune too
      assert(s:drain("R", {}, true))
      _, rows = assert(s:renew_beat("R:1:01", { "rb-1" }, 7000, me("R:1:01", { name = "R" }), 60000))
      assert.is_true(by_owner(rows)["R:1:01"].draining)
      assert.equal(2, (s:drain("R", { "R:1:01" }, false)))
      -- a lost lease is no error: it is simply not renewed
      got = assert(s:renew_beat("R:1:01", { "rb-2" }, 7000, me("R:1:01", { name = "R" }), 60000))
      assert.is_nil(got["rb-2"])
    end)

    it("renew_beat refuses what renew_ctl or beat refuses, and another owner's row", function()
      local ok, err = s:renew_beat("R:1:01", { "rb-1" }, 0, me("R:1:01"), 60000)
      assert.is_nil(ok)
      assert.matches("duration", err)
      ok, err = s:renew_beat("R:1:01", { "rb-1" }, 7000, me("R:1:01"), 0)
      assert.is_nil(ok)
      assert.matches("duration", err)
      ok, err = s:renew_beat("R:1:01", { "rb-1" }, 7000, me("Q:1:01"), 60000)
      assert.is_nil(ok)
      assert.matches("presence row is Q:1:01's", err)
    end)

    it("refuses bad arguments before any SQL", function()
      local ok0, err0 = s:drain("", {}, true)
      assert.is_nil(ok0)
      assert.matches("replica name", err0)
      ok0, err0 = s:drain(nil, { "" }, true)
      assert.is_nil(ok0)
      assert.matches("owner", err0)
      local ok, err = s:beat(me(""), 60000)
      assert.is_nil(ok)
      assert.matches("owner", err)
      ok, err = s:beat(me("A:1:aa"), 0)
      assert.is_nil(ok)
      assert.matches("duration", err)
      ok, err = s:beat(me("A:1:aa", { hash = ("x"):rep(33) }), 60000)
      assert.is_nil(ok)
      assert.matches("too long", err)
      ok, err = s:leave(nil)
      assert.is_nil(ok)
    end)
  end)
end
