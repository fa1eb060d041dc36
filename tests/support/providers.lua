-- The lease-store providers the conformance spec runs against, built from
-- the environment that tests/support/services/ exported:
--   sqlite    always (a file under $LEASH_TEST_TMP)
--   postgres  when LEASH_TEST_PG_CONNINFO is set
--   mssql     when LEASH_TEST_MSSQL is set ("host:port:user:password:database")
-- M.missing lists providers that are expected but not configured (postgres
-- is expected in CI, or when this host has PostgreSQL 15's initdb, or when
-- LEASH_TEST_REQUIRE names it): the spec fails on them instead of skipping.
local M = {}

local tmp = os.getenv("LEASH_TEST_TMP") or "/tmp"

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

local function expected(name)
  local req = os.getenv("LEASH_TEST_REQUIRE") or ""
  for w in req:gmatch("[^%s,]+") do
    if w == name then return true end
  end
  if name == "postgres" then
    local ci = os.getenv("CI")
    return (ci ~= nil and ci ~= "" and ci ~= "false" and ci ~= "0")
      or exists("/usr/lib/postgresql/15/bin/initdb")
  end
  return false
end

-- Splits "host:port:user:password:database"; the password may contain ':'.
function M.parse_mssql(s)
  local host, port, rest = s:match("^([^:]+):(%d+):(.*)$")
  if not host then return nil, "LEASH_TEST_MSSQL: expected host:port:user:password:database" end
  local user, rest2 = rest:match("^([^:]*):(.*)$")
  local password, database = (rest2 or ""):match("^(.*):([^:]*)$")
  if not user or not password then
    return nil, "LEASH_TEST_MSSQL: expected host:port:user:password:database"
  end
  return { provider = "mssql", host = host, port = tonumber(port), user = user,
           password = password, database = database }
end

M.list = {}
M.missing = {}

M.list[#M.list + 1] = { provider = "sqlite", path = tmp .. "/conformance.db" }

local pg = os.getenv("LEASH_TEST_PG_CONNINFO")
if pg and pg ~= "" then
  M.list[#M.list + 1] = { provider = "postgres", conninfo = pg }
elseif expected("postgres") then
  M.missing[#M.missing + 1] = "postgres (LEASH_TEST_PG_CONNINFO is not set; tests/support/services/10-postgres.sh did not run)"
end

-- A real T-SQL engine (LEASH_TEST_MSSQL without the TDS test server's
-- control file, LEASH_TEST_TDS_CTL) parses the first statements of each new
-- connection slowly (Babelfish: 0.4-1 s each, more on a busy machine), so
-- its statement timeout is generous; the test server's stays short, for the
-- specs that time its faults.
local ms = os.getenv("LEASH_TEST_MSSQL")
M.mssql_real = ms ~= nil and ms ~= "" and (os.getenv("LEASH_TEST_TDS_CTL") or "") == ""
M.MSSQL_REAL_TIMEOUT_MS = 30000
if ms and ms ~= "" then
  local cfg, err = M.parse_mssql(ms)
  if cfg then
    M.list[#M.list + 1] = cfg
  else
    M.missing[#M.missing + 1] = "mssql (" .. err .. ")"
  end
elseif expected("mssql") then
  M.missing[#M.missing + 1] = "mssql (LEASH_TEST_MSSQL is not set)"
end

-- A copy of provider `name`'s config with the given table and timeouts.
function M.get(name, table_name, extra)
  for _, p in ipairs(M.list) do
    if p.provider == name then
      local c = {}
      for k, v in pairs(p) do c[k] = v end
      c.table = table_name
      c.connect_timeout_ms = 5000
      c.statement_timeout_ms = name == "mssql" and M.mssql_real and M.MSSQL_REAL_TIMEOUT_MS or 5000
      for k, v in pairs(extra or {}) do c[k] = v end
      return c
    end
  end
  return nil
end

return M
