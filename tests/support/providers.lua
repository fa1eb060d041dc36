-- The lease-store providers the specs run against, built from the
-- environment that tests/support/services/ exported:
--   sqlite      always (a file under $LEASH_TEST_TMP)
--   postgres    when LEASH_TEST_PG_CONNINFO is set
--   mssql       when LEASH_TEST_MSSQL is set ("host:port:user:password:database"):
--               the TDS test server (with LEASH_TEST_TDS_CTL), or a real
--               SQL Server named by hand
--   mssql-real  when LEASH_TEST_MSSQL_REAL is set: a real T-SQL engine
--               (tests/support/services/30-babelfish.sh starts Babelfish)
-- M.list has the first three, for the specs that run leash end to end (the
-- TDS test server answers those fast and can be faulted); M.proof_list adds
-- mssql-real, for the specs that prove the provider's T-SQL (the
-- conformance specs).  Each entry's key (its provider's name, or
-- "mssql-real") finds it again: M.get(key, ...).
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
-- control file, LEASH_TEST_TDS_CTL, or LEASH_TEST_MSSQL_REAL) parses the
-- first statements of each new connection slowly (Babelfish: 0.4-1 s each,
-- more on a busy machine), so its statement timeout is generous; the test
-- server's stays short, for the specs that time its faults.
M.MSSQL_REAL_TIMEOUT_MS = 30000
local ms = os.getenv("LEASH_TEST_MSSQL")
if ms and ms ~= "" then
  local cfg, err = M.parse_mssql(ms)
  if cfg then
    cfg.real = (os.getenv("LEASH_TEST_TDS_CTL") or "") == ""
    M.list[#M.list + 1] = cfg
  else
    M.missing[#M.missing + 1] = "mssql (" .. err .. ")"
  end
elseif expected("mssql") then
  M.missing[#M.missing + 1] = "mssql (LEASH_TEST_MSSQL is not set)"
end

M.proof_list = {}
for i, p in ipairs(M.list) do M.proof_list[i] = p end
local real = os.getenv("LEASH_TEST_MSSQL_REAL")
if real and real ~= "" then
  local cfg, err = M.parse_mssql(real)
  if cfg then
    cfg.key, cfg.real = "mssql-real", true
    M.real = cfg
    M.proof_list[#M.proof_list + 1] = cfg
  else
    M.missing[#M.missing + 1] = "mssql-real (LEASH_TEST_MSSQL_REAL: " .. err .. ")"
  end
end

-- LEASH_TEST_PROVIDERS (keys, space or comma apart): only those, for a lane
-- of tests/run.sh that runs one provider's share of a long spec.  A
-- provider left out is not missing either.
local only = os.getenv("LEASH_TEST_PROVIDERS")
if only and only ~= "" then
  local keep = {}
  for w in only:gmatch("[^%s,]+") do keep[w] = true end
  local function keyed(list)
    local out = {}
    for _, p in ipairs(list) do
      if keep[p.key or p.provider] then out[#out + 1] = p end
    end
    return out
  end
  M.list, M.proof_list = keyed(M.list), keyed(M.proof_list)
  if M.real and not keep["mssql-real"] then M.real = nil end
  local missing = {}
  for _, m in ipairs(M.missing) do
    if keep[m:match("^(%S+)")] then missing[#missing + 1] = m end
  end
  M.missing = missing
end

-- Whether the provider keyed `key` is a real T-SQL engine.
function M.is_real(key)
  for _, p in ipairs(M.proof_list) do
    if (p.key or p.provider) == key then return p.real == true end
  end
  return false
end

-- A copy of the config of the provider keyed `key` with the given table and
-- timeouts (a store's options: the list's own fields left out).
function M.get(key, table_name, extra)
  for _, p in ipairs(M.proof_list) do
    if (p.key or p.provider) == key then
      local c = {}
      for k, v in pairs(p) do c[k] = v end
      c.key, c.real = nil, nil
      c.table = table_name
      c.connect_timeout_ms = 5000
      c.statement_timeout_ms = p.real and M.MSSQL_REAL_TIMEOUT_MS or 5000
      for k, v in pairs(extra or {}) do c[k] = v end
      return c
    end
  end
  return nil
end

return M
