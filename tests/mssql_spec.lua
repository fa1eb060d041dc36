-- The mssql provider's own failure paths, through FreeTDS db-lib, against the
-- TDS test server (tests/support/tds_server.py) or the real SQL Server that
-- LEASH_TEST_MSSQL names.  The conformance spec covers the contract itself.
-- Faults that need the test server's control file (LEASH_TEST_TDS_CTL) are
-- pending, never passed, against a real server.
local core = require "leash.core"
local providers = require "providers"
local system = require "system"

local env = os.getenv("LEASH_TEST_MSSQL")
local ctl = os.getenv("LEASH_TEST_TDS_CTL")

local function uniq(prefix)
  return ("%s_%d_%d"):format(prefix, os.time() % 100000, math.random(0, 999999))
end

-- Asks the test server for a fault (see tds_server.py).
local function fault(line)
  local f = assert(io.open(ctl, "a"))
  f:write(line, "\n")
  f:close()
end

local function clear_faults()
  if ctl then os.remove(ctl) end
end

-- How many logins the test server has accepted so far.
local function logins()
  local f = assert(io.open(ctl .. ".logins"))
  local n = tonumber(f:read("l"))
  f:close()
  return n
end

-- Runs fn, returns its results and the seconds it took.
local function timed(fn, ...)
  local t0 = system.monotime()
  local r = table.pack(fn(...))
  return system.monotime() - t0, table.unpack(r, 1, r.n)
end

local function free_port()
  local p = assert(io.popen([[python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])']]))
  local port = tonumber(p:read("l"))
  p:close()
  return port
end

describe("mssql provider", function()
  it("is configured (LEASH_TEST_MSSQL is set by tests/support/services/20-tds.sh)", function()
    assert.is_truthy(env and env ~= "", "LEASH_TEST_MSSQL is not set")
  end)
  if not env or env == "" then return end

  local base = assert(providers.parse_mssql(env))
  local tbl = uniq("ms")

  local function cfg(extra)
    local c = { connect_timeout_ms = 2000, statement_timeout_ms = 2000 }
    for k, v in pairs(extra or {}) do c[k] = v end
    return providers.get("mssql", c.table or tbl, c)
  end

  -- Fault tests only run against the test server.
  local function it_tds(desc, fn)
    if ctl then
      it(desc, function()
        clear_faults()
        local ok, err = pcall(fn)
        clear_faults()
        assert(ok, err)
      end)
    else
      pending(desc .. " (needs the TDS test server)")
    end
  end

  setup(function()
    math.randomseed(os.time())
  end)

  it("opens, creates its table and answers", function()
    local s = assert(core.open_store(cfg()))
    local ok, info = s:try_acquire("first", "A", 5000)
    assert.is_true(ok)
    assert.equal(5000, info.expires_at - info.now)
    s:close()
    -- opening again finds the table
    s = assert(core.open_store(cfg()))
    assert.is_false((s:try_acquire("first", "B", 5000)))
    s:close()
  end)

  it("a wrong password is a clear error within the connect timeout", function()
    local secs, s, err = timed(core.open_store, cfg({ password = base.password .. "x" }))
    assert.is_nil(s)
    assert.matches("18456", err)
    assert.matches("Login failed", err)
    assert.is_true(secs < 3, ("took %.1f s"):format(secs))
  end)

  it("a missing database is a clear error within the connect timeout", function()
    local db = uniq("nodb")
    local secs, s, err = timed(core.open_store, cfg({ database = db }))
    assert.is_nil(s)
    -- SQL Server answers 4060 (Cannot open database), Babelfish 911
    local no = err:match("server error (%d+)")
    assert.is_truthy(no == "4060" or no == "911", err)
    assert.matches(db, err, 1, true)
    assert.is_true(secs < 3, ("took %.1f s"):format(secs))
  end)

  it("an unreachable port is a clear error within the connect timeout", function()
    local port = free_port()
    local secs, s, err = timed(core.open_store, cfg({ port = port }))
    assert.is_nil(s)
    assert.matches("127.0.0.1:" .. port, err, 1, true)
    assert.matches("Connection refused", err)
    assert.is_true(secs < 3, ("took %.1f s"):format(secs))
  end)

  it("a missing user or database is refused before connecting", function()
    local s, err = core.open_store(cfg({ user = "" }))
    assert.is_nil(s)
    assert.matches("user and database are required", err)
    s, err = core.open_store(cfg({ table = "bad-name" }))
    assert.is_nil(s)
    assert.matches("not a valid identifier", err)
  end)

  it_tds("a server that never answers the login times out within the connect timeout", function()
    fault("stall")
    local secs, s, err = timed(core.open_store, cfg({ connect_timeout_ms = 1000 }))
    assert.is_nil(s)
    assert.is_string(err)
    assert.is_true(secs < 2.5, ("took %.1f s"):format(secs))
  end)

  it_tds("a query timeout is an error within the statement timeout, and the next call works", function()
    local s = assert(core.open_store(cfg({ statement_timeout_ms = 1000 })))
    local n = uniq("slow")
    fault("delay 4000")
    local secs, ok, err = timed(s.try_acquire, s, n, "A", 5000)
    assert.is_nil(ok)
    assert.matches("timeout", err)
    assert.is_true(secs < 2.5, ("took %.1f s"):format(secs))
    local got, info = s:try_acquire(n, "A", 5000)
    assert.is_true(got, info)
    s:close()
  end)

  -- A store with a 1 s statement timeout, a lease it holds, the test
  -- server's login count, then a renew of that lease that times out under
  -- the given faults: returns the store, the lease, the count, the error
  -- and the seconds the renew took.
  local function renew_timing_out(...)
    local s = assert(core.open_store(cfg({ statement_timeout_ms = 1000 })))
    local n = uniq("cancel")
    assert.is_true((s:try_acquire(n, "A", 5000)))
    local before = logins()
    for _, f in ipairs({ ... }) do fault(f) end
    local secs, ok, err = timed(s.renew, s, n, "A", 5000)
    assert.is_nil(ok)
    assert.matches("statement timeout", err, 1, true)
    return s, n, before, err, secs
  end

  it_tds("a statement timeout cancels the statement and keeps the connection", function()
    local s, n, before, err, secs = renew_timing_out("delay 5000")
    assert.matches("cancelled", err, 1, true)
    assert.is_true(secs > 0.9 and secs < 2, ("took %.1f s"):format(secs))
    local again, info = s:renew(n, "A", 5000)
    assert.is_true(again, info)
    assert.equal(before, logins())            -- the same connection, no new login
    s:close()
  end)

  it_tds("a cancel the server never acknowledges drops the connection; the next call reconnects", function()
    local s, n, before, err, secs = renew_timing_out("delay 6000", "deaf")
    assert.matches("nor to the cancel: connection dropped", err, 1, true)
    assert.is_true(secs < 3, ("took %.1f s"):format(secs))
    local again, info = s:renew(n, "A", 5000)
    assert.is_true(again, info)
    assert.equal(before + 1, logins())
    s:close()
  end)

  it_tds("a dropped connection is an error for that call, and the next call reconnects", function()
    local s = assert(core.open_store(cfg()))
    local n = uniq("drop")
    assert.is_true((s:try_acquire(n, "A", 5000)))
    fault("drop")
    local ok, err = s:renew(n, "A", 5000)
    assert.is_nil(ok)
    assert.matches("connection lost", err, 1, true)
    local again, info = s:renew(n, "A", 5000)
    assert.is_true(again, info)
    -- and on every other operation
    for _, op in ipairs({
      function() return s:release(n, "B") end,
      function() return s:renew_all("A", { n }, 5000) end,
      function() return s:acquire_all("A", { n }, 5000) end,
      function() return s:list() end,
    }) do
      fault("drop")
      local r, e = op()
      assert.is_nil(r)
      assert.is_string(e)
      assert.is_truthy(op())
    end
    s:close()
  end)

  it_tds("a server error is an error with its number, and the connection stays usable", function()
    local s = assert(core.open_store(cfg()))
    fault("fail 1205")
    local ok, err = s:try_acquire(uniq("err"), "A", 5000)
    assert.is_nil(ok)
    assert.matches("server error 1205", err)
    assert.is_true((s:try_acquire(uniq("err"), "A", 5000)))
    s:close()
  end)

  it_tds("a duplicate key on insert (2627) means someone else got it, not an error", function()
    local s = assert(core.open_store(cfg()))
    local n = uniq("race")
    fault("race winner")
    local ok, info = s:try_acquire(n, "A", 5000)
    assert.is_false(ok, info)
    assert.equal("winner", info.owner)
    assert.equal(1, info.token)
    assert.is_true(info.expires_at > info.now)
    assert.is_false((s:renew(n, "A", 5000)))
    s:close()
  end)

  it_tds("a duplicate key in acquire_all (2627) loses only that name to the other replica", function()
    local s = assert(core.open_store(cfg()))
    local a, b, c = uniq("race_a"), uniq("race_b"), uniq("race_c")
    local _, ci = s:try_acquire(c, "A", 5000)
    fault("race winner")                      -- a is the first name with no row
    local got = assert(s:acquire_all("A", { a, b, c, b }, 5000))
    assert.is_false(got[a].ok)
    assert.equal("winner", got[a].owner)
    assert.equal(1, got[a].token)
    assert.is_true(got[a].expires_at > got[a].now)
    assert.is_true(got[b].ok)
    assert.equal("A", got[b].owner)
    assert.equal(1, got[b].token)
    assert.is_true(got[c].ok)
    assert.equal(ci.token, got[c].token)
    assert.is_false((s:renew(a, "A", 5000)))
    s:close()
  end)

  it("names with quotes and backslashes survive every operation", function()
    local s = assert(core.open_store(cfg()))
    local names = { "a'b", "a''b", "c\\", "\\'", "d\"e", "x\\' OR 1=1 --", "@n1", "N'x'" }
    for _, n in ipairs(names) do
      assert.is_true((s:try_acquire(n, "O'\\", 5000)), n)
    end
    local acq = assert(s:acquire_all("O'\\", names, 5000))
    local got = assert(s:renew_all("O'\\", names, 5000))
    for _, n in ipairs(names) do
      assert.is_true(acq[n].ok, n)
      assert.equal(1, got[n], n)
      assert.is_true((s:renew(n, "O'\\", 5000)), n)
      assert.is_true((s:release(n, "O'\\")), n)
    end
    local rows = assert(s:list())
    local seen = {}
    for _, r in ipairs(rows) do seen[r.name] = r end
    for _, n in ipairs(names) do
      assert.equal("O'\\", seen[n].owner, n)
    end
    s:close()
  end)

  it("renew_all with more names than SQL Server's 2,100 parameters goes in chunks", function()
    local s = assert(core.open_store(cfg()))
    local names, held = {}, {}
    for i = 1, 4500 do names[i] = ("many-%04d"):format(i) end
    for _, i in ipairs({ 1, 2000, 2001, 4000, 4500 }) do
      assert.is_true((s:try_acquire(names[i], "A", 10000)))
      held[names[i]] = 1
    end
    assert.is_true((s:try_acquire("many-other", "B", 10000)))
    names[#names + 1] = "many-other"
    names[#names + 1] = names[2001]           -- listed twice
    local got = assert(s:renew_all("A", names, 10000))
    assert.same(held, got)
    s:close()
  end)

  it("acquire_all with more names than SQL Server's 2,100 parameters goes in chunks", function()
    local s = assert(core.open_store(cfg()))
    local names = {}
    for i = 1, 4500 do names[i] = ("acq-%04d"):format(i) end
    for _, i in ipairs({ 1, 1000, 1001, 2000, 2001, 4500 }) do
      assert.is_true((s:try_acquire(names[i], "B", 10000)))
    end
    names[#names + 1] = names[2001]           -- listed twice
    local got = assert(s:acquire_all("A", names, 10000))
    local n = 0
    for name, g in pairs(got) do
      n = n + 1
      local theirs = name == names[1] or name == names[1000] or name == names[1001]
        or name == names[2000] or name == names[2001] or name == names[4500]
      assert.equal(not theirs, g.ok, name)
      assert.equal(theirs and "B" or "A", g.owner, name)
      assert.equal(1, g.token, name)
    end
    assert.equal(4500, n)
    s:close()
  end)
end)
