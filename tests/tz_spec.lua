local tz = require "leash.tz"
local core = require "leash.core"

local ZONEINFO = "/usr/share/zoneinfo"

local L = require "e2e"

local function slurp(path)
  local s = L.read(path)
  assert(s ~= "", path .. " is missing or empty")
  return s
end

-- The process's TZ offset at t, through the C library: the reference.
local function libc_offset(t)
  local lt = os.date("*t", t)
  local d = os.date("!*t", t)
  lt.isdst, d.isdst = false, false
  return os.time(lt) - os.time(d)
end

local rnd = 4242
local function rand(n) rnd = (rnd * 1103515245 + 12345) % 2147483648; return rnd // 65536 % n end

describe("leash.tz", function()
  local saved_tz, saved_dir = os.getenv("TZ"), os.getenv("TZDIR")
  after_each(function()
    core.setenv("TZ", saved_tz)
    core.setenv("TZDIR", saved_dir)
  end)

  it("reads every zone of the system as the C library does", function()
    local names = {}
    for line in io.lines(ZONEINFO .. "/tzdata.zi") do
      local n = line:match("^Z (%S+)") or line:match("^L %S+ (%S+)")
      if n then names[#names + 1] = n end
    end
    assert.is_true(#names > 300)
    for _, name in ipairs(names) do
      local z = assert(tz.get(name))
      core.setenv("TZ", name)
      for _ = 1, 20 do
        -- 1900 to 2150: the file's transitions and its footer's rule
        local t = -2208988800 + rand(1 << 15) * (1 << 15) * 7 + rand(1 << 15)
        assert.equal(libc_offset(t), z.offset(t), ("%s at %s"):format(name, os.date("!%c", t)))
      end
    end
  end)

  it("reads a version 1 file (32-bit times, no footer)", function()
    local data = slurp(ZONEINFO .. "/Europe/Berlin")
    local v1 = data:sub(1, 4) .. "\0" .. data:sub(6)
    local z = assert(tz.parse(v1))
    core.setenv("TZ", "Europe/Berlin")
    for _, t in ipairs { 0, 1000000000, 1774746000, 1792890000, 2000000000 } do
      assert.equal(libc_offset(t), z.offset(t))
    end
  end)

  it("reads POSIX TZ footers", function()
    local r = assert(tz._parse_posix("CET-1CEST,M3.5.0,M10.5.0/3"))
    assert.same({ 3600, 7200, 7200, 10800 }, { r.std, r.dst, r.start.time, r.stop.time })
    r = assert(tz._parse_posix("<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45"))
    assert.same({ 45900, 49500, 9900 }, { r.std, r.dst, r.start.time })
    r = assert(tz._parse_posix("<-03>3<-02>,M3.5.0/-2,M10.5.0/-1"))
    assert.same({ -10800, -7200, -7200 }, { r.std, r.dst, r.start.time })
    assert(tz._parse_posix("EST5EDT,M3.2.0,M11.1.0"))
    assert(tz._parse_posix("<+0545>-5:45"))
    assert(tz._parse_posix("XXX3EDT4,0/0,J365/25"))
    for _, bad in ipairs { "", "C-1", "CET", "CET-1CEST", "CET-1CEST,M3.5.0", "CET-1CEST,M13.5.0,M10.5.0",
                           "CET-1CEST,M3.6.0,M10.5.0", "CET-1CEST,J0,J365", "CET-1CEST,M3.5.0,M10.5.0/200",
                           "<+01-1", "CET-99", "CET-1CEST,M3.5.0,M10.5.0x" } do
      assert.is_nil(tz._parse_posix(bad), bad)
    end
  end)

  it("keeps daylight saving all year with the J365/25 rule", function()
    local r = assert(tz._parse_posix("<-03>3<-02>,0/0,J365/25"))
    assert(r)
    local data = slurp(ZONEINFO .. "/UTC")
    -- a file with no transitions and that footer
    data = data:gsub("\nUTC0\n$", "\n<-03>3<-02>,0/0,J365/25\n")
    local z = assert(tz.parse(data))
    for _, t in ipairs { 0, 1767225600, 1767225600 - 1, 1782864000, 4102444800 } do
      assert.equal(-7200, z.offset(t))
    end
  end)

  it("refuses every truncation of a real file with a reason", function()
    for _, name in ipairs { "Europe/Berlin", "Australia/Lord_Howe", "UTC" } do
      local data = slurp(ZONEINFO .. "/" .. name)
      assert(tz.parse(data))
      for n = 0, #data - 1 do
        local z, err = tz.parse(data:sub(1, n))
        assert.is_nil(z, name .. " cut at " .. n)
        assert.is_string(err)
      end
    end
  end)

  it("never raises on damaged or random bytes (fuzz)", function()
    local data = slurp(ZONEINFO .. "/America/New_York")
    local seeds = { data, slurp(ZONEINFO .. "/Pacific/Chatham"), slurp(ZONEINFO .. "/UTC") }
    local parsed, refused = 0, 0
    for i = 1, 4000 do
      local s = seeds[1 + i % #seeds]
      local bytes = {}
      for j = 1, #s do bytes[j] = s:byte(j) end
      for _ = 1, 1 + rand(8) do
        local k = rand(4)
        local at = 1 + rand(#bytes)
        if k == 0 then bytes[at] = rand(256)
        elseif k == 1 then bytes[at] = bytes[at] ~ (1 << rand(8))
        elseif k == 2 then table.remove(bytes, at)
        else table.insert(bytes, at, rand(256)) end
      end
      -- often in the header and the footer, where the counts and rules are
      if i % 3 == 0 then bytes[20 + rand(25)] = rand(256) end
      local mutated = string.char(table.unpack(bytes))
      local ok, z, err = pcall(tz.parse, mutated)
      assert(ok, z)
      if z then
        parsed = parsed + 1
        for _ = 1, 8 do
          local t = rand(1 << 30) * (rand(2) == 0 and 1 or -8) + rand(1 << 30) * 4
          local ok2, off = pcall(z.offset, t)
          assert(ok2, off)
          assert.equal("integer", math.type(off))
          assert.is_true(math.abs(off) <= 26 * 3600)
        end
      else
        refused = refused + 1
        assert.is_string(err)
      end
    end
    assert.is_true(parsed > 100 and refused > 100, parsed .. " parsed, " .. refused .. " refused")
    for _ = 1, 500 do
      local b = {}
      for j = 1, rand(200) do b[j] = string.char(rand(256)) end
      local s = (rand(2) == 0 and "TZif2" or "") .. table.concat(b)
      local ok, z = pcall(tz.parse, s)
      assert(ok, z)
    end
  end)

  it("names the zone and the reason for a zone it cannot use", function()
    local z, err = tz.get("Mars/Olympus_Mons")
    assert.is_nil(z)
    assert.matches('"Mars/Olympus_Mons" is not a time zone in ' .. ZONEINFO, err, 1, true)
    for _, bad in ipairs { "../../etc/passwd", "/etc/passwd", "Europe/../Europe/Berlin", "",
                           "Europe//Berlin", "Europe/Berlin/", ("A"):rep(200), "Europe/Ber lin" } do
      z, err = tz.get(bad)
      assert.is_nil(z, bad)
      assert.matches("not a time zone name", err, 1, true)
    end
    z, err = tz.get("Europe")
    assert.is_nil(z)
    assert.matches('"Europe" is not a time zone', err, 1, true)
  end)

  it("refuses truncated and garbage files with a message naming the zone", function()
    local dir = os.getenv("LEASH_TEST_TMP") .. "/zoneinfo"
    os.execute("mkdir -p " .. dir .. "/Bad")
    local data = slurp(ZONEINFO .. "/Europe/Berlin")
    local function put(name, s) L.write(dir .. "/" .. name, s) end
    put("Bad/Truncated", data:sub(1, 300))
    put("Bad/Garbage", ("\0\255garbage"):rep(50))
    put("Bad/Empty", "")
    put("Bad/Good", data)
    core.setenv("TZDIR", dir)
    for _, name in ipairs { "Bad/Truncated", "Bad/Garbage", "Bad/Empty" } do
      local z, err = tz.get(name)
      assert.is_nil(z, name)
      assert.matches(('time zone "%s": %s/%s is not a usable TZif file: '):format(name, dir, name),
        err, 1, true)
    end
    assert(tz.get("Bad/Good"))
    local ok, err = pcall(function()
      return require("leash.cron").next(require("leash.cron").parse("* * * * *"), 0, "Bad/Garbage")
    end)
    assert.is_true(ok)
    assert.is_nil(err)
  end)
end)
