-- leash.config: every config key, once, and the checks on the values read.
--
-- The C side reads the INI file with inih and hands over the entries it saw
-- ({section=, key=, value=, line=}, and {section=, line=, header=true} for
-- each [section] line; then each `-o SECTION.KEY=VALUE` of the command line
-- as {section=, key=, value=, option="-o ...", dir=the current directory},
-- which replaces the file's value); build() turns them into a table of
-- typed values with the defaults filled in, or a list of errors naming file,
-- line (or option) and key.
local duration = require "leash.duration"
local core = require "leash.core"
local limits = core.limits

local M = {}

-- Every key once, from the C core's list (src/core/cfg_keys.h): { section=, key=,
-- kind=, words=, default=, min=, max=, field=, meaning= }.  Kinds: "path"
-- (relative to the config file), "string", "ident", "replica", "word" and
-- "index" (one of words), "bool", "port", "duration" (ms), "count" (an
-- integer), "listen" (HOST:PORT or empty), "envname" (a variable's name or
-- empty), "user" (a user of this host, or empty), "names" (host names, kept
-- lower-case, one space apart).  A nil default is
-- derived after reading (see timing()); min and max bound a duration or port.
M.KEYS = core.config_keys

local by_key, sections = {}, {}
for _, k in ipairs(M.KEYS) do
  by_key[k.section .. "." .. k.key] = k
  sections[k.section] = true
end

-- What a replica's name may hold: it is part of every owner id, so it
-- shows in logs, leash status, the page and the store.
M.REPLICA_CHARS = "^[A-Za-z0-9._-]+$"
M.REPLICA_RULE = "letters, digits, '.', '-' and '_'"

-- The definition of [section] key.
function M.key(section, key)
  return by_key[section .. "." .. key]
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

-- An IPv4 address in dotted decimal, or nil.
local function ipv4(h)
  local a = { h:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$") }
  if #a ~= 4 then return nil end
  for _, o in ipairs(a) do
    if #o > 3 or tonumber(o) > 255 then return nil end
  end
  return h
end

-- [http] listen: "" (off) or HOST:PORT with HOST an IPv4 address, [IPv6]
-- or localhost.  No other names: resolving one would make `leash check`
-- and `leash run` depend on DNS, and its addresses may change under a
-- running server.  Whether the address is this host's, and the port free,
-- only binding tells: `leash run` does it before the scheduler starts.
local function listen(raw)
  if raw == "" then return raw end
  local host, port = raw:match("^(.*):(%d+)$")
  local n = port and tonumber(port)
  if not host or n < 1 or n > 65535 then
    return nil, ("%q is not HOST:PORT with a port from 1 to 65535 (e.g. 127.0.0.1:9187, [::1]:9187)"):format(raw)
  end
  local v6 = host:match("^%[([%x:.]+)%]$")
  if host ~= "localhost" and not ipv4(host) and not (v6 and v6:find(":")) then
    return nil, ("%q: the host must be an IP address (127.0.0.1, 0.0.0.0, [::1]) or localhost"):format(raw)
  end
  return raw
end

-- Whether [http] listen's host is a loopback address: 127.0.0.0/8, [::1],
-- localhost.
function M.loopback(listen)
  local host = listen:match("^(.*):%d+$") or listen
  return host == "localhost" or host == "[::1]" or (ipv4(host) ~= nil and host:match("^127%.") ~= nil)
end

-- [http] hosts: names as a Host header gives them (letters, digits, '-',
-- '.'), space or comma separated.  No port, no IP address (any address is
-- taken anyway), no wildcard.
local function names(raw)
  local out = {}
  for name in raw:gmatch("[^%s,]+") do
    local n = name:lower():gsub("%.$", "")
    if #n > 253 or not n:match("^[%w-]+[%w.-]*$") or n:find("..", 1, true) then
      return nil, ("%q is not a host name (letters, digits, '-' and '.', no port)"):format(name)
    end
    out[#out + 1] = n
  end
  return table.concat(out, " ")
end

local function words(list)
  return table.concat(list, ", ")
end

-- Converts one raw value by its key's kind; returns value, or nil and a message.
local function convert(k, raw, dir)
  local kind = k.kind
  if k.words then
    for _, w in ipairs(k.words) do
      if raw == w then return raw end
    end
    return nil, ("%q is not one of %s"):format(raw, words(k.words))
  elseif kind == "string" then
    return raw
  elseif kind == "path" then
    -- A path that may be left out has "" for its default.
    if raw == "" and k.default == "" then return "" end
    if raw == "" then return nil, "a path is required" end
    return join(dir, raw)
  elseif kind == "bool" then
    local v = ({ ["true"] = true, yes = true, on = true, ["1"] = true,
                 ["false"] = false, no = false, off = false, ["0"] = false })[raw:lower()]
    if v == nil then return nil, ("%q is not a boolean (use true or false)"):format(raw) end
    return v
  elseif kind == "duration" then
    local ms, msg = duration.parse(raw)
    if not ms then return nil, msg end
    return duration.within(ms, k.min, k.max)
  elseif kind == "ident" then
    if #raw > limits.ident_max or not raw:match("^[A-Za-z_][A-Za-z0-9_]*$") then
      return nil, ("%q is not a valid table name ([A-Za-z_][A-Za-z0-9_]*, at most %d bytes)"):format(raw, limits.ident_max)
    end
    return raw
  elseif kind == "replica" then
    if raw == "" then return nil, "must not be empty (use auto for the hostname)" end
    local name, what = raw, '"' .. core.safe(raw, 60) .. '"'
    if raw == "auto" then
      name = core.hostname()
      what = ('auto: the hostname "%s"'):format(core.safe(name, 60))
    end
    if #name > limits.replica_max then
      return nil, ("%s is %d bytes, at most %d: the owner id <replica>:<pid>:<8 hex> must fit the store's %d"):format(
        what, #name, limits.replica_max, limits.name_max)
    end
    if not name:match(M.REPLICA_CHARS) then
      return nil, ("%s: a replica name may hold only %s%s"):format(what, M.REPLICA_RULE,
        raw == "auto" and " (set replica = NAME)" or "")
    end
    return raw
  elseif kind == "count" then
    local n = raw:match("^%d+$") and math.tointeger(tonumber(raw))
    if not n or n < k.min or n > k.max then
      return nil, ("%q is not a whole number from %d to %d"):format(raw, k.min, k.max)
    end
    return n
  elseif kind == "listen" then
    return listen(raw)
  elseif kind == "names" then
    return names(raw)
  elseif kind == "envname" then
    if raw ~= "" and not raw:match("^[A-Za-z_][A-Za-z0-9_]*$") then
      return nil, ("%q is not the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*)"):format(raw)
    end
    return raw
  elseif kind == "user" then
    if raw ~= "" and not core.user(raw) then
      return nil, ("%q is not a user of this host (getent passwd knows no such name)"):format(raw)
    end
    return raw
  elseif kind == "port" then
    local n = tonumber(raw)
    if not raw:match("^%d+$") or n < k.min or n > k.max then
      return nil, ("%q is not a port (%d-%d)"):format(raw, k.min, k.max)
    end
    return math.tointeger(n)
  end
  error("unknown kind " .. tostring(kind))
end

-- The renew interval and margin of a lease (ms): renew and margin when given,
-- else lease/3 and lease/5.  The one rule for [singleton] and for a job with
-- its own lease.  Returns renew, margin, and when they do not fit the lease
-- the key at fault and why.
function M.timing(lease, renew, margin)
  renew = renew or lease // 3
  margin = margin or lease // 5
  local floor = by_key["singleton.renew"].min
  if margin >= lease then
    return renew, margin, "margin", ("%s must be shorter than lease (%s)"):format(
      duration.format(margin), duration.format(lease))
  elseif renew >= lease - margin then
    return renew, margin, "renew", ("%s must be shorter than lease - margin (%s), or the lease runs out before it is renewed"):format(
      duration.format(renew), duration.format(lease - margin))
  elseif renew < floor then
    return renew, margin, "renew", ("%s is too short (at least %s)"):format(
      duration.format(renew), duration.format(floor))
  end
  return renew, margin
end

-- [http]: who may reach the server, and TLS's two halves.
local function http_checks(c, where, errors)
  local h = c.http
  if h.listen ~= "" and not M.loopback(h.listen) and h.token_env == "" and not h.public then
    errors[#errors + 1] = ("%s: [http] listen: %s is not a loopback address and [http] token_env is empty: anyone who reaches it reads every job, run and error; set token_env (or public = true to serve it without a token)"):format(
      where("listen", "http"), h.listen)
  end
  if (h.cert == "") ~= (h.key == "") then
    local given, missing = "cert", "key"
    if h.cert == "" then given, missing = "key", "cert" end
    errors[#errors + 1] = ("%s: [http] %s: HTTPS needs both cert and key: [http] %s is not set"):format(
      where(given, "http"), given, missing)
  end
  -- Whether they parse only libmicrohttpd tells (the server logs it); a
  -- file that cannot be read or is no PEM at all is caught here.
  for _, key in ipairs { "cert", "key" } do
    local path = h[key]
    if path ~= "" then
      local f, err = io.open(path, "rb")
      local head = f and f:read(64 * 1024)
      if f then f:close() end
      if not f then
        errors[#errors + 1] = ("%s: [http] %s: cannot read %s"):format(where(key, "http"), key, err)
      elseif not (head or ""):find("-----BEGIN ", 1, true) then
        errors[#errors + 1] = ("%s: [http] %s: %s is not a PEM file (no -----BEGIN line)"):format(
          where(key, "http"), key, path)
      end
    end
  end
end

-- Values that depend on others, and the checks that span keys.
local function derive(c, where, errors)
  local s = c.singleton
  http_checks(c, where, errors)
  local key, msg
  s.renew, s.margin, key, msg = M.timing(s.lease, s.renew, s.margin)
  if not s.enabled then return end
  if key then
    errors[#errors + 1] = ("%s: [singleton] %s: %s"):format(where(key), key, msg)
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
  -- A default can fail only by what it depends on (auto: the hostname): an
  -- error unless the file gives the key.
  local bad_default = {}
  for _, k in ipairs(M.KEYS) do
    c[k.section] = c[k.section] or {}
    if k.default ~= nil then
      local v, msg = convert(k, k.default, dir)
      if v == nil then bad_default[#bad_default + 1] = { k = k, msg = msg } end
      c[k.section][k.key] = v
    end
  end
  -- where: an entry's "file:line", or its "-o SECTION.KEY=VALUE"
  local lines, opts = {}, {}
  local function at(e) return e.option or ("%s:%d"):format(file, e.line) end
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
      errors[#errors + 1] = ("%s: %s: key outside any section"):format(at(e), e.key)
    elseif not sections[e.section] then
      if e.option then          -- (the file's unknown sections are reported at their header)
        local known = {}
        for name in pairs(sections) do known[#known + 1] = name end
        table.sort(known)
        errors[#errors + 1] = ("%s: unknown section [%s] (known: %s)"):format(
          e.option, e.section, words(known))
      end
    else
      local id = e.section .. "." .. e.key
      local k = by_key[id]
      if not k then
        errors[#errors + 1] = ("%s: [%s] %s: unknown key"):format(at(e), e.section, e.key)
      elseif e.option and opts[id] then
        errors[#errors + 1] = ("%s: [%s] %s: given twice (first as %s)"):format(
          e.option, e.section, e.key, opts[id])
      elseif not e.option and seen[id] then
        errors[#errors + 1] = ("%s:%d: [%s] %s: given twice (first on line %d)"):format(
          file, e.line, e.section, e.key, seen[id])
      else
        -- an option replaces the file's value
        if e.option then opts[id] = e.option else seen[id] = e.line end
        lines[id] = at(e)
        local v, msg = convert(k, e.value, e.dir or dir)
        if v == nil then
          errors[#errors + 1] = ("%s: [%s] %s: %s"):format(at(e), e.section, e.key, msg)
        else
          c[e.section][e.key] = v
        end
      end
    end
  end
  for _, b in ipairs(bad_default) do
    if not lines[b.k.section .. "." .. b.k.key] then
      errors[#errors + 1] = ("%s: [%s] %s: %s"):format(file, b.k.section, b.k.key, b.msg)
    end
  end
  if #errors == 0 then
    derive(c, function(key, section)
      return lines[(section or "singleton") .. "." .. key] or file
    end, errors)
  end
  c.file = file
  return c, errors
end

return M
