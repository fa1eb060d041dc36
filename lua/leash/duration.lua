-- leash.duration: durations as written in job files and leash.ini.
--
-- parse(v) turns "500ms", "30s", "5m", "1h", "1d", or a combination in
-- descending order ("1m30s", "2h0m5s500ms") into integer milliseconds.  A
-- Lua number means seconds (0.5 -> 500).  A number part may carry a decimal
-- fraction ("1.5s") as long as the result is a whole number of milliseconds.
-- It returns the milliseconds, or nil and a short message that says what is
-- allowed; the caller prefixes file:line and key.  Zero is a valid duration:
-- callers that need a minimum ("every" is at least 1s) check it with within().
--
-- format(ms) is the inverse for humans: 90000 -> "1m30s", 0 -> "0s".
local M = {}

local HINT = "(use 500ms, 30s, 5m, 1h or 1m30s)"

-- The largest duration accepted, in ms: 2^53, so a value survives a trip
-- through a double (JSON, SQL drivers) unchanged.  About 285,000 years.
M.MAX_MS = 1 << 53

-- Units in the order they must appear, with their size in ms.
local UNITS = { d = 86400000, h = 3600000, m = 60000, s = 1000, ms = 1 }
local RANK = { d = 1, h = 2, m = 3, s = 4, ms = 5 }

local quote = require("leash.text").quote

local function bad(s, why)
  if why then
    return nil, ("%s is not a duration: %s %s"):format(quote(s), why, HINT)
  end
  return nil, ("%s is not a duration %s"):format(quote(s), HINT)
end

-- digits "." digits  times unit  -> integer ms, or nil when not whole or too big.
local function term_ms(int, frac, unit)
  local size = UNITS[unit]
  if #int > 16 then return nil, "too large" end
  local n = math.tointeger(tonumber(int))
  if n > M.MAX_MS // size then return nil, "too large" end
  local ms = n * size
  if frac ~= "" then
    -- frac/10^n * size must be a whole number: strip trailing zeros first.
    frac = frac:gsub("0+$", "")
    if #frac > 0 then
      local n = #frac
      if n > 9 then return nil, "not a whole number of milliseconds" end
      local num = math.tointeger(tonumber(frac)) * size
      local den = math.tointeger(10 ^ n)
      if num % den ~= 0 then return nil, "not a whole number of milliseconds" end
      ms = ms + num // den
    end
  end
  return ms
end

local function parse_string(s)
  if s == "" then return nil, "empty duration " .. HINT end
  if s:sub(1, 1) == "-" then return bad(s, "negative") end
  local pos, total, last = 1, 0, 0
  while pos <= #s do
    local int, dot, frac, unit, after = s:match("^(%d+)(%.?)(%d*)(%a*)()", pos)
    -- ".5s" and "1.s": a number needs digits on both sides of its dot.
    if not int or (dot ~= "" and frac == "") then return bad(s) end
    if unit == "" then
      if after > #s then return bad(s, "a number needs a unit") end
      return bad(s)
    end
    local rank = RANK[unit]
    if not rank then return bad(s, ("unknown unit %s"):format(quote(unit))) end
    if rank <= last then
      return bad(s, "units must appear once each, largest first")
    end
    last = rank
    local ms, why = term_ms(int, frac, unit)
    if not ms then return bad(s, why) end
    total = total + ms
    if total > M.MAX_MS then return bad(s, "too large") end
    pos = after
  end
  return total
end

local function parse_number(v)
  if v ~= v then return nil, "nan is not a duration " .. HINT end
  local shown = tostring(v)
  if v < 0 then return nil, ("%s is not a duration: negative %s"):format(shown, HINT) end
  -- An integer times 1000 wraps around past 2^63 (2305843009213693957
  -- came out as 5 s): compare before multiplying.
  if math.type(v) == "integer" then
    if v > M.MAX_MS // 1000 then
      return nil, ("%s is not a duration: too large %s"):format(shown, HINT)
    end
    return v * 1000
  end
  if v * 1000 > M.MAX_MS then
    return nil, ("%s is not a duration: too large %s"):format(shown, HINT)
  end
  -- 1.005 * 1000 is 1004.9999999999999 in binary floating point: accept a
  -- product within rounding error of a whole number, refuse anything else.
  local x = v * 1000
  local ms = math.floor(x + 0.5)
  if math.abs(x - ms) > 1e-9 * math.max(1, x) then ms = nil end
  if not ms then
    return nil, ("%s is not a duration: not a whole number of milliseconds %s")
      :format(shown, HINT)
  end
  return ms
end

-- parse(v) -> ms (integer) | nil, message
function M.parse(v)
  local ty = type(v)
  if ty == "string" then return parse_string(v) end
  if ty == "number" then return parse_number(v) end
  return nil, ("a duration must be a string or a number of seconds, not a %s %s")
    :format(ty, HINT)
end

-- within(ms, min, max) -> ms | nil, message: ms when min <= ms <= max (max
-- may be nil); else says which bound it misses, for the caller to prefix.
function M.within(ms, min, max)
  if ms < min then
    return nil, ("%s is too short (at least %s)"):format(M.format(ms), M.format(min))
  end
  if max and ms > max then
    return nil, ("%s is too long (at most %s)"):format(M.format(ms), M.format(max))
  end
  return ms
end

-- format(ms) -> "1h30m", "500ms", "0s"; a negative value gets a leading "-".
function M.format(ms)
  ms = math.tointeger(ms)
  assert(ms, "duration.format: integer milliseconds expected")
  if ms == 0 then return "0s" end
  if ms < 0 then return "-" .. M.format(-ms) end
  local out = {}
  for _, u in ipairs { "d", "h", "m", "s", "ms" } do
    local n = ms // UNITS[u]
    if n > 0 then
      out[#out + 1] = n .. u
      ms = ms - n * UNITS[u]
    end
  end
  return table.concat(out)
end

return M
