-- leash.tz: IANA time zones, read from the system's TZif files (RFC 8536).
--
-- Why TZif in Lua rather than the C library: localtime() answers only for
-- the process's TZ, so a per-job zone would mean setting TZ and calling
-- tzset() around every call, which changes process state the rest of leash
-- (and `tz = "local"`) reads, and re-reads the file each time.  The files
-- are small and their format is fixed; read once, a zone answers offset(t)
-- with a binary search, the same on every replica whatever its TZ.
--
-- get(name) -> zone | nil, message.  name is a zone such as "Europe/Berlin",
-- looked up under $TZDIR or /usr/share/zoneinfo; a zone read once is kept
-- for the life of the process (outside any job file's environment), so a
-- thousand jobs in one zone read its file once.  A failed look-up is not
-- kept: a zone installed later is found.
--
-- parse(data) -> zone | nil, reason: the reader itself, for any bytes.  It
-- never raises; truncated or garbage input gives a reason.
--
-- zone.offset(t) is the UTC offset (seconds east) at epoch second t: the
-- file's transitions up to the last one, its footer's POSIX TZ rule after
-- it (needed for future fires: "slim" files stop at the last rule change).
local core = require "leash.core"
local quote = require("leash.text").quote

local M = {}

-- The largest TZif file read (real ones are a few KiB).
M.FILE_MAX = 256 * 1024

-- Every offset in tzdata is within a day of UTC; a larger one is garbage.
local OFFSET_MAX = 26 * 3600

function M.dir()
  local d = os.getenv("TZDIR")
  if d and d ~= "" then return d end
  return "/usr/share/zoneinfo"
end

-- Calendar helpers (proleptic Gregorian, days since 1970-01-01).
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = y // 400
  local yoe = y - era * 400
  local doy = (153 * ((m + 9) % 12) + 2) // 5 + d - 1
  return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
end

local function year_of(t)
  -- The civil year of day z (Hinnant's civil_from_days, year only).
  local z = t // 86400 + 719468
  local era = z // 146097
  local doe = z - era * 146097
  local yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
  local doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
  local y = yoe + era * 400
  if (5 * doy + 2) // 153 >= 10 then y = y + 1 end
  return y
end

local function is_leap(y) return y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0) end
local MDAYS = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

-- The POSIX TZ string of the footer -------------------------------------

-- Each reader takes (s, pos) and returns value, next pos, or nil.
local function tz_name(s, pos)
  if s:sub(pos, pos) == "<" then
    local close = s:find(">", pos + 1, true)
    if not close or close - pos - 1 < 3 then return nil end
    return s:sub(pos + 1, close - 1), close + 1
  end
  local a, b = s:find("^%a+", pos)
  if not a or b - a + 1 < 3 then return nil end
  return s:sub(a, b), b + 1
end

-- [+-]hh[:mm[:ss]] in seconds, hours up to max_h.
local function hms(s, pos, max_h)
  local sign, h, rest = s:match("^([+-]?)(%d+)()", pos)
  if not h or #h > 3 then return nil end
  local v = tonumber(h) * 3600
  pos = rest
  local m = s:match("^:(%d%d?)", pos)
  if m then
    v, pos = v + tonumber(m) * 60, pos + 1 + #m
    local sec = s:match("^:(%d%d?)", pos)
    if sec then v, pos = v + tonumber(sec), pos + 1 + #sec end
  end
  if v > max_h * 3600 + 3599 then return nil end
  return sign == "-" and -v or v, pos
end

-- Jn, n or Mm.w.d, then an optional /time (default 02:00).
local function rule_date(s, pos)
  local r
  local m, w, d, rest = s:match("^M(%d%d?)%.(%d)%.(%d)()", pos)
  if m then
    m, w, d = tonumber(m), tonumber(w), tonumber(d)
    if m < 1 or m > 12 or w < 1 or w > 5 or d > 6 then return nil end
    r = { kind = "M", m = m, w = w, d = d }
  else
    local j, n
    j, n, rest = s:match("^(J?)(%d+)()", pos)
    if not n or #n > 3 then return nil end
    n = tonumber(n)
    if j == "J" and (n < 1 or n > 365) or n > 365 then return nil end
    r = { kind = j == "J" and "J" or "n", n = n }
  end
  pos = rest
  r.time = 7200
  if s:sub(pos, pos) == "/" then
    r.time, pos = hms(s, pos + 1, 167)
    if not r.time then return nil end
  end
  return r, pos
end

-- parse_posix("CET-1CEST,M3.5.0,M10.5.0/3") -> rule | nil.  The rule holds
-- std and dst (UTC offsets, seconds east) and the dates start and stop.
local function parse_posix(s)
  local std, dst, pos, off
  std, pos = tz_name(s, 1)
  if not std then return nil end
  off, pos = hms(s, pos, 24)
  if not off then return nil end
  local r = { std = -off }
  if pos > #s then return r end
  dst, pos = tz_name(s, pos)
  if not dst then return nil end
  r.dst = r.std + 3600
  if s:sub(pos, pos) ~= "," then
    off, pos = hms(s, pos, 24)
    if not off then return nil end
    r.dst = -off
  end
  -- A footer with daylight saving always spells out its rule (RFC 8536).
  if s:sub(pos, pos) ~= "," then return nil end
  r.start, pos = rule_date(s, pos + 1)
  if not r.start or s:sub(pos, pos) ~= "," then return nil end
  r.stop, pos = rule_date(s, pos + 1)
  if not r.stop or pos <= #s then return nil end
  return r
end
M._parse_posix = parse_posix

-- The local second (since the epoch, read as UTC) at which date rule d
-- happens in year y.
local function rule_local(d, y)
  local day
  if d.kind == "J" then
    day = days_from_civil(y, 1, 1) + d.n - 1
    if is_leap(y) and d.n >= 60 then day = day + 1 end
  elseif d.kind == "n" then
    day = days_from_civil(y, 1, 1) + d.n
  else
    local first = days_from_civil(y, d.m, 1)
    day = first + (d.d - (first + 4) % 7 + 7) % 7 + 7 * (d.w - 1)
    local dim = MDAYS[d.m] + ((d.m == 2 and is_leap(y)) and 1 or 0)
    while day >= first + dim do day = day - 7 end
  end
  return day * 86400 + d.time
end

-- The rule's offset at t.  The changes of the years around t's, in order
-- (a stop and a start at the same instant: the start wins, which is how
-- "all year daylight saving" is written, `0/0,J365/25`); the last change at
-- or before t decides.
local function rule_offset(r, t, cache)
  if not r.dst then return r.std end
  local y = year_of(t)
  local ev = cache.y == y and cache.ev
  if not ev then
    ev = {}
    for yy = y - 1, y + 1 do
      ev[#ev + 1] = { at = rule_local(r.stop, yy) - r.dst, off = r.std, rank = 0 }
      ev[#ev + 1] = { at = rule_local(r.start, yy) - r.std, off = r.dst, rank = 1 }
    end
    table.sort(ev, function(a, b)
      if a.at ~= b.at then return a.at < b.at end
      return a.rank < b.rank
    end)
    cache.y, cache.ev = y, ev
  end
  local off = ev[1].off == r.std and r.dst or r.std  -- before the first change
  for _, e in ipairs(ev) do
    if e.at > t then break end
    off = e.off
  end
  return off
end

-- The TZif reader -------------------------------------------------------

local function fail(msg) error({ tzif = msg }, 0) end

local function read_tzif(data)
  local function need(pos, n)
    if n < 0 or pos - 1 + n > #data then fail("truncated") end
  end
  local function header(pos)
    need(pos, 44)
    if data:sub(pos, pos + 3) ~= "TZif" then fail("no TZif magic") end
    local h = { version = data:byte(pos + 4) }
    h.isut, h.isstd, h.leap, h.time, h.type, h.char = string.unpack(">I4I4I4I4I4I4", data, pos + 20)
    return h, pos + 44
  end
  local h, pos = header(1)
  local version = h.version
  if version ~= 0 and (version < 0x32 or version > 0x39) then
    fail(("unknown version byte %d"):format(version))
  end
  local tsize = 4
  if version ~= 0 then
    -- Skip the 32-bit block; the 64-bit one after the second header is complete.
    local v1 = h.time * 5 + h.type * 6 + h.char + h.leap * 8 + h.isstd + h.isut
    need(pos, v1)
    h, pos = header(pos + v1)
    tsize = 8
  end
  if h.type < 1 or h.type > 256 then fail(("%d local time types"):format(h.type)) end
  if h.char < 1 then fail("no time zone designations") end
  if h.isstd ~= 0 and h.isstd ~= h.type or h.isut ~= 0 and h.isut ~= h.type then
    fail("bad standard/UT indicator counts")
  end
  if h.leap > 0 then
    fail("it counts leap seconds (a right/ zone); use the zone without right/")
  end
  need(pos, h.time * (tsize + 1) + h.type * 6 + h.char + h.isstd + h.isut)
  local tfmt = tsize == 8 and ">i8" or ">i4"
  local at, idx = {}, {}
  for i = 1, h.time do
    at[i] = string.unpack(tfmt, data, pos + (i - 1) * tsize)
    if i > 1 and at[i] <= at[i - 1] then fail("transition times out of order") end
  end
  pos = pos + h.time * tsize
  for i = 1, h.time do
    idx[i] = data:byte(pos + i - 1)
    if idx[i] >= h.type then fail("a transition to a time type that does not exist") end
  end
  pos = pos + h.time
  local types = {}
  for i = 0, h.type - 1 do
    local utoff, isdst, desig = string.unpack(">i4BB", data, pos + i * 6)
    if utoff < -OFFSET_MAX or utoff > OFFSET_MAX then
      fail(("a UTC offset of %d seconds"):format(utoff))
    end
    if isdst > 1 or desig >= h.char then fail("a bad local time type") end
    types[i] = utoff
  end
  pos = pos + h.type * 6 + h.char + h.isstd + h.isut
  local off = {}
  for i = 1, h.time do off[i] = types[idx[i]] end
  local rule
  if version ~= 0 then
    local footer = data:match("^\n([^\n]*)\n", pos)
    if not footer then fail("no footer line after the data") end
    if footer ~= "" then
      rule = parse_posix(footer)
      if not rule then fail("a bad POSIX TZ footer " .. quote(footer)) end
      if math.abs(rule.std) > OFFSET_MAX or math.abs(rule.dst or 0) > OFFSET_MAX then
        fail("a bad POSIX TZ footer " .. quote(footer))
      end
    end
  end
  return at, off, types[0], rule
end

function M.parse(data)
  if type(data) ~= "string" then return nil, "not a string" end
  local ok, at, off, first, rule = pcall(read_tzif, data)
  if not ok then
    if type(at) == "table" and at.tzif then return nil, at.tzif end
    return nil, "unreadable: " .. tostring(at)
  end
  local n, last, cache = #at, at[#at], {}
  local zone = {}
  function zone.offset(t)
    if n == 0 or t >= last then
      if rule then return rule_offset(rule, t, cache) end
      return n == 0 and first or off[n]
    end
    if t < at[1] then return first end
    local lo, hi = 1, n                  -- at[lo] <= t < at[hi]
    while hi - lo > 1 do
      local mid = (lo + hi) // 2
      if at[mid] <= t then lo = mid else hi = mid end
    end
    return off[lo]
  end
  return zone
end

-- Zone names: components of letters, digits, '_', '-' and '+', joined by
-- '/'.  No '.', so no way out of the zoneinfo directory.
local NAME_MAX = 128

function M.valid_name(name)
  if type(name) ~= "string" or #name == 0 or #name > NAME_MAX then return false end
  for part in (name .. "/"):gmatch("([^/]*)/") do
    if not part:match("^[%w_+-]+$") then return false end
  end
  return true
end

local zones = {}

function M.get(name)
  local z = zones[name]
  if z then return z end
  if not M.valid_name(name) then
    return nil, ("%s is not a time zone name (such as \"Europe/Berlin\")"):format(
      quote(tostring(name)))
  end
  local path = M.dir() .. "/" .. name
  local data, err = core.read_job(path, M.FILE_MAX)
  if not data then
    return nil, ("%s is not a time zone in %s: %s"):format(quote(name), M.dir(), err)
  end
  local reason
  z, reason = M.parse(data)
  if not z then
    return nil, ("time zone %s: %s is not a usable TZif file: %s"):format(quote(name), path, reason)
  end
  zones[name] = z
  return z
end

return M
