-- `leash status --leases` end to end: one list() on the configured store, on SQLite,
-- PostgreSQL and SQL Server (the TDS test server in CI), as a table and as JSON; exit 1 when the store is
-- unreachable; singleton off says so and exits 0.
local L = require "e2e"
local core = require "leash.core"
local json = require "dkjson"
local providers = require "providers"

local function cfg(p, tbl)
  local c = { singleton = { enabled = "true" }, store = { provider = p.provider, table = tbl } }
  if p.provider == "sqlite" then c.sqlite = { path = p.path }
  elseif p.provider == "mssql" then
    c.mssql = { host = p.host, port = tostring(p.port), user = p.user, database = p.database,
                password_env = "LEASH_TEST_MSSQL_PASSWORD" }
  else c.postgres = { conninfo = p.conninfo } end
  return c
end

describe("leash status", function()
  for _, x in ipairs(providers.list) do
    local p = x.provider == "sqlite"
      and { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/status.db" } or x
    it("lists every lease of the " .. p.provider .. " store, as a table and as JSON", function()
      local tbl = "status_" .. math.random(1, 1e6)
      local s = assert(core.open_store { provider = p.provider, path = p.path,
        conninfo = p.conninfo, host = p.host, port = p.port, user = p.user,
        password = p.password, database = p.database, table = tbl })
      assert.is_true(s:try_acquire("held-job", "replica-a:1:00000001", 60000))
      assert.is_true(s:try_acquire("free-job", "replica-b:2:00000002", 60000))
      assert.is_true(s:release("free-job", "replica-b:2:00000002"))
      s:close()
      local d = L.dir { config = cfg(p, tbl) }
      local env = { env = { LEASH_TEST_MSSQL_PASSWORD = p.password or "" } }
      local code, out, err = L.leash({ "status", "-c", d.config, "--leases" }, env)
      assert.equal(0, code, err)
      assert.matches("LEASE%s+OWNER%s+STATE%s+EXPIRES IN%s+TOKEN", out)
      assert.matches("held%-job%s+replica%-a:1:00000001%s+held%s+%d+%.%ds%s+1", out)
      assert.matches("free%-job%s+replica%-b:2:00000002%s+free%s+%-%s+1", out)

      code, out, err = L.leash({ "status", "-c", d.config, "--leases", "--json" }, env)
      assert.equal(0, code, err)
      assert.equal("\n", out:sub(-1))
      local obj = assert(json.decode(out))
      assert.equal(p.provider, obj.provider)
      assert.is_number(obj.now)
      assert.equal(2, #obj.leases)
      local by = {}
      for _, l in ipairs(obj.leases) do by[l.name] = l end
      assert.equal("held", by["held-job"].state)
      assert.equal("free", by["free-job"].state)
      assert.equal(1, by["held-job"].token)
      assert.equal(by["held-job"].expires_at - obj.now, by["held-job"].expires_in_ms)
      assert.is_true(by["held-job"].expires_in_ms > 50000)
    end)
  end

  it("exits 1 with a clear message when the store is unreachable", function()
    local d = L.dir { config = {
      singleton = { enabled = "true" },
      store = { provider = "postgres", connect_timeout = "1s" },
      postgres = { conninfo = "host=127.0.0.1 port=1 dbname=nowhere" },
    } }
    local t0 = L.monotonic()
    local code, out, err = L.leash { "status", "-c", d.config }
    assert.equal(1, code)
    assert.equal("", out)
    assert.matches("leash status: cannot open the postgres store: .*127%.0%.0%.1", err)
    assert.is_true(L.monotonic() - t0 < 3)
  end)

  it("exits 1 when the sqlite file's directory does not exist", function()
    local d = L.dir { config = {
      singleton = { enabled = "true" },
      sqlite = { path = "/nonexistent/dir/leash.db" },
    } }
    local code, _, err = L.leash { "status", "-c", d.config }
    assert.equal(1, code)
    assert.matches("cannot open the sqlite store", err)
    assert.matches("/nonexistent/dir/leash.db", err)
  end)

  it("with singleton mode off says so and exits 0 without opening the store", function()
    local d = L.dir { config = { sqlite = { path = "/nonexistent/dir/leash.db" } } }
    local code, out = L.leash { "status", "-c", d.config }
    assert.equal(0, code)
    assert.matches("singleton mode is off", out)
    code, out = L.leash { "status", "-c", d.config, "--json" }
    assert.equal(0, code)
    local obj = assert(json.decode(out))
    assert.is_false(obj.singleton)
    assert.same({}, obj.leases)
  end)

  it("exits 2 when the mssql password variable is not set", function()
    local d = L.dir { config = {
      singleton = { enabled = "true" },
      store = { provider = "mssql" },
      mssql = { password_env = "LEASH_NO_SUCH_PASSWORD_VAR" },
    } }
    local code, _, err = L.leash({ "status", "-c", d.config }, { env = { LEASH_NO_SUCH_PASSWORD_VAR = false } })
    assert.equal(2, code)
    assert.matches("LEASH_NO_SUCH_PASSWORD_VAR is not set", err)
  end)
end)
