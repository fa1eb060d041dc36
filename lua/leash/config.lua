-- leash.config: every config key, once, and the checks on the values read.
--
-- The C side reads the INI file with inih and hands over the entries it saw
-- ({section=, key=, value=, line=}, and {section=, line=, header=true} for
-- each [section] line); build() turns them into a table of typed values with
-- the defaults filled in, or a list of errors naming file, line and key.
local duration = require "leash.duration"
local limits = require("leash.core").limits

local M = {}

-- section, key, kind, default, meaning.  Kinds: a list of allowed words,
-- "string", "path" (relative to the config file), "bool", "duration" (ms),
-- "ident", "port", "replica".  A nil default is derived after reading (see derive()).
M.KEYS = {
  { "leash", "jobs", "path", "jobs", "directory of job files" },
  { "leash", "replica", "replica", "auto", "the readable part of the owner id <replica>:<pid>:<8 random hex>; auto = the hostname" },
  { "leash", "log_format", { "text", "json" }, "text", "log line format" },
  { "leash", "log_level", { "debug", "info", "warn", "error" }, "info", "lowest level logged" },
  { "leash", "grace", "duration", "5s", "time between SIGTERM and SIGKILL when a run is stopped" },
  { "singleton", "enabled", "bool", "false", "elect one replica per job through the lease store" },
  { "singleton", "lease", "duration", "15s", "lease duration asked for on acquire and renew" },
  { "singleton", "renew", "duration", nil, "how often the holder renews (default lease/3)" },
  { "singleton", "retry", "duration", "2s", "how often a follower tries to acquire (plus jitter)" },
  { "singleton", "margin", "duration", nil, "the body stops this long before the lease could expire (default lease/5)" },
  { "store", "provider", { "sqlite", "postgres", "mssql" }, "sqlite", "lease store provider" },
  { "store", "table", "ident", "leash_leases", "lease table name" },
  { "store", "connect_timeout", "duration", "5s", "time allowed to connect to the database" },
  { "store", "statement_timeout", "duration", "5s", "time allowed for one statement" },
  { "sqlite", "path", "path", "/var/lib/leash/leash.db", "SQLite database file" },
  { "postgres", "conninfo", "string", "", "libpq connection string" },
  { "mssql", "host", "string", "127.0.0.1", "SQL Server host" },
  { "mssql", "port", "port", "1433", "SQL Server port" },
  { "mssql", "user", "string", "leash", "SQL Server login" },
  { "mssql", "password_env", "string", "LEASH_MSSQL_PASSWORD", "environment variable holding the password" },
  { "mssql", "database", "string", "leash", "SQL Server database" },
}

local by_key, sections = {}, {}
for _, k in ipairs(M.KEYS) do
  by_key[k[1] .. "." .. k[2]] = k
  sections[k[1]] = true
end

-- dir/p with "." and ".." folded, so logs show the path that is used.
local function join(dir, p)
  if p:sub(1, 1) ~= "/" and dir and dir ~= "" then p = dir .. "/" .. p end
  local out = {}
  for part in p:gmatch("[^/]+") do
    if part == ".." and #out > 0 and out[#out] ~= ".." then
      out[#out] = nil
    elseif part ~= "." then
      out[#out + 1] = part
    end
  end
  local joined = table.concat(out, "/")
  if p:sub(1, 1) == "/" then return "/" .. joined end
  return joined == "" and "." or joined
end

local function words(list)
  return table.concat(list, ", ")
end

-- Converts one raw value to its kind; returns value, or nil and a message.
local function convert(kind, raw, dir)
  if type(kind) == "table" then
    for _, w in ipairs(kind) do
      if raw == w then return raw end
    end
    return nil, ("%q is not one of %s"):format(raw, words(kind))
  elseif kind == "string" then
    return raw
  elseif kind == "path" then
    if raw == "" then return nil, "a path is required" end
    return join(dir, raw)
  elseif kind == "bool" then
    local v = ({ ["true"] = true, yes = true, on = true, ["1"] = true,
                 ["false"] = false, no = false, off = false, ["0"] = false })[raw:lower()]
    if v == nil then return nil, ("%q is not a boolean (use true or false)"):format(raw) end
    return v
  elseif kind == "duration" then
    return duration.parse(raw)
  elseif kind == "ident" then
    if #raw > limits.ident_max or not raw:match("^[A-Za-z_][A-Za-z0-9_]*$") then
      return nil, ("%q is not a valid table name ([A-Za-z_][A-Za-z0-9_]*, at most %d bytes)"):format(raw, limits.ident_max)
    end
    return raw
  elseif kind == "replica" then
    if raw == "" then return nil, "must not be empty (use auto for the hostname)" end
    if #raw > limits.replica_max then
      return nil, ("is %d bytes, at most %d: the owner id <replica>:<pid>:<8 hex> must fit the store's %d"):format(
        #raw, limits.replica_max, limits.name_max)
    end
    if raw:find("%c") then return nil, ("%q has a control character"):format(raw) end
    return raw
  elseif kind == "port" then
    local n = tonumber(raw)
    if not raw:match("^%d+$") or n < 1 or n > 65535 then
      return nil, ("%q is not a port (1-65535)"):format(raw)
    end
    return math.tointeger(n)
  end
  error("unknown kind " .. tostring(kind))
end

-- Values that depend on others, and the checks that span keys.
local function derive(c, where, errors)
  local s = c.singleton
  s.renew = s.renew or s.lease // 3
  s.margin = s.margin or s.lease // 5
  if not s.enabled then return end
  local function bad(key, msg)
    errors[#errors + 1] = ("%s: [singleton] %s: %s"):format(where(key), key, msg)
  end
  if s.margin >= s.lease then
    bad("margin", ("%s must be shorter than lease (%s)"):format(
      duration.format(s.margin), duration.format(s.lease)))
  elseif s.renew >= s.lease - s.margin then
    bad("renew", ("%s must be shorter than lease - margin (%s), or the lease runs out before it is renewed"):format(
      duration.format(s.renew), duration.format(s.lease - s.margin)))
  end
  if c.store.provider == "postgres" and c.postgres.conninfo == "" then
    errors[#errors + 1] = ("%s: [postgres] conninfo: required when [store] provider = postgres"):format(
      where("conninfo", "postgres"))
  end
end

-- file: the config file's name as shown in messages; dir: its directory.
-- Returns the config table, and a list of errors (empty when all is well).
function M.build(file, dir, entries)
  local c, errors, seen = {}, {}, {}
  for _, k in ipairs(M.KEYS) do
    c[k[1]] = c[k[1]] or {}
    if k[4] ~= nil then
      local v, msg = convert(k[3], k[4], dir)
      assert(v ~= nil, msg)
      c[k[1]][k[2]] = v
    end
  end
  local lines = {}
  for _, e in ipairs(entries) do
    if e.header then
      if not sections[e.section] then
        local known = {}
        for name in pairs(sections) do known[#known + 1] = name end
        table.sort(known)
        errors[#errors + 1] = ("%s:%d: unknown section [%s] (known: %s)"):format(
          file, e.line, e.section, words(known))
      end
    elseif e.section == "" then
      errors[#errors + 1] = ("%s:%d: %s: key outside any section"):format(file, e.line, e.key)
    elseif sections[e.section] then
      local id = e.section .. "." .. e.key
      local k = by_key[id]
      if not k then
        errors[#errors + 1] = ("%s:%d: [%s] %s: unknown key"):format(file, e.line, e.section, e.key)
      elseif seen[id] then
        errors[#errors + 1] = ("%s:%d: [%s] %s: given twice (first on line %d)"):format(
          file, e.line, e.section, e.key, seen[id])
      else
        seen[id] = e.line
        lines[id] = e.line
        local v, msg = convert(k[3], e.value, dir)
        if v == nil then
          errors[#errors + 1] = ("%s:%d: [%s] %s: %s"):format(file, e.line, e.section, e.key, msg)
        else
          c[e.section][e.key] = v
        end
      end
    end
  end
  if #errors == 0 then
    derive(c, function(key, section)
      local line = lines[(section or "singleton") .. "." .. key]
      return line and ("%s:%d"):format(file, line) or file
    end, errors)
  end
  c.file = file
  return c, errors
end

return M
