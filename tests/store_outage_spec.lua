-- PostgreSQL outages: a server that stops, freezes or is not there gives an
-- error within the timeout, never a hang; the same handle works again once
-- the server is back.  Also the release NOTIFY that followers LISTEN for.
local core = require "leash.core"
local providers = require "providers"
local system = require "system"

local conninfo = os.getenv("LEASH_TEST_PG_CONNINFO")
local ctl = os.getenv("LEASH_TEST_PG_CTL")

local function elapsed_ms(f)
  local t = system.monotime()
  local a, b, c = f()
  return (system.monotime() - t) * 1000, a, b, c
end

local function pg_ctl(what)
  local ok = os.execute(ctl .. " " .. what)
  assert(ok, ctl .. " " .. what .. " failed")
end

local function free_port()
  local p = io.popen([[python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])']])
  local port = p:read("*l")
  p:close()
  return assert(tonumber(port))
end

local function open(extra)
  local c = { provider = "postgres", conninfo = conninfo, table = "outage",
              connect_timeout_ms = 1000, statement_timeout_ms = 1000 }
  for k, v in pairs(extra or {}) do c[k] = v end
  return core.open_store(c)
end

if not conninfo or not ctl then
  describe("postgres outages", function()
    it("has a PostgreSQL server to test against", function()
      local missing = table.concat(providers.missing, "; ")
      if missing == "" then
        pending("PostgreSQL is not installed on this host")
      else
        error("PostgreSQL expected but not configured: " .. missing)
      end
    end)
  end)
  return
end

describe("postgres outages", function()
  it("refuses at once when nothing listens on the port", function()
    local port = free_port()
    local ms, s, err = elapsed_ms(function()
      return open({ conninfo = ("host=127.0.0.1 port=%d dbname=postgres user=leash"):format(port) })
    end)
    assert.is_nil(s)
    assert.equal(("postgres: connect to 127.0.0.1:%d: Connection refused"):format(port), err)
    assert.is_true(ms < 1000, ms .. " ms")
  end)

  it("gives up within connect_timeout on an address that never answers", function()
    local ms, s, err = elapsed_ms(function()
      return open({ conninfo = "host=10.255.255.1 port=5432 dbname=postgres user=leash",
                    connect_timeout_ms = 700 })
    end)
    assert.is_nil(s)
    assert.matches("^postgres: connect to 10%.255%.255%.1:5432: ", err)
    assert.is_true(ms < 1500, ms .. " ms")
  end)

  it("fails within the timeout while the server is down and works again on the same handle", function()
    local s = assert(open())
    local ok, a = s:try_acquire("outage-stop", "A", 60000)
    assert.is_true(ok)
    pg_ctl("stop")
    local restarted = false
    local good, err = pcall(function()
      for _, op in ipairs({
        function() return s:renew("outage-stop", "A", 60000) end,
        function() return s:try_acquire("outage-stop", "B", 60000) end,
        function() return s:list() end,
        function() return s:release("outage-stop", "B") end,
      }) do
        local ms, r, e, kind = elapsed_ms(op)
        assert.is_nil(r)
        assert.matches("^postgres: ", e)
        assert.equal("gone", kind, e)
        assert.is_true(ms < 2500, ms .. " ms: " .. e)
      end
      assert.equal(-1, s:event_fd())
      pg_ctl("start")
      restarted = true
      local ok2, r = s:renew("outage-stop", "A", 60000)   -- same handle, lease survived
      assert.is_true(ok2, r)
      assert.equal(a.token, r.token)
      assert.is_true(s:event_fd() >= 0)
    end)
    if not restarted then pg_ctl("start") end
    s:close()
    assert(good, err)
  end)

  it("fails within the timeout when the server freezes, and recovers when it thaws", function()
    local s = assert(open())
    assert.is_true(s:try_acquire("outage-freeze", "A", 60000))
    pg_ctl("pause")
    local good, err = pcall(function()
      local ms, r, e, kind = elapsed_ms(function() return s:renew("outage-freeze", "A", 60000) end)
      assert.is_nil(r)
      assert.matches("no answer within the timeout", e)
      assert.equal("timeout", kind)
      assert.is_true(ms >= 900 and ms < 2500, ms .. " ms")
      s:set_timeout(300)                 -- a call bounded by the lease it concerns
      ms, r, e = elapsed_ms(function() return s:renew("outage-freeze", "A", 60000) end)
      assert.is_nil(r)
      assert.is_true(ms < 1000, ms .. " ms: " .. e)
      s:set_timeout(0)
    end)
    pg_ctl("resume")
    if good then
      local ok = s:renew("outage-freeze", "A", 60000)
      good, err = ok == true, "renew after the thaw: " .. tostring(ok)
    end
    s:close()
    assert(good, err)
  end)
end)

describe("postgres release events", function()
  it("tells a listening store at once which lease another one released", function()
    local a = assert(open({ table = "events" }))
    local b = assert(open({ table = "events" }))
    assert.is_true(b:event_fd() >= 0)
    assert.is_true(a:try_acquire("ev-1", "A", 60000))
    assert.is_true(a:try_acquire("ev-2", "A", 60000))
    assert.same({}, assert(b:drain_events()))
    assert.is_true(a:release("ev-2", "A"))
    assert.is_true(a:release("ev-2", "A"))      -- not held any more: no second event
    assert.is_true(a:release("ev-1", "B"))      -- not the holder: no event
    local got = {}
    for _ = 1, 100 do
      for _, n in ipairs(assert(b:drain_events())) do got[#got + 1] = n end
      if #got > 0 then break end
      system.sleep(0.01)
    end
    system.sleep(0.05)
    for _, n in ipairs(assert(b:drain_events())) do got[#got + 1] = n end
    assert.same({ "ev-2" }, got)
    assert.same({}, assert(a:drain_events()))    -- its own release is not news
    assert.is_true(b:try_acquire("ev-2", "B", 1000))
    a:close()
    b:close()
  end)

  it("release_all notifies each lease it freed, once, and no other", function()
    local a = assert(open({ table = "events_all" }))
    local b = assert(open({ table = "events_all" }))
    assert.is_true(b:event_fd() >= 0)
    for _, n in ipairs({ "eva-1", "eva-2", "eva-3" }) do
      assert.is_true(a:try_acquire(n, "A", 60000))
    end
    assert.is_true(b:try_acquire("eva-b", "B", 60000))
    assert.same({}, assert(b:drain_events()))
    assert.is_true(a:release_all("A", { "eva-1", "eva-3", "eva-b", "eva-none" }))
    assert.is_true(a:release_all("A", { "eva-1" }))   -- not held any more: no second event
    local got = {}
    for _ = 1, 100 do
      for _, n in ipairs(assert(b:drain_events())) do got[#got + 1] = n end
      if #got >= 2 then break end
      system.sleep(0.01)
    end
    system.sleep(0.05)
    for _, n in ipairs(assert(b:drain_events())) do got[#got + 1] = n end
    table.sort(got)
    assert.same({ "eva-1", "eva-3" }, got)
    a:close()
    b:close()
  end)
end)
