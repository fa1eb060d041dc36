local cron = require "leash.cron"
local core = require "leash.core"

-- Expected times are written by hand as ISO strings and converted here, with
-- a calendar walk that shares nothing with leash.cron.  Results are compared
-- as ISO strings (os.date "!"), so a failure shows readable times.

local function is_leap(y) return y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0) end
local MDAYS = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

-- "2026-03-29T03:00:00+02:00" or "...Z" -> epoch seconds
local function T(iso)
  local y, mo, d, h, mi, s, zone = iso:match(
    "^(%d%d%d%d)-(%d%d)-(%d%d)T(%d%d):(%d%d):(%d%d)(.*)$")
  assert(y, "bad ISO time in spec: " .. iso)
  y, mo, d, h, mi, s = tonumber(y), tonumber(mo), tonumber(d), tonumber(h),
                       tonumber(mi), tonumber(s)
  local days = 0
  if y >= 1970 then
    for yy = 1970, y - 1 do days = days + (is_leap(yy) and 366 or 365) end
  else
    for yy = y, 1969 do days = days - (is_leap(yy) and 366 or 365) end
  end
  for m = 1, mo - 1 do days = days + MDAYS[m] + ((m == 2 and is_leap(y)) and 1 or 0) end
  days = days + d - 1
  local off = 0
  if zone ~= "Z" then
    local sign, oh, om = zone:match("^([+-])(%d%d):(%d%d)$")
    assert(sign, "bad zone in spec: " .. iso)
    off = (tonumber(oh) * 3600 + tonumber(om) * 60) * (sign == "-" and -1 or 1)
  end
  return days * 86400 + h * 3600 + mi * 60 + s - off
end

local function iso(t)
  if t == nil then return "nil" end
  return os.date("!%Y-%m-%dT%H:%M:%SZ", t)
end

local function spec_of(expr)
  local spec, err = cron.parse(expr)
  assert(spec, ("%s: %s"):format(expr, tostring(err)))
  return spec
end

-- The next n fire times of expr after `from`, as UTC ISO strings.
local function fires(expr, from, n, tz)
  local spec, t, out = spec_of(expr), T(from), {}
  for i = 1, n do
    local nt, err = cron.next(spec, t, tz)
    assert(nt, err)
    assert.equal("integer", math.type(nt))
    out[i] = iso(nt)
    t = nt
  end
  return out
end

-- Hand-written expectations may carry offsets; normalise them to UTC ISO.
local function utc(list)
  local out = {}
  for i, s in ipairs(list) do out[i] = iso(T(s)) end
  return out
end

local function refused(expr, want)
  local spec, err = cron.parse(expr)
  assert.is_nil(spec, ("%q was accepted"):format(tostring(expr)))
  assert.is_string(err)
  assert.is_truthy(err:find(want, 1, true), ("message %q lacks %q"):format(err, want))
end

describe("spec helper T", function()
  it("converts ISO times independently of leash.cron", function()
    assert.equal(0, T("1970-01-01T00:00:00Z"))
    assert.equal(951782400, T("2000-02-29T00:00:00Z"))
    assert.equal(1767225600, T("2026-01-01T00:00:00Z"))
    assert.equal(T("2026-03-29T01:00:00Z"), T("2026-03-29T03:00:00+02:00"))
    assert.equal(-86400, T("1969-12-31T00:00:00Z"))
    assert.equal("2026-03-29T01:00:00Z", iso(T("2026-03-29T03:00:00+02:00")))
  end)
end)

describe("leash.cron.parse", function()
  it("accepts 5 and 6 fields", function()
    assert.is_table(cron.parse("* * * * *"))
    assert.is_table(cron.parse("* * * * * *"))
    assert.is_table(cron.parse("  0\t3 * *  *  * "))
  end)

  it("refuses the wrong number of fields", function()
    refused("1 2 3 4", "expected 5 or 6 fields, got 4")
    refused("", "expected 5 or 6 fields, got 0")
    refused("* * * * * * *", "expected 5 or 6 fields, got 7")
  end)

  it("refuses values out of range, naming the field", function()
    refused("0 25 * * *", 'field 2 (hour): "25" is out of range 0-23')
    refused("60 * * * *", 'field 1 (minute): "60" is out of range 0-59')
    refused("0 0 0 * *", 'field 3 (day-of-month): "0" is out of range 1-31')
    refused("0 0 32 * *", 'field 3 (day-of-month): "32" is out of range 1-31')
    refused("0 0 * 13 *", 'field 4 (month): "13" is out of range 1-12')
    refused("0 0 * 0 *", 'field 4 (month): "0" is out of range 1-12')
    refused("0 0 * * 8", 'field 5 (day-of-week): "8" is out of range 0-7')
    refused("0 0-99999999999 * * *", "field 2 (hour)")
  end)

  it("numbers the fields of a 6-field expression from the seconds", function()
    refused("60 * * * * *", 'field 1 (second): "60" is out of range 0-59')
    refused("0 0 25 * * *", 'field 3 (hour): "25" is out of range 0-23')
    refused("0 0 0 * FOO *", 'field 5 (month): "FOO" is not a month')
  end)

  it("refuses unknown names", function()
    refused("0 0 * FOO *", 'field 4 (month): "FOO" is not a month')
    refused("0 0 * * FOO", 'field 5 (day-of-week): "FOO" is not a day of the week')
    refused("0 0 * * monday", "is not a day of the week")
    refused("0 0 * mon *", "is not a month")
    refused("mon * * * *", 'field 1 (minute): "mon" is not a number')
    refused("0 jan * * *", 'field 2 (hour): "jan" is not a number')
  end)

  it("refuses step 0 and bad steps", function()
    refused("*/0 * * * *", "field 1 (minute)")
    refused("*/0 * * * *", "step")
    refused("0 0 */0 * *", "field 3 (day-of-month)")
    refused("*/x * * * *", "step")
    refused("*/ * * * *", "step")
    refused("*/-1 * * * *", "step")
  end)

  it("refuses a reversed range", function()
    refused("5-1 * * * *", 'field 1 (minute): "5-1" is a reversed range')
    refused("0 0 * * fri-mon", 'field 5 (day-of-week): "fri-mon" is a reversed range')
    refused("0 0 * dec-jan *", "reversed range")
  end)

  it("refuses malformed fields", function()
    refused("1,,2 * * * *", "field 1 (minute)")
    refused(",1 * * * *", "field 1 (minute)")
    refused("1- * * * *", "field 1 (minute)")
    refused("-5 * * * *", "field 1 (minute)")
    refused("1-2-3 * * * *", "field 1 (minute)")
    refused("** * * * *", "field 1 (minute)")
    refused("? * * * *", "field 1 (minute)")
    refused("0 0 L * *", "field 3 (day-of-month)")
  end)

  it("takes Vixie cron's nicknames, and refuses @reboot with a hint and unknown ones by name", function()
    local same = {
      ["@yearly"] = "0 0 1 1 *", ["@annually"] = "0 0 1 1 *", ["@monthly"] = "0 0 1 * *",
      ["@weekly"] = "0 0 * * 0", ["@daily"] = "0 0 * * *", ["@midnight"] = "0 0 * * *",
      ["@hourly"] = "0 * * * *",
    }
    local t0 = T("2026-12-05T08:31:00Z")
    for nick, expr in pairs(same) do
      local a, b = spec_of(nick), spec_of(expr)
      local ta, tb = t0, t0
      for _ = 1, 3 do
        ta, tb = cron.next(a, ta, "UTC"), cron.next(b, tb, "UTC")
        assert.equal(iso(tb), iso(ta), nick)
      end
    end
    assert.equal("2027-01-01T00:00:00Z", iso(cron.next(spec_of("@yearly"), t0, "UTC")))
    local spec, err = cron.parse("@reboot")
    assert.is_nil(spec)
    assert.matches("@reboot is not a schedule leash keeps.*a service %(a job with neither every nor cron%)", err)
    spec, err = cron.parse("@fortnightly")
    assert.is_nil(spec)
    assert.matches('unknown nickname "@fortnightly"', err, 1, true)
  end)

  it("refuses a non-string", function()
    local spec, err = cron.parse(5)
    assert.is_nil(spec)
    assert.matches("string", err)
  end)

  it("refuses an expression that never fires", function()
    refused("0 0 30 2 *", "never fires")
    refused("0 0 31 2 *", "never fires")
    refused("0 0 31 4,6,9,11 *", "never fires")
    refused("0 0 30,31 feb *", "never fires")
    -- but these do fire
    assert.is_table(cron.parse("0 0 29 2 *"))
    assert.is_table(cron.parse("0 0 31 2,3 *"))
    assert.is_table(cron.parse("0 0 30 2 mon"))   -- day-of-week still matches
  end)

  it("describes a spec", function()
    assert.equal("sec 0 min 0,15,30,45 hour 9-17 dom 1,15 mon * dow 1-5 (day-of-month or day-of-week)",
      cron.describe(spec_of("*/15 9-17 1,15 * mon-fri")))
    assert.equal("sec 0 min 0 hour 3 dom * mon * dow *", cron.describe(spec_of("0 3 * * *")))
  end)
end)

describe("leash.cron.next in UTC", function()
  it("fires strictly after t", function()
    assert.same({ "2026-01-01T03:00:00Z", "2026-01-02T03:00:00Z" },
      fires("0 3 * * *", "2026-01-01T02:59:59Z", 2))
    assert.same({ "2026-01-02T03:00:00Z" }, fires("0 3 * * *", "2026-01-01T03:00:00Z", 1))
    assert.same({ "2026-01-01T00:01:00Z" }, fires("* * * * *", "2026-01-01T00:00:00Z", 1))
  end)

  it("walks a step that does not divide the range", function()
    assert.same(utc { "2026-01-01T00:07:00Z", "2026-01-01T00:14:00Z", "2026-01-01T00:21:00Z",
                      "2026-01-01T00:28:00Z", "2026-01-01T00:35:00Z", "2026-01-01T00:42:00Z",
                      "2026-01-01T00:49:00Z", "2026-01-01T00:56:00Z", "2026-01-01T01:00:00Z",
                      "2026-01-01T01:07:00Z" },
      fires("*/7 * * * *", "2026-01-01T00:00:00Z", 10))
    assert.same({ "2026-01-01T05:00:00Z", "2026-01-01T10:00:00Z", "2026-01-01T15:00:00Z",
                  "2026-01-01T20:00:00Z", "2026-01-02T00:00:00Z" },
      fires("0 */5 * * *", "2026-01-01T00:00:00Z", 5))
  end)

  it("reads lists, ranges and steps with a start", function()
    assert.same({ "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z", "2026-01-01T00:05:00Z",
                  "2026-01-01T01:01:00Z" },
      fires("1,2,5 * * * *", "2026-01-01T00:00:00Z", 4))
    assert.same({ "2026-01-01T09:00:00Z", "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z",
                  "2026-01-02T09:00:00Z" },
      fires("0 9-11 * * *", "2026-01-01T00:00:00Z", 4))
    assert.same({ "2026-01-01T00:10:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:50:00Z",
                  "2026-01-01T01:10:00Z" },
      fires("10-50/20 * * * *", "2026-01-01T00:00:00Z", 4))
    assert.same({ "2026-01-01T00:05:00Z", "2026-01-01T00:20:00Z", "2026-01-01T00:35:00Z",
                  "2026-01-01T00:50:00Z", "2026-01-01T01:05:00Z" },
      fires("5/15 * * * *", "2026-01-01T00:00:00Z", 5))
    assert.same({ "2026-01-01T00:03:00Z", "2026-01-01T00:04:00Z", "2026-01-01T00:10:00Z",
                  "2026-01-01T00:40:00Z", "2026-01-01T00:50:00Z", "2026-01-01T01:03:00Z" },
      fires("40-50/10,3-4,10 * * * *", "2026-01-01T00:00:00Z", 6))
  end)

  it("reads month and day names in any case, also in ranges", function()
    -- 2026-01-30 is a Friday; next weekday in January or July is Wed 1 July.
    assert.same({ "2026-07-01T12:00:00Z", "2026-07-02T12:00:00Z", "2026-07-03T12:00:00Z",
                  "2026-07-06T12:00:00Z" },
      fires("0 12 * jan,JUL Mon-fri", "2026-01-30T13:00:00Z", 4))
    assert.same({ "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z", "2027-02-01T00:00:00Z" },
      fires("0 0 1 feb-Apr *", "2026-02-01T00:00:00Z", 3))
    assert.same({ "2026-01-03T00:00:00Z", "2026-01-10T00:00:00Z" },
      fires("0 0 * * SAT", "2026-01-01T00:00:00Z", 2))
  end)

  it("takes Sunday as 0, 7 or SUN", function()
    local sundays = { "2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-18T00:00:00Z" }
    assert.same(sundays, fires("0 0 * * 0", "2026-01-01T00:00:00Z", 3))
    assert.same(sundays, fires("0 0 * * 7", "2026-01-01T00:00:00Z", 3))
    assert.same(sundays, fires("0 0 * * sun", "2026-01-01T00:00:00Z", 3))
    -- Friday to Sunday through 7
    assert.same({ "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z",
                  "2026-01-09T00:00:00Z" },
      fires("0 0 * * 5-7", "2026-01-01T00:00:00Z", 4))
    -- every other day of the week from Sunday: Sun, Tue, Thu, Sat
    assert.same({ "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-06T00:00:00Z",
                  "2026-01-08T00:00:00Z" },
      fires("0 0 * * */2", "2026-01-01T00:00:00Z", 4))
  end)

  it("ORs day-of-month and day-of-week when both are restricted", function()
    -- the 13th or any Friday; Jan 13 2026 is a Tuesday
    assert.same({ "2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z",
                  "2026-01-16T00:00:00Z" },
      fires("0 0 13 * 5", "2026-01-01T00:00:00Z", 4))
    -- 1st or 15th or Monday
    assert.same({ "2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z", "2026-01-15T00:00:00Z",
                  "2026-01-19T00:00:00Z" },
      fires("0 0 1,15 * mon", "2026-01-01T00:00:00Z", 4))
    -- a stepped range is a restriction too: days 1,11,21,31 or Mondays
    assert.same({ "2026-01-05T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-12T00:00:00Z",
                  "2026-01-19T00:00:00Z", "2026-01-21T00:00:00Z" },
      fires("0 0 1-31/10 * 1", "2026-01-01T00:00:00Z", 5))
    -- but */10 starts with *: days 1,11,21,31 that are Mondays (Vixie's rule)
    assert.same({ "2026-05-11T00:00:00Z" },
      fires("0 0 */10 * 1", "2026-01-01T00:00:00Z", 1))
  end)

  it("ANDs them when one of them is *", function()
    assert.same({ "2026-01-13T00:00:00Z", "2026-02-13T00:00:00Z" },
      fires("0 0 13 * *", "2026-01-01T00:00:00Z", 2))
    assert.same({ "2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z" },
      fires("0 0 * * 5", "2026-01-01T00:00:00Z", 2))
    -- with a month restriction, * day-of-week still means every day
    assert.same({ "2026-06-13T00:00:00Z", "2027-06-13T00:00:00Z" },
      fires("0 0 13 6 *", "2026-01-01T00:00:00Z", 2))
  end)

  it("skips months without the day", function()
    assert.same({ "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z",
                  "2026-08-31T00:00:00Z", "2026-10-31T00:00:00Z", "2026-12-31T00:00:00Z",
                  "2027-01-31T00:00:00Z" },
      fires("0 0 31 * *", "2026-01-31T00:00:00Z", 7))
    assert.same({ "2026-03-30T00:00:00Z", "2026-04-30T00:00:00Z" },
      fires("0 0 30 * *", "2026-01-30T00:00:00Z", 2))
    assert.same({ "2026-03-31T00:00:00Z", "2027-03-31T00:00:00Z" },
      fires("0 0 31 2,3 *", "2026-01-01T00:00:00Z", 2))
  end)

  it("finds 29 February in leap years only", function()
    assert.same({ "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z" },
      fires("0 0 29 2 *", "2026-01-01T00:00:00Z", 2))
    -- 2100 is not a leap year
    assert.same({ "2096-02-29T00:00:00Z", "2104-02-29T00:00:00Z" },
      fires("0 0 29 2 *", "2095-06-01T00:00:00Z", 2))
    -- 2000 is
    assert.same({ "2000-02-29T00:00:00Z" }, fires("0 0 29 2 *", "1997-01-01T00:00:00Z", 1))
  end)

  it("rolls over the year", function()
    assert.same({ "2027-01-01T00:00:00Z" }, fires("0 0 1 1 *", "2026-12-31T23:59:59Z", 1))
    assert.same({ "2026-12-31T23:59:00Z", "2027-12-31T23:59:00Z" },
      fires("59 23 31 12 *", "2026-06-01T00:00:00Z", 2))
    assert.same({ "2027-01-01T00:00:00Z", "2027-01-01T00:00:01Z" },
      fires("* * * * * *", "2026-12-31T23:59:59Z", 2))
    assert.same({ "2027-01-01T00:00:00Z" }, fires("* * * * *", "2026-12-31T23:59:00Z", 1))
  end)

  it("reads seconds in 6 fields", function()
    assert.same({ "2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z" },
      fires("*/20 * * * * *", "2026-01-01T00:00:00Z", 3))
    assert.same({ "2026-01-01T12:30:05Z", "2026-01-02T12:30:05Z" },
      fires("5 30 12 * * *", "2026-01-01T12:30:04Z", 2))
    assert.same({ "2026-01-01T00:00:07Z", "2026-01-01T00:00:14Z", "2026-01-01T00:00:56Z" },
      { fires("*/7 * * * * *", "2026-01-01T00:00:00Z", 8)[1],
        fires("*/7 * * * * *", "2026-01-01T00:00:00Z", 8)[2],
        fires("*/7 * * * * *", "2026-01-01T00:00:00Z", 8)[8] })
    assert.same({ "2026-01-01T00:01:00Z" }, fires("*/7 * * * * *", "2026-01-01T00:00:56Z", 1))
    -- a 5-field expression fires at second 0
    assert.same({ "2026-01-01T00:05:00Z" }, fires("5 * * * *", "2026-01-01T00:00:00Z", 1))
  end)

  it("works before 1970", function()
    assert.same({ "1970-01-01T00:00:00Z" }, fires("0 0 1 1 *", "1969-06-01T00:00:00Z", 1))
    assert.same({ "1969-12-31T23:30:00Z" }, fires("30 * * * *", "1969-12-31T23:00:00Z", 1))
  end)

  it("is UTC by default whatever the process's TZ", function()
    local saved = os.getenv("TZ")
    core.setenv("TZ", "Europe/Berlin")
    local ok, err = pcall(function()
      assert.same({ "2026-03-29T02:30:00Z" }, fires("30 2 * * *", "2026-03-29T00:00:00Z", 1))
      assert.same({ "2026-03-29T02:30:00Z" },
        fires("30 2 * * *", "2026-03-29T00:00:00Z", 1, "UTC"))
    end)
    core.setenv("TZ", saved)
    assert(ok, err)
  end)

  it("refuses an unknown tz and a non-integer t", function()
    local spec = spec_of("* * * * *")
    local t, err = cron.next(spec, 0, "Mars/Olympus_Mons")
    assert.is_nil(t)
    assert.matches("Mars/Olympus_Mons", err, 1, true)
    t, err = cron.next(spec, 0, 42)
    assert.is_nil(t)
    assert.matches("tz", err)
    t, err = cron.next(spec, 0.5)
    assert.is_nil(t)
    assert.is_string(err)
  end)

  it("agrees with a brute-force minute scan on random expressions", function()
    -- Sets are drawn at random, rendered as lists, and the spec scans minute
    -- by minute with os.date("!*t") for the reference answer.
    local rnd = 12345
    local function rand(n) rnd = (rnd * 1103515245 + 12345) % 2147483648; return rnd % n end
    local function draw(lo, hi, star_chance)
      if rand(100) < star_chance then return nil, "*" end
      local set, list = {}, {}
      for _ = 1, 1 + rand(4) do set[lo + rand(hi - lo + 1)] = true end
      for v = lo, hi do if set[v] then list[#list + 1] = tostring(v) end end
      return set, table.concat(list, ",")
    end
    for _ = 1, 60 do
      local mins, mt = draw(0, 59, 20)
      local hours, ht = draw(0, 23, 30)
      local doms, dt = draw(1, 28, 60)
      local mons, mot = draw(1, 12, 70)
      local dows, wt = draw(0, 6, 60)
      local expr = table.concat({ mt, ht, dt, mot, wt }, " ")
      local function day_matches(t)
        local f = os.date("!*t", t)
        if mons and not mons[f.month] then return false end
        local dm = not doms or doms[f.day]
        local dw = not dows or dows[f.wday - 1]
        if doms and dows then return dm or dw end
        return dm and dw
      end
      local function time_matches(t)
        local f = os.date("!*t", t)
        return (not mins or mins[f.min]) and (not hours or hours[f.hour])
      end
      local t = T("2026-01-01T00:00:00Z") + 60 * rand(525600)
      local got = cron.next(spec_of(expr), t)
      -- reference: first matching minute after t (t is on a minute),
      -- skipping whole days that do not match
      local want = t + 60
      while not (day_matches(want) and time_matches(want)) do
        if day_matches(want) then want = want + 60
        else want = want - want % 86400 + 86400 end
      end
      assert.equal(iso(want), iso(got), expr .. " after " .. iso(t))
    end
  end)

  it("is fast enough for a thousand jobs", function()
    local specs = { spec_of("*/5 * * * * *"), spec_of("0 0 29 2 *"), spec_of("0 0 13 * 5") }
    local t0 = os.clock()
    for i = 1, 3000 do
      local spec = specs[i % 3 + 1]
      assert(cron.next(spec, 1767225600 + i * 7919))
    end
    assert.is_true(os.clock() - t0 < 1, "3000 next() took " .. (os.clock() - t0) .. "s")
  end)
end)

describe("Vixie's day rule", function()
  -- A day field whose text starts with `*` counts as unrestricted, whatever
  -- follows: the sets are then ANDed, not ORed.
  local function days(expr, from, n)
    local out = {}
    for i, s in ipairs(fires(expr, from, n)) do out[i] = s:sub(1, 10) end
    return out
  end

  it("reads */N in day-of-month alone as a plain set", function()
    -- 2026-03-01 is a Sunday; odd days only, whatever the weekday
    assert.same({ "2026-03-01", "2026-03-03", "2026-03-05", "2026-03-07" },
      days("32 19 */2 * *", "2026-03-01T00:00:00Z", 4))
    assert.same({ "2026-03-29", "2026-03-31", "2026-04-01" },
      days("32 19 */2 * *", "2026-03-28T00:00:00Z", 3))
    assert.same({ "2026-03-01", "2026-03-11", "2026-03-21", "2026-03-31", "2026-04-01" },
      days("0 0 */10 * *", "2026-02-28T12:00:00Z", 5))
  end)

  it("reads */N in day-of-week alone as a plain set", function()
    -- Sunday, Tuesday, Thursday, Saturday
    assert.same({ "2026-03-01", "2026-03-03", "2026-03-05", "2026-03-07", "2026-03-08" },
      days("0 0 * * */2", "2026-02-28T12:00:00Z", 5))
    -- */7 over 0-6 is Sunday alone
    assert.same({ "2026-03-01", "2026-03-08" }, days("0 0 * * */7", "2026-02-28T12:00:00Z", 2))
  end)

  it("fires 32 19 */2 * */1 on odd days only", function()
    assert.same(utc { "2026-03-01T19:32:00Z", "2026-03-03T19:32:00Z", "2026-03-05T19:32:00Z" },
      fires("32 19 */2 * */1", "2026-03-01T00:00:00Z", 3))
    -- the 31st, then the 1st: a month's odd days, not every other day
    assert.same({ "2026-03-31", "2026-04-01", "2026-04-03" },
      days("32 19 */2 * */1", "2026-03-30T00:00:00Z", 3))
  end)

  it("fires * 12-15 */1 * 0 on Sundays only", function()
    assert.same(utc { "2026-03-01T12:00:00Z", "2026-03-01T12:01:00Z" },
      fires("* 12-15 */1 * 0", "2026-02-28T00:00:00Z", 2))
    assert.same(utc { "2026-03-08T12:00:00Z" }, fires("* 12-15 */1 * 0", "2026-03-01T15:59:00Z", 1))
  end)

  it("ANDs */N in both day fields", function()
    -- odd days that are Sunday, Wednesday or Saturday
    assert.same({ "2026-03-01", "2026-03-07", "2026-03-11", "2026-03-15", "2026-03-21" },
      days("0 0 */2 * */3", "2026-02-28T12:00:00Z", 5))
    assert.same({ "2026-03-01", "2026-03-02" }, days("0 0 */1 * */1", "2026-02-28T12:00:00Z", 2))
  end)

  it("looks only at the first character of the field", function()
    -- "*,5" starts with *: unrestricted, so Mondays only
    assert.same({ "2026-03-02", "2026-03-09" }, days("0 0 *,5 * 1", "2026-03-01T00:00:00Z", 2))
    -- "5,*" and "1-31" do not: ORed with Monday, so every day
    assert.same({ "2026-03-03", "2026-03-04" }, days("0 0 5,* * 1", "2026-03-02T00:00:00Z", 2))
    assert.same({ "2026-03-03", "2026-03-04" }, days("0 0 1-31 * 1", "2026-03-02T00:00:00Z", 2))
    -- day-of-week "0-7" is not *: ORed with the 13th
    assert.same({ "2026-03-03", "2026-03-04" }, days("0 0 13 * 0-7", "2026-03-02T00:00:00Z", 2))
  end)

  it("refuses a */N day-of-week ANDed with a day no allowed month has", function()
    refused("0 0 31 4 */2", "never fires")
    refused("0 0 30 2 */1", "never fires")
    assert.same({ "2032-02-29" }, days("0 0 29 2 */7", "2026-01-01T00:00:00Z", 1))
  end)

  it("shows the rule in describe", function()
    assert.equal("sec 0 min 0 hour 0 dom 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31 mon * dow *",
      cron.describe(spec_of("0 0 */2 * */1")))
  end)

  -- The oracle: a cron written from Vixie cron's documented semantics
  -- (crontab(5) and its entry.c/cron.c), sharing nothing with leash.cron:
  -- each field a set of bits (day-of-week 0-7, 0 and 7 both Sunday),
  -- DOM_STAR and DOW_STAR from the field's first character, and a time
  -- matches when minute, hour and month match and the days match by
  -- (DOM_STAR or DOW_STAR) ? dom and dow : dom or dow.  Its next fire is a
  -- brute-force walk, day by day and then minute by minute.
  local VIXIE = {
    { lo = 0, hi = 59 }, { lo = 0, hi = 23 }, { lo = 1, hi = 31 },
    { lo = 1, hi = 12, names = { "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug",
                                 "sep", "oct", "nov", "dec" }, base = 1 },
    { lo = 0, hi = 7, names = { "sun", "mon", "tue", "wed", "thu", "fri", "sat" }, base = 0 },
  }

  local function vixie_number(f, s)
    local n = tonumber(s)
    if n then return n end
    for i, name in ipairs(f.names) do
      if name == s:lower() then return i - 1 + f.base end
    end
    error("oracle: bad number " .. s)
  end

  local function vixie_field(f, text)
    local bits = {}
    for item in text:gmatch("[^,]+") do
      local range, step = item:match("^([^/]+)/(%d+)$")
      range, step = range or item, tonumber(step) or 1
      local a, b
      if range == "*" then
        a, b = f.lo, f.hi
      elseif range:find("-", 1, true) then
        local x, y = range:match("^(%w+)-(%w+)$")
        a, b = vixie_number(f, x), vixie_number(f, y)
      else
        a = vixie_number(f, range)
        b = a
      end
      for v = a, b, step do bits[v] = true end
    end
    return bits
  end

  local function vixie_entry(expr)
    local words = {}
    for w in expr:gmatch("%S+") do words[#words + 1] = w end
    local e = {}
    for i, f in ipairs(VIXIE) do e[i] = vixie_field(f, words[i]) end
    if e[5][0] or e[5][7] then e[5][0], e[5][7] = true, true end
    e.dom_star = words[3]:sub(1, 1) == "*"
    e.dow_star = words[5]:sub(1, 1) == "*"
    return e
  end

  local function vixie_day(e, day)
    local f = os.date("!*t", day * 86400)
    if not e[4][f.month] then return false end
    local dom, dow = e[3][f.day] == true, e[5][f.wday - 1] == true
    if e.dom_star or e.dow_star then return dom and dow end
    return dom or dow
  end

  -- The first matching minute strictly after t (a whole minute), within
  -- `years` years, or nil.
  local function vixie_next(e, t, years)
    local day = t // 86400
    local from = t % 86400 // 60 + 1
    for _ = 0, years * 366 do
      if vixie_day(e, day) then
        for m = from, 1439 do
          if e[2][m // 60] and e[1][m % 60] then return day * 86400 + m * 60 end
        end
      end
      day, from = day + 1, 0
    end
    return nil
  end

  -- Random expressions in Vixie's syntax: *, */N, N, a-b, a-b/N, names in
  -- any case, lists of them, 7 as Sunday; day fields are often `*`-led.
  local rnd = 20260314
  local function rand(n) rnd = (rnd * 1103515245 + 12345) % 2147483648; return rnd // 65536 % n end
  local function number(f, v)
    if f.names and v - f.base < #f.names and rand(4) == 0 then
      local name = f.names[v - f.base + 1]
      if rand(2) == 0 then name = name:upper() end
      return name
    end
    return tostring(v)
  end
  local function gen_item(f, span)
    local k = rand(10)
    if k <= 1 then return "*" end
    if k <= 3 then return "*/" .. (1 + rand(span)) end
    local a = f.lo + rand(f.hi - f.lo + 1)
    if k <= 5 then return number(f, a) end
    local b = a + rand(f.hi - a + 1)
    local r = number(f, a) .. "-" .. number(f, b)
    if k <= 7 then return r end
    return r .. "/" .. (1 + rand(span))
  end
  local SPANS = { 60, 24, 31, 12, 7 }
  local function gen_field(i)
    local f = VIXIE[i]
    local star = ({ 15, 25, 40, 60, 40 })[i]
    if rand(100) < star then return "*" end
    local items = {}
    for j = 1, 1 + (rand(3) == 0 and rand(3) or 0) do items[j] = gen_item(f, SPANS[i]) end
    return table.concat(items, ",")
  end

  it("agrees with an independent Vixie cron on random expressions", function()
    local N, compared, refused_n = 3000, 0, 0
    local t0 = os.clock()
    for _ = 1, N do
      local words = {}
      for i = 1, 5 do words[i] = gen_field(i) end
      local expr = table.concat(words, " ")
      local e = vixie_entry(expr)
      local spec, err = cron.parse(expr)
      local t = T("2000-01-01T00:00:00Z") + 60 * rand(100 * 525960)
      if not spec then
        -- leash refuses only what Vixie cron would never run
        assert.matches("never fires", err, 1, true)
        assert.is_nil(vixie_next(e, t, 8), expr)
        refused_n = refused_n + 1
      else
        for _ = 1, 3 do
          local got = assert(cron.next(spec, t))
          local want = vixie_next(e, t, 30)
          if want or got - t < 30 * 365 * 86400 then
            assert.equal(iso(want), iso(got), ("%q after %s"):format(expr, iso(t)))
          end
          t = got
        end
        compared = compared + 1
      end
    end
    assert.is_true(compared > N * 0.9, "only " .. compared .. " compared")
    assert.is_true(refused_n < N * 0.1)
    assert.is_true(os.clock() - t0 < 10, "the oracle took " .. (os.clock() - t0) .. "s")
  end)
end)

describe("leash.cron.every_next", function()
  it("returns the next multiple of the interval since the epoch", function()
    assert.equal(1000, cron.every_next(1000, 0))
    assert.equal(1000, cron.every_next(1000, 999))
    assert.equal(2000, cron.every_next(1000, 1000))
    assert.equal(0, cron.every_next(1000, -1))
    assert.equal(7000, cron.every_next(7000, 6999))
    assert.equal(14000, cron.every_next(7000, 7000))
  end)

  it("aligns to the epoch, not to t", function()
    local t = T("2026-01-01T00:00:12Z") * 1000 + 345
    assert.equal(T("2026-01-01T00:00:30Z") * 1000, cron.every_next(30000, t))
    assert.equal(T("2026-01-01T00:05:00Z") * 1000, cron.every_next(300000, t))
    assert.equal(T("2026-01-02T00:00:00Z") * 1000, cron.every_next(86400000, t))
    assert.equal(T("2026-01-01T00:00:12Z") * 1000 + 500, cron.every_next(500, t))
    -- 7s does not divide a minute: multiples of 7000 ms since 1970
    local at = cron.every_next(7000, t)
    assert.equal(0, at % 7000)
    assert.is_true(at > t and at - t <= 7000)
    -- two replicas asking at different moments of one period agree
    assert.equal(cron.every_next(60000, t), cron.every_next(60000, t + 17000))
  end)

  it("returns integers and refuses bad arguments", function()
    assert.equal("integer", math.type(cron.every_next(1000, 1500)))
    assert.is_nil(cron.every_next(0, 1))
    assert.is_nil(cron.every_next(-1000, 1))
    assert.is_nil(cron.every_next(1000.5, 1))
    assert.is_nil(cron.every_next(1000, 1.5))
    assert.is_nil(cron.every_next("1s", 1))
  end)
end)

-- The DST specs run twice: with tz = "local" and the process's TZ set to
-- the zone, and with the zone named in tz while the process's TZ is a zone
-- on the other side of the world (its own daylight saving included).
for _, mode in ipairs { "local", "named" } do
describe("leash.cron.next with tz " .. mode, function()
  local saved = os.getenv("TZ")
  local tz_of = "local"
  local function zone(name)
    if mode == "local" then
      core.setenv("TZ", name)
    else
      core.setenv("TZ", name:find("^America") and "Australia/Sydney" or "America/Santiago")
      tz_of = name
    end
  end
  after_each(function() core.setenv("TZ", saved) end)
  teardown(function() core.setenv("TZ", saved) end)
  local real_fires = fires
  local function fires(expr, from, n, tz)     -- luacheck: ignore 431
    return real_fires(expr, from, n, tz == "local" and tz_of or tz)
  end

  describe("Europe/Berlin", function()
    before_each(function() zone("Europe/Berlin") end)

    it("uses the local offset on normal days", function()
      assert.same(utc { "2026-01-15T12:00:00+01:00", "2026-01-16T12:00:00+01:00" },
        fires("0 12 * * *", "2026-01-15T00:00:00Z", 2, "local"))
      assert.same(utc { "2026-06-15T02:30:00+02:00" },
        fires("30 2 * * *", "2026-06-14T12:00:00Z", 1, "local"))
    end)

    it("fires a time in the spring-forward gap once, when the gap ends", function()
      -- 2026-03-29 02:00 CET jumps to 03:00 CEST (01:00Z)
      assert.same(utc { "2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00",
                        "2026-03-30T02:30:00+02:00" },
        fires("30 2 * * *", "2026-03-27T12:00:00Z", 3, "local"))
      assert.same({ "2026-03-29T01:00:00Z" },
        fires("30 2 * * *", "2026-03-29T00:59:59Z", 1, "local"))
    end)

    it("fires an every-minute cron once for the whole gap", function()
      assert.same(utc { "2026-03-29T01:59:00+01:00", "2026-03-29T03:00:00+02:00",
                        "2026-03-29T03:01:00+02:00", "2026-03-29T03:02:00+02:00" },
        fires("* * * * *", "2026-03-29T01:58:00+01:00", 4, "local"))
    end)

    it("fires an hourly cron once across the gap", function()
      assert.same(utc { "2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00",
                        "2026-03-29T04:00:00+02:00" },
        fires("0 * * * *", "2026-03-29T00:30:00+01:00", 3, "local"))
      -- 02:00 (in the gap) and 03:00 both land on 03:00 CEST: one fire
      assert.same(utc { "2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00" },
        fires("0 2,3 * * *", "2026-03-29T00:00:00Z", 2, "local"))
    end)

    it("fires a seconds cron in the gap once", function()
      -- every 30 s from 02:00:00 to 02:59:30, none of which exists that day
      assert.same(utc { "2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00",
                        "2026-03-30T02:00:30+02:00" },
        fires("*/30 * 2 * * *", "2026-03-29T01:58:00+01:00", 3, "local"))
    end)

    it("fires a time in the repeated hour once, at its first occurrence", function()
      -- 2026-10-25 03:00 CEST goes back to 02:00 CET (01:00Z)
      assert.same(utc { "2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00",
                        "2026-10-26T02:30:00+01:00" },
        fires("30 2 * * *", "2026-10-23T12:00:00Z", 3, "local"))
      -- asked from inside the second 02:xx, it has already fired
      assert.same(utc { "2026-10-26T02:30:00+01:00" },
        fires("30 2 * * *", "2026-10-25T02:10:00+01:00", 1, "local"))
    end)

    it("runs a minute-level cron through the repeated hour once", function()
      assert.same(utc { "2026-10-25T02:00:00+02:00", "2026-10-25T02:15:00+02:00",
                        "2026-10-25T02:30:00+02:00", "2026-10-25T02:45:00+02:00",
                        "2026-10-25T03:00:00+01:00", "2026-10-25T03:15:00+01:00" },
        fires("*/15 * * * *", "2026-10-25T01:50:00+02:00", 6, "local"))
      assert.same(utc { "2026-10-25T03:00:00+01:00" },
        fires("*/15 * * * *", "2026-10-25T02:05:00+01:00", 1, "local"))
    end)

    it("runs an hourly cron through the repeated hour once", function()
      assert.same(utc { "2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00",
                        "2026-10-25T03:00:00+01:00", "2026-10-25T04:00:00+01:00" },
        fires("0 * * * *", "2026-10-25T00:30:00+02:00", 4, "local"))
    end)

    it("runs a seconds cron through the repeated hour once", function()
      assert.same(utc { "2026-10-25T02:59:00+02:00", "2026-10-25T02:59:20+02:00",
                        "2026-10-25T02:59:40+02:00", "2026-10-26T02:59:00+01:00" },
        fires("*/20 59 2 * * *", "2026-10-25T02:58:00+02:00", 4, "local"))
      assert.same(utc { "2026-10-25T03:00:00+01:00", "2026-10-25T03:00:01+01:00" },
        fires("* * * * * *", "2026-10-25T02:59:59+02:00", 2, "local"))
      -- asked from inside the second 02:xx, every second of it already fired
      assert.same(utc { "2026-10-25T03:00:00+01:00" },
        fires("* * * * * *", "2026-10-25T02:00:30+01:00", 1, "local"))
      assert.same(utc { "2026-10-25T03:00:00+01:00" },
        fires("* * * * * *", "2026-10-25T02:00:00+01:00", 1, "local"))
    end)
  end)

  describe("America/New_York", function()
    before_each(function() zone("America/New_York") end)

    it("uses the local offset on normal days", function()
      assert.same(utc { "2026-07-01T09:00:00-04:00", "2026-07-02T09:00:00-04:00" },
        fires("0 9 * * *", "2026-07-01T00:00:00Z", 2, "local"))
      assert.same(utc { "2026-01-15T09:00:00-05:00" },
        fires("0 9 * * *", "2026-01-15T00:00:00Z", 1, "local"))
    end)

    it("fires a time in the spring-forward gap once, when the gap ends", function()
      -- 2026-03-08 02:00 EST jumps to 03:00 EDT (07:00Z)
      assert.same(utc { "2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00",
                        "2026-03-09T02:30:00-04:00" },
        fires("30 2 * * *", "2026-03-06T12:00:00Z", 3, "local"))
      assert.same(utc { "2026-03-08T01:59:00-05:00", "2026-03-08T03:00:00-04:00",
                        "2026-03-08T03:01:00-04:00" },
        fires("* * * * *", "2026-03-08T01:58:00-05:00", 3, "local"))
      assert.same(utc { "2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00",
                        "2026-03-08T04:00:00-04:00" },
        fires("0 * * * *", "2026-03-08T00:30:00-05:00", 3, "local"))
    end)

    it("fires the repeated hour once, at its first occurrence", function()
      -- 2026-11-01 02:00 EDT goes back to 01:00 EST (06:00Z)
      assert.same(utc { "2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00",
                        "2026-11-02T01:30:00-05:00" },
        fires("30 1 * * *", "2026-10-30T12:00:00Z", 3, "local"))
      assert.same(utc { "2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00",
                        "2026-11-01T03:00:00-05:00" },
        fires("0 * * * *", "2026-11-01T00:30:00-04:00", 3, "local"))
      assert.same(utc { "2026-11-01T01:00:00-04:00", "2026-11-01T01:15:00-04:00",
                        "2026-11-01T01:30:00-04:00", "2026-11-01T01:45:00-04:00",
                        "2026-11-01T02:00:00-05:00" },
        fires("*/15 * * * *", "2026-11-01T00:50:00-04:00", 5, "local"))
      assert.same(utc { "2026-11-01T02:00:00-05:00" },
        fires("*/15 * * * *", "2026-11-01T01:20:00-05:00", 1, "local"))
      assert.same(utc { "2026-11-01T01:59:00-04:00", "2026-11-01T01:59:30-04:00",
                        "2026-11-02T01:59:00-05:00" },
        fires("*/30 59 1 * * *", "2026-11-01T01:58:00-04:00", 3, "local"))
    end)
  end)

  it("gives UTC results that do not depend on TZ", function()
    zone("America/New_York")
    assert.same({ "2026-11-01T01:30:00Z" }, fires("30 1 * * *", "2026-11-01T00:00:00Z", 1))
  end)
end)
end

describe("leash.cron.next in IANA zones", function()
  local saved = os.getenv("TZ")
  after_each(function() core.setenv("TZ", saved) end)

  it("reads Lord Howe's 30-minute daylight saving", function()
    -- +10:30, +11:00 from the first Sunday of October (02:00 -> 02:30)
    -- to the first Sunday of April (02:00 -> 01:30)
    local z = "Australia/Lord_Howe"
    assert.same(utc { "2026-07-15T12:00:00+10:30", "2026-12-15T12:00:00+11:00" },
      { fires("0 12 15 * *", "2026-07-01T00:00:00Z", 1, z)[1],
        fires("0 12 15 * *", "2026-12-01T00:00:00Z", 1, z)[1] })
    assert.same(utc { "2026-10-03T02:15:00+10:30", "2026-10-04T02:30:00+11:00",
                      "2026-10-05T02:15:00+11:00" },
      fires("15 2 * * *", "2026-10-02T12:00:00Z", 3, z))
    assert.same(utc { "2026-10-04T01:59:00+10:30", "2026-10-04T02:30:00+11:00",
                      "2026-10-04T02:31:00+11:00" },
      fires("* * * * *", "2026-10-04T01:58:00+10:30", 3, z))
    -- the half hour 01:30-01:59 happens twice on 5 April 2026: once
    assert.same(utc { "2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30" },
      fires("45 1 * * *", "2026-04-04T12:00:00Z", 2, z))
    assert.same(utc { "2026-04-05T01:50:00+11:00", "2026-04-05T02:00:00+10:30" },
      fires("*/10 * * * *", "2026-04-05T01:45:00+11:00", 2, z))
  end)

  it("reads Chatham's +12:45 and its 02:45 change", function()
    local z = "Pacific/Chatham"
    assert.same(utc { "2026-01-15T12:00:00+13:45" }, fires("0 12 * * *", "2026-01-15T00:00:00+13:45", 1, z))
    assert.same(utc { "2026-07-15T12:00:00+12:45" }, fires("0 12 * * *", "2026-07-15T00:00:00+12:45", 1, z))
    -- last Sunday of September: 02:45 +12:45 -> 03:45 +13:45
    assert.same(utc { "2026-09-26T03:00:00+12:45", "2026-09-27T03:45:00+13:45",
                      "2026-09-28T03:00:00+13:45" },
      fires("0 3 * * *", "2026-09-25T12:00:00Z", 3, z))
    -- first Sunday of April: 03:45 +13:45 -> 02:45 +12:45
    assert.same(utc { "2026-04-05T03:00:00+13:45", "2026-04-06T03:00:00+12:45" },
      fires("0 3 * * *", "2026-04-04T12:00:00Z", 2, z))
  end)

  it("follows zones whose offset changed by law", function()
    -- Moscow: +03/+04 with DST until March 2011, then +04 all year (no
    -- fall-back in October 2011), then +03 from 26 October 2014 02:00
    local z = "Europe/Moscow"
    assert.same(utc { "2011-01-15T12:00:00+03:00" }, fires("0 12 15 * *", "2011-01-01T00:00:00Z", 1, z))
    assert.same(utc { "2011-11-15T12:00:00+04:00" }, fires("0 12 15 * *", "2011-11-01T00:00:00Z", 1, z))
    assert.same(utc { "2013-01-15T12:00:00+04:00" }, fires("0 12 15 * *", "2013-01-01T00:00:00Z", 1, z))
    assert.same(utc { "2014-10-26T01:30:00+04:00", "2014-10-27T01:30:00+03:00" },
      fires("30 1 * * *", "2014-10-25T12:00:00Z", 2, z))
    assert.same(utc { "2026-07-15T12:00:00+03:00" }, fires("0 12 15 * *", "2026-07-01T00:00:00Z", 1, z))
    -- Samoa skipped 30 December 2011 (-10 -> +14): noon that day fires
    -- once, at the first second after the gap
    assert.same(utc { "2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00",
                      "2011-12-31T12:00:00+14:00" },
      fires("0 12 * * *", "2011-12-29T00:00:00-10:00", 3, "Pacific/Apia"))
  end)

  it("uses the footer's rule past the file's last transition", function()
    local z = "Europe/Berlin"
    assert.same(utc { "2100-01-15T12:00:00+01:00" }, fires("0 12 15 1 *", "2099-12-01T00:00:00Z", 1, z))
    assert.same(utc { "2100-07-15T12:00:00+02:00" }, fires("0 12 15 7 *", "2100-01-01T00:00:00Z", 1, z))
    assert.same(utc { "2099-03-28T02:30:00+01:00", "2099-03-29T03:00:00+02:00" },
      fires("30 2 * * *", "2099-03-27T12:00:00Z", 2, z))
    assert.same(utc { "2300-11-04T01:30:00-04:00", "2300-11-05T01:30:00-05:00" },
      fires("30 1 * * *", "2300-11-03T12:00:00Z", 2, "America/New_York"))
  end)

  it("gives the same fires whatever the process's TZ", function()
    local exprs = { "30 2 * * *", "*/15 * * * *", "0 * * * *", "* * * * *", "*/20 59 2 * * *" }
    local ref
    for _, tz in ipairs { "UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata",
                          "Australia/Lord_Howe", "" } do
      core.setenv("TZ", tz ~= "" and tz or nil)
      local got = {}
      for _, e in ipairs(exprs) do
        for _, from in ipairs { "2026-03-29T00:50:00Z", "2026-10-25T00:10:00Z" } do
          got[#got + 1] = table.concat(fires(e, from, 5, "Europe/Berlin"), " ")
        end
      end
      if ref then assert.same(ref, got, "with TZ=" .. tz) else ref = got end
    end
  end)

  it("agrees with tz = \"local\" through the C library on random schedules", function()
    -- glibc reads the same TZif files on its own: a zone named in tz and the
    -- process's TZ set to it must give the same fires, gaps and folds too.
    local rnd = 99
    local function rand(n) rnd = (rnd * 1103515245 + 12345) % 2147483648; return rnd // 65536 % n end
    local exprs = { "30 2 * * *", "*/15 * * * *", "0 * * * *", "* * * * *", "*/20 59 2 * * *",
                    "45 1 * * *", "0 3 * * sun", "*/7 1-3 * * *", "0 0 1 * *" }
    for _, z in ipairs { "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
                         "Pacific/Chatham", "Europe/Moscow", "America/Sao_Paulo", "Asia/Tehran" } do
      for _ = 1, 40 do
        local e = exprs[1 + rand(#exprs)]
        local spec = spec_of(e)
        -- near a change often: the spec walks from a random time in 1990-2040
        local t = T("1990-01-01T00:00:00Z") + 60 * rand(50 * 525960)
        local named, loc = {}, {}
        core.setenv("TZ", "UTC")
        local u = t
        for i = 1, 4 do u = assert(cron.next(spec, u, z)); named[i] = iso(u) end
        core.setenv("TZ", z)
        u = t
        for i = 1, 4 do u = assert(cron.next(spec, u, "local")); loc[i] = iso(u) end
        assert.same(loc, named, ("%s %q after %s"):format(z, e, iso(t)))
      end
    end
  end)

  it("notes a fire that a gap moved", function()
    local spec = spec_of("30 2 * * *")
    assert.equal("02:30 Europe/Berlin does not exist: fires at 03:00",
      cron.note(spec, T("2027-03-28T01:00:00Z"), "Europe/Berlin"))
    assert.is_nil(cron.note(spec, T("2027-03-29T00:30:00Z"), "Europe/Berlin"))
    -- a fold is not a move: the first 02:30 is the fire
    assert.is_nil(cron.note(spec, T("2026-10-25T00:30:00Z"), "Europe/Berlin"))
    assert.is_nil(cron.note(spec, T("2027-03-28T02:30:00Z"), "UTC"))
    assert.equal("02:15 Australia/Lord_Howe does not exist: fires at 02:30",
      cron.note(spec_of("15 2 * * *"), T("2026-10-04T02:30:00+11:00"), "Australia/Lord_Howe"))
    assert.equal("02:00:30 Europe/Berlin does not exist: fires at 03:00:00",
      cron.note(spec_of("30 * 2 * * *"), T("2026-03-29T01:00:00Z"), "Europe/Berlin"))
  end)
end)
