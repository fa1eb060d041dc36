-- leash.cron: cron expressions and fire times.
--
-- parse(expr) reads 5 fields (minute hour day-of-month month day-of-week;
-- the second is 0) or 6 fields (second first).  A field is `*`, a number, a
-- range `a-b`, any of those with a step (`*/5`, `10-50/10`, `5/15` meaning
-- 5-max/15), or a comma list of them.  Months and days of the week may be
-- named (JAN-DEC, SUN-SAT, any case, also in ranges); Sunday is 0 or 7.
-- Vixie's day rule: a day field whose text starts with `*` (`*`, `*/2`,
-- `*/1`, `*,5`) counts as unrestricted.  When neither day field starts with
-- `*`, a day matches if either matches; otherwise both sets must match, so
-- `0 0 */2 * *` fires on odd days and `0 0 */1 * 0` on Sundays only (as in
-- Vixie cron, cronie and Debian's cron, whose entry.c sets DOM_STAR and
-- DOW_STAR from the field's first character).
-- It returns a spec table, or nil and a message that names the field.  An
-- expression that can never fire (`0 0 30 2 *`) is refused.
--
-- next(spec, t, tz) is the first fire time strictly after epoch second t, in
-- the time zone "UTC" (default), "local" (the process's TZ) or an IANA zone
-- such as "Europe/Berlin" (its TZif file, through leash.tz, whatever the
-- process's TZ).  In a zone with daylight saving, a wall time in a
-- spring-forward gap fires once, at the first second after the gap, and a
-- wall time that occurs twice in a fall-back fires once, at its first
-- occurrence.  note(spec, at, tz) says when a gap moved the fire at `at`.
--
-- every_next(every_ms, t_ms) is the next multiple of every_ms since the Unix
-- epoch strictly after t_ms.
local M = {}

-- Calendar arithmetic on the proleptic Gregorian calendar, in days since
-- 1970-01-01 (H. Hinnant's days_from_civil / civil_from_days).  All integer.

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = y // 400
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = (153 * mp + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end

local function civil_from_days(z)
  z = z + 719468
  local era = z // 146097
  local doe = z - era * 146097
  local yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
  local doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
  local mp = (5 * doy + 2) // 153
  local d = doy - (153 * mp + 2) // 5 + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m, d
end

local function is_leap(y)
  return y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0)
end

local MDAYS = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

local function days_in_month(y, m)
  if m == 2 and is_leap(y) then return 29 end
  return MDAYS[m]
end

-- Seconds since the epoch of a civil date and time read as UTC.
local function timegm(y, mo, d, h, mi, s)
  return days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s
end
M._timegm = timegm

-- Parsing ------------------------------------------------------------------

local MONTHS = { jan = 1, feb = 2, mar = 3, apr = 4, may = 5, jun = 6,
                 jul = 7, aug = 8, sep = 9, oct = 10, nov = 11, dec = 12 }
local DAYS = { sun = 0, mon = 1, tue = 2, wed = 3, thu = 4, fri = 5, sat = 6 }

-- The six fields in the order of a 6-field expression.  `star` is the range
-- `*` stands for (day-of-week accepts 7 as Sunday but `*` is 0-6).
local FIELDS = {
  { key = "sec", name = "second", min = 0, max = 59 },
  { key = "min", name = "minute", min = 0, max = 59 },
  { key = "hour", name = "hour", min = 0, max = 23 },
  { key = "dom", name = "day-of-month", min = 1, max = 31 },
  { key = "mon", name = "month", min = 1, max = 12, names = MONTHS, what = "a month" },
  { key = "dow", name = "day-of-week", min = 0, max = 7, star_max = 6, names = DAYS,
    what = "a day of the week" },
}

local quote = require("leash.text").quote
local tzdb = require "leash.tz"

-- One value of a field: a number or, for months and days, a name.
local function value(f, s)
  if s:match("^%d+$") then
    local n = #s <= 4 and tonumber(s) or math.huge
    if n < f.min or n > f.max then
      return nil, ("%s is out of range %d-%d"):format(quote(s), f.min, f.max)
    end
    return math.tointeger(n)
  end
  if f.names then
    local n = f.names[s:lower()]
    if n then return n end
    return nil, ("%s is not %s"):format(quote(s), f.what)
  end
  if s == "" then return nil, "a number is missing" end
  return nil, ("%s is not a number"):format(quote(s))
end

-- One list item into the set `set` (value -> true).
local function item(f, s, set)
  local base, step = s, nil
  local slash = s:find("/", 1, true)
  if slash then
    base, step = s:sub(1, slash - 1), s:sub(slash + 1)
    if not step:match("^%d+$") then
      return nil, ("%s: the step %s is not a number"):format(quote(s), quote(step))
    end
    local span = (f.star_max or f.max) - f.min + 1
    step = #step <= 4 and tonumber(step) or math.huge
    if step < 1 or step > span then
      return nil, ("%s: the step must be 1-%d"):format(quote(s), span)
    end
    step = math.tointeger(step)
  end
  local lo, hi
  if base == "*" then
    lo, hi = f.min, f.star_max or f.max
  else
    local dash = base:find("-", 1, true)
    local err
    if dash then
      lo, err = value(f, base:sub(1, dash - 1))
      if not lo then return nil, err end
      hi, err = value(f, base:sub(dash + 1))
      if not hi then return nil, err end
      if lo > hi then
        return nil, ("%s is a reversed range (its start is after its end)"):format(quote(s))
      end
    else
      lo, err = value(f, base)
      if not lo then return nil, err end
      -- "5/15" means 5-max/15; a plain "5" is just 5.
      hi = step and (f.star_max or f.max) or lo
    end
  end
  for v = lo, hi, step or 1 do set[v] = true end
  return true
end

local function field(f, s)
  local set = {}
  if s == "" then return nil, "empty field" end
  for part in (s .. ","):gmatch("([^,]*),") do
    if part == "" then return nil, ("%s has an empty list item"):format(quote(s)) end
    local ok, err = item(f, part, set)
    if not ok then return nil, err end
  end
  if set[7] and f.key == "dow" then set[7] = nil; set[0] = true end
  return set
end

-- For fast skipping: nxt[v] is the smallest allowed value >= v (nil past the
-- last one), first the smallest, list the values in order.
local function index(set, lo, hi)
  local nxt, list, after = {}, {}, nil
  for v = hi, lo, -1 do
    if set[v] then after = v end
    nxt[v] = after
  end
  for v = lo, hi do
    if set[v] then list[#list + 1] = v end
  end
  return nxt, list
end

-- Could the days ever fire in one of the allowed months?  Only a day-of-month
-- ANDed with a `*`-led day-of-week can miss: a `*`-led day-of-month holds
-- the 1st, and every date falls on every weekday sooner or later (29
-- February counts: it happens in leap years).
local function ever_fires(spec)
  if spec.dom_star or not spec.dow_star then return true end
  local LONGEST = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }
  for _, m in ipairs(spec.mon.list) do
    if spec.dom.list[1] <= LONGEST[m] then return true end
  end
  return false
end

-- Vixie cron's nicknames, as its crontab(5) gives them.
local NICKNAMES = {
  ["@yearly"] = "0 0 1 1 *", ["@annually"] = "0 0 1 1 *", ["@monthly"] = "0 0 1 * *",
  ["@weekly"] = "0 0 * * 0", ["@daily"] = "0 0 * * *", ["@midnight"] = "0 0 * * *",
  ["@hourly"] = "0 * * * *",
}
M.NICKNAMES = NICKNAMES

-- parse(expr) -> spec | nil, message
function M.parse(expr)
  if type(expr) ~= "string" then
    return nil, ("a cron expression must be a string, not a %s"):format(type(expr))
  end
  local nick = expr:match("^%s*(@%S*)%s*$")
  if nick == "@reboot" then
    return nil, "@reboot is not a schedule leash keeps (a cluster has no one boot): a job " ..
      "that runs for as long as leash does is a service (a job with neither every nor cron)"
  elseif nick and not NICKNAMES[nick] then
    return nil, ("unknown nickname %s (known: @yearly @annually @monthly @weekly @daily " ..
      "@midnight @hourly)"):format(quote(nick))
  end
  local words = {}
  for w in (nick and NICKNAMES[nick] or expr):gmatch("%S+") do words[#words + 1] = w end
  if #words ~= 5 and #words ~= 6 then
    return nil, ("expected 5 or 6 fields, got %d"):format(#words)
  end
  local spec = { expr = expr, fields = #words }
  local skip = #words == 5 and 1 or 0
  if skip == 1 then table.insert(words, 1, "0") end
  for i, f in ipairs(FIELDS) do
    local set, err = field(f, words[i])
    if not set then
      return nil, ("field %d (%s): %s"):format(i - skip, f.name, err)
    end
    local hi = f.key == "dow" and 6 or f.max
    local nxt, list = index(set, f.min, hi)
    spec[f.key] = { set = set, next = nxt, list = list, first = list[1] }
  end
  spec.dom_star = words[4]:sub(1, 1) == "*"
  spec.dow_star = words[6]:sub(1, 1) == "*"
  if not ever_fires(spec) then
    return nil, ("%s never fires: no allowed month has day %d"):format(
      quote(expr), spec.dom.list[1])
  end
  return spec
end

-- Matching -----------------------------------------------------------------

local function day_ok(spec, y, mo, d)
  local dom = spec.dom.set[d] == true
  local dow = spec.dow.set[(days_from_civil(y, mo, d) + 4) % 7] == true
  if spec.dom_star or spec.dow_star then return dom and dow end
  return dom or dow
end

-- The smallest matching civil time strictly after w, all in "wall seconds"
-- (a civil time read as if it were UTC).  Field-wise: a field that does not
-- match moves to its next allowed value and resets the smaller fields.
-- nil when nothing matches within 400 years (not for a parsed spec).
local function next_wall(spec, w)
  w = w + 1
  local y, mo, d = civil_from_days(w // 86400)
  local sod = w % 86400
  local h, mi, s = sod // 3600, sod % 3600 // 60, sod % 60
  local S, MI, H, MO = spec.sec, spec.min, spec.hour, spec.mon
  local limit = y + 400
  while y <= limit do
    local m2 = MO.next[mo]
    if m2 ~= mo then
      if m2 then mo = m2 else y, mo = y + 1, MO.first end
      d, h, mi, s = 1, H.first, MI.first, S.first
    end
    local dim = days_in_month(y, mo)
    local d2 = d
    while d2 <= dim and not day_ok(spec, y, mo, d2) do d2 = d2 + 1 end
    if d2 > dim then
      mo, d, h, mi, s = mo + 1, 1, H.first, MI.first, S.first
      goto continue
    elseif d2 ~= d then
      d, h, mi, s = d2, H.first, MI.first, S.first
    end
    do
      local h2 = H.next[h]
      if not h2 then
        d, h, mi, s = d + 1, H.first, MI.first, S.first
        goto continue
      elseif h2 ~= h then
        h, mi, s = h2, MI.first, S.first
      end
      local mi2 = MI.next[mi]
      if not mi2 then
        h, mi, s = h + 1, MI.first, S.first
        goto continue
      elseif mi2 ~= mi then
        mi, s = mi2, S.first
      end
      local s2 = S.next[s]
      if not s2 then
        mi, s = mi + 1, S.first
        goto continue
      end
      return timegm(y, mo, d, h, mi, s2)
    end
    ::continue::
  end
  return nil
end

-- Zoned time.  A zone is an offset function: off(t) is the UTC offset
-- (seconds east) at instant t.  "local" asks os.date (the process's TZ; no
-- mktime and its DST guessing), an IANA zone its TZif data (leash.tz).

local function local_offset(t)
  local lt = os.date("*t", t)
  return timegm(lt.year, lt.month, lt.day, lt.hour, lt.min, lt.sec) - t
end

-- The offset function of tz, or nil and a message.  UTC is nil, nil.
local function zone_of(tz)
  if tz == nil or tz == "UTC" then return nil end
  if tz == "local" then return local_offset end
  if type(tz) ~= "string" then
    return nil, ("tz must be \"UTC\", \"local\" or a zone name, not a %s"):format(type(tz))
  end
  local z, err = tzdb.get(tz)
  if not z then return nil, err end
  return z.offset
end

-- The largest wall time reached at or before instant t.  Just after a
-- fall-back the clock shows wall times it already showed; those fired then.
local function max_wall(off, t)
  local now = off(t)
  local before = off(t - 86400)
  if before <= now then return t + now end
  local back = before - now              -- how far the clock went back
  if off(t - back) == now then return t + now end  -- the fold is over
  -- The transition is in (t - back, t]: find its instant T (first second
  -- with the new offset); the wall time just before it is the largest.
  local lo, hi = t - back, t             -- off(lo) ~= now, off(hi) == now
  while hi - lo > 1 do
    local mid = (lo + hi) // 2
    if off(mid) == now then hi = mid else lo = mid end
  end
  return math.max(t + now, hi - 1 + off(hi - 1))
end

-- The first instant whose wall time is W; for a W in a spring-forward gap,
-- the first instant after the gap.
local function first_instant(off, W)
  local early, late = off(W - 86400), off(W + 86400)
  local best
  for _, o in ipairs { early, late } do
    local t = W - o
    if off(t) == o and (not best or t < best) then best = t end
  end
  if best then return best end
  -- In a gap: the instants W - late and W - early straddle it.  Find the
  -- first instant whose wall time is at least W.
  local lo, hi = math.min(W - early, W - late), math.max(W - early, W - late)
  if lo + off(lo) >= W then return lo end
  while hi - lo > 1 do
    local mid = (lo + hi) // 2
    if mid + off(mid) >= W then hi = mid else lo = mid end
  end
  return hi
end

-- The first fire strictly after t, and the wall time it is for (which a
-- gap moves: then the fire's own wall time is later).
local function next_zoned(spec, t, off)
  local w = max_wall(off, t)
  for _ = 1, 1000 do
    local W = next_wall(spec, w)
    if not W then return nil end
    local at = first_instant(off, W)
    if at > t then return at, W end
    w = W
  end
  return nil
end

-- next(spec, t, tz) -> epoch seconds | nil, message
function M.next(spec, t, tz)
  t = math.tointeger(t)
  if not t then return nil, "cron.next: t must be an integer number of seconds" end
  local off, err = zone_of(tz)
  if err then return nil, err end
  local at
  if off then at = next_zoned(spec, t, off) else at = next_wall(spec, t) end
  if not at then return nil, "never fires" end
  return at
end

-- note(spec, at, tz) -> nil | "02:30 Europe/Berlin does not exist: fires at 03:00"
-- for a fire time `at` that cron.next gave: says when a spring-forward gap
-- moved it from the wall time it was for.
function M.note(spec, at, tz)
  local off = zone_of(tz)
  if not off then return nil end
  local got, W = next_zoned(spec, at - 1, off)
  if got ~= at or W == at + off(at) then return nil end
  local function hm(w)
    local sod = w % 86400
    if sod % 60 == 0 and spec.fields == 5 then
      return ("%02d:%02d"):format(sod // 3600, sod % 3600 // 60)
    end
    return ("%02d:%02d:%02d"):format(sod // 3600, sod % 3600 // 60, sod % 60)
  end
  return ("%s %s does not exist: fires at %s"):format(hm(W), tz, hm(at + off(at)))
end

-- every_next(every_ms, t_ms) -> ms | nil, message
function M.every_next(every_ms, t_ms)
  every_ms, t_ms = math.tointeger(every_ms), math.tointeger(t_ms)
  if not every_ms or every_ms <= 0 then
    return nil, "every_next: the interval must be a positive integer of ms"
  end
  if not t_ms then return nil, "every_next: t must be an integer of ms" end
  return (t_ms // every_ms + 1) * every_ms
end

-- describe(spec) -> "sec 0 min */15 hour 9-17 dom * mon * dow 1-5 (dom and dow)"
local function ranges(f, lo, hi)
  local list = f.list
  if #list == hi - lo + 1 then return "*" end
  local out, i = {}, 1
  while i <= #list do
    local j = i
    while j < #list and list[j + 1] == list[j] + 1 do j = j + 1 end
    if j - i >= 2 then
      out[#out + 1] = list[i] .. "-" .. list[j]
    else
      for k = i, j do out[#out + 1] = tostring(list[k]) end
    end
    i = j + 1
  end
  return table.concat(out, ",")
end

function M.describe(spec)
  local parts = {}
  for _, f in ipairs(FIELDS) do
    local hi = f.key == "dow" and 6 or f.max
    parts[#parts + 1] = f.key .. " " .. ranges(spec[f.key], f.min, hi)
  end
  local rule = (spec.dom_star or spec.dow_star) and "" or " (day-of-month or day-of-week)"
  return table.concat(parts, " ") .. rule
end

return M
