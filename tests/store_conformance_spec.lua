-- The lease-store conformance spec: the same tests, unchanged, against every
-- provider of tests/support/providers.lua (DESIGN.md "The lease store
-- contract", issue 3 "Conformance spec").
local core = require "leash.core"
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

-- Makes table t with the columns it had before the fire cursor, and rows
-- (an SQL VALUES list), by hand: sqlite3 on SQLite's file and on the TDS
-- test server's, psql on PostgreSQL.  nil, why when this provider's table
-- cannot be reached but through leash (a real SQL Server).
local OLD_COLUMNS = "name VARCHAR(200) PRIMARY KEY, owner VARCHAR(200) NOT NULL,"
  .. " token BIGINT NOT NULL, acquired_at BIGINT NOT NULL, renewed_at BIGINT NOT NULL,"
  .. " expires_at BIGINT NOT NULL"

local function make_old_table(pname, t, rows)
  local file = ("%s/%s.sql"):format(tmp, t)
  local f = assert(io.open(file, "w"))
  f:write(("CREATE TABLE %s (%s);\nINSERT INTO %s VALUES %s;\n"):format(t, OLD_COLUMNS, t, rows))
  f:close()
  local cmd
  if pname == "sqlite" then
    cmd = ("sqlite3 -bail -cmd '.timeout 5000' '%s' < '%s'"):format(providers.get("sqlite", t).path, file)
  elseif pname == "postgres" then
    cmd = ("psql -X -q -v ON_ERROR_STOP=1 \"$LEASH_TEST_PG_CONNINFO\" -f '%s' >/dev/null"):format(file)
  elseif os.getenv("LEASH_TEST_TDS_CTL") then
    local db = os.getenv("LEASH_TEST_TDS_CTL"):gsub("/[^/]*$", "") .. "/leases.db"
    cmd = ("sqlite3 -bail -cmd '.timeout 5000' '%s' < '%s'"):format(db, file)
  else
    return nil, "a real SQL Server: the spec cannot make an old table by hand"
  end
  assert.equal(0, sh(cmd), "could not make the old table: " .. cmd)
  return true
end

describe("lease store providers", function()
  it("every expected provider is configured", function()
    assert.same({}, providers.missing)
  end)
end)

for _, p in ipairs(providers.list) do
  local pname = p.provider

  describe("lease store conformance [" .. pname .. "]", function()
    local s, tbl
    local count = 0
    local function lease() count = count + 1; return ("job-%d.%s"):format(count, uniq("x")) end

    setup(function()
      math.randomseed(os.time())
      tbl = uniq("conf")
      s = assert(core.open_store(providers.get(pname, tbl)))
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

    it("an old table (no last_fire column) gets it at open, keeping rows and tokens", function()
      local old = uniq("old")
      local now = os.time() * 1000
      local made, why = make_old_table(pname, old, ("('held', 'A', 7, %d, %d, %d), ('free', 'B', 3, 1, 1, 2)")
        :format(now - 1000, now - 1000, now + 600000))
      if not made then
        pending(why)
        return
      end
      local s2 = assert(core.open_store(providers.get(pname, old)))
      local rows = assert(s2:list())
      assert.equal(2, #rows)
      assert.same({ "free", "B", 3, 2, nil }, { rows[1].name, rows[1].owner, rows[1].token, rows[1].expires_at, rows[1].last_fire })
      assert.same({ "held", "A", 7, now + 600000, nil }, { rows[2].name, rows[2].owner, rows[2].token, rows[2].expires_at, rows[2].last_fire })
      local ok, info = s2:try_acquire("held", "B", 5000)
      assert.is_false(ok)
      assert.equal(7, info.token)
      ok, info = s2:try_acquire("held", "A", 5000)
      assert.is_true(ok)
      assert.equal(7, info.token)
      assert.is_nil(info.last_fire)
      assert.same({ true }, assert(s2:claim_all("A", { { name = "held", token = 7, fire = 1 } })))
      ok, info = s2:try_acquire("free", "C", 5000)
      assert.is_true(ok)
      assert.equal(4, info.token)
      s2:close()
      local s3 = assert(core.open_store(providers.get(pname, old)))   -- a second open changes nothing
      local r = assert(s3:list())
      assert.equal(1, r[2].last_fire)
      assert.equal(7, r[2].token)
      assert.equal(4, r[1].token)
      s3:close()
    end)

    it("claim race: 8 processes x 300 fires, 50 ms leases: each fire claimed once, by the token's holder", function()
      local name = "claimed"
      local dir = tmp .. "/" .. uniq("claims-" .. pname)
      assert.equal(0, sh("mkdir -p '" .. dir .. "'"))
      local fires = 300
      local parts = {}
      for i = 1, 8 do
        parts[#parts + 1] = ("(lua5.4 '%s/tests/support/claim_worker.lua' %s %s %s w%d %d 50 60 '%s/w%d.txt'; echo $? > '%s/w%d.rc') &")
          :format(root, pname, tbl, name, i, fires, dir, i, dir, i)
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
      -- each fire accepted exactly once (all 300 were claimed), and the cursor says so
      local seen = {}
      for _, c in ipairs(claims) do
        assert.is_nil(seen[c.fire], ("fire %d accepted twice (%s and %s)"):format(c.fire, seen[c.fire] or "", c.owner))
        seen[c.fire] = c.owner
      end
      for f = 1, fires do assert.is_truthy(seen[f], "fire " .. f .. " was never claimed") end
      assert.equal(fires, row_of(s, name).last_fire)
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
      local s2 = assert(core.open_store(providers.get(pname, tbl)))
      s2:close()
      s2:close()
      local ok, err = pcall(s2.list, s2)
      assert.is_false(ok)
      assert.matches("closed", err)
    end)

    it("contention: 8 processes x 300 attempts, no overlapping grants, tokens grow with each holder", function()
      local name = "contended"
      local dir = tmp .. "/" .. uniq("contention-" .. pname)
      assert.equal(0, sh("mkdir -p '" .. dir .. "'"))
      local attempts = 300
      if pname == "mssql" then attempts = tonumber(os.getenv("LEASH_TEST_MSSQL_ATTEMPTS") or "") or 300 end
      local parts = {}
      for i = 1, 8 do
        parts[#parts + 1] = ("(lua5.4 '%s/tests/support/contention_worker.lua' %s %s %s w%d %d 50 '%s/w%d.txt'; echo $? > '%s/w%d.rc') &")
          :format(root, pname, tbl, name, i, attempts, dir, i, dir, i)
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

    if pname == "sqlite" then
      it("clock: expiry follows SQLite's (injected) clock, never the process clock", function()
        local T = 1000000000000   -- 2001-09-09, far from the process clock
        core.sqlite_test_clock(T)
        local ok, err = pcall(function()
          local s2 = assert(core.open_store(providers.get(pname, tbl)))
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
        assert.equal(0, sh("command -v faketime >/dev/null"), "faketime is not installed (tools/deps.sh)")
        local n = lease()
        local ok, held = s:try_acquire(n, "A", 30000)
        assert.is_true(ok)
        local dir = tmp .. "/" .. uniq("clock")
        assert.equal(0, sh("mkdir -p '" .. dir .. "'"))
        for _, shift in ipairs({ "-3d", "+5h", "+0" }) do
          local out = dir .. "/out"
          local code = sh(("FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f '%s' lua5.4 '%s/tests/support/clock_worker.lua' %s %s '%s' > '%s'")
            :format(shift, root, pname, tbl, n, out))
          assert.equal(0, code, "clock worker failed under " .. shift)
          local l = read_lines(out)[1] or ""
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
  end)
end
