-- Hostile job files (issue 15, item 3): loading one is bounded in
-- instructions and memory, refuses what is not a small regular file, keeps
-- blocking calls and os.exit out of the top level, and keeps each file's
-- changes to shared tables its own.  Each case goes through `leash check`
-- (under timeout 20: a hang is a failure that names the file), the cases
-- that used to wedge a replica through a running `leash run` and SIGHUP, and
-- the file-to-file cases through the in-process job table.
local L = require "e2e"
local core = require "leash.core"
local job = require "leash.job"

local GOOD = 'return { every = "1s", run = function() end }\n'
local SPIN = "function() while true do end end"

-- name = { src =, says = what the message holds, line = its line or false
-- (file only), wedged = it used to wedge a running replica }.  A case
-- without src is made by make(path).
local CASES = {
  pcall = { src = ("while true do pcall(%s) end\n"):format(SPIN),
    says = "loading ran more than 10000000 instructions", line = 1, wedged = true },
  xpcall = { src = ("local x = 1\nwhile true do xpcall(%s, %s) end\n"):format(SPIN, SPIN),
    says = "instructions", line = 2, wedged = true },
  sethook = { src = "debug.sethook()\nwhile true do end\n",
    says = "global 'debug'", line = 1, wedged = true },
  coroutines = { src = "while true do\n  coroutine.wrap(function() for i = 1, 900 do end end)()\nend\n",
    says = "instructions", line = 2, wedged = true },
  ["coroutine-pcall"] = {
    src = ("while true do coroutine.resume(coroutine.create(%s)) end\n"):format(SPIN),
    says = "instructions", line = 1, wedged = true },
  ["meta-index"] = { src = ("return setmetatable({}, { __index = %s })\n"):format(SPIN),
    says = "run: missing", line = false, wedged = true },
  ["meta-pairs"] = { src = ("return setmetatable({ every = \"1s\" }, { __pairs = %s })\n"):format(SPIN),
    says = "run: missing", line = false, wedged = true },
  ["meta-tostring"] = {
    src = ("return { every = \"1s\", run = function() end,\n  [setmetatable({}, { __tostring = %s })] = 1 }\n"):format(SPIN),
    says = "[a table]: unknown key", line = false, wedged = true },
  -- Item 4: this one named lua/leash/job.lua:112.
  ["meta-tostring-number"] = {
    src = "return { every = \"1s\", run = function() end,\n  [setmetatable({}, { __tostring = function() return 1 end })] = 1 }\n",
    says = "[a table]: unknown key", line = false },
  ["gc-loop"] = { src = ("setmetatable({}, { __gc = %s })\n%s"):format(SPIN, GOOD),
    says = "__gc is not allowed while loading", line = 1, wedged = true },
  ["gc-exit"] = { src = "setmetatable({}, { __gc = function() os.exit(7) end })\n" .. GOOD,
    says = "__gc is not allowed while loading", line = 1, wedged = true },
  ["gc-later"] = { src = "local mt = { __gc = true }\nsetmetatable({}, mt)\nmt.__gc = function() os.exit(7) end\n" .. GOOD,
    says = "__gc is not allowed while loading", line = 2 },
  rep = { src = 'local t = {}\nfor i = 1, 6 do t[i] = string.rep("x", 2^30) end\n',
    says = "loading used more than 64 MiB of memory", line = 2, wedged = true },
  ["rep-pcall"] = { src = 'for i = 1, 6 do pcall(string.rep, "x", 2^30) end\n' .. GOOD,
    says = "64 MiB", line = 1, wedged = true },
  ["rep-empty"] = { src = 'local s = ("").rep("", math.maxinteger)\nlocal t = ("x"):sub(1, 0):rep(math.maxinteger)\nreturn { every = 5, run = 1 }\n',
    says = "run: expected a function", line = 3 },
  pattern = { src = 'local s = ("a"):rep(3000)\nlocal i = s:find(".-.-.-.-b")\n' .. GOOD,
    says = "could run for too long while loading", line = 2, wedged = true },
  ["pattern-fn"] = { src = 'local s = ("a"):rep(3000)\nlocal i = string.match(s, "(.*)(.*)(.*)b")\n' .. GOOD,
    says = "could run for too long while loading", line = 2 },
  ["table-move"] = { src = "table.move({}, 1, math.maxinteger, 1)\n",
    says = "table.move: more than", line = 1 },
  zero = { make = function(path) assert(os.execute("ln -s /dev/zero " .. L.quote(path))) end,
    says = "is a character device, not a regular file", line = false, wedged = true },
  fifo = { make = function(path) assert(os.execute("mkfifo " .. L.quote(path))) end,
    says = "is a FIFO, not a regular file", line = false, wedged = true },
  directory = { make = function(path) assert(os.execute("mkdir " .. L.quote(path))) end,
    says = "is a directory", line = false },
  big = { src = "return {}\n" .. ("-"):rep(1024 * 1024) .. "\n",
    says = "is 1048587 bytes, more than the 1048576 a job file may have", line = false },
  execute = { src = 'os.execute("sleep 100")\n', says = "os.execute is not available while loading",
    line = 1, wedged = true },
  popen = { src = 'local x = 1\nio.popen("sleep 100"):read("a")\n', says = "io.popen is not available",
    line = 2 },
  ["io-read"] = { src = "local l = io.read()\n", says = "io.read is not available", line = 1 },
  ["io-stdin"] = { src = "local l = io.stdin:read()\n", says = "io.stdin is not available", line = 1 },
  ["core-sleep"] = { src = 'local core = require "leash.core"\ncore.sleep(100)\n',
    says = "leash.core.sleep is not available", line = 2 },
  exit = { src = "local x = 1\nos.exit(7, true)\n", says = "os.exit is not available", line = 2 },
  ["gc-stop"] = { src = 'collectgarbage("stop")\n', says = 'collectgarbage("stop") is not available', line = 1 },
  ["require-other"] = { src = 'local d = require "leash.duration"\n', says = 'may only require "leash.core"', line = 1 },
  ["string-meta"] = { src = 'getmetatable("").__index = {}\n' .. GOOD, says = "attempt to index a nil value", line = 1 },
  package = { src = 'package.loaded["leash.duration"].parse = function() return 1000 end\n' .. GOOD,
    says = "global 'package'", line = 1 },
  ["error-table"] = { src = 'local x = 1\nerror({ code = 42, why = "x" })\n',
    says = 'error raised with a table: { code = 42, why = "x" }', line = 2 },
  ["error-level0"] = { src = 'local x = 1\nerror("plain", 0)\n', says = "plain", line = 2 },
  ["error-nil"] = { src = "error()\n", says = "error raised with nil", line = 1 },
  ["error-in-c"] = { src = "local x = 1\nlocal y = string.rep()\n", says = "bad argument #1 to 'rep'", line = 2 },
}

-- A jobs directory with good.lua and the files of `names`.
local function dir_with(names)
  local d = L.dir { jobs = { good = GOOD } }
  for _, name in ipairs(names) do
    local c = CASES[name]
    local path = d.job_path(name)
    if c.make then c.make(path) else L.write(path, c.src) end
  end
  return d
end

local function expected(d, name)
  local c = CASES[name]
  return d.job_path(name) .. (c.line and (":" .. c.line .. ":") or ":")
end

local function names(pred)
  local out = {}
  for name, c in pairs(CASES) do
    if not pred or pred(c) then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

describe("leash check on a hostile job file", function()
  for _, name in ipairs(names()) do
    it(name .. ": a problem with file and line, in bounded time, the good job ok", function()
      local d = dir_with { name }
      local t0 = L.monotonic()
      local code, out, err = L.exec { "timeout", "20", L.bin, "check", "-c", d.config }
      assert.are_not.equal(124, code, name .. ".lua: leash check did not end within 20s")
      assert.equal(1, code, out .. err)
      local line = out:match("[^\n]*" .. d.job_path(name):gsub("%p", "%%%0") .. "[^\n]*")
      assert.is_string(line, out)
      assert.equal(expected(d, name), line:sub(1, #expected(d, name)), line)
      assert.is_truthy(line:find(CASES[name].says, 1, true), line)
      assert.is_nil(line:find("leash/[%w_]+%.lua:%d"), line)   -- never leash's own lines
      assert.matches("1 job ok, 1 problem\n", err, 1, true)
      assert.is_true(L.monotonic() - t0 < 5, name)
    end)
  end

  it("all of them at once: one problem each, the good job ok", function()
    local all = names()
    local d = dir_with(all)
    local code, out, err = L.exec { "timeout", "20", L.bin, "check", "-c", d.config }
    assert.equal(1, code, out .. err)
    assert.matches(("1 job ok, %d problems"):format(#all), err, 1, true)
  end)
end)

describe("the files of one load stay apart", function()
  -- The in-process job table loads a directory as leash run does.
  local function loaded(files)
    local d = L.dir { jobs = files }
    local s = core.sched { jobs = d.jobs, wall = function() return 0 end, mono = function() return 0 end }
    s:load(false)
    local jobs, log = s:jobs(), {}
    for _, e in ipairs(s:events()) do
      if e[1] == "log" then log[#log + 1] = e[2] end
    end
    s:stop()
    return jobs, table.concat(log, "\n")
  end

  -- Each uses the string library at its top level; "a-..." loads first.
  local USES = 'local s = ("%d"):format(5) .. string.format("%s", "x")\n'
    .. 'assert(s == "5x" and ("abc"):upper() == "ABC")\n' .. GOOD

  it("a file that empties the string metatable or string.format breaks no other", function()
    local jobs, log = loaded {
      ["a-meta"] = 'pcall(function() getmetatable("").__index = {} end)\n' .. GOOD,
      ["a-format"] = "string.format = nil\nstring.rep = nil\n" .. GOOD,
      ["a-table"] = "table.concat = nil\nmath.floor = nil\nos.time = nil\ncoroutine.wrap = nil\n" .. GOOD,
      ["b-uses"] = USES .. "",
      ["c-uses"] = USES:gsub("^", "assert(table.concat and math.floor and os.time and coroutine.wrap)\n"),
    }
    for _, name in ipairs { "a-meta", "a-format", "a-table", "b-uses", "c-uses" } do
      assert.is_table(jobs[name], name .. "\n" .. log)
    end
    assert.equal("x", ("%s"):format("x"))   -- and leash's own state is intact
  end)

  it("a file cannot reach leash's modules: every = \"bogus\" stays refused", function()
    local jobs, log = loaded {
      ["a-pkg"] = "pcall(function() package.loaded['leash.duration'].parse = function() return 1000 end end)\n"
        .. "pcall(function() require('leash.core').limits.name_max = 1 end)\n" .. GOOD,
      ["b-bogus"] = 'return { every = "bogus", run = function() end }\n',
      ["c-long-name-is-fine"] = GOOD,
    }
    assert.is_table(jobs["a-pkg"], log)
    assert.is_nil(jobs["b-bogus"])
    assert.matches('b%-bogus%.lua:1: every: "bogus" is not a duration', log)
    assert.is_table(jobs["c-long-name-is-fine"], log)
    assert.is_nil(rawget(_G, "leaked"))
  end)

  it("a file's globals, string metatable and GC stay as they were", function()
    local before = collectgarbage("isrunning")
    local jobs, log = loaded {
      ["a"] = 'leaked = 1\n_G.leaked2 = 1\npcall(collectgarbage, "stop")\n' .. GOOD,
    }
    assert.is_table(jobs.a, log)
    assert.is_nil(rawget(_G, "leaked"))
    assert.is_nil(rawget(_G, "leaked2"))
    assert.equal(before, collectgarbage("isrunning"))
    assert.is_table(getmetatable("").__index)
    assert.equal(string, getmetatable("").__index)
  end)

  it("what is refused while loading works in the run's child", function()
    -- leash.run calls the job's run in the child; here, in-process, after
    -- the load: loading is over, so the real functions answer.
    local path = L.tmpdir("h") .. "/late.lua"
    L.write(path, 'local core = require "leash.core"\nreturn { every = "1s", run = function()\n'
      .. '  return os.execute("true"), io.popen("echo hi"):read("l"), core.monotonic() > 0,\n'
      .. '    select("#", collectgarbage("count")) end }\n')
    local j = assert(job.load(path, "late"))
    local ok, hi, mono = j.run()
    assert.is_true(ok)
    assert.equal("hi", hi)
    assert.is_true(mono)
  end)
end)

describe("a file's libraries", function()
  local sandbox = require "leash.sandbox"

  it("are views of one shared copy: its own writes, all the fields listed, the shared one out of reach", function()
    local a, b = sandbox.env(), sandbox.env()
    a.string.upper = function() return "A" end
    a.math.tau = 6.28
    assert.equal("X", b.string.upper("x"))
    assert.equal("A", a.string.upper("x"))
    assert.is_nil(b.math.tau)
    local n, m, tau = 0, 0, nil
    for _ in pairs(a.string) do n = n + 1 end
    for _ in pairs(string) do m = m + 1 end
    for k, v in pairs(a.math) do if k == "tau" then tau = v end end
    assert.equal(m, n, "pairs lists each field once, the file's own included")
    assert.equal(6.28, tau)
    assert.is_string(getmetatable(a.string))
    assert.is_false(pcall(setmetatable, a.string, {}))
  end)

  it("cost a file about 1.5 KB, not 6 KB of copies of every library", function()
    collectgarbage()
    local before = collectgarbage("count")
    local keep = {}
    for i = 1, 200 do keep[i] = sandbox.env() end
    collectgarbage()
    local per = (collectgarbage("count") - before) / 200
    assert.is_true(per < 2, ("%.1f KB an environment"):format(per))
  end)
end)

describe("leash run given hostile files on SIGHUP", function()
  local d, p, log, records_before, records_after, rc

  lazy_setup(function()
    local out = L.tmpdir("h") .. "/tick.out"
    d = L.dir { jobs = { tick = L.recorder_job(out, { every = "1s" }) } }
    p = L.spawn(d)
    L.wait_for(function() return #L.records(out) >= 2 end, 5)
    for _, name in ipairs(names(function(c) return c.wedged end)) do
      local c = CASES[name]
      if c.make then c.make(d.job_path(name)) else d.write_job(name, c.src) end
    end
    p:signal("HUP")
    p:wait_log("SIGHUP: reloading", 5)
    records_before = #L.records(out)
    L.wait_for(function() return #L.records(out) >= records_before + 4 end, 8)
    records_after = #L.records(out)
    rc = p:stop(10)
    log = p:log_text()
  end)

  lazy_teardown(function() if p then p:stop() end end)

  it("logs each file's problem", function()
    for _, name in ipairs(names(function(c) return c.wedged end)) do
      assert.is_truthy(log:find(d.job_path(name), 1, true), name .. "\n" .. log)
    end
  end)

  it("keeps running the good job", function()
    assert.is_true(records_after >= records_before + 4, log)
  end)

  it("still exits 0 on SIGTERM", function()
    assert.equal(0, rc, log)
  end)
end)
