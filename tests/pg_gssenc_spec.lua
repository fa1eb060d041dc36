-- The postgres provider's gssencmode default: leash connects with
-- gssencmode=disable (no Kerberos context made, libkrb5's pages left alone)
-- unless the host is set up for Kerberos (/etc/krb5.conf, a ticket in
-- /tmp/krb5cc_UID) or the conninfo or the environment says anything about
-- Kerberos or a service file; then libpq's own default (prefer) applies.  Whether libpq
-- asked Kerberos is seen through KRB5_TRACE: libkrb5 creates that file
-- when it makes a context, which prefer does at every connect.
local L = require "e2e"
local core = require "leash.core"

local pg = assert(os.getenv("LEASH_TEST_PG_CONNINFO"), "LEASH_TEST_PG_CONNINFO is not set")
-- Nothing of the suite's own environment may decide for a case.
local CLEAN = { PGGSSENCMODE = false, PGKRBSRVNAME = false, PGGSSLIB = false, PGSERVICE = false,
                KRB5_CONFIG = false, KRB5CCNAME = false, KRB5_CLIENT_KTNAME = false }
-- A host set up for Kerberos keeps libpq's default even for a bare conninfo.
local _, uid = L.sh("id -u")
local KERBEROS_HOST = L.exists("/etc/krb5.conf") or L.exists("/tmp/krb5cc_" .. uid:gsub("%s", ""))

-- `leash status --leases` on conninfo with env added to CLEAN: whether
-- libkrb5 made a context (the trace file exists).
local function asked_kerberos(conninfo, env)
  local tbl = "gssenc_" .. math.random(1, 1e6)
  local d = L.dir { config = {
    singleton = { enabled = "true" },
    store = { provider = "postgres", table = tbl },
    postgres = { conninfo = conninfo },
  } }
  -- The tables, as leash run makes them (status makes none).
  assert(core.open_store { provider = "postgres", conninfo = pg, table = tbl }):close()
  local trace = d.out "krb5.trace"
  local e = { KRB5_TRACE = trace }
  for k, v in pairs(CLEAN) do e[k] = v end
  for k, v in pairs(env or {}) do e[k] = v end
  local code, _, err = L.leash({ "status", "-c", d.config, "--leases" }, { env = e })
  assert.equal(0, code, err)
  return L.exists(trace)
end

describe("postgres gssencmode", function()
  it("is disable when nothing names Kerberos: no Kerberos context is made", function()
    assert.equal(KERBEROS_HOST, asked_kerberos(pg))
  end)

  it("is the conninfo's own when it has one, key=value or URI", function()
    assert.is_true(asked_kerberos(pg .. " gssencmode=prefer"))
    local host, port = pg:match("host=(%S+)"), pg:match("port=(%d+)")
    local user, db = pg:match("user=(%S+)"), pg:match("dbname=(%S+)")
    local uri = ("postgresql://%s@%s:%s/%s"):format(user, host, port, db)
    assert.equal(KERBEROS_HOST, asked_kerberos(uri))
    assert.is_true(asked_kerberos(uri .. "?gssencmode=prefer"))
  end)

  it("is libpq's default when the conninfo names krbsrvname or gsslib", function()
    assert.is_true(asked_kerberos(pg .. " krbsrvname=postgres"))
    assert.is_true(asked_kerberos(pg .. " gsslib=gssapi"))
  end)

  it("is libpq's default when the environment names Kerberos settings", function()
    assert.is_true(asked_kerberos(pg, { PGGSSENCMODE = "prefer" }))
    assert.is_true(asked_kerberos(pg, { KRB5CCNAME = "FILE:/nonexistent/krb5cc" }))
    assert.is_true(asked_kerberos(pg, { PGKRBSRVNAME = "postgres" }))
    assert.is_true(asked_kerberos(pg, { KRB5_CONFIG = "/nonexistent/krb5.conf" }))
  end)

  it("passes the conninfo's value to libpq: a bad one is libpq's error", function()
    local s, err = core.open_store { provider = "postgres", conninfo = pg .. " gssencmode=bogus",
                                     table = "gssenc_bad" }
    assert.is_nil(s)
    assert.matches("gssencmode", err)
  end)
end)
