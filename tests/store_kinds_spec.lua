-- The kind of a store error (store.h, enum store_err_kind): a failed call
-- answers nil, err, kind, so that a caller can tell a database that did not
-- answer in time ("timeout") or at all ("gone") from one that refused the
-- statement ("refused").  Each driver maps its client's errors in one place;
-- an injected fault (LEASH_STORE_FAULT) names its own.  The mssql and
-- PostgreSQL kinds of real faults are checked where those faults are made
-- (tests/mssql_spec.lua, tests/store_outage_spec.lua).
local core = require "leash.core"

local tmp = os.getenv("LEASH_TEST_TMP") or "/tmp"

local function sh_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

describe("store error kinds", function()
  it("sqlite: the write lock not had within the timeout is a timeout", function()
    local path = ("%s/kinds_%d.db"):format(tmp, math.random(1, 1e9))
    local s = assert(core.open_store { provider = "sqlite", path = path })
    assert.is_true((s:try_acquire("k", "A", 60000)))
    -- another connection holds the write lock for 3 s
    local holder = assert(io.popen("python3 -c " .. sh_quote(
      "import sqlite3, sys, time\n" ..
      "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n" ..
      "c.execute('BEGIN IMMEDIATE')\n" ..
      "print('locked', flush=True)\n" ..
      "time.sleep(3)\n") .. " " .. sh_quote(path)))
    assert.equal("locked", holder:read("l"))
    s:set_timeout(200)
    local ok, err, kind = s:renew("k", "A", 60000)
    holder:close()
    assert.is_nil(ok)
    assert.matches("locked", err, 1, true)
    assert.equal("timeout", kind)
    s:set_timeout(0)
    assert.is_true((s:renew("k", "A", 60000)))     -- and the next call works
    s:close()
  end)

  it("a bad argument, refused before any SQL, is the store's own: other", function()
    local s = assert(core.open_store { provider = "sqlite", path = tmp .. "/kinds_args.db" })
    local ok, err, kind = s:try_acquire("", "A", 1000)
    assert.is_nil(ok)
    assert.matches("lease name", err, 1, true)
    assert.equal("other", kind)
    s:close()
  end)

  it("an injected fault answers with the kind it names", function()
    for _, k in ipairs({ "timeout", "gone", "refused" }) do
      local path = ("%s/kinds_fault_%d.db"):format(tmp, math.random(1, 1e9))
      local p = assert(io.popen(("LEASH_STORE_FAULT=list:2:%s lua5.4 -e %s"):format(k, sh_quote(
        "local core = require 'leash.core'\n" ..
        "local s = assert(core.open_store { provider = 'sqlite', path = '" .. path .. "' })\n" ..
        "assert(s:list())\n" ..
        "local ok, err, kind = s:list()\n" ..
        "io.write(tostring(ok), '|', err, '|', kind, '\\n')\n" ..
        "assert(s:list())\n"))))
      local line = p:read("a")
      assert.is_true((p:close()), line)
      assert.equal(("nil|sqlite: list: %s|%s\n"):format(
        ({ timeout = "no answer within the timeout", gone = "connection lost",
           refused = "refused by the server" })[k] .. " (injected fault)", k), line)
    end
  end)
end)
