-- Job files: leash.job directly, then `leash check` over a directory with
-- one file of each bad kind (golden output) and `--next`.
local L = require "e2e"
local job = require "leash.job"

local ROOT = os.getenv("LEASH_ROOT") or "."

-- One file of each bad kind the foundation issue lists, plus two good jobs.
local FILES = {
  ["syntax.lua"] = 'return {\n  every = "1s",\n  run = function(ctx) end\n',
  ["raises.lua"] = 'local x = 1\nerror("boom at load")\n',
  ["number.lua"] = "return 42\n",
  ["nothing.lua"] = "local x = 1\n",
  ["unknown.lua"] = 'return {\n  every = "1s",\n  colour = "red",\n  run = function() end,\n}\n',
  ["badcron.lua"] = 'return {\n  cron = "61 * * * *",\n  run = function() end,\n}\n',
  ["baddur.lua"] = 'return {\n  every = "3x",\n  run = function() end,\n}\n',
  ["negdur.lua"] = 'return {\n  every = "1s",\n  timeout = "-5s",\n  run = function() end,\n}\n',
  ["heavy.lua"] = 'return {\n  every = "1s",\n  weight = 0,\n  run = function() end,\n}\n',
  ["notfn.lua"] = 'return {\n  every = "1s",\n  run = "echo hi",\n}\n',
  ["norun.lua"] = 'return {\n  every = "1s",\n}\n',
  ["Bad Name.lua"] = 'return { every = "1s", run = function() end }\n',
  ["loop.lua"] = "local n = 0\nwhile true do n = n + 1 end\n",
  ["exits.lua"] = 'os.exit(0)\nreturn { every = "1s", run = function() end }\n',
  ["good-a.lua"] = 'return { every = "1s", run = function() end }\n',
  ["good.b.lua"] = 'return { cron = "*/5 * * * * *", run = function() end }\n',
}

local function jobs_dir(files)
  local d = L.dir { jobs = {} }
  for name, src in pairs(files) do L.write(d.jobs .. "/" .. name, src) end
  return d
end

-- leash.job.load on one source; returns job, or nil and the messages
-- joined by newlines; the path is shown as "J/<name>.lua".
local function load_src(src, name)
  local d = L.tmpdir("job")
  name = name or "t"
  local path = d .. "/" .. name .. ".lua"
  L.write(path, src)
  local j, errs = job.load(path, name)
  if j then return j end
  return nil, (table.concat(errs, "\n"):gsub(d:gsub("%p", "%%%0"), "J"))
end

local function refused(src, ...)
  local j, msg = load_src(src)
  assert.is_nil(j, "accepted: " .. src)
  for _, p in ipairs { ... } do
    assert.is_truthy(msg:find(p, 1, true), ("%q lacks %q"):format(msg, p))
  end
  return msg
end

describe("leash.job.load", function()
  it("normalises a good periodic job", function()
    local j = assert(load_src('return { every = "1m30s", timeout = "20s", lease = "9s",\n'
      .. '  singleton = false, description = "d", run = function() end }\n'))
    assert.equal("every", j.kind)
    assert.equal(90000, j.every_ms)
    assert.equal(20000, j.timeout_ms)
    assert.equal(9000, j.lease_ms)
    assert.is_false(j.singleton)
    assert.equal("t", j.name)
    assert.equal("every 1m30s, on every replica", job.describe(j))
  end)

  it("a cron job, with tz, and a service", function()
    local j = assert(load_src('return { cron = "0 3 * * mon-fri", tz = "local", run = function() end }\n'))
    assert.equal("cron", j.kind)
    assert.equal("local", j.tz)
    assert.is_true(j.singleton)
    local s = assert(load_src("return { run = function() end }\n"))
    assert.equal("service", s.kind)
    assert.equal("service", job.describe(s))
  end)

  it("a syntax error, with file:line", function()
    refused(FILES["syntax.lua"], "J/t.lua:4:", "expected")
  end)

  it("a file that raises while loading, with file:line", function()
    refused(FILES["raises.lua"], "J/t.lua:2:", "boom at load")
    refused("error({ code = 1 })\n", "J/t.lua", "table")
  end)

  it("a file that returns a non-table or nothing", function()
    refused("return 42\n", "J/t.lua:", "returned a number", "expected a table")
    refused("local x = 1\n", "J/t.lua:", "returned nothing")
    refused('return "every 1s"\n', "returned a string")
  end)

  it("an unknown key, with its line", function()
    refused(FILES["unknown.lua"], "J/t.lua:3:", "colour", "unknown key")
  end)

  it("a bad cron field, with its line", function()
    refused(FILES["badcron.lua"], "J/t.lua:2:", "cron", "61")
    refused('return {\n  cron = "* * * *",\n  run = function() end }\n', "J/t.lua:2:", "cron")
    refused('return { cron = 5, run = function() end }\n', "cron", "number")
  end)

  it("a bad, a negative and a too short duration", function()
    refused(FILES["baddur.lua"], "J/t.lua:2:", "every", '"3x"')
    refused(FILES["negdur.lua"], "J/t.lua:3:", "timeout", "-5s")
    refused('return {\n  every = "500ms",\n  run = function() end }\n', "J/t.lua:2:", "every",
      "too short")
    refused('return {\n  every = -1,\n  run = function() end }\n', "J/t.lua:2:", "every")
    -- A plain number is seconds.
    assert.equal(30000, assert(load_src('return { every = 30, run = function() end }\n')).every_ms)
  end)

  -- A job's own lease has the bounds of [singleton] lease: lease = "1ms"
  -- used to pass and then spin (87% CPU, 1,000 new tokens a second).
  it("a lease too short or too long, with its line", function()
    refused('return {\n  every = "1s",\n  lease = "1ms",\n  run = function() end }\n',
      "J/t.lua:3:", "lease", "1ms is too short (at least 100ms)")
    refused('return {\n  lease = "0s", run = function() end }\n', "J/t.lua:2:", "lease", "too short")
    refused('return {\n  lease = "48h", run = function() end }\n', "J/t.lua:2:", "lease",
      "too long (at most 1d)")
  end)

  it("derives a job's renew and margin from its lease the way [singleton] does", function()
    local config = require "leash.config"
    for _, lease in ipairs { "100ms", "400ms", "9s", "24h" } do
      local j = assert(load_src(('return { lease = %q, run = function() end }\n'):format(lease)))
      local renew, margin, key = config.timing(j.lease_ms)
      assert.is_nil(key)
      assert.equal(renew, j.renew_ms)
      assert.equal(margin, j.margin_ms)
      assert.is_true(j.renew_ms < j.lease_ms - j.margin_ms, lease)
    end
    local j = assert(load_src('return { lease = "9s", run = function() end }\n'))
    assert.equal(3000, j.renew_ms)
    assert.equal(1800, j.margin_ms)
    local s = assert(load_src("return { run = function() end }\n"))
    assert.is_nil(s.lease_ms)
    assert.is_nil(s.renew_ms)
  end)

  it("both every and cron", function()
    refused('return { every = "1s",\n cron = "* * * * *", run = function() end }\n', "either every or cron")
  end)

  it("a tz leash does not know, or tz without cron", function()
    refused('return { cron = "* * * * *",\n tz = "Europe/Atlantis", run = function() end }\n',
      'J/t.lua:2: tz: "Europe/Atlantis" is not a time zone in /usr/share/zoneinfo',
      'such as "Europe/Berlin"')
    refused('return { cron = "* * * * *",\n\n tz = "../../etc/passwd", run = function() end }\n',
      'J/t.lua:3: tz: "../../etc/passwd" is not a time zone name')
    refused('return { cron = "* * * * *",\n tz = 7, run = function() end }\n',
      "J/t.lua:2: tz: 7 is not a time zone")
    refused('return { cron = "* * * * *",\n tz = "' .. ("x"):rep(300) .. '", run = function() end }\n',
      "J/t.lua:2: tz:", "300 bytes long")
    refused('return { every = "1s",\n tz = "local", run = function() end }\n', "J/t.lua:2:", "tz")
    refused('return { every = "1s",\n tz = "Europe/Berlin", run = function() end }\n',
      "J/t.lua:2: tz: only applies to cron")
  end)

  it("an IANA zone, read once for all the jobs that name it", function()
    local j = assert(load_src('return { cron = "30 2 * * *", tz = "Europe/Berlin", run = function() end }\n'))
    assert.equal("Europe/Berlin", j.tz)
    assert.equal('cron "30 2 * * *" Europe/Berlin', job.describe(j))
    -- 2027-03-28: 02:30 does not exist in Berlin; fires at 03:00 CEST
    assert.equal(1806195600000, job.next_fire(j, 1806192000000))
    local tz = require "leash.tz"
    assert.equal(tz.get("Europe/Berlin"), tz.get("Europe/Berlin"))
  end)

  it("a zone file that is garbage, with the file's line and the zone", function()
    local dir = os.getenv("LEASH_TEST_TMP") .. "/zoneinfo-jobs"
    os.execute("mkdir -p " .. dir .. "/Bad")
    local f = assert(io.open(dir .. "/Bad/Zone", "wb"))
    f:write("TZif2" .. ("\0"):rep(10))
    f:close()
    local saved = os.getenv("TZDIR")
    require("leash.core").setenv("TZDIR", dir)
    local ok, msg = pcall(refused, 'return { cron = "* * * * *",\n tz = "Bad/Zone", run = function() end }\n',
      'J/t.lua:2: tz: time zone "Bad/Zone": ' .. dir .. "/Bad/Zone is not a usable TZif file: truncated")
    require("leash.core").setenv("TZDIR", saved)
    assert(ok, msg)
  end)

  it("jitter and overlap: the offset is the name's, overlap defaults to skip", function()
    local j = assert(load_src('return { every = "1m", jitter = "30s", overlap = "queue", run = function() end }\n', "spread"))
    assert.equal(30000, j.jitter_ms)
    assert.equal(job.offset("spread", 30000), j.offset_ms)
    assert.equal("queue", j.overlap)
    assert.equal("every 1m, jitter 30s, overlap queue", job.describe(j))
    assert.equal(60000 + j.offset_ms, job.next_fire(j, j.offset_ms))
    assert.equal(j.offset_ms, job.next_fire(j, j.offset_ms - 1))
    local plain = assert(load_src('return { every = "1m", run = function() end }\n'))
    assert.equal("skip", plain.overlap)
    assert.equal(0, plain.offset_ms)
    -- A jitter of exactly the period is allowed: the fires spread over all of it.
    assert(load_src('return { cron = "0,30 * * * * *", jitter = "30s", run = function() end }\n'))
  end)

  it("a jitter negative, zero or longer than the shortest period, or overlap not a word: file:line", function()
    refused('return { every = "1m",\n jitter = "-5s", run = function() end }\n', "J/t.lua:2: jitter:", "negative")
    refused('return { every = "1m",\n jitter = 0, run = function() end }\n', "J/t.lua:2: jitter:", "too short")
    refused('return { every = "1m",\n jitter = "2m", run = function() end }\n',
      "J/t.lua:2: jitter: 2m is longer than the job's shortest period (1m)")
    refused('return { cron = "0,45 * * * *",\n jitter = "20m", run = function() end }\n',
      "J/t.lua:2: jitter: 20m is longer than the job's shortest period (15m)")
    refused('return { cron = "0 9 * * *",\n jitter = "25h", run = function() end }\n',
      "J/t.lua:2: jitter: 1d1h is longer than the job's shortest period (1d)")
    refused('return { every = "1m",\n overlap = "wait", run = function() end }\n',
      'J/t.lua:2: overlap: "wait" is not one of "skip", "queue", "replace"')
    refused('return { every = "1m",\n overlap = true, run = function() end }\n', "J/t.lua:2: overlap: true")
    refused('return {\n overlap = "queue",\n jitter = "1s", run = function() end }\n',
      "J/t.lua:2: overlap: only applies to every and cron jobs", "J/t.lua:3: jitter: only applies")
  end)

  it("missed, missed_within, missed_max: the words, a duration up to 24h, a count with missed = all; file:line", function()
    assert(load_src('return { every = "1m", missed = "all", missed_within = "24h", missed_max = 1000, run = function() end }\n'))
    refused('return { every = "1m",\n missed = "some", run = function() end }\n',
      'J/t.lua:2: missed: "some" is not one of "skip", "once", "all"')
    refused('return { every = "1m",\n missed_within = "25h", run = function() end }\n', "J/t.lua:2: missed_within:")
    refused('return { every = "1m",\n missed = "all", missed_max = 0, run = function() end }\n',
      "J/t.lua:2: missed_max: 0 is not a whole number from 1 to 1000")
    refused('return { every = "1m",\n missed_max = 3, run = function() end }\n',
      'J/t.lua:2: missed_max: only applies with missed = "all"')
    refused('return {\n missed = "all",\n missed_within = "1m", run = function() end }\n',
      "J/t.lua:2: missed: only applies to every and cron jobs", "J/t.lua:3: missed_within: only applies")
  end)

  it("weight: a whole number from 1 to 1000, 1 by default, for any kind of singleton job; file:line", function()
    assert.equal(1, assert(load_src('return { every = "1m", run = function() end }\n')).weight)
    assert.equal(5, assert(load_src('return { every = "1m", weight = 5, run = function() end }\n')).weight)
    assert.equal(1000, assert(load_src('return { weight = 1000, run = function() end }\n')).weight)
    assert.equal(1, assert(load_src('return { cron = "* * * * *", weight = 1, run = function() end }\n')).weight)
    for _, v in ipairs { "0", "-1", "1001", "2.5", "1e3", '"5"', "true", "{}", "math.huge", "0/0" } do
      refused(('return { every = "1m",\n weight = %s, run = function() end }\n'):format(v),
        "J/t.lua:2: weight: ", "is not a whole number from 1 to 1000")
    end
    refused('return { every = "1m", singleton = false,\n weight = 2, run = function() end }\n',
      "J/t.lua:2: weight: only applies to singleton jobs")
  end)

  it("the shortest period: every, or cron's finest field with more than one value", function()
    local cron = require "leash.cron"
    local function p(expr) return job.shortest_period { cron = assert(cron.parse(expr)) } end
    assert.equal(7000, job.shortest_period { every_ms = 7000 })
    assert.equal(10000, p("*/10 * * * * *"))
    assert.equal(1000, p("0,59 * * * * *"))          -- :59 to the next minute's :00
    assert.equal(15 * 60000, p("0,45 * * * *"))
    assert.equal(8 * 3600000, p("0 9,17 * * 1-5"))
    assert.equal(86400000, p("0 9 * * 1-5"))
  end)

  it("warnings: a timeout longer than the period, an every that does not divide a day", function()
    local function warns(src)
      local j = assert(load_src(src))
      return (table.concat(j.warnings, "\n"):gsub("^.-/t%.lua", "J/t.lua"))
    end
    assert.equal('J/t.lua:2: timeout: warning: 2m is longer than the job\'s period (1m): with overlap = '
      .. '"skip" a run that long makes the next fire skip (every other fire, or more)',
      warns('return { every = "1m",\n timeout = "2m", run = function() end }\n'))
    assert.matches("timeout: warning: 2h is longer than the job's shortest period %(1h%): with overlap = "
      .. '"queue" the runs fall behind the fires',
      warns('return { cron = "0 * * * *", overlap = "queue",\n timeout = "2h", run = function() end }\n'))
    assert.matches("J/t.lua:1: every: warning: 7m does not divide a day",
      warns('return { every = "7m", run = function() end }\n'))
    assert.matches("every: warning: 1d12h does not divide a day",
      warns('return { every = "36h", run = function() end }\n'))
    for _, ok in ipairs { "7s", "90s", "5m", "45m", "8h", "2d" } do
      assert.equal("", warns(('return { every = %q, timeout = "1s", run = function() end }\n'):format(ok)), ok)
    end
  end)

  it("run missing or not a function", function()
    refused(FILES["notfn.lua"], "J/t.lua:3:", "run", "expected a function, got a string")
    refused(FILES["norun.lua"], "J/t.lua", "run", "missing")
  end)

  it("singleton not a boolean", function()
    refused('return {\n  singleton = "yes", run = function() end }\n', "J/t.lua:2:", "singleton")
  end)

  it("every problem of one file at once", function()
    local msg = refused('return {\n  every = "3x",\n  colour = 1,\n  run = 5,\n}\n',
      "J/t.lua:2:", "J/t.lua:3:", "J/t.lua:4:")
    assert.equal(3, select(2, msg:gsub("\n", "")) + 1)
  end)

  it("a file name that is not a job name", function()
    for _, bad in ipairs { "Bad Name", "UPPER", "-dash", ".hidden", "a/b", ("x"):rep(201) } do
      local j, errs = job.load("/nonexistent/" .. bad .. ".lua", bad)
      assert.is_nil(j, bad)
      assert.matches("not a valid job name", errs[1], 1, true)
    end
    assert.is_true(job.valid_name(("x"):rep(200)))
    assert.is_true(job.valid_name("0.model_health-2"))
  end)

  it("a top-level infinite loop runs out of its instruction budget", function()
    local t0 = L.monotonic()
    refused(FILES["loop.lua"], "J/t.lua:2:", "instructions")
    assert.is_true(L.monotonic() - t0 < 10)
  end)

  it("os.exit at the top level is an error, not the end of the loader", function()
    refused(FILES["exits.lua"], "J/t.lua:1:", "os.exit")
    assert.is_function(os.exit)
    assert.is_true(pcall(function() return os.exit ~= nil end))
  end)

  it("a job file cannot leave globals behind", function()
    assert(load_src('leaked_by_job = 1\nreturn { every = "1s", run = function() end }\n'))
    assert.is_nil(rawget(_G, "leaked_by_job"))
  end)
end)

describe("leash check", function()
  local function normalise(s, d)
    return (s:gsub(d.dir:gsub("%p", "%%%0"), "DIR"))
  end

  it("lists every problem of a directory in one go (golden file), exit 1", function()
    local d = jobs_dir(FILES)
    local code, out, err = L.leash { "check", "-c", d.config }
    local got = normalise(out, d) .. "-- stderr\n" .. normalise(err, d)
    local golden = ROOT .. "/tests/golden/check.txt"
    if os.getenv("LEASH_GOLDEN_UPDATE") then L.write(golden, got) end
    assert.equal(L.read(golden), got)
    assert.equal(1, code)
  end)

  it("20,000 unknown keys on one line: ten named, the rest counted, in bounded time (was 69 s)", function()
    local keys = {}
    for i = 1, 20000 do keys[i] = ("k%d = 1"):format(i) end
    local d = jobs_dir { ["many.lua"] = 'return { every = "1s", run = function() end, '
      .. table.concat(keys, ", ") .. " }\n" }
    local t0 = L.monotonic()
    local code, out = L.exec { "timeout", "20", L.bin, "check", "-c", d.config }
    assert.equal(1, code)
    assert.is_true(L.monotonic() - t0 < 5, ("took %.1fs"):format(L.monotonic() - t0))
    assert.equal(10, select(2, out:gsub(": unknown key", "")), out)
    assert.truthy(out:find("many.lua: and 19990 more unknown keys", 1, true), out)
  end)

  it("all good: exit 0 and a count", function()
    local d = jobs_dir { ["good-a.lua"] = FILES["good-a.lua"], ["good.b.lua"] = FILES["good.b.lua"] }
    local code, out, err = L.leash { "check", "-c", d.config }
    assert.equal(0, code)
    assert.equal("", out)
    assert.equal(d.config .. ": 2 jobs ok, 0 problems\n", err)
  end)

  it("an empty jobs directory is a problem", function()
    local d = jobs_dir {}
    local code, out = L.leash { "check", "-c", d.config }
    assert.equal(1, code)
    assert.matches(d.jobs .. ": no job files", out, 1, true)
  end)

  it("a jobs directory that does not exist is a problem", function()
    local d = jobs_dir {}
    os.execute("rmdir " .. L.quote(d.jobs))
    local code, out = L.leash { "check", "-c", d.config }
    assert.equal(1, code)
    assert.matches("cannot read the jobs directory", out, 1, true)
  end)

  it("a job whose lease leash run would spin on is a problem with file:line, exit 1", function()
    local d = jobs_dir { ["good-a.lua"] = FILES["good-a.lua"],
      ["fast.lua"] = 'return {\n  every = "1s",\n  lease = "1ms",\n  run = function() end,\n}\n' }
    local code, out = L.leash { "check", "-c", d.config }
    assert.equal(1, code, out)
    assert.matches(d.jobs .. "/fast.lua:3: lease: 1ms is too short (at least 100ms)", out, 1, true)
  end)

  it("leash run logs that job with file:line, never runs it, and runs the others", function()
    local d = jobs_dir {
      ["good-a.lua"] = 'return { every = "1s", run = function() print("good ran") end }\n',
      ["fast.lua"] = 'return {\n  every = "1s",\n  lease = "1ms",\n'
        .. '  run = function() print("fast ran") end,\n}\n',
    }
    local p = L.spawn(d)
    local ran = p:wait_log("%[good%-a run %d+%] good ran", 5)
    local rc = p:stop()
    local log = p:log_text()
    assert.is_string(ran, log)
    assert.equal(0, rc, log)
    assert.matches("error [^\n]*/jobs/fast%.lua:3: lease: 1ms is too short", log)
    assert.is_nil(log:find("fast ran", 1, true), log)
  end)

  it("a bad config is exit 2 even with bad jobs", function()
    local d = jobs_dir(FILES)
    L.write(d.config, "[leash]\njobs = jobs\nwhat = 1\n")
    local code = L.leash { "check", "-c", d.config }
    assert.equal(2, code)
  end)

  it("--next N prints each job's next N fire times in UTC", function()
    local d = jobs_dir {
      ["seven.lua"] = 'return { every = "7s", run = function() end }\n',
      ["nightly.lua"] = 'return { cron = "0 3 * * *", run = function() end }\n',
      ["sixes.lua"] = 'return { cron = "*/20 * * * * *", run = function() end }\n',
      ["svc.lua"] = "return { run = function() end }\n",
    }
    local before = os.time()
    local code, out = L.leash { "check", "-c", d.config, "--next", "3" }
    local after = os.time()
    assert.equal(0, code)
    -- Expected lines for a given "now" (whole seconds).
    local function expect(now)
      local lines = {}
      local day = now - now % 86400
      local first = day + 3 * 3600
      if first <= now then first = first + 86400 end
      for i = 0, 2 do lines[#lines + 1] = "nightly " .. L.iso(first + i * 86400) end
      local t = now - now % 7 + 7
      for i = 0, 2 do lines[#lines + 1] = "seven " .. L.iso(t + i * 7) end
      t = now - now % 20 + 20
      for i = 0, 2 do lines[#lines + 1] = "sixes " .. L.iso(t + i * 20) end
      return table.concat(lines, "\n") .. "\n"
    end
    if out ~= expect(before) then assert.equal(expect(after), out) end
    for line in out:gmatch("[^\n]+") do
      assert.matches("^[a-z]+ %d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$", line)
    end
    assert.is_nil(out:find("svc", 1, true))
  end)

  it("warnings are printed as file:line lines and leave the exit code 0", function()
    local d = jobs_dir {
      ["drift.lua"] = 'return {\n  every = "7m",\n  run = function() end,\n}\n',
      ["long.lua"] = 'return {\n  every = "1m",\n  timeout = "5m",\n  run = function() end,\n}\n',
    }
    local code, out, err = L.leash { "check", "-c", d.config }
    assert.equal(0, code)
    assert.truthy(out:find(d.jobs .. "/drift.lua:2: every: warning: 7m does not divide a day", 1, true), out)
    assert.truthy(out:find(d.jobs .. "/long.lua:3: timeout: warning: 5m is longer than the job's period (1m)", 1, true), out)
    assert.equal(d.config .. ": 2 jobs ok, 0 problems\n", err)
  end)

  it("--next shows the times a jitter shifted, with their milliseconds", function()
    local d = jobs_dir { ["spread.lua"] = 'return { every = "1m", jitter = "1m", run = function() end }\n' }
    local off = job.offset("spread", 60000)
    local code, out = L.leash { "check", "-c", d.config, "--next", "2" }
    assert.equal(0, code)
    local times = {}
    for y, mo, dd, h, mi, sec, ms in out:gmatch("spread (%d+)%-(%d+)%-(%d+)T(%d+):(%d+):(%d+)%.?(%d*)Z") do
      times[#times + 1] = L.timegm(tonumber(y), tonumber(mo), tonumber(dd), tonumber(h),
        tonumber(mi), tonumber(sec)) * 1000 + (tonumber(ms) or 0)
    end
    assert.equal(2, #times, out)
    assert.equal(off, times[1] % 60000)
    assert.equal(60000, times[2] - times[1])
  end)

  it("--next marks a fire that a daylight-saving gap moved, whatever the TZ", function()
    local d = jobs_dir {
      ["berlin.lua"] = 'return { cron = "30 2 28 3 *", tz = "Europe/Berlin", run = function() end }\n',
    }
    local outs = {}
    for i, zone in ipairs { "America/New_York", "Asia/Tokyo" } do
      local code, out = L.leash({ "check", "-c", d.config, "--next", "12" }, { env = { TZ = zone } })
      assert.equal(0, code)
      outs[i] = out
    end
    assert.equal(outs[1], outs[2])
    -- 28 March is the day Berlin springs forward when it is the last Sunday
    -- (2027, 2032, 2038): 02:30 does not exist and it fires at 03:00 CEST
    local moved = 0
    for line in outs[1]:gmatch("[^\n]+") do
      local note = line:match("^berlin %d%d%d%d%-03%-28T01:00:00Z  %((.*)%)$")
      if note then
        assert.equal("02:30 Europe/Berlin does not exist: fires at 03:00", note)
        moved = moved + 1
      else
        assert.matches("^berlin %d%d%d%d%-03%-28T0[01]:30:00Z$", line)
      end
    end
    assert.is_true(moved >= 1, outs[1])
  end)

  it("--next needs a count", function()
    local d = jobs_dir { ["good-a.lua"] = FILES["good-a.lua"] }
    for _, bad in ipairs { "0", "x", "-1", "10001" } do
      local code, _, err = L.leash { "check", "-c", d.config, "--next", bad }
      assert.equal(2, code, bad)
      assert.matches("--next", err, 1, true)
    end
  end)
end)

describe("job file paths in messages", function()
  it("are from the current directory when the jobs lie below it, whole otherwise", function()
    local d = jobs_dir { ["unknown.lua"] = FILES["unknown.lua"], ["good-a.lua"] = FILES["good-a.lua"] }
    local code, out, err = L.leash({ "check", "-c", "leash.ini" }, { cwd = d.dir })
    assert.equal(1, code, err)
    assert.matches("^jobs/unknown%.lua:3: colour: unknown key", out)
    local parent, base = d.dir:match("^(.*)/([^/]+)$")
    code, out, err = L.leash({ "check", "-c", base .. "/leash.ini" }, { cwd = parent })
    assert.equal(1, code, err)
    assert.equal(1, (out:find(base .. "/jobs/unknown.lua:3: colour: unknown key", 1, true)), out)
    code, out, err = L.leash({ "check", "-c", d.config }, { cwd = "/" })
    assert.equal(1, code, err)
    assert.equal(1, (out:find(d.jobs .. "/unknown.lua:3: colour: unknown key", 1, true)), out)
  end)
end)
