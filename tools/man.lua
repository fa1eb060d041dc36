-- tools/man.lua TEMPLATE: prints the man page TEMPLATE makes (make man).
--
-- For leash.ini(5): each line '.\" @key SECTION.KEY' of the template becomes
-- that key's entry, its kind, default, bounds and meaning taken from the
-- keys the code defines (src/core/cfg_keys.h, through leash.core.config_keys and
-- leash.core.limits); the lines after it follow as they are.  A key of the
-- code that the template does not place goes to the end of its section
-- (.SS "[section]"), so a new key needs no edit here to be documented; a
-- @key naming no key of the code, or a section of the code the template
-- lacks, is an error (exit 1).
--
-- Run with LUA_PATH='lua/?.lua;;' LUA_CPATH='BUILD/lua/?.so;;'.
local config = require "leash.config"
local duration = require "leash.duration"
local limits = require("leash.core").limits

local M = {}

-- Text for a roff line: backslashes escaped, hyphens as minus signs where
-- they start an option, and a leading control character neutralised.
local function roff(s)
  s = s:gsub("\\", "\\e")
  if s:match("^[.']") then s = "\\&" .. s end
  return s
end

local function bold(s) return "\\fB" .. roff(s) .. "\\fR" end
local function ital(s) return "\\fI" .. roff(s) .. "\\fR" end

-- What a kind reads, and the bounds the code gives it, as one phrase.
local function what(k)
  local kind = k.kind
  if k.words then
    local w = {}
    for i, word in ipairs(k.words) do w[i] = bold(word) end
    return table.concat(w, " | ")
  elseif kind == "duration" then
    local fmt = duration.format
    if k.min > 0 then return ital("duration") .. (", %s to %s"):format(fmt(k.min), fmt(k.max)) end
    return ital("duration") .. (", at most %s"):format(fmt(k.max))
  elseif kind == "count" or kind == "port" then
    return ital(kind == "port" and "port" or "number") .. (", %d to %d"):format(k.min, k.max)
  elseif kind == "ident" then
    return ital("name") .. (", [A\\-Za\\-z_][A\\-Za\\-z0\\-9_]*, at most %d bytes"):format(limits.ident_max)
  elseif kind == "replica" then
    return ital("name") .. (", 1 to %d bytes of letters, digits, ., \\- and _"):format(limits.replica_max)
  elseif kind == "envname" then
    return ital("variable") .. ", [A\\-Za\\-z_][A\\-Za\\-z0\\-9_]*, or empty"
  elseif kind == "user" then
    return ital("user") .. ", a user of this host, or empty"
  elseif kind == "listen" then
    return ital("host") .. ":" .. ital("port") .. ", or empty"
  elseif kind == "names" then
    return ital("names") .. ", space or comma separated, or empty"
  elseif kind == "bool" then
    return ital("boolean")
  end
  return ital(kind)                     -- path, string
end

-- The lines of one key's entry.
function M.entry(k)
  local default
  if k.default == nil then
    default = ""                        -- derived: the meaning says how
  elseif k.default == "" then
    default = "; default empty"
  else
    default = "; default " .. bold(k.default)
  end
  -- A sentence: a capital first (but a name written in lower case, such
  -- as libpq, stays as it is) and a full stop.
  local meaning = k.meaning
  if not meaning:match("^libpq") then meaning = meaning:gsub("^%l", string.upper) end
  meaning = meaning:gsub("([^.])$", "%1.")
  return {
    ".TP",
    ("%s = %s%s"):format(bold(k.key), what(k), default),
    roff(meaning),
  }
end

-- Turns the template's text into the page's; returns it, or nil and errors.
function M.render(template, name)
  local by_id, left, order = {}, {}, {}
  for _, k in ipairs(config.KEYS) do
    local id = k.section .. "." .. k.key
    by_id[id] = k
    if not left[k.section] then
      left[k.section] = {}
      order[#order + 1] = k.section
    end
    table.insert(left[k.section], id)
  end
  local out, errors, done, section, seen = {}, {}, {}, nil, {}
  out[1] = (".\\\" Made by tools/man.lua from %s and src/core/cfg_keys.h: edit those, then make man."):format(name)
  local function flush()
    if not section then return end
    for _, id in ipairs(left[section] or {}) do
      if not done[id] then
        done[id] = true
        for _, l in ipairs(M.entry(by_id[id])) do out[#out + 1] = l end
      end
    end
    section = nil
  end
  local n = 0
  for line in (template .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local id = line:match('^%.\\" @key (%S+)%s*$')
    local head = line:match("^%.S[HS]")
    if id then
      local k = by_id[id]
      if not k then
        errors[#errors + 1] = ("%s:%d: @key %s: no such key in src/core/cfg_keys.h"):format(name, n, id)
      elseif done[id] then
        errors[#errors + 1] = ("%s:%d: @key %s: placed twice"):format(name, n, id)
      elseif k.section ~= section then
        errors[#errors + 1] = ("%s:%d: @key %s: not under .SS \"[%s]\""):format(name, n, id, k.section)
      else
        done[id] = true
        for _, l in ipairs(M.entry(k)) do out[#out + 1] = l end
      end
    elseif not line:match('^%.\\"') then  -- the template's comments stay there
      if head then
        flush()
        section = line:match('^%.SS "%[(.-)%]"$')
        if section then seen[section] = true end
      end
      out[#out + 1] = line
    end
  end
  flush()
  for _, s in ipairs(order) do
    if not seen[s] then
      errors[#errors + 1] = ("%s: no .SS \"[%s]\" for the keys of section [%s]"):format(name, s, s)
    end
  end
  if #errors > 0 then return nil, errors end
  if out[#out] == "" then out[#out] = nil end
  return table.concat(out, "\n") .. "\n"
end

if arg and arg[0] and arg[0]:match("man%.lua$") then
  local path = arg[1]
  if not path then
    io.stderr:write("usage: lua5.4 tools/man.lua man/leash.ini.5.in > man/leash.ini.5\n")
    os.exit(2)
  end
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  local page, errors = M.render(text, path)
  if not page then
    io.stderr:write(table.concat(errors, "\n"), "\n")
    os.exit(1)
  end
  io.write(page)
end

return M
