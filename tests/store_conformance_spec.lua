-- The lease-store conformance spec: the same tests, unchanged, against every
-- provider of tests/support/providers.lua (DESIGN.md "The lease store
-- contract", issue 3 "Conformance spec").
local core = require "leash.core"
local L = require "e2e"
local providers = require "providers"
local system = require "system"

local root = os.getenv("LEASH_ROOT") or "."
local tmp = os.getenv("LEASH_TEST_TMP") or "/tmp"

local function sleep_ms(ms) system.sleep(ms / 1000) end

local function uniq(prefix)
  return ("%s_%d_%d"):format(prefix, os.time() % 100000, math.random(0, 999999))
end

-- What every provider answers on a lost renew (moved, expired or never
-- held): no holder named, in the same single statement (store.h).
local LOST = { owner = "", token = 0, expires_at = 0, now = 0 }

local function row_of(s, name)
  local rows, now = assert(s:list())
  for _, r in ipairs(rows) do
    if r.name == name then return r, now end
  end
  return nil, now
end

local function sh(cmd)
  local ok, how, code = os.execute(cmd)
  return ok and 0 or (how == "exit" and code or 128 + (code or 0))
end

local function read_lines(path)
  local t = {}
  local f = io.open(path, "r")
  if not f then return t end
  for l in f:lines() do t[#t + 1] = l end
  f:close()
  return t
end

-- Runs SQL by hand, beside leash: sqlite3 on SQLite's file and on the TDS
-- test server's, psql on PostgreSQL, FreeTDS's tsql on a real T-SQL engine.
-- The output's lines: a query's rows ('|' between columns; tabs on tsql).
local function by_hand(key, sql)
  local file = ("%s/%s.sql"):format(tmp, uniq("hand"))
  local out, err = file .. ".out", file .. ".err"
  local f = assert(io.open(file, "w"))
  f:write(sql)
  local cmd
  if key == "sqlite" then
    cmd = ("sqlite3 -bail -cmd '.timeout 5000' '%s' < '%s' > '%s'"):format(providers.get("sqlite", "x").path, file, out)
  elseif key == "postgres" then
    cmd = ("psql -X -q -A -t -v ON_ERROR_STOP=1 \"$LEASH_TEST_PG_CONNINFO\" -f '%s' > '%s'"):format(file, out)
  elseif key == "mssql" and os.getenv("LEASH_TEST_TDS_CTL") then
    local db = os.getenv("LEASH_TEST_TDS_CTL"):gsub("/[^/]*$", "") .. "/leases.db"
    cmd = ("sqlite3 -bail -cmd '.timeout 5000' '%s' < '%s' > '%s'"):format(db, file, out)
  else                          -- tsql ends each batch at "go"; its errors go to stderr
    local c = providers.get(key, "x")
    f:write("\ngo\n")
    cmd = ("tsql -H %s -p %d -U %s -P %s -D %s -o fhq < '%s' > '%s' 2> '%s'"):format(L.quote(c.host),
      c.port, L.quote(c.user), L.quote(c.password), L.quote(c.database), file, out, err)
  end
  f:close()
  assert.equal(0, sh(cmd), "by hand: " .. cmd)
  local msgs = table.concat(read_lines(err), "\n")
  assert.is_nil(msgs:find("Msg %d+"), "by hand: " .. msgs)
  return read_lines(out)
end

-- Makes table t with the columns it had before the fire cursor, and rows
-- (an SQL VALUES list), by hand.
local OLD_COLUMNS = "name VARCHAR(200) PRIMARY KEY, owner VARCHAR(200) NOT NULL,"
  .. " token BIGINT NOT NULL, acquired_at BIGINT NOT NULL, renewed_at BIGINT NOT NULL,"
  .. " expires_at BIGINT NOT NULL"

local function make_old_table(key, t, rows)
  by_hand(key, ("CREATE TABLE %s (%s);\nINSERT INTO %s VALUES %s;\n"):format(t, OLD_COLUMNS, t, rows))
end

-- The claim races' leases: 50 ms, or 300 ms on a real T-SQL engine, whose
-- statements take tens of ms each when eight processes share two cores.
local RACE_LEASE_MS = { [false] = 50, [true] = 300 }

-- Runs the claim race: 8 claim_worker processes contending for lease
-- `name` of table tbl, claiming fires 1..fires with RACE_LEASE_MS leases (mode
-- "runs": through claim_runs).  Returns the grants and the accepted claims
-- the workers saw, after checking what every provider must keep: each fire
-- accepted exactly once, tokens only grow and belong to one owner, and each
-- accepted claim was made with the token granted last, inside its lease, on
-- the database's clock.
local function claim_race(key, tbl, name, fires, mode)
  local dir = tmp .. "/" .. uniq("claims-" .. key)
  local lease, secs = RACE_LEASE_MS[providers.is_real(key)], providers.is_real(key) and 180 or 60
  assert.equal(0, sh("mkdir -p '" .. dir .. "'"))
  local parts = {}
  for i = 1, 8 do
    parts[#parts + 1] = ("(lua5.4 '%s/tests/support/claim_worker.lua' %s %s %s w%d %d %d %d '%s/w%d.txt' %s; echo $? > '%s/w%d.rc') &")
      :format(root, key, tbl, name, i, fires, lease, secs, dir, i, mode or "", dir, i)
  end
  sh(table.concat(parts, " ") .. " wait")
  local grants, claims = {}, {}
  for i = 1, 8 do
    assert.same({ "0" }, read_lines(("%s/w%d.rc"):format(dir, i)), "worker " .. i .. " failed")
    for _, l in ipairs(read_lines(("%s/w%d.txt"):format(dir, i))) do
      local o, t, now, ex = l:match("^G (%S+) (%d+) (%d+) (%d+)$")
      if o then
        grants[#grants + 1] = { owner = o, token = tonumber(t), now = tonumber(now), exp = tonumber(ex) }
      else
        local fire, co, ct, cnow = l:match("^C (%d+) (%S+) (%d+) (%d+)$")
        assert.is_truthy(fire, "bad worker line: " .. l)
        claims[#claims + 1] = { fire = tonumber(fire), owner = co, token = tonumber(ct), now = tonumber(cnow) }
      end
    end
  end
  -- each fire accepted exactly once (all of them were claimed)
  local seen = {}
  for _, c in ipairs(claims) do
    assert.is_nil(seen[c.fire], ("fire %d accepted twice (%s and %s)"):format(c.fire, seen[c.fire] or "", c.owner))
    seen[c.fire] = c.owner
  end
  for f = 1, fires do assert.is_truthy(seen[f], "fire " .. f .. " was never claimed") end
  -- tokens only grow, each belongs to one owner
  table.sort(grants, function(a, b) return a.now < b.now or (a.now == b.now and a.token < b.token) end)
  local token_owner = {}
  for i, g in ipairs(grants) do
    assert.is_true(i == 1 or g.token >= grants[i - 1].token, "token went down at " .. g.now)
    assert.is_true(token_owner[g.token] == nil or token_owner[g.token] == g.owner, "token " .. g.token .. " given to two owners")
    token_owner[g.token] = g.owner
  end
  -- an accepted claim: its owner's token, the highest granted up to then,
  -- and within a lease that token held at that moment (database clock)
  table.sort(claims, function(a, b) return a.now < b.now or (a.now == b.now and a.fire < b.fire) end)
  local owners = {}
  for i, c in ipairs(claims) do
    assert.is_true(i == 1 or c.fire > claims[i - 1].fire, "the cursor went back at fire " .. c.fire)
    assert.equal(token_owner[c.token], c.owner, "fire " .. c.fire .. " claimed under another's token")
    local top, live = 0, false
    for _, g in ipairs(grants) do
      if g.now > c.now then break end
      top = math.max(top, g.token)
      if g.token == c.token and g.exp > c.now then live = true end
    end
    assert.equal(top, c.token, ("fire %d claimed with token %d at %d after token %d was granted"):format(c.fire, c.token, c.now, top))
    assert.is_true(live, ("fire %d claimed at %d with token %d outside its lease"):format(c.fire, c.now, c.token))
    owners[c.owner] = true
  end
  local n = 0
  for _ in pairs(owners) do n = n + 1 end
  assert.is_true(n >= 3, "only " .. n .. " owners claimed fires")
  return grants, claims
end

describe("lease store providers", function()
  it("every expected provider is configured", function()
    assert.same({}, providers.missing)
  end)
end)

for _, p in ipairs(providers.proof_list) do
  local pname, pkey = p.provider, p.key or p.provider
  -- A real T-SQL engine answers slower (Babelfish under a busy CI all the
  -- more): its races take fewer fires, and longer leases.
  local race = providers.is_real(pkey) and (tonumber(os.getenv("LEASH_TEST_MSSQL_FIRES") or "") or 100)
    or 300
  local race_ms = RACE_LEASE_MS[providers.is_real(pkey)]

  describe("lease store conformance [" .. pkey .. "]", function()
    local s, tbl
    local count = 0
    local function lease() count = count + 1; return ("job-%d.%s"):format(count, uniq("x")) end

    setup(function()
      math.randomseed(os.time())
      tbl = uniq("conf")
      s = assert(core.open_store(providers.get(pkey, tbl)))
    end)

    teardown(function()
      if s then s:close() end
    end)

    it("acquires a free lease", function()
      local n = lease()
      local ok, info = s:try_acquire(n, "A", 5000)
      assert.is_true(ok)
      assert.equal("A", info.owner)
      assert.equal(1, info.token)
      assert.equal(5000, info.expires_at - info.now)
      local r = row_of(s, n)
      assert.equal("A", r.owner)
      assert.equal(info.expires_at, r.expires_at)
      assert.equal(info.now, r.acquired_at)
      assert.equal(info.now, r.renewed_at)
    end)

    it("refuses a lease held by another, naming the holder and its expiry", function()
      local n = lease()
      local _, mine = s:try_acquire(n, "A", 5000)
      local ok, info = s:try_acquire(n, "B", 5000)
      assert.is_false(ok)
      assert.equal("A", info.owner)
      assert.equal(mine.token, info.token)
      assert.equal(mine.expires_at, info.expires_at)
      assert.is_true(info.now >= mine.now and info.now < info.expires_at)
      local r = row_of(s, n)
      assert.equal("A", r.owner)
      assert.equal(mine.expires_at, r.expires_at)
    end)

    it("lets the holder re-acquire with the same token and a later expiry", function()
      local n = lease()
      local _, first = s:try_acquire(n, "A", 5000)
      sleep_ms(5)
      local ok, again = s:try_acquire(n, "A", 5000)
      assert.is_true(ok)
      assert.equal(first.token, again.token)
      assert.is_true(again.expires_at > first.expires_at)
      assert.equal(first.now, row_of(s, n).acquired_at)
    end)

    it("gives an expired lease to a new owner with token + 1", function()
      local n = lease()
      local _, a = s:try_acquire(n, "A", 80)
      sleep_ms(150)
      local ok, b = s:try_acquire(n, "B", 5000)
      assert.is_true(ok)
      assert.equal("B", b.owner)
      assert.equal(a.token + 1, b.token)
      assert.equal(b.now, row_of(s, n).acquired_at)
    end)

    it("gives the old owner token + 1 when it re-acquires after expiry", function()
      local n = lease()
      local _, a = s:try_acquire(n, "A", 80)
      sleep_ms(150)
      local ok, a2 = s:try_acquire(n, "A", 5000)
      assert.is_true(ok)
      assert.equal(a.token + 1, a2.token)
    end)

    it("renews for the holder: same token, later expiry", function()
      local n = lease()
      local _, a = s:try_acquire(n, "A", 5000)
      sleep_ms(5)
      local ok, r = s:renew(n, "A", 5000)
      assert.is_true(ok)
      assert.equal(a.token, r.token)
      assert.is_true(r.expires_at > a.expires_at)
      assert.equal(r.expires_at - r.now, 5000)
      local row = row_of(s, n)
      assert.equal(r.expires_at, row.expires_at)
      assert.equal(r.now, row.renewed_at)
      assert.equal(a.now, row.acquired_at)
    end)

    it("refuses a renew by a non-holder and leaves the row unchanged", function()
      local n = lease()
      s:try_acquire(n, "A", 5000)
      local before = row_of(s, n)
      local ok, info = s:renew(n, "B", 60000)
      assert.is_false(ok)
      assert.same(LOST, info)
      assert.same(before, (row_of(s, n)))
      local none_ok, none = s:renew(lease(), "B", 1000)
      assert.is_false(none_ok)
      assert.same(LOST, none)
    end)

    it("refuses a renew after expiry", function()
      local n = lease()
      s:try_acquire(n, "A", 80)
      sleep_ms(150)
      local before = row_of(s, n)
      local ok, info = s:renew(n, "A", 5000)
      assert.is_false(ok)
      assert.same(LOST, info)
      assert.same(before, (row_of(s, n)))
      assert.is_true(s:try_acquire(n, "B", 5000))
    end)

    it("ignores a release by a non-holder", function()
      local n = lease()
      s:try_acquire(n, "A", 5000)
      local before = row_of(s, n)
      assert.is_true(s:release(n, "B"))
      assert.same(before, (row_of(s, n)))
      assert.is_false(s:try_acquire(n, "B", 5000))
      assert.is_true(s:release(lease(), "B"))   -- unknown name: done, nothing made
    end)

    it("frees a released lease at once, keeps its token, and the next acquire gets token + 1", function()
      local n = lease()
      local _, a = s:try_acquire(n, "A", 60000)
      assert.is_true(s:release(n, "A"))
      local r, now = row_of(s, n)
      assert.equal("A", r.owner)
      assert.equal(a.token, r.token)
      assert.is_true(r.expires_at <= now)
      local ok, b = s:try_acquire(n, "B", 5000)
      assert.is_true(ok)
      assert.equal(a.token + 1, b.token)
      assert.is_false(s:renew(n, "A", 5000))
    end)

    it("renew_all renews exactly the held names, with their tokens", function()
      local held1, held2, other, expired, unknown = lease(), lease(), lease(), lease(), lease()
      local _, h1 = s:try_acquire(held1, "A", 5000)
      s:try_acquire(held2, "A", 80)
      s:try_acquire(held2, "A", 5000)
      s:try_acquire(other, "B", 5000)
      s:try_acquire(expired, "A", 80)
      sleep_ms(150)
      local _, h2 = s:try_acquire(held2, "A", 5000)
      local before_other = row_of(s, other)
      local before_expired = row_of(s, expired)
      local got = assert(s:renew_all("A", { held1, held2, other, expired, unknown }, 7000))
      assert.same({ [held1] = h1.token, [held2] = h2.token }, got)
      local r1, now = row_of(s, held1)
      assert.is_true(r1.expires_at - now > 6000)
      assert.equal(r1.renewed_at + 7000, r1.expires_at)
      assert.same(before_other, (row_of(s, other)))
      assert.same(before_expired, (row_of(s, expired)))
      assert.is_nil(row_of(s, unknown))
      assert.same({}, assert(s:renew_all("A", {}, 1000)))
    end)

    -- Controls (leash pause/resume/trigger/handoff): the providers that have them so far.
    local CONTROLS = { sqlite = true, postgres = true, mssql = true }
    local it_ctl = CONTROLS[pname] and it or pending

    it_ctl("renew_ctl renews as renew_all and returns each renewed lease's controls", function()
      local held, paused, other = lease(), lease(), lease()
      local _, h = s:try_acquire(held, "A", 5000)
      local _, hp = s:try_acquire(paused, "A", 5000)
      s:try_acquire(other, "B", 5000)
      local ok, at = s:control(paused, "pause", 4102444800000)
      assert.is_true(ok)
      assert.is_true(at > 0)
      assert.is_true(s:control(paused, "trigger"))
      assert.is_true(s:control(other, "handoff"))
      local got, now = assert(s:renew_ctl("A", { held, paused, other }, 7000))
      assert.same({ token = h.token }, got[held])
      assert.equal(hp.token, got[paused].token)
      assert.equal(4102444800000, got[paused].paused_until)
      assert.is_true(got[paused].trigger_at >= at and got[paused].trigger_at <= now)
      assert.is_nil(got[paused].handoff_at)
      assert.is_nil(got[other])                            -- not ours: not renewed, not told
      assert.equal(7000, row_of(s, held).expires_at - row_of(s, held).renewed_at)
      assert.is_true(math.abs(now - at) < 20000)
      -- resume clears the pause, keeps the requests
      assert.is_true(s:control(paused, "resume"))
      got = assert(s:renew_ctl("A", { paused }, 7000))
      assert.is_nil(got[paused].paused_until)
      assert.is_truthy(got[paused].trigger_at)
      assert.same({}, assert(s:renew_ctl("A", {}, 1000)))
    end)

    it_ctl("control: a pause of a job never held makes a free row; trigger and handoff of an unknown job answer no", function()
      local fresh, unknown = lease(), lease()
      assert.is_true(s:control(fresh, "pause", 4102444800000))
      local r = row_of(s, fresh)
      assert.equal("", r.owner)
      assert.equal(0, r.token)
      assert.is_true(r.expires_at <= r.renewed_at + 1 or r.expires_at == 0)
      -- the row is free: the first acquire takes it with token 1, the pause kept
      local ok, info = s:try_acquire(fresh, "A", 5000)
      assert.is_true(ok)
      assert.equal(1, info.token)
      local got = assert(s:renew_ctl("A", { fresh }, 5000))
      assert.equal(4102444800000, got[fresh].paused_until)
      assert.is_false((s:control(unknown, "trigger")))
      assert.is_false((s:control(unknown, "handoff")))
      assert.is_nil(row_of(s, unknown))
      assert.is_nil(s:control(unknown, "pause", 0))      -- refused by the wrapper: no SQL
    end)

    it_ctl("ctl_version: every control grows it by one in its own statement; no listing shows its row", function()
      local job, unknown = lease(), lease()
      local v0, now = assert(s:ctl_version())
      assert.is_true(v0 >= 0)
      assert.is_true(now > 0)
      local calls = s:calls()
      assert.is_true(s:control(job, "pause", 4102444800000))
      assert.equal(calls + 1, s:calls(), "the bump rides on the control's own round trip")
      assert.equal(v0 + 1, (s:ctl_version()))
      assert.is_true(s:control(job, "resume"))
      assert.is_true(s:control(job, "trigger"))
      assert.is_true(s:control(job, "handoff"))
      assert.equal(v0 + 4, (s:ctl_version()))
      -- the version is read, never written, by anything but a control
      s:try_acquire(job, "A", 5000)
      s:renew_ctl("A", { job }, 5000)
      assert.equal(v0 + 4, (s:ctl_version()))
      assert.is_false((s:control(unknown, "trigger")))
      assert.is_true((s:ctl_version()) >= v0 + 4)
      -- the row is the store's: no listing shows it, no control names it
      local rows = assert(s:list())
      for _, r in ipairs(rows) do assert.is_not.equal("@controls", r.name) end
      local none, err = s:control("@controls", "pause", 4102444800000)
      assert.is_nil(none)
      assert.matches("store's own row", err)
    end)

    it("health: changes once per transition, only under the holder's unexpired token", function()
      local n, other = lease(), lease()
      local _, a = s:try_acquire(n, "A", 60000)
      local calls = s:calls()
      assert.is_false(s:health("A", n, a.token, false), "NULL counts as ok: no change")
      assert.is_true(s:health("A", n, a.token, true), "ok -> failing")
      assert.is_false(s:health("A", n, a.token, true), "failing already")
      assert.is_false(s:health("B", n, a.token, false), "not the holder")
      assert.is_false(s:health("A", n, a.token + 1, false), "not the token")
      assert.is_true(s:health("A", n, a.token, false), "failing -> ok")
      assert.equal(calls + 6, s:calls())
      -- The next holder finds the state the last one left (no second hook).
      assert.is_true(s:health("A", n, a.token, true))
      s:release(n, "A")
      assert.is_false(s:health("A", n, a.token, false), "released: not held")
      local _, b = s:try_acquire(n, "B", 60000)
      assert.is_false(s:health("B", n, b.token, true), "failing already, under the new token too")
      assert.is_true(s:health("B", n, b.token, false))
      -- Expired on the database's clock: refused.
      local _, o = s:try_acquire(other, "A", 80)
      sleep_ms(150)
      assert.is_false(s:health("A", other, o.token, true))
      assert.is_false(s:health("A", lease(), 1, true), "no row")
      calls = s:calls()
      local function refused(pattern, ok, err)
        assert.is_nil(ok)
        assert.matches(pattern, err)
      end
      refused("token", s:health("A", n, 0, true))
      refused("lease name", s:health("A", "", 1, true))
      refused("owner", s:health(("x"):rep(201), n, 1, true))
      assert.equal(calls, s:calls(), "refused before any SQL")
    end)

    it("release_all frees exactly the caller's held leases in one statement, keeping their tokens", function()
      local mine1, mine2, other, expired, unknown = lease(), lease(), lease(), lease(), lease()
      local _, m1 = s:try_acquire(mine1, "A", 60000)
      local _, m2 = s:try_acquire(mine2, "A", 60000)
      s:try_acquire(other, "B", 60000)
      s:try_acquire(expired, "A", 80)
      sleep_ms(150)
      local before_other = row_of(s, other)
      local before_expired = row_of(s, expired)
      local calls = s:calls()
      assert.is_true(s:release_all("A", { mine1, other, expired, unknown, mine2, mine1 }))
      assert.equal(calls + 1, s:calls())
      for name, tok in pairs({ [mine1] = m1.token, [mine2] = m2.token }) do
        local r, now = row_of(s, name)
        assert.equal("A", r.owner, name)
        assert.equal(tok, r.token, name)
        assert.is_true(r.expires_at <= now, name)
      end
      assert.same(before_other, (row_of(s, other)))
      assert.same(before_expired, (row_of(s, expired)))   -- as release: nothing to free
      assert.is_nil(row_of(s, unknown))
      assert.is_false(s:renew(mine2, "A", 5000))
      local ok, b = s:try_acquire(mine1, "B", 5000)
      assert.is_true(ok)
      assert.equal(m1.token + 1, b.token)
      assert.is_false(s:try_acquire(other, "C", 5000))
      calls = s:calls()
      assert.is_true(s:release_all("A", {}))
      assert.equal(calls, s:calls())
    end)

    it("release_all of 2,500 names: one statement per chunk, others' leases left alone", function()
      local names, theirs = {}, {}
      for i = 1, 2500 do names[i] = ("bulk-%04d.%s"):format(i, tbl) end
      local chunk = pname == "mssql" and 2000 or #names   -- mssql: < 2,100 parameters
      for i = 1, 2500, 500 do
        theirs[names[i]] = true
        assert.is_true(s:try_acquire(names[i], "B", 60000))
      end
      local got = assert(s:acquire_all("A", names, 60000))
      local tokens = {}
      for _, n in ipairs(names) do
        assert.equal(not theirs[n], got[n].ok, n)
        tokens[n] = got[n].token
      end
      local calls = s:calls()
      assert.is_true(s:release_all("A", names))
      assert.equal(calls + math.ceil(#names / chunk), s:calls())
      local rows, now = assert(s:list())
      local seen = 0
      for _, r in ipairs(rows) do
        if r.name:match("^bulk%-") and r.name:sub(-#tbl) == tbl then
          seen = seen + 1
          assert.equal(tokens[r.name], r.token, r.name)
          if theirs[r.name] then
            assert.equal("B", r.owner, r.name)
            assert.is_true(r.expires_at > now, r.name)
          else
            assert.equal("A", r.owner, r.name)
            assert.is_true(r.expires_at <= now, r.name)
          end
        end
      end
      assert.equal(2500, seen)
      local again = assert(s:acquire_all("C", { names[2], names[2499], names[1] }, 5000))
      assert.is_true(again[names[2]].ok)
      assert.equal(tokens[names[2]] + 1, again[names[2]].token)
      assert.is_true(again[names[2499]].ok)
      assert.is_false(again[names[1]].ok)
    end)

    it("acquire_all takes the free names and names the holders of the others", function()
      local free, held, mine = lease(), lease(), lease()
      s:try_acquire(held, "B", 5000)
      local _, m = s:try_acquire(mine, "A", 5000)
      local got = assert(s:acquire_all("A", { free, held, mine }, 4000))
      assert.is_true(got[free].ok)
      assert.equal(1, got[free].token)
      assert.equal(4000, got[free].expires_at - got[free].now)
      assert.is_false(got[held].ok)
      assert.equal("B", got[held].owner)
      assert.is_true(got[mine].ok)
      assert.equal(m.token, got[mine].token)
    end)

    it("acquire_all over free, held, own, own-expired and other-expired names: outcomes, tokens, holders, rows", function()
      local free, held, mine, mine_exp, other_exp = lease(), lease(), lease(), lease(), lease()
      local _, h = s:try_acquire(held, "B", 60000)
      local _, m = s:try_acquire(mine, "A", 60000)
      local _, me = s:try_acquire(mine_exp, "A", 80)
      local _, oe = s:try_acquire(other_exp, "C", 80)
      sleep_ms(150)
      local before_held = row_of(s, held)
      local before_mine = row_of(s, mine)
      local calls = s:calls()
      local got = assert(s:acquire_all("A", { free, held, mine, mine_exp, other_exp }, 4000))
      assert.equal(calls + 1, s:calls())   -- one batch on every provider
      local n = 0
      for _ in pairs(got) do n = n + 1 end
      assert.equal(5, n)
      -- taken: ours, expiring ms after the database's now
      for name, want_token in pairs({ [free] = 1, [mine] = m.token, [mine_exp] = me.token + 1,
                                      [other_exp] = oe.token + 1 }) do
        local g = got[name]
        assert.is_true(g.ok, name)
        assert.equal("A", g.owner, name)
        assert.equal(want_token, g.token, name)
        assert.equal(4000, g.expires_at - g.now, name)
        local r = row_of(s, name)
        assert.equal("A", r.owner, name)
        assert.equal(want_token, r.token, name)
        assert.equal(g.expires_at, r.expires_at, name)
        assert.equal(g.now, r.renewed_at, name)
      end
      -- newly taken (free or expired): acquired now; still held: acquired_at kept
      assert.equal(got[free].now, row_of(s, free).acquired_at)
      assert.equal(got[other_exp].now, row_of(s, other_exp).acquired_at)
      assert.equal(got[mine_exp].now, row_of(s, mine_exp).acquired_at)
      assert.equal(before_mine.acquired_at, row_of(s, mine).acquired_at)
      -- held by another: refused, naming the holder, its token and expiry; row unchanged
      local g = got[held]
      assert.is_false(g.ok)
      assert.equal("B", g.owner)
      assert.equal(h.token, g.token)
      assert.equal(h.expires_at, g.expires_at)
      assert.is_true(g.now >= h.now and g.now < g.expires_at)
      assert.same(before_held, (row_of(s, held)))
      -- the others see the new holder
      local ok, info = s:try_acquire(other_exp, "C", 5000)
      assert.is_false(ok)
      assert.equal("A", info.owner)
      assert.is_true(s:renew(free, "A", 5000))
      assert.same({}, assert(s:acquire_all("A", {}, 1000)))
    end)

    it("acquire_all answers as try_acquire would, name by name, and lets another owner in after a release", function()
      local a, b = lease(), lease()
      local first = assert(s:acquire_all("A", { a, b }, 60000))
      assert.is_true(first[a].ok and first[b].ok)
      local other = assert(s:acquire_all("B", { b, a }, 60000))
      assert.is_false(other[a].ok)
      assert.is_false(other[b].ok)
      assert.equal("A", other[a].owner)
      assert.equal(first[b].token, other[b].token)
      assert.equal(first[b].expires_at, other[b].expires_at)
      assert.is_true(s:release(b, "A"))
      local after = assert(s:acquire_all("B", { a, b }, 60000))
      assert.is_false(after[a].ok)
      assert.is_true(after[b].ok)
      assert.equal("B", after[b].owner)
      assert.equal(first[b].token + 1, after[b].token)
      local again = assert(s:acquire_all("A", { a, b }, 60000))
      assert.is_true(again[a].ok)
      assert.equal(first[a].token, again[a].token)
      assert.is_false(again[b].ok)
      assert.equal("B", again[b].owner)
    end)

    it("claim_all: the holder's claim advances the cursor, once per fire; later fires only", function()
      local n = lease()
      local _, a = s:try_acquire(n, "A", 60000)
      assert.is_nil(a.last_fire)                         -- a new job has no cursor
      assert.is_nil(row_of(s, n).last_fire)
      local oks, now = assert(s:claim_all("A", { { name = n, token = a.token, fire = 1000 } }))
      assert.same({ true }, oks)
      assert.is_true(now >= a.now and now < a.expires_at)
      assert.equal(1000, row_of(s, n).last_fire)
      assert.same({ false }, assert(s:claim_all("A", { { name = n, token = a.token, fire = 1000 } })))
      assert.same({ false }, assert(s:claim_all("A", { { name = n, token = a.token, fire = 999 } })))
      assert.same({ true }, assert(s:claim_all("A", { { name = n, token = a.token, fire = 1001 } })))
      assert.same({ false }, assert(s:claim_all("A", { { name = n, token = a.token, fire = 1000 } })))
      local r = row_of(s, n)
      assert.equal(1001, r.last_fire)
      assert.equal(a.token, r.token)                     -- a claim moves nothing but the cursor
      assert.equal(a.expires_at, r.expires_at)
      local ok, again = s:try_acquire(n, "A", 60000)
      assert.is_true(ok)
      assert.equal(1001, again.last_fire)
      local _, renewed = s:renew(n, "A", 60000)
      assert.equal(1001, renewed.last_fire)
      assert.same({ true }, assert(s:claim_all("A", { { name = n, token = a.token, fire = 5000 } })))
    end)

    it("claim_all refuses a wrong token, another owner, an expired lease and an unknown name", function()
      local n, gone = lease(), lease()
      local _, a = s:try_acquire(n, "A", 60000)
      assert.is_true(s:claim_all("A", { { name = n, token = a.token, fire = 10 } })[1])
      local _, g = s:try_acquire(gone, "A", 80)
      sleep_ms(150)
      local before = row_of(s, n)
      local oks = assert(s:claim_all("A", {
        { name = n, token = a.token + 1, fire = 20 },   -- a token it does not hold
        { name = gone, token = g.token, fire = 20 },    -- expired on the database's clock
        { name = lease(), token = 1, fire = 20 },       -- no row
      }))
      assert.same({ false, false, false }, oks)
      assert.same({ false }, assert(s:claim_all("B", { { name = n, token = a.token, fire = 20 } })))
      assert.same(before, (row_of(s, n)))
      assert.is_nil(row_of(s, gone).last_fire)
      -- the next holder of the expired lease claims with its own token, not the old one
      local ok, b = s:try_acquire(gone, "B", 60000)
      assert.is_true(ok)
      assert.equal(g.token + 1, b.token)
      assert.same({ false }, assert(s:claim_all("A", { { name = gone, token = g.token, fire = 20 } })))
      assert.same({ false }, assert(s:claim_all("B", { { name = gone, token = g.token, fire = 20 } })))
      assert.same({ true }, assert(s:claim_all("B", { { name = gone, token = b.token, fire = 20 } })))
    end)

    it("claim_all claims many jobs' fires in one statement, answering each in order", function()
      local names, claims = {}, {}
      for i = 1, 6 do names[i] = lease() end
      local got = assert(s:acquire_all("A", names, 60000))
      assert.is_true(s:claim_all("A", { { name = names[5], token = got[names[5]].token, fire = 500 } })[1])
      for i, n in ipairs(names) do claims[i] = { name = n, token = got[n].token, fire = 400 + i } end
      claims[2].token = claims[2].token + 7                -- stale
      local calls = s:calls()
      local oks = assert(s:claim_all("A", claims))
      assert.equal(calls + 1, s:calls())
      assert.same({ true, false, true, true, false, true }, oks)   -- 5: 405 < its cursor 500
      for i, n in ipairs(names) do
        local want = ({ 401, nil, 403, 404, 500, 406 })[i]
        assert.equal(want, row_of(s, n).last_fire, n)
      end
      calls = s:calls()
      local none, now = assert(s:claim_all("A", {}))
      assert.same({}, none)
      assert.equal(0, now)
      assert.equal(calls, s:calls())
    end)

    it("claim_all of 1,400 claims: one statement per chunk (650 on SQL Server)", function()
      local names, claims = {}, {}
      for i = 1, 1400 do names[i] = ("claim-%04d.%s"):format(i, tbl) end
      local got = assert(s:acquire_all("A", names, 60000))
      for i, n in ipairs(names) do
        claims[i] = { name = n, token = got[n].token, fire = i % 3 == 0 and 0 or 7000 + i }   -- 0: a fire at all
      end
      local chunk = pname == "mssql" and 650 or #claims
      local calls = s:calls()
      local oks = assert(s:claim_all("A", claims))
      assert.equal(calls + math.ceil(#claims / chunk), s:calls())
      assert.equal(#claims, #oks)
      for i = 1, #claims do assert.is_true(oks[i], names[i]) end
      local rows = {}
      for _, r in ipairs((assert(s:list()))) do rows[r.name] = r end
      for i, n in ipairs(names) do assert.equal(claims[i].fire, rows[n].last_fire, n) end
      -- the same claims again: all refused (each fire was claimed), in every chunk
      for _, ok in ipairs(assert(s:claim_all("A", claims))) do assert.is_false(ok) end
      assert.is_true(s:release_all("A", names))
    end)

    it("release keeps the cursor, and the next holder's acquire returns it", function()
      local n, m = lease(), lease()
      local _, a = s:try_acquire(n, "A", 60000)
      local _, am = s:try_acquire(m, "A", 60000)
      assert.same({ true, true }, assert(s:claim_all("A", {
        { name = n, token = a.token, fire = 1700000000000 },
        { name = m, token = am.token, fire = 42 } })))
      assert.is_true(s:release(n, "A"))
      assert.is_true(s:release_all("A", { m }))
      local r = row_of(s, n)
      assert.equal(1700000000000, r.last_fire)
      local ok, b = s:try_acquire(n, "B", 60000)
      assert.is_true(ok)
      assert.equal(a.token + 1, b.token)
      assert.equal(1700000000000, b.last_fire)
      local got = assert(s:acquire_all("C", { m, n }, 60000))
      assert.is_true(got[m].ok)
      assert.equal(42, got[m].last_fire)
      assert.is_false(got[n].ok)                         -- held by B: the holder's cursor
      assert.equal("B", got[n].owner)
      assert.equal(1700000000000, got[n].last_fire)
      local held, info = s:try_acquire(n, "C", 60000)
      assert.is_false(held)
      assert.equal(1700000000000, info.last_fire)
      -- the old holder's token claims nothing, the new one's does
      assert.same({ false }, assert(s:claim_all("A", { { name = n, token = a.token, fire = 1700000000001 } })))
      assert.same({ true }, assert(s:claim_all("B", { { name = n, token = b.token, fire = 1700000000001 } })))
    end)

    it("claim_all refuses bad claims before any SQL", function()
      local n = lease()
      local _, a = s:try_acquire(n, "A", 60000)
      local calls = s:calls()
      local function refused(pattern, ok, err)
        assert.is_nil(ok)
        assert.matches(pattern, err)
      end
      local good = { name = n, token = a.token, fire = 5 }
      refused("owner", s:claim_all(nil, { good }))
      refused("owner", s:claim_all("", { good }))
      refused("owner", s:claim_all(("o"):rep(201), { good }))
      refused("lease name", s:claim_all("A", { good, { token = 1, fire = 5 } }))
      refused("lease name", s:claim_all("A", { { name = "", token = 1, fire = 5 } }))
      refused("lease name", s:claim_all("A", { { name = ("n"):rep(201), token = 1, fire = 5 } }))
      refused("lease name", s:claim_all("A", { "not a claim" }))
      for _, tok in ipairs({ 0, -1, 1.5, "1" }) do
        refused("token", s:claim_all("A", { { name = n, token = tok, fire = 5 } }))
      end
      refused("token", s:claim_all("A", { { name = n, fire = 5 } }))
      for _, fire in ipairs({ -1, 2.5, "5" }) do
        refused("fire", s:claim_all("A", { { name = n, token = a.token, fire = fire } }))
      end
      refused("fire", s:claim_all("A", { { name = n, token = a.token } }))
      refused("twice", s:claim_all("A", { good, { name = lease(), token = 1, fire = 1 }, good }))
      assert.equal(calls, s:calls())
      assert.is_nil(row_of(s, n).last_fire)
      assert.has_error(function() s:claim_all("A", "x") end)
    end)

    it("an old presence table (no broken column) gets it at open; its rows read as no broken files", function()
      local old = uniq("oldp")
      local now = os.time() * 1000
      by_hand(pkey, ("CREATE TABLE %s_replicas (owner VARCHAR(200) PRIMARY KEY, host VARCHAR(200) NOT NULL,"
        .. " pid BIGINT NOT NULL, version VARCHAR(32) NOT NULL, started_at BIGINT NOT NULL,"
        .. " heartbeat BIGINT NOT NULL, draining INTEGER NOT NULL DEFAULT 0,"
        .. " jobs_hash VARCHAR(32) NOT NULL, jobs TEXT NOT NULL);\n"
        .. "INSERT INTO %s_replicas VALUES ('O:1:01', 'h', 1, '0.8', %d, %d, 0, 'ho', 'a');\n")
        :format(old, old, now, now))
      local s2 = assert(core.open_store(providers.get(pkey, old)))
      local rows = assert(s2:replicas())
      assert.equal(1, #rows)
      assert.equal("O:1:01", rows[1].owner)
      assert.is_nil(rows[1].broken)
      rows = assert(s2:beat({ owner = "N:1:01", host = "h", pid = 2, version = "1.0",
        jobs_hash = "hn", jobs = "b\n", broken = "b\t1\t0\tjobs/b.lua:1: oops\n" }, 600000))
      local t = {}
      for _, r in ipairs(rows) do t[r.owner] = r end
      assert.is_nil(t["O:1:01"].broken)
      assert.equal("b\t1\t0\tjobs/b.lua:1: oops\n", t["N:1:01"].broken)
      -- an old replica's beat (its statement names no broken column) still goes
      by_hand(pkey, ("UPDATE %s_replicas SET heartbeat = %d WHERE owner = 'O:1:01';\n"):format(old, now + 1))
      s2:close()
      local s3 = assert(core.open_store(providers.get(pkey, old)))   -- a second open changes nothing
      assert.equal(2, #assert(s3:replicas()))
      s3:close()
    end)

    it("an old table (no last_fire column) gets it and the control columns at open, keeping rows and tokens", function()
      local old = uniq("old")
      local now = os.time() * 1000
      make_old_table(pkey, old, ("('held', 'A', 7, %d, %d, %d), ('free', 'B', 3, 1, 1, 2)")
        :format(now - 1000, now - 1000, now + 600000))
      local s2 = assert(core.open_store(providers.get(pkey, old)))
      local rows = assert(s2:list())
      assert.equal(2, #rows)
      assert.same({ "free", "B", 3, 2, nil }, { rows[1].name, rows[1].owner, rows[1].token, rows[1].expires_at, rows[1].last_fire })
      assert.same({ "held", "A", 7, now + 600000, nil }, { rows[2].name, rows[2].owner, rows[2].token, rows[2].expires_at, rows[2].last_fire })
      local ok, info = s2:try_acquire("held", "B", 600000)
      assert.is_false(ok)
      assert.equal(7, info.token)
      ok, info = s2:try_acquire("held", "A", 600000)
      assert.is_true(ok)
      assert.equal(7, info.token)
      assert.is_nil(info.last_fire)
      assert.same({ true }, assert(s2:claim_all("A", { { name = "held", token = 7, fire = 1 } })))
      ok, info = s2:try_acquire("free", "C", 600000)
      assert.is_true(ok)
      assert.equal(4, info.token)
      s2:close()
      local s3 = assert(core.open_store(providers.get(pkey, old)))   -- a second open changes nothing
      local r = assert(s3:list())
      assert.equal(1, r[2].last_fire)
      assert.equal(7, r[2].token)
      assert.equal(4, r[1].token)
      -- the control columns are there, NULL until a control sets them
      local got = assert(s3:renew_ctl("A", { "held" }, 600000))
      assert.same({ token = 7 }, got.held)
      assert.is_true(s3:control("held", "trigger"))
      assert.is_number(assert(s3:renew_ctl("A", { "held" }, 600000)).held.trigger_at)
      -- and the health column, NULL (ok) until a run fails
      assert.is_false(s3:health("A", "held", 7, false))
      assert.is_true(s3:health("A", "held", 7, true))
      -- and handoff_to: a handoff to nobody live frees the lease
      assert.is_true(s3:control("held", "handoff", nil, "Z:1:01"))
      assert.same({ true, "" }, { s3:handoff("held", "A", 600000, 10000) })
      assert.is_true((s3:try_acquire("held", "A", 600000)))
      s3:close()
    end)

    it(("claim race: 8 processes x %d fires, %d ms leases: each fire claimed once, by the token's holder"):format(race, race_ms), function()
      local name = "claimed"
      claim_race(pkey, tbl, name, race)
      assert.equal(race, row_of(s, name).last_fire)
    end)

    it("refuses bad durations, names and owners before any SQL", function()
      local n = lease()
      local long = ("x"):rep(201)
      local calls = s:calls()
      local function refused(pattern, ok, err)
        assert.is_nil(ok)
        assert.matches(pattern, err)
      end
      for _, ms in ipairs({ 0, -1, 24 * 3600 * 1000 + 1, 1.5, "10s" }) do
        refused("duration", s:try_acquire(n, "A", ms))
        refused("duration", s:renew(n, "A", ms))
        refused("duration", s:renew_all("A", { n }, ms))
        refused("duration", s:acquire_all("A", { n }, ms))
      end
      for _, bad in ipairs({ "", long }) do
        refused("lease name", s:try_acquire(bad, "A", 1000))
        refused("owner", s:try_acquire(n, bad, 1000))
        refused("lease name", s:renew(bad, "A", 1000))
        refused("owner", s:renew(n, bad, 1000))
        refused("lease name", s:release(bad, "A"))
        refused("owner", s:release(n, bad))
        refused("lease name", s:renew_all("A", { n, bad }, 1000))
        refused("owner", s:renew_all(bad, { n }, 1000))
        refused("lease name", s:acquire_all("A", { n, bad }, 1000))
        refused("lease name", s:release_all("A", { n, bad }))
        refused("owner", s:release_all(bad, { n }))
      end
      refused("owner", s:release_all(nil, { n }))
      refused("lease name", s:try_acquire(nil, "A", 1000))
      refused("owner", s:try_acquire(n, nil, 1000))
      refused("lease name", s:try_acquire(42, "A", 1000))
      assert.equal(calls, s:calls())
      assert.is_nil(row_of(s, n))
      -- the limits themselves are fine
      assert.is_true(s:try_acquire(("n"):rep(200), ("o"):rep(200), 24 * 3600 * 1000))
      assert.is_true(s:release(("n"):rep(200), ("o"):rep(200)))
      assert.equal(calls + 3, s:calls())
    end)

    it("stores and returns names with quotes, ;, --, % and UTF-8 exactly", function()
      local names = {
        "it's", 'say "hi"', "a;b; DROP TABLE " .. tbl .. ";", "x -- y", "100%_done", "back\\slash",
        "naïve-日本語-🚀", "tab\there", "[brackets]{}", "$1 ?1 :name",
      }
      local owner = "owner'; --%ü"
      for _, n in ipairs(names) do
        local ok, info = s:try_acquire(n, owner, 5000)
        assert.is_true(ok, n)
        assert.equal(owner, info.owner)
      end
      local got = assert(s:renew_all(owner, names, 5000))
      local rows = assert(s:list())
      local seen = {}
      for _, r in ipairs(rows) do seen[r.name] = r.owner end
      for _, n in ipairs(names) do
        assert.is_number(got[n], n)
        assert.equal(owner, seen[n], n)
        assert.is_true(s:renew(n, owner, 5000), n)
        assert.is_true(s:release(n, owner), n)
      end
      assert.is_truthy(row_of(s, names[1]))
    end)

    it("lists rows sorted by name with the database's now", function()
      local rows, now = assert(s:list())
      assert.is_true(#rows > 0)
      assert.is_true(now > 1600000000000 and now < 4102444800000)
      for i = 2, #rows do assert.is_true(rows[i - 1].name < rows[i].name) end
    end)

    it("gives a clear error on a closed handle", function()
      local s2 = assert(core.open_store(providers.get(pkey, tbl)))
      s2:close()
      s2:close()
      local ok, err = pcall(s2.list, s2)
      assert.is_false(ok)
      assert.matches("closed", err)
    end)

    it("contention: 8 processes x 300 attempts (150 on a real T-SQL engine), no overlapping grants, tokens grow with each holder", function()
      local name = "contended"
      local dir = tmp .. "/" .. uniq("contention-" .. pkey)
      assert.equal(0, sh("mkdir -p '" .. dir .. "'"))
      local attempts = 300
      if pname == "mssql" then
        -- (half as many on a real T-SQL engine, whose statements cost more)
        attempts = tonumber(os.getenv("LEASH_TEST_MSSQL_ATTEMPTS") or "") or providers.is_real(pkey) and 150 or 300
      end
      local parts = {}
      for i = 1, 8 do
        parts[#parts + 1] = ("(lua5.4 '%s/tests/support/contention_worker.lua' %s %s %s w%d %d 50 '%s/w%d.txt'; echo $? > '%s/w%d.rc') &")
          :format(root, pkey, tbl, name, i, attempts, dir, i, dir, i)
      end
      sh(table.concat(parts, " ") .. " wait")
      local grants = {}
      for i = 1, 8 do
        assert.same({ "0" }, read_lines(("%s/w%d.rc"):format(dir, i)), "worker " .. i .. " failed")
        for _, l in ipairs(read_lines(("%s/w%d.txt"):format(dir, i))) do
          local o, t, st, ex = l:match("^(%S+) (%d+) (%d+) (%d+)$")
          grants[#grants + 1] = { owner = o, token = tonumber(t), start = tonumber(st), exp = tonumber(ex) }
        end
      end
      table.sort(grants, function(a, b)
        if a.start ~= b.start then return a.start < b.start end
        return a.token < b.token
      end)
      assert.is_true(#grants >= 20, "only " .. #grants .. " grants")
      local max_exp, token_owner, holders = {}, {}, 0
      local prev
      for _, g in ipairs(grants) do
        for o, e in pairs(max_exp) do
          if o ~= g.owner and e > g.start then
            error(("grant to %s (token %d) at %d overlaps %s's lease until %d")
              :format(g.owner, g.token, g.start, o, e))
          end
        end
        max_exp[g.owner] = math.max(max_exp[g.owner] or 0, g.exp)
        if token_owner[g.token] then
          assert.equal(token_owner[g.token], g.owner, "token " .. g.token .. " given to two owners")
        else
          token_owner[g.token] = g.owner
        end
        if prev then
          if prev.owner ~= g.owner then
            assert.is_true(g.token > prev.token, ("token went from %d to %d on handover"):format(prev.token, g.token))
            holders = holders + 1
          else
            assert.is_true(g.token >= prev.token)
          end
        end
        prev = g
      end
      assert.is_true(holders >= 5, "only " .. holders .. " handovers")
    end)

    -- ---- the run ledger: <table>_runs (store.h) ----

    describe("run ledger", function()
      -- A ledger row to write, defaults filled in.
      local function run(t)
        local r = { owner = "A", token = 0, outcome = "ok" }
        for k, v in pairs(t) do r[k] = v end
        return r
      end
      local function rows_of(st, job, extra)
        local q = { job = job, limit = 10000 }
        for k, v in pairs(extra or {}) do q[k] = v end
        return assert(st:read_runs(q))
      end
      local function db_now(st)
        local _, now = assert(st:list())
        return now
      end

      it("claim_runs writes a claim's rows iff the claim is accepted, with claimed_at = the database's now", function()
        local n, gone, other, past = lease(), lease(), lease(), lease()
        local _, a = s:try_acquire(n, "A", 60000)
        local _, g = s:try_acquire(gone, "A", 80)
        local _, o = s:try_acquire(other, "B", 60000)
        local _, p = s:try_acquire(past, "A", 60000)
        assert.same({ true }, assert(s:claim_all("A", { { name = past, token = p.token, fire = 500 } })))
        sleep_ms(150)                                   -- gone expires on the database's clock
        local claims = {
          { name = n, token = a.token, fire = 100 },          -- accepted
          { name = gone, token = g.token, fire = 100 },       -- expired
          { name = other, token = o.token, fire = 100 },      -- B's lease
          { name = past, token = p.token, fire = 400 },       -- its cursor is at 500
        }
        local runs = {}
        for i = 1, #claims do
          runs[#runs + 1] = { claim = i, scheduled_at = 100, owner = "A", outcome = "running",
                              claimed_at = 1, started_at = 123 }   -- claimed_at is the store's
        end
        runs[#runs + 1] = { claim = 1, scheduled_at = 90, owner = "A", outcome = "missed" }
        local calls = s:calls()
        local oks, now = assert(s:claim_runs("A", claims, runs))
        assert.equal(calls + 1, s:calls())
        assert.same({ true, false, false, false }, oks)
        local got = rows_of(s, n)
        assert.equal(2, #got)
        assert.same({ job = n, owner = "A", token = a.token, outcome = "running", scheduled_at = 100,
                      claimed_at = now, started_at = 123, recorded_at = now }, got[1])
        assert.same({ job = n, owner = "A", token = a.token, outcome = "missed", scheduled_at = 90,
                      claimed_at = now, recorded_at = now }, got[2])
        for _, j in ipairs({ gone, other, past }) do assert.same({}, rows_of(s, j), j) end
        assert.equal(100, row_of(s, n).last_fire)
        assert.equal(500, row_of(s, past).last_fire)
        -- stale token: the next holder of gone took it with token + 1
        local _, b = s:try_acquire(gone, "B", 60000)
        assert.same({ false }, assert(s:claim_runs("A", { { name = gone, token = g.token, fire = 200 } },
          { { claim = 1, scheduled_at = 200, owner = "A", outcome = "running" } })))
        assert.same({ false }, assert(s:claim_runs("B", { { name = gone, token = g.token, fire = 200 } },
          { { claim = 1, scheduled_at = 200, owner = "B", outcome = "running" } })))
        assert.same({}, rows_of(s, gone))
        assert.same({ true }, assert(s:claim_runs("B", { { name = gone, token = b.token, fire = 200 } },
          { { claim = 1, scheduled_at = 200, owner = "B", outcome = "running" } })))
        local r = rows_of(s, gone)
        assert.equal(1, #r)
        assert.equal(b.token, r[1].token)             -- the claim's token, by default
        -- the same fire again is refused and writes nothing
        assert.same({ false }, assert(s:claim_runs("B", { { name = gone, token = b.token, fire = 200 } },
          { { claim = 1, scheduled_at = 200, owner = "B", outcome = "failed" } })))
        assert.equal("running", rows_of(s, gone)[1].outcome)
        -- claims without rows, and no claims at all
        assert.same({ true }, assert(s:claim_runs("B", { { name = gone, token = b.token, fire = 201 } }, {})))
        calls = s:calls()
        local none, zero = assert(s:claim_runs("B", {}, {}))
        assert.same({}, none)
        assert.equal(0, zero)
        assert.equal(calls, s:calls())
      end)

      it("claim_runs replaces a row whose key exists, whole", function()
        local n = lease()
        local _, a = s:try_acquire(n, "A", 60000)
        assert(s:record_runs({ run{ job = n, scheduled_at = 10, token = a.token, outcome = "skipped-overlap",
                                    started_at = 5, exit_code = 3, error = "old", actor = "me@host" } }))
        assert.same({ true }, assert(s:claim_runs("A", { { name = n, token = a.token, fire = 10 } },
          { { claim = 1, scheduled_at = 10, owner = "A", outcome = "running" } })))
        local r = rows_of(s, n)
        assert.equal(1, #r)
        assert.equal("running", r[1].outcome)
        assert.is_nil(r[1].started_at)
        assert.is_nil(r[1].exit_code)
        assert.is_nil(r[1].error)
        assert.is_nil(r[1].actor)
        assert.is_number(r[1].claimed_at)
      end)

      it("claim_runs of many jobs' fires at one instant: one statement, each job's rows with its own claim", function()
        local names, claims, runs = {}, {}, {}
        for i = 1, 40 do names[i] = lease() end
        local got = assert(s:acquire_all("A", names, 60000))
        for i, n in ipairs(names) do
          claims[i] = { name = n, token = got[n].token, fire = 1000 }
          runs[#runs + 1] = { claim = i, scheduled_at = 1000, owner = "A", outcome = "running" }
          if i % 2 == 0 then
            runs[#runs + 1] = { claim = i, scheduled_at = 999, owner = "A", outcome = "missed" }
          end
        end
        claims[7].token = claims[7].token + 1           -- refused: its rows are not written
        local calls = s:calls()
        local oks = assert(s:claim_runs("A", claims, runs))
        assert.equal(calls + 1, s:calls())
        for i, n in ipairs(names) do
          assert.equal(i ~= 7, oks[i], n)
          local r = rows_of(s, n)
          assert.equal(i == 7 and 0 or (i % 2 == 0 and 2 or 1), #r, n)
          for _, row in ipairs(r) do assert.equal(got[n].token, row.token) end
        end
      end)

      it("unclaim_all gives a fire back: the cursor to just before it, its unstarted row gone, in one statement", function()
        local n, started, later, other, stale = lease(), lease(), lease(), lease(), lease()
        local got = assert(s:acquire_all("A", { n, started, later, stale }, 60000))
        local _, o = s:try_acquire(other, "B", 60000)
        local function claim(owner, name, token, fire, row)
          local ok = assert(s:claim_runs(owner, { { name = name, token = token, fire = fire } },
            { { claim = 1, scheduled_at = fire, owner = owner, outcome = "running",
                started_at = row and row.started_at } }))
          assert.same({ true }, ok, name)
        end
        for _, j in ipairs({ n, started, later, stale }) do claim("A", j, got[j].token, 1000) end
        claim("B", other, o.token, 1000)
        assert.is_true(s:record_runs({ run{ job = n, scheduled_at = 990, token = got[n].token,
                                            outcome = "missed" } }))  -- an older row stays
        claim("A", started, got[started].token, 2000, { started_at = 2001 })
        claim("A", later, got[later].token, 2000)
        local calls = s:calls()
        local oks = assert(s:unclaim_all("A", {
          { name = n, token = got[n].token, fire = 1000 },            -- given back
          { name = started, token = got[started].token, fire = 2000 }, -- its run started: the row stays
          { name = later, token = got[later].token, fire = 1000 },    -- a later fire was claimed
          { name = other, token = o.token, fire = 1000 },             -- B's lease
          { name = stale, token = got[stale].token + 1, fire = 1000 }, -- not its token
        }))
        assert.equal(calls + 1, s:calls())
        assert.same({ true, true, false, false, false }, oks)
        assert.equal(999, row_of(s, n).last_fire)
        assert.equal(got[n].token, row_of(s, n).token)
        local r = rows_of(s, n)
        assert.equal(1, #r)
        assert.equal(990, r[1].scheduled_at)
        assert.equal(1999, row_of(s, started).last_fire)
        assert.equal(2, #rows_of(s, started), "a row whose run started is not the claim's to take back")
        assert.equal(2000, row_of(s, later).last_fire)
        assert.equal(2, #rows_of(s, later))
        assert.equal(1000, row_of(s, other).last_fire)
        assert.equal(1, #rows_of(s, other))
        assert.equal(1000, row_of(s, stale).last_fire)
        -- Given back, the fire can be claimed again (by the next holder).
        assert.is_true(s:release(n, "A"))
        local _, b = s:try_acquire(n, "B", 60000)
        assert.same({ true }, assert(s:claim_all("B", { { name = n, token = b.token, fire = 1000 } })))
        assert.same({ false }, assert(s:unclaim_all("A", { { name = n, token = got[n].token, fire = 1000 } })))
        assert.equal(1000, row_of(s, n).last_fire)
      end)

      it("unclaim_all: a fire at 0 leaves no cursor; an expired lease still gives back; none sends nothing", function()
        local z, e = lease(), lease()
        local _, a = s:try_acquire(z, "A", 60000)
        local _, g = s:try_acquire(e, "A", 80)
        assert.same({ true, true }, assert(s:claim_all("A", { { name = z, token = a.token, fire = 0 },
                                                              { name = e, token = g.token, fire = 50 } })))
        sleep_ms(150)
        assert.same({ true, true }, assert(s:unclaim_all("A", { { name = z, token = a.token, fire = 0 },
                                                                { name = e, token = g.token, fire = 50 } })))
        assert.is_nil(row_of(s, z).last_fire)
        assert.equal(49, row_of(s, e).last_fire)
        local calls = s:calls()
        assert.same({}, assert(s:unclaim_all("A", {})))
        assert.equal(calls, s:calls())
        local none, err = s:unclaim_all("A", { { name = z, token = 0, fire = 5 } })
        assert.is_nil(none)
        assert.truthy(err:find("token must be > 0", 1, true), err)
      end)

      it("record_runs inserts, then updates keeping every field given as nil; outcome and token always replace", function()
        local j = lease()
        local before = db_now(s)
        assert.is_true(s:record_runs({ run{ job = j, scheduled_at = 5000, token = 3, outcome = "running",
                                            claimed_at = 4990, started_at = 5001, actor = "ops@h" } }))
        local r1 = rows_of(s, j)[1]
        assert.is_true(r1.recorded_at >= before)
        sleep_ms(5)
        assert.is_true(s:record_runs({ run{ job = j, scheduled_at = 5000, token = 4, outcome = "failed",
                                            ended_at = 6000, exit_code = 2, duration_ms = 999, error = "boom" } }))
        local r = rows_of(s, j)
        assert.equal(1, #r)
        assert.same({ job = j, owner = "A", scheduled_at = 5000, token = 4, outcome = "failed",
                      claimed_at = 4990, started_at = 5001, ended_at = 6000, exit_code = 2,
                      duration_ms = 999, error = "boom", actor = "ops@h", recorded_at = r[1].recorded_at }, r[1])
        assert.is_true(r[1].recorded_at >= r1.recorded_at)
        -- a signal, zeros kept as zeros (not NULL)
        assert.is_true(s:record_runs({ run{ job = j, scheduled_at = 5000, token = 0, outcome = "killed",
                                            exit_signal = 9, exit_code = 0, duration_ms = 0 } }))
        r = rows_of(s, j)[1]
        assert.same({ "killed", 0, 9, 0, 0, "boom" }, { r.outcome, r.token, r.exit_signal, r.exit_code, r.duration_ms, r.error })
        -- another owner's row of the same fire is another row
        assert.is_true(s:record_runs({ run{ job = j, scheduled_at = 5000, owner = "B", outcome = "ok" } }))
        assert.equal(2, #rows_of(s, j))
        -- many rows in one call, one statement
        local many = {}
        for i = 1, 500 do many[i] = run{ job = j, scheduled_at = 10000 + i, outcome = "ok", duration_ms = i } end
        local calls = s:calls()
        assert.is_true(s:record_runs(many))
        assert.equal(calls + 1, s:calls())
        assert.equal(502, #rows_of(s, j))
        calls = s:calls()
        assert.is_true(s:record_runs({}))
        assert.equal(calls, s:calls())
      end)

      it("last_runs: per job, in one statement, the latest run, ok and failure, the failure streak and the latest handled fire", function()
        local t2 = uniq("last")
        local st = assert(core.open_store(providers.get(pkey, t2)))
        local rows, now = assert(st:last_runs())
        assert.same({}, rows)
        assert.is_true(now > 0)
        local a, b, c, d = "a-job", "b-job", "c-job", "d-job"
        assert.is_true(st:record_runs({
          -- a: ok, then two failures, then a skip and a missed fire
          run{ job = a, scheduled_at = 1000, outcome = "ok", duration_ms = 5 },
          run{ job = a, scheduled_at = 2000, outcome = "failed", exit_code = 3, error = "boom" },
          run{ job = a, scheduled_at = 3000, outcome = "timeout" },
          run{ job = a, scheduled_at = 3000, owner = "B", outcome = "lost" },
          run{ job = a, scheduled_at = 4000, outcome = "skipped-overlap" },
          run{ job = a, scheduled_at = 5000, outcome = "missed" },
          -- b: failed long ago, ok since, and one still running
          run{ job = b, scheduled_at = 100, outcome = "killed" },
          run{ job = b, scheduled_at = 200, outcome = "ok" },
          run{ job = b, scheduled_at = 300, owner = "C", token = 7, outcome = "running", started_at = 301 },
          -- c: only missed fires (no run, nothing handled)
          run{ job = c, scheduled_at = 10, outcome = "missed" },
          -- d: never ok
          run{ job = d, scheduled_at = 10, outcome = "failed" },
          run{ job = d, scheduled_at = 20, outcome = "killed" },
        }))
        local calls = st:calls()
        rows, now = assert(st:last_runs())
        assert.equal(calls + 1, st:calls())
        assert.is_true(now > 0)
        local n = 0
        for _ in pairs(rows) do n = n + 1 end
        assert.equal(4, n)
        local ra = rows[a]
        assert.same({ a, 3000, "B", "lost" }, { ra.last.job, ra.last.scheduled_at, ra.last.owner, ra.last.outcome })
        assert.same({ 1000, "ok", 5 }, { ra.ok.scheduled_at, ra.ok.outcome, ra.ok.duration_ms })
        assert.same({ 3000, "B", "lost" }, { ra.failed.scheduled_at, ra.failed.owner, ra.failed.outcome })
        assert.equal(3, ra.fails)
        assert.equal(4000, ra.handled_at)
        local rb = rows[b]
        assert.same({ 300, "C", 7, "running", 301 },
          { rb.last.scheduled_at, rb.last.owner, rb.last.token, rb.last.outcome, rb.last.started_at })
        assert.equal(200, rb.ok.scheduled_at)
        assert.equal("killed", rb.failed.outcome)
        assert.equal(0, rb.fails)
        assert.equal(300, rb.handled_at)
        local rc = rows[c]
        assert.same({ job = c, fails = 0 }, rc)
        local rd = rows[d]
        assert.is_nil(rd.ok)
        assert.same({ 20, "killed" }, { rd.last.scheduled_at, rd.last.outcome })
        assert.equal(2, rd.fails)
        assert.equal(20, rd.handled_at)
        -- a failure's error text comes back whole
        assert.is_true(st:record_runs({ run{ job = d, scheduled_at = 30, outcome = "failed", error = ("e"):rep(1024) } }))
        rows = assert(st:last_runs())
        assert.equal(("e"):rep(1024), rows[d].failed.error)
        assert.equal(3, rows[d].fails)
        st:close()
      end)

      it("read_runs: newest first (then job, then owner), by job, since and limit, with the database's now", function()
        local j1, j2 = "r1-" .. lease(), "r2-" .. lease()
        assert.is_true(s:record_runs({
          run{ job = j1, scheduled_at = 3000, owner = "B" }, run{ job = j1, scheduled_at = 3000, owner = "A" },
          run{ job = j2, scheduled_at = 3000, owner = "A" }, run{ job = j1, scheduled_at = 1000 },
          run{ job = j2, scheduled_at = 2000 }, run{ job = j1, scheduled_at = 4000, outcome = "missed" },
        }))
        local rows, now = rows_of(s, j1)
        assert.is_true(math.abs(now - os.time() * 1000) < 60000)
        local keys = {}
        for _, r in ipairs(rows) do keys[#keys + 1] = r.scheduled_at .. r.owner end
        assert.same({ "4000A", "3000A", "3000B", "1000A" }, keys)
        keys = {}
        for _, r in ipairs(rows_of(s, j1, { since = 3000 })) do keys[#keys + 1] = r.scheduled_at .. r.owner end
        assert.same({ "4000A", "3000A", "3000B" }, keys)
        keys = {}
        for _, r in ipairs(rows_of(s, j1, { limit = 2 })) do keys[#keys + 1] = r.scheduled_at .. r.owner end
        assert.same({ "4000A", "3000A" }, keys)
        assert.same({}, rows_of(s, j1, { since = 4001 }))
        local none, now2 = assert(s:read_runs{ job = "nobody-" .. lease() })
        assert.same({}, none)
        assert.is_true(now2 >= now)
        -- all jobs: the same order across jobs (ties by job, then owner)
        local all = assert(s:read_runs{ since = 0, limit = 10000 })
        local mine = {}
        for _, r in ipairs(all) do
          if r.job == j1 or r.job == j2 then mine[#mine + 1] = r.scheduled_at .. (r.job == j1 and "1" or "2") .. r.owner end
        end
        assert.same({ "40001A", "30001A", "30001B", "30002A", "20002A", "10001A" }, mine)
        for i = 2, #all do
          assert.is_true(all[i - 1].scheduled_at >= all[i].scheduled_at, "read_runs is not newest first")
        end
        assert.equal(3, #assert(s:read_runs{ limit = 3 }))
        assert.equal(100, #assert(s:read_runs{}) <= 100 and 100 or -1)      -- the default limit is 100
      end)

      it("error text: quotes kept, cut at 1 KB on a character boundary, invalid UTF-8 and NUL as '?'", function()
        local j = lease()
        local cases = {
          { 1, "it's \"quoted\" \\ back; -- %s $1 ?1", "it's \"quoted\" \\ back; -- %s $1 ?1" },
          { 2, ("a"):rep(1023) .. "é" .. ("x"):rep(1024 * 1024), ("a"):rep(1023) },
          { 3, ("a"):rep(1022) .. "€" .. ("x"):rep(100), ("a"):rep(1022) },
          { 4, ("a"):rep(1021) .. "😀" .. "tail", ("a"):rep(1021) },
          { 5, ("a"):rep(1020) .. "😀" .. "tail", ("a"):rep(1020) .. "😀" },
          { 6, ("é"):rep(600), ("é"):rep(512) },
          { 7, "a\255b\192\128c\237\160\128d", "a?b??c???d" },
          { 8, "cut short: \226\130", "cut short: ??" },
          { 9, "nul\0byte", "nul?byte" },
          { 10, ("日本"):rep(200), ("日本"):rep(170) .. "日" },
        }
        local runs = {}
        for _, c in ipairs(cases) do runs[#runs + 1] = run{ job = j, scheduled_at = c[1], error = c[2] } end
        assert.is_true(s:record_runs(runs))
        local got = {}
        for _, r in ipairs(rows_of(s, j)) do got[r.scheduled_at] = r.error end
        for _, c in ipairs(cases) do
          assert.equal(c[3], got[c[1]], "case " .. c[1])
          assert.is_true(#got[c[1]] <= 1024, "case " .. c[1])
        end
        assert.equal(1024, #got[5])
        assert.equal(1023, #got[10])
        -- the same through claim_runs
        local n = lease()
        local _, a = s:try_acquire(n, "A", 60000)
        assert.same({ true }, assert(s:claim_runs("A", { { name = n, token = a.token, fire = 1 } },
          { { claim = 1, scheduled_at = 1, owner = "A", outcome = "running", error = cases[2][2] } })))
        assert.equal(cases[2][3], rows_of(s, n)[1].error)
      end)

      it("stores names, owners and actors with quotes, ;, --, % and UTF-8 exactly", function()
        local job = "it's \"job\"; DROP TABLE " .. tbl .. "_runs; -- 100% naïve-日本語-🚀 " .. lease()
        local owner, actor = "o'wner\"; --%ü", "ro'ot@h\"ost"
        local _, a = s:try_acquire(job, owner, 60000)
        assert.same({ true }, assert(s:claim_runs(owner, { { name = job, token = a.token, fire = 7 } },
          { { claim = 1, scheduled_at = 7, owner = owner, outcome = "running", actor = actor } })))
        assert.is_true(s:record_runs({ run{ job = job, scheduled_at = 7, owner = owner, token = a.token,
                                            outcome = "manual" } }))
        local r = rows_of(s, job)
        assert.equal(1, #r)
        assert.same({ job, owner, actor, "manual" }, { r[1].job, r[1].owner, r[1].actor, r[1].outcome })
        assert.equal(job, assert(s:read_runs{ since = 7, limit = 10000 })[1] and job)
      end)

      it("refuses bad rows and arguments before any SQL", function()
        local n = lease()
        local _, a = s:try_acquire(n, "A", 60000)
        local calls = s:calls()
        local function refused(pattern, ok, err)
          assert.is_nil(ok)
          assert.matches(pattern, err)
        end
        local good = { job = n, scheduled_at = 1, owner = "A", token = 0, outcome = "ok" }
        local function with(k, v)
          local r = {}
          for key, val in pairs(good) do r[key] = val end
          r[k] = v
          return r
        end
        refused("job", s:record_runs({ with("job", nil) }))
        refused("job", s:record_runs({ with("job", "") }))
        refused("job", s:record_runs({ with("job", ("j"):rep(201)) }))
        refused("owner", s:record_runs({ with("owner", nil) }))
        refused("owner", s:record_runs({ with("owner", ("o"):rep(201)) }))
        refused("outcome", s:record_runs({ with("outcome", "done") }))
        refused("outcome", s:record_runs({ with("outcome", nil) }))
        refused("scheduled_at", s:record_runs({ with("scheduled_at", -1) }))
        refused("scheduled_at", s:record_runs({ with("scheduled_at", 1.5) }))
        refused("scheduled_at", s:record_runs({ with("scheduled_at", nil) }))
        refused("token", s:record_runs({ with("token", -1) }))
        refused("token", s:record_runs({ with("token", nil) }))
        refused("started_at", s:record_runs({ with("started_at", -5) }))
        refused("ended_at", s:record_runs({ with("ended_at", "10") }))
        refused("exit_code", s:record_runs({ with("exit_code", -2) }))
        refused("job", s:record_runs({ with("job", "a\0b") }))
        refused("actor", s:record_runs({ with("actor", "") }))
        refused("error", s:record_runs({ with("error", 5) }))
        refused("twice", s:record_runs({ good, with("outcome", "failed") }))
        refused("run 2", s:record_runs({ good, "not a run" }))
        local c = { { name = n, token = a.token, fire = 1 } }
        refused("claim", s:claim_runs("A", c, { { claim = 2, scheduled_at = 1, owner = "A", outcome = "ok" } }))
        refused("claim", s:claim_runs("A", c, { { scheduled_at = 1, owner = "A", outcome = "ok" } }))
        refused("claim", s:claim_runs("A", c, { { claim = 1, job = "other", scheduled_at = 1, owner = "A", outcome = "ok" } }))
        refused("owner", s:claim_runs("", c, {}))
        refused("token", s:claim_runs("A", { { name = n, token = 0, fire = 1 } }, {}))
        refused("limit", s:read_runs{ limit = 0 })
        refused("limit", s:read_runs{ limit = 10001 })
        refused("since", s:read_runs{ since = -2 })
        refused("job", s:read_runs{ job = "" })
        refused("keep", s:prune_runs{ keep = 0, keep_per_job = 1, max_rows = 1 })
        refused("keep_per_job", s:prune_runs{ keep = 1, keep_per_job = 0, max_rows = 1 })
        refused("max_rows", s:prune_runs{ keep = 1, keep_per_job = 1, max_rows = 0 })
        refused("max_rows", s:prune_runs{ keep = 1, keep_per_job = 1 })
        assert.equal(calls, s:calls())
        assert.is_nil(row_of(s, n).last_fire)
        assert.same({}, rows_of(s, n))
        assert.has_error(function() s:record_runs("x") end)
        assert.has_error(function() s:read_runs() end)
      end)

      it("prune: dead running rows become lost, old rows go, each job keeps its newest; at most max_rows a call", function()
        local pt = uniq("prune")
        local p = assert(core.open_store(providers.get(pkey, pt)))
        local now = db_now(p)
        local H = 3600 * 1000
        -- "lost": a's lease passed from token 1 to token 2; its token-1 running rows are dead
        assert.is_true(p:try_acquire("a", "A", 60))
        sleep_ms(120)
        local ok, b = p:try_acquire("a", "B", 600000)
        assert.is_true(ok)
        assert.equal(2, b.token)
        assert.is_true(p:try_acquire("c", "A", 600000))
        local rows = {
          run{ job = "a", scheduled_at = now - 1000, token = 1, outcome = "running" },
          run{ job = "a", scheduled_at = now - 2000, token = 1, owner = "A2", outcome = "running" },
          run{ job = "a", scheduled_at = now - 500, token = 2, owner = "B", outcome = "running" },
          run{ job = "free", scheduled_at = now - 1000, token = 0, outcome = "running" },    -- no lease row
          -- old: past keep, whatever their job or outcome
          run{ job = "a", scheduled_at = now - 3 * H, token = 1, outcome = "running" },
          run{ job = "free", scheduled_at = now - 2 * H },
          run{ job = "c", scheduled_at = now - 5 * H },
        }
        -- c: 10 recent rows (two of one fire), keep_per_job = 3 keeps the newest 3
        for i = 1, 9 do rows[#rows + 1] = run{ job = "c", scheduled_at = now - i * 1000 } end
        rows[#rows + 1] = run{ job = "c", scheduled_at = now - 1000, owner = "B" }
        assert.is_true(p:record_runs(rows))
        local total, calls = 0, 0
        repeat
          local changed = assert(p:prune_runs{ keep = H, keep_per_job = 3, max_rows = 5 })
          assert.is_true(changed <= 5, "prune changed " .. changed .. " rows, more than max_rows")
          total = total + changed
          calls = calls + 1
          assert.is_true(calls < 20, "prune never reached 0")
        until changed == 0
        assert.equal(2 + 3 + 7, total)
        assert.is_true(calls >= 4)
        local function keys(job)
          local t = {}
          for _, r in ipairs(rows_of(p, job)) do t[#t + 1] = ("%d %s %s"):format(now - r.scheduled_at, r.owner, r.outcome) end
          return t
        end
        assert.same({ "500 B running", "1000 A lost", "2000 A2 lost" }, keys("a"))
        assert.same({ "1000 A running" }, keys("free"))
        assert.same({ "1000 A ok", "1000 B ok", "2000 A ok" }, keys("c"))
        local lostrow = rows_of(p, "a")[2]
        assert.is_true(lostrow.recorded_at >= now)
        -- a lost row says why (issue 38 item 6)
        assert.equal("no end was recorded before the lease moved on (its replica died or lost the lease)",
          lostrow.error)
        -- the cutoffs follow the database's clock and the arguments
        assert.equal(0, assert(p:prune_runs{ keep = H, keep_per_job = 3, max_rows = 100 }))
        -- keep_per_job = 1: c loses 1000 B and 2000 A, a its two lost rows (its running one stays)
        assert.equal(4, assert(p:prune_runs{ keep = H, keep_per_job = 1, max_rows = 100 }))
        assert.same({ "500 B running" }, keys("a"))
        assert.same({ "1000 B ok" }, keys("c"))        -- of one fire's rows, the greatest owner is "newest"
        p:close()
      end)

      it("prune of many rows: bounded steps, each at most max_rows, until nothing is left to do", function()
        local pt = uniq("prunemany")
        local p = assert(core.open_store(providers.get(pkey, pt)))
        local now = db_now(p)
        local jobs = {}
        for i = 1, 5 do jobs[i] = "j" .. i end
        assert(p:acquire_all("A", jobs, 600000))
        local rows = {}
        for _, j in ipairs(jobs) do
          for i = 1, 300 do rows[#rows + 1] = run{ job = j, scheduled_at = now - i * 1000 } end
          for i = 1, 50 do rows[#rows + 1] = run{ job = j, scheduled_at = now - 86400000 - i } end
        end
        assert.is_true(p:record_runs(rows))
        local total, n = 0, 0
        repeat
          local changed = assert(p:prune_runs{ keep = 86400000, keep_per_job = 100, max_rows = 97 })
          assert.is_true(changed <= 97)
          total = total + changed
          n = n + 1
        until changed == 0 or n > 50
        assert.equal(5 * 50 + 5 * 200, total)
        for _, j in ipairs(jobs) do
          local r = rows_of(p, j)
          assert.equal(100, #r, j)
          assert.equal(now - 1000, r[1].scheduled_at)
          assert.equal(now - 100000, r[100].scheduled_at)
        end
        p:close()
      end)

      -- Makes <t>_runs by hand as the first leash made it (less the column
      -- without names, if any) with one row (values: an SQL list).
      local function old_ledger(t, without, values)
        local cols = {}
        for _, c in ipairs { "job VARCHAR(200) NOT NULL", "scheduled_at BIGINT NOT NULL",
                             "owner VARCHAR(200) NOT NULL", "token BIGINT NOT NULL", "claimed_at BIGINT",
                             "started_at BIGINT", "ended_at BIGINT", "outcome VARCHAR(15) NOT NULL",
                             "exit_code INTEGER", "exit_signal INTEGER", "duration_ms BIGINT",
                             pkey == "mssql" and not os.getenv("LEASH_TEST_TDS_CTL") and "error NVARCHAR(1024)"
                               or "error TEXT", "actor VARCHAR(200)", "recorded_at BIGINT NOT NULL" } do
          if c:match("^%S+") ~= without then cols[#cols + 1] = c end
        end
        cols[#cols + 1] = "PRIMARY KEY (job, scheduled_at, owner)"
        by_hand(pkey, ("CREATE TABLE %s_runs (%s);\nINSERT INTO %s_runs VALUES (%s);\n")
          :format(t, table.concat(cols, ", "), t, values))
      end

      it("record_runs keeps a run's number and how it came; nil keeps them, read_runs returns them", function()
        local j = lease()
        assert.is_true(s:record_runs({ run{ job = j, scheduled_at = 7000, outcome = "running", started_at = 7001,
                                            run_id = 41, how = "catch-up" },
                                       run{ job = j, scheduled_at = 8000, outcome = "manual", run_id = 2 ^ 40 // 1,
                                            how = "manual" },
                                       run{ job = j, scheduled_at = 9000, outcome = "missed",
                                            error = "the store did not answer" } }))
        assert.is_true(s:record_runs({ run{ job = j, scheduled_at = 7000, outcome = "ok", ended_at = 7100 } }))
        local r = rows_of(s, j)
        assert.same({ { 9000, nil, nil }, { 8000, 2 ^ 40 // 1, "manual" }, { 7000, 41, "catch-up" } },
          { { r[1].scheduled_at, r[1].run_id, r[1].how }, { r[2].scheduled_at, r[2].run_id, r[2].how },
            { r[3].scheduled_at, r[3].run_id, r[3].how } })
        assert.equal("ok", r[3].outcome)
        local ok, err = s:record_runs({ run{ job = j, scheduled_at = 1, how = "retry" } })
        assert.is_nil(ok)
        assert.matches('how "retry" is not one of catch%-up, manual', err)
        ok, err = s:record_runs({ run{ job = j, scheduled_at = 1, run_id = -1 } })
        assert.is_nil(ok)
        assert.matches("run_id must be 0 to", err)
      end)

      it("an old ledger (no run_id, no how) gets them at open; its rows read as before, new ones keep them", function()
        local old = uniq("oldrun")
        old_ledger(old, nil, "'j', 1000, 'o', 1, NULL, 1001, 1201, 'ok', 0, NULL, 200, NULL, NULL, 5")
        local s2 = assert(core.open_store(providers.get(pkey, old)))
        local r = rows_of(s2, "j")
        assert.same({ "ok", 1001, 200 }, { r[1].outcome, r[1].started_at, r[1].duration_ms })
        assert.is_nil(r[1].run_id)
        assert.is_nil(r[1].how)
        assert.is_true(s2:record_runs({ run{ job = "j", scheduled_at = 2000, owner = "o", outcome = "ok",
                                             run_id = 7, how = "manual" } }))
        s2:close()
        local s3 = assert(core.open_store(providers.get(pkey, old)))     -- a second open changes nothing
        r = rows_of(s3, "j")
        assert.same({ 2000, 7, "manual" }, { r[1].scheduled_at, r[1].run_id, r[1].how })
        assert.is_nil(r[2].run_id)
        s3:close()
      end)

      it("a ledger table with the wrong columns is refused at open, naming the column, and left as it was", function()
        local w = uniq("wrong")
        old_ledger(w, "error", "'j', 1, 'o', 1, NULL, NULL, NULL, 'ok', NULL, NULL, NULL, NULL, 5")
        local s2, err = core.open_store(providers.get(pkey, w))
        assert.is_nil(s2)
        assert.matches(w .. "_runs", err, 1, true)
        assert.matches("column error", err, 1, true)
        assert.same({ "1" }, by_hand(pkey, ("SELECT count(*) FROM %s_runs;\n"):format(w)))
        -- the columns it had, no more (nothing added, nothing dropped)
        local s3, err3 = core.open_store(providers.get(pkey, w))
        assert.is_nil(s3)
        assert.equal(err, err3)
        assert.same({ "1" }, by_hand(pkey, ("SELECT count(*) FROM %s_runs WHERE job = 'j' AND recorded_at = 5;\n"):format(w)))
      end)

      it("a 54-byte table name works with its ledger (identifiers stay within 63); 55 bytes are refused", function()
        local long = ("L%s_"):format(os.time() % 100000 .. math.random(0, 999)) 
        long = long .. ("x"):rep(54 - #long)
        assert.equal(54, #long)
        local p = assert(core.open_store(providers.get(pkey, long)))
        local _, a = p:try_acquire("j", "A", 60000)
        assert.same({ true }, assert(p:claim_runs("A", { { name = "j", token = a.token, fire = 1 } },
          { { claim = 1, scheduled_at = 1, owner = "A", outcome = "running" } })))
        assert.equal(1, #assert(p:read_runs{ job = "j" }))
        assert.is_number(assert(p:prune_runs{ keep = 1, keep_per_job = 1, max_rows = 10 }))
        p:close()
        local p2 = assert(core.open_store(providers.get(pkey, long)))     -- a second open: indexes found
        p2:close()
        local none, err = core.open_store(providers.get(pkey, long .. "y"))
        assert.is_nil(none)
        assert.matches("at most 54 bytes", err, 1, true)
      end)

      it(("claim race through claim_runs: 8 processes x %d fires, %d ms leases: one row per fire, rows == accepted claims, each with its holder's token"):format(race, race_ms), function()
        local name = "claimed-runs"
        local _, claims = claim_race(pkey, tbl, name, race, "runs")
        assert.equal(race, row_of(s, name).last_fire)
        local rows = rows_of(s, name)
        assert.equal(#claims, #rows)
        local by_fire = {}
        for _, r in ipairs(rows) do
          assert.is_nil(by_fire[r.scheduled_at], "fire " .. r.scheduled_at .. " has two rows")
          by_fire[r.scheduled_at] = r
        end
        for _, c in ipairs(claims) do
          local r = by_fire[c.fire]
          assert.is_truthy(r, "accepted claim of fire " .. c.fire .. " has no row")
          assert.same({ c.owner, c.token, c.now, "running" }, { r.owner, r.token, r.claimed_at, r.outcome })
        end
      end)
    end)

    if pname == "sqlite" then
      it("clock: expiry follows SQLite's (injected) clock, never the process clock", function()
        local T = 1000000000000   -- 2001-09-09, far from the process clock
        core.sqlite_test_clock(T)
        local ok, err = pcall(function()
          local s2 = assert(core.open_store(providers.get(pkey, tbl)))
          local n = lease()
          local got, a = s2:try_acquire(n, "A", 50)
          assert.is_true(got)
          assert.equal(T, a.now)
          assert.equal(T + 50, a.expires_at)
          sleep_ms(120)                       -- the process clock moves past 50 ms...
          local held, b = s2:try_acquire(n, "B", 50)
          assert.is_false(held)               -- ...the database clock did not
          assert.equal(T, b.now)
          assert.is_true(s2:renew(n, "A", 50))
          core.sqlite_test_clock(T + 49)
          assert.is_false(s2:try_acquire(n, "B", 50))
          core.sqlite_test_clock(T + 50)      -- now the database says it expired
          assert.is_false(s2:renew(n, "A", 50))
          local took, c = s2:try_acquire(n, "B", 50)
          assert.is_true(took)
          assert.equal(a.token + 1, c.token)
          assert.equal(T + 100, c.expires_at)
          local _, now = s2:list()
          assert.equal(T + 50, now)
          s2:close()
        end)
        core.sqlite_test_clock(nil)
        assert(ok, err)
      end)
    else
      it("clock: answers do not change when the client's clock is shifted", function()
        assert.equal(0, sh("test -r " .. L.FAKETIME_LIB), "libfaketime is not installed (tools/deps.sh)")
        local n = lease()
        local ok, held = s:try_acquire(n, "A", 30000)
        assert.is_true(ok)
        for _, shift in ipairs({ "-3d", "+5h", "+0" }) do
          local code, stdout, stderr = L.exec({ "lua5.4", root .. "/tests/support/clock_worker.lua",
            pkey, tbl, n }, { env = L.faketime_env(shift) })
          assert.equal(0, code, "clock worker failed under " .. shift .. ": " .. stderr)
          local l = stdout:match("^[^\n]*")
          local wall, other_ok, holder, exp, now, mine_left, mine_tok = l:match("^(%d+) (%a+) (%S+) (%d+) (%d+) (%d+) (%d+)$")
          assert.is_truthy(wall, "bad worker output: " .. l)
          local skew = tonumber(wall) - os.time() * 1000
          if shift ~= "+0" then
            assert.is_true(math.abs(skew) > 3600 * 1000, "faketime did not shift the worker's clock")
          end
          assert.equal("false", other_ok)                     -- still held, whatever the client's clock
          assert.equal("A", holder)
          assert.equal(held.expires_at, tonumber(exp))
          assert.is_true(math.abs(tonumber(now) - held.now) < 20000, "db now moved with the client's clock")
          assert.equal(1000, tonumber(mine_left))            -- expires_at - now on the db clock
          assert.equal(1, tonumber(mine_tok))
        end
      end)
    end

    it("claims 1,000 fires as fast from the sixth claim on as in the first five", function()
      -- PostgreSQL gives a prepared statement its generic plan from the
      -- sixth run on; for claim_runs (arrays bound to it, guessed at 10
      -- rows) that plan took ten times as long.  The session asks for
      -- custom plans (plan_cache_mode).
      local names, ms = {}, {}
      -- (Short names, as a burst bench's: with long ones the server
      -- judged the generic plan no cheaper and kept custom plans anyway.)
      for i = 1, 1000 do names[i] = ("b-%04d"):format(i) end
      local got = {}
      for i = 1, #names, 500 do      -- mssql: < 2,100 parameters a call
        local part = {}
        for k = i, math.min(i + 499, #names) do part[#part + 1] = names[k] end
        for n, g in pairs(assert(s:acquire_all("A", part, 600000))) do got[n] = g end
      end
      for round = 1, 8 do
        local claims, runs = {}, {}
        for i, n in ipairs(names) do
          claims[i] = { name = n, token = got[n].token, fire = round * 1000 }
          runs[i] = { claim = i, scheduled_at = round * 1000, owner = "A", outcome = "running",
                      started_at = round * 1000 }
        end
        local t0 = core.monotonic()
        local oks = assert(s:claim_runs("A", claims, runs))
        ms[round] = (core.monotonic() - t0) * 1000
        for i = 1, #names do assert.is_true(oks[i], names[i]) end
      end
      local function median(a, b, c) local t = { a, b, c }; table.sort(t); return t[2] end
      local first, later = median(ms[1], ms[2], ms[3]), median(ms[6], ms[7], ms[8])
      local took = {}
      for i, v in ipairs(ms) do took[i] = ("%.0f"):format(v) end
      assert.is_true(later <= 3 * first + 20, "claims took (ms): " .. table.concat(took, ", "))
    end)
  end)
end
