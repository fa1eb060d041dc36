-- Loading a job file is bounded in wall-clock time whatever it does (issue
-- 37, item 1): each way past the instruction and memory budget the probe
-- found, through `leash check` and through a running `leash run` after
-- SIGHUP.  A bad file is a load error naming it; the other jobs keep their
-- fires (every fire of the ticking job is run, none missed for a stall) and
-- SIGTERM still ends the replica.  Bounds are generous: a hang is what fails.
local L = require "e2e"

local GOOD = 'return { every = "1s", run = function() end }\n'

-- name = { src =, says = { what the message holds, one of them }, line =
-- its line, false (file only) or nil (either); ok = the file is harmless
-- and loads }.
local CASES = {
  -- A count given as a string: C converts it, the guard did not (17 s).
  ["rep-string-count"] = { src = 'local s = (""):rep("4000000000")\n' .. GOOD, ok = true },
  -- Float and string bounds (2^62 never ended).
  ["move-float"] = { src = "table.move({}, 1, 2^62, 1, {})\n" .. GOOD,
    says = { "table.move: more than 16777216 elements while loading" }, line = 1 },
  ["move-string"] = { src = 'local x = 1\ntable.move({}, 1, "100000000", 1, {})\n' .. GOOD,
    says = { "table.move: more than 16777216 elements while loading" }, line = 2 },
  -- ? backtracks as * does (13 s).
  ["pattern-optional"] = {
    src = 'local x = ("a"):rep(24):match(("a?"):rep(24) .. ("a"):rep(24) .. "b")\n' .. GOOD,
    says = { "could run for too long while loading" }, line = 1 },
  -- A plain search compares the pattern at every byte: n * m.
  ["find-plain"] = {
    src = 'local i = ("a"):rep(1e7):find(("a"):rep(5e6) .. "b", 1, true)\n' .. GOOD,
    says = { "could run for too long while loading" }, line = 1 },
  -- No net growth, but 600 MB allocated and 20 full collections (3.2 s).
  ["alloc-collect"] = {
    src = 'for i = 1, 20 do local s = ("x"):rep(3e7); s = nil; collectgarbage() end\n' .. GOOD,
    says = { "loading allocated more than 256 MiB in all", "loading took more than 1s" } },
  -- 50 MB to stdout (200 MB took 1.4 s).
  print = { src = 'local s = ("x"):rep(1e6)\nfor i = 1, 50 do print(s) end\n' .. GOOD,
    says = { "print: more than 65536 bytes of output while loading" }, line = 2 },
  -- What a job keeps after its load, in the scheduler and every run.
  keep = { src = 'local big = ("x"):rep(3e7)\nreturn { every = "1s", run = function() return #big end }\n',
    says = { "the job keeps 28 MiB after loading, more than the 8 MiB a job may keep",
      "loading took more than 1s" } },
  -- C calls no guard knows of, neither instructions nor allocations: only
  -- the wall clock ends them.
  ["c-call"] = {
    src = 'local t = table.pack(string.byte(("x"):rep(900000), 1, -1))\n'
      .. "for i = 1, 100 do table.sort(t) end\n" .. GOOD,
    says = { "loading took more than 1s ([leash] load_timeout)" } },
}

local function names()
  local out = {}
  for name in pairs(CASES) do out[#out + 1] = name end
  table.sort(out)
  return out
end

-- The first line of text naming path, from the path on (a log line's time
-- and level left out), or nil.
local function line_of(text, path)
  return text:match(path:gsub("%p", "%%%0") .. "[^\n]*")
end

local function check_message(name, d, line)
  local c, path = CASES[name], d.job_path(name)
  assert.is_string(line, name)
  if c.line then
    assert.equal(path .. ":" .. c.line .. ":", line:sub(1, #path + #tostring(c.line) + 2), line)
  elseif c.line == false then
    assert.equal(path .. ": ", line:sub(1, #path + 2), line)
  end
  -- A slow machine may meet the wall clock first, whatever the file does:
  -- refused all the same, naming the file.
  local found = line:find("loading took more than 1s ([leash] load_timeout)", 1, true) ~= nil
  for _, s in ipairs(c.says) do found = found or line:find(s, 1, true) ~= nil end
  assert.is_true(found, line)
  assert.is_nil(line:find("leash/[%w_]+%.lua:%d"), line)
end

describe("leash check on a file that goes past the load budget", function()
  for _, name in ipairs(names()) do
    it(name .. ": a problem naming the file, in bounded time, the good job ok", function()
      local d = L.dir { jobs = { good = GOOD } }
      d.write_job(name, CASES[name].src)
      local t0 = L.monotonic()
      local code, out, err = L.exec { "timeout", "40", L.bin, "check", "-c", d.config }
      assert.are_not.equal(124, code, name .. ".lua: leash check did not end within 40s")
      assert.is_true(L.monotonic() - t0 < 15, ("%s: %.1fs"):format(name, L.monotonic() - t0))
      if CASES[name].ok then
        assert.equal(0, code, out .. err)
        assert.matches("2 jobs ok, 0 problems", err, 1, true)
      else
        assert.equal(1, code, out .. err)
        check_message(name, d, line_of(out, d.job_path(name)))
        assert.matches("1 job ok, 1 problem\n", err, 1, true)
      end
      assert.is_true(#out < 64 * 1024, ("%d bytes of output"):format(#out))
    end)
  end

  it("eight files that each keep 30 MB: one check's memory stays that of one file", function()
    local d = L.dir { jobs = { good = GOOD } }
    for i = 1, 8 do d.write_job("keep" .. i, CASES.keep.src) end
    local rss = L.tmpdir("rss") .. ".txt"
    local code, out, err = L.exec { "/usr/bin/time", "-o", rss, "-f", "%M", L.bin, "check",
      "-c", d.config }
    assert.equal(1, code, out .. err)
    assert.matches("1 job ok, 8 problems", err, 1, true)
    local kb = tonumber(L.read(rss):match("(%d+)%s*$"))
    assert.is_true(kb < 150 * 1024, ("%d MB at most"):format(kb // 1024))
  end)
end)

describe("leash run given a file past the load budget on SIGHUP", function()
  for _, name in ipairs(names()) do
    it(name .. ": the file's problem is logged, the other job misses no fire, SIGTERM ends it",
      function()
        local out = L.tmpdir("lb") .. "/tick.out"
        local d = L.dir { jobs = { tick = L.recorder_job(out, { every = "1s" }) } }
        local p = L.spawn(d)
        finally(function() p:stop() end)
        assert.is_truthy(L.wait_for(function() return #L.records(out) >= 2 end, 10), p:log_text())
        d.write_job(name, CASES[name].src)
        assert.is_true(p:signal("HUP"))
        if CASES[name].ok then
          assert.is_truthy(p:wait_log("%[" .. name:gsub("%p", "%%%0") .. "[^]]*%] added", 30),
            p:log_text())
        else
          assert.is_truthy(L.wait_for(function() return line_of(p:log_text(), d.job_path(name)) end,
            30), p:log_text())
        end
        local n = #L.records(out)
        assert.is_truthy(L.wait_for(function() return #L.records(out) >= n + 3 end, 15), p:log_text())
        local t0 = L.monotonic()
        local rc = p:stop(20)
        local log = p:log_text()
        assert.equal(0, rc, log)
        assert.is_true(L.monotonic() - t0 < 15, log)
        if not CASES[name].ok then check_message(name, d, line_of(log, d.job_path(name))) end
        -- Every fire from the first to the last was run, none missed
        -- (ctx.scheduled_at is in whole seconds), or skipped on time by the
        -- overlap rule: on a saturated machine a run's process may take a
        -- second to be gone after its body (it exits at the lowest
        -- priority), and the loop's skip at the fire says the loop was there.
        local fires = {}
        for _, r in ipairs(L.records(out)) do
          if r.what == "start" then fires[#fires + 1] = r.scheduled_at end
        end
        table.sort(fires)
        for i = 2, #fires do
          for t = fires[i - 1] + 1, fires[i] - 1 do
            local iso = os.date("!%Y-%m-%dT%H:%M:%SZ", t):gsub("%-", "%%-")
            local skipped = ("skipped the fire at %s: run %%d+ is still going"):format(iso)
            assert.is_truthy(log:find(skipped), ("the fire at %d missed\n%s"):format(t, log))
          end
        end
        assert.is_nil(log:find("missed: leash came too late", 1, true), log)
        assert.is_true(#log < 1024 * 1024, ("a log of %d bytes"):format(#log))
      end)
  end
end)
