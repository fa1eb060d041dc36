-- End to end: real `leash run` processes on temporary jobs directories.
-- Jobs record what they did by appending lines to files; the specs read
-- those files and the log.  Singleton mode is off throughout.
local L = require "e2e"
local json = require "dkjson"

local function count(list, pred)
  local n = 0
  for _, v in ipairs(list) do if pred(v) then n = n + 1 end end
  return n
end

-- A job whose run appends "k=v" pairs (space-separated) to `out`; `body` is
-- Lua run before the record is written, with `rec` (a table) in scope.
local function job_src(out, head, body)
  return ([[
local core = require "leash.core"
local OUT = %q
local function write(line)
  local f = assert(io.open(OUT, "a"))
  f:write(line, "\n")
  f:close()
end
local function mypid()
  local f = io.open("/proc/self/stat")
  local pid = f:read("l"):match("^%%d+")
  f:close()
  return pid
end
return {
  %s
  run = function(ctx)
    local rec = { pid = mypid(), start = ("%%.3f"):format(core.now()) }
    %s
    local keys, parts = {}, {}
    for k in pairs(rec) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(rec[k]) end
    write(table.concat(parts, " "))
  end,
}
]]):format(out, head, body or "")
end

-- The records job_src wrote: a list of { key = value-string }.
local function records(path)
  local out = {}
  for _, line in ipairs(L.lines(path)) do
    local r = {}
    for k, v in line:gmatch("([%w_]+)=(%S*)") do r[k] = v end
    out[#out + 1] = r
  end
  return out
end

describe("leash run, one replica with many jobs", function()
  local d, p, rc, leash_pid
  local log

  lazy_setup(function()
    d = L.dir {
      config = { leash = { grace = "1s", replica = "auto" } },
      jobs = {
        tick = job_src(L.tmpdir("o") .. "/unused", 'every = "1s",', [[
          rec.job = ctx.job
          rec.replica = ctx.replica
          rec.token = ctx.token
          rec.run_id = ctx.run_id
          rec.scheduled_at = ctx.scheduled_at
          rec.sched_type = math.type(ctx.scheduled_at)
          rec.lease_left = ctx.lease_left()
          local t0 = ctx.now()
          local t1 = ctx.now()
          while t1 == t0 do t1 = ctx.now() end
          rec.now_type = math.type(t0)
          rec.now = ("%.6f"):format(t0)
          rec.now_step = ("%.9f"):format(t1 - t0)
        ]]),
        logger = job_src(L.tmpdir("o") .. "/unused", 'every = "1s",', [[
          print("out-line " .. ctx.run_id)
          io.stderr:write("err-line ", ctx.run_id, "\n")
          ctx.log("warn", "ctx-line", { answer = 42, note = "two words" })
        ]]),
        pieces = job_src(L.tmpdir("o") .. "/unused", 'every = "1s",', [[
          io.stdout:write("first half ")
          io.stdout:flush()
          ctx.sleep(0.05)
          io.stdout:write("second half\n", ("y"):rep(10000), "\n", "no newline at the end")
        ]]),
        slow = job_src(L.tmpdir("o") .. "/unused", 'every = "1s",', [[
          ctx.sleep(2.5)
          rec.stop = ("%.3f"):format(core.now())
        ]]),
        raises = 'return { every = "1s", run = function(ctx) error("deliberate failure") end }\n',
        exits = 'return { every = "1s", run = function(ctx) os.exit(3) end }\n',
        signalled = 'return { every = "1s", run = function(ctx)\n'
          .. '  ctx.exec({ "sh", "-c", "kill -KILL $PPID; sleep 5" })\n'
          .. 'end }\n',
        exec = job_src(L.tmpdir("o") .. "/unused", 'every = "1s",', [[
          local function q(s) return (tostring(s):gsub("[%s=,%%]", function(c) return ("%%%02X"):format(c:byte()) end)) end
          local ok, code, out, err = ctx.exec({ "echo", "a;b", "$HOME", "`id`" })
          rec.lit = q(ok) .. "," .. q(code) .. "," .. q(out) .. "," .. q(err)
          ok, code, out, err = ctx.exec({ "sh", "-c", "echo o; echo e >&2; exit 7" })
          rec.seven = q(ok) .. "," .. q(code) .. "," .. q(out) .. "," .. q(err)
          local t0 = core.monotonic()
          ok, code = ctx.exec({ "sleep", "5" }, { timeout = 0.3 })
          rec.timeout = q(ok) .. "," .. q(code) .. "," .. ("%.2f"):format(core.monotonic() - t0)
          ok, code, out, err = ctx.exec({ "/nonexistent/program" })
          rec.missing = q(ok) .. "," .. q(code) .. "," .. q(err)
          ok, code, out = ctx.exec({ "sh", "-c", "ls /proc/$$/fd" })
          rec.fds = q(out)
        ]]),
        ["broken"] = "return {\n  every = \"1s\",\n",
        ["loops"] = "while true do end\n",
        ["Bad Name"] = 'return { every = "1s", run = function() end }\n',
      },
    }
    -- Each job records into its own file in d.dir.
    for _, name in ipairs { "tick", "logger", "slow", "exec" } do
      local src = L.read(d.job_path(name)):gsub('local OUT = "[^"]*"', ("local OUT = %q"):format(d.out(name)))
      d.write_job(name, src)
    end
    p = L.spawn(d)
    leash_pid = p.pid
    -- Stop while a slow run is going: it must be stopped too.  (Its runs
    -- last 2.5 s of every 3: the one seen going must still be going once
    -- 0.2 s more have passed, else the next one is waited for.)
    local function slow_going()
      return #p:grep("%[slow run %d+%] started") > #p:grep("%[slow run %d+%] finished")
    end
    L.wait_for(function()
      if #L.lines(d.out("tick")) < 4 or #L.lines(d.out("slow")) < 2 or not slow_going() then
        return false
      end
      L.sleep(0.2)
      return slow_going()
    end, 15)
    p:signal("TERM")
    rc = p:wait(10)
    log = p:log_text()
  end)

  lazy_teardown(function()
    if p then p:stop() end
  end)

  local function lines_of(job)
    local out = {}
    for _, l in ipairs(p:log_lines()) do
      if l:find("[" .. job .. " run ", 1, true) or l:find("[" .. job .. "] ", 1, true) then
        out[#out + 1] = l
      end
    end
    return out
  end

  it("stops on SIGTERM with exit 0", function()
    assert.equal(0, rc, log)
    assert.matches("Terminated: stopping", log, 1, true)
    assert.matches("stopped\n$", log)
  end)

  it("runs an every = 1s job once per fire second, each in a forked child", function()
    local recs = records(d.out("tick"))
    assert.is_true(#recs >= 4, log)
    local pids = {}
    for i, r in ipairs(recs) do
      assert.is_nil(pids[r.pid], "pid reused within the run: " .. r.pid)
      pids[r.pid] = true
      assert.are_not.equal(tostring(leash_pid), r.pid)
      if i > 1 then
        assert.equal(tonumber(recs[i - 1].scheduled_at) + 1, tonumber(r.scheduled_at))
      end
      -- Started within the fire second it was scheduled for.
      local late = tonumber(r.start) - tonumber(r.scheduled_at)
      assert.is_true(late >= 0 and late < 0.5, ("started %.3fs after its fire time"):format(late))
    end
  end)

  it("gives the body the ctx fields", function()
    local recs = records(d.out("tick"))
    local startup = log:match("starting: replica (%S+),")
    assert.is_string(startup)
    assert.matches("^[^:]+:" .. leash_pid .. ":%x%x%x%x%x%x%x%x$", startup)
    local ids = {}
    for _, r in ipairs(recs) do
      assert.equal("tick", r.job)
      assert.equal(startup, r.replica)
      assert.equal("0", r.token)
      assert.equal("integer", r.sched_type)
      assert.equal(tostring(math.huge), r.lease_left)
      -- ctx.now(): the wall clock, a float, a little after the fire time,
      -- ticking in well under a millisecond
      assert.equal("float", r.now_type)
      local now = tonumber(r.now)
      assert.is_true(now >= tonumber(r.scheduled_at) and now < tonumber(r.scheduled_at) + 5, r.now)
      assert.is_true(tonumber(r.now_step) > 0 and tonumber(r.now_step) < 0.001, r.now_step)
      assert.is_nil(ids[r.run_id])
      ids[r.run_id] = true
      -- The run id is the one the log gives the child with that pid.
      assert.matches("[tick run " .. r.run_id .. "] started pid=" .. r.pid, log, 1, true)
    end
  end)

  it("logs stdout, stderr and ctx.log lines with job name and run id", function()
    local n = 0
    for id in log:gmatch("%[logger run (%d+)%] out%-line (%d+)") do
      n = n + 1
    end
    assert.is_true(n >= 2, log)
    for id, echoed in log:gmatch("%[logger run (%d+)%] out%-line (%d+) stream=stdout") do
      assert.equal(id, echoed)
    end
    for id, echoed in log:gmatch("%[logger run (%d+)%] err%-line (%d+) stream=stderr") do
      assert.equal(id, echoed)
    end
    assert.matches("warn  %[logger run %d+%] err%-line %d+ stream=stderr", log)
    assert.matches('warn  %[logger run %d+%] ctx%-line answer=42 note="two words"', log)
  end)

  it("logs a line written in parts as one, a long line in pieces, and a last line without newline", function()
    assert.matches("%[pieces run %d+%] first half second half stream=stdout", log)
    assert.matches("%[pieces run %d+%] no newline at the end stream=stdout", log)
    local id = log:match("%[pieces run (%d+)%] first half")
    local sizes = {}
    for ys in log:gmatch("%[pieces run " .. id .. "%] (y+) stream=stdout") do sizes[#sizes + 1] = #ys end
    assert.same({ 4095, 4095, 1810 }, sizes)
  end)

  it("skips a fire while the run is still going, never two at once", function()
    local recs = records(d.out("slow"))
    assert.is_true(#recs >= 2, log)
    for i = 2, #recs do
      assert.is_true(tonumber(recs[i].start) >= tonumber(recs[i - 1].stop),
        "two runs of slow overlapped")
    end
    local skips = {}
    for l in log:gmatch("[^\n]*%[slow%] skipped the fire at [^\n]*") do skips[#skips + 1] = l end
    assert.is_true(#skips >= 2, log)
    assert.matches("skipped the fire at %d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ: run %d+ is still going",
      skips[1])
  end)

  it("a body that raises is a failed run with its reason and traceback", function()
    assert.matches("%[raises run %d+%] run failed: [^\n]*raises%.lua:1: deliberate failure", log)
    assert.matches("traceback=", log, 1, true)
    assert.matches("%[raises run %d+%] failed after [%d.]+s: the body raised an error", log)
    -- the job's frames only: not leash's modules, not the xpcall below the body
    local tb = assert(log:match('%[raises run %d+%] run failed: [^\n]*traceback="([^\n]*)"'), log)
    assert.matches("raises%.lua:1: in ", tb)
    assert.is_nil(tb:find("lua/leash/", 1, true), tb)
    assert.is_nil(tb:find("xpcall", 1, true), tb)
  end)

  it("os.exit(3) and death by a signal are failed runs with their reason", function()
    assert.matches("%[exits run %d+%] failed after [%d.]+s: exit status 3", log)
    assert.matches("%[signalled run %d+%] failed after [%d.]+s: killed by signal 9", log)
  end)

  it("failing jobs do not stop the others", function()
    -- raises, exits and signalled fail every second, and still fire again.
    for _, job in ipairs { "raises", "exits", "signalled" } do
      assert.is_true(count(lines_of(job), function(l) return l:find("failed after", 1, true) end) >= 3,
        job .. ":\n" .. log)
    end
    assert.is_true(#records(d.out("tick")) >= 4)
  end)

  it("reports broken job files and runs the good ones", function()
    assert.matches("error [^\n]*/jobs/broken%.lua:3: [^\n]*expected", log)
    assert.matches("error [^\n]*/jobs/loops%.lua:1: loading ran more than", log)
    assert.matches('error [^\n]*/jobs/Bad Name%.lua: "Bad Name" is not a valid job name', log)
    assert.is_nil(log:find("[broken", 1, true))
  end)

  it("ctx.exec runs argv without a shell", function()
    local r = records(d.out("exec"))[1]
    assert.is_table(r, log)
    local function dec(s) return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)) end
    local function parts(s)
      local out = {}
      for piece in (s .. ","):gmatch("([^,]*),") do out[#out + 1] = dec(piece) end
      return out
    end
    assert.same({ "true", "0", "a;b $HOME `id`\n", "" }, parts(r.lit))
    assert.same({ "false", "7", "o\n", "e\n" }, parts(r.seven))
    local t = parts(r.timeout)
    assert.same({ "false", "124" }, { t[1], t[2] })
    assert.is_true(tonumber(t[3]) >= 0.3 and tonumber(t[3]) < 2, "exec timeout took " .. t[3])
    local m = parts(r.missing)
    assert.same({ "false", "127" }, { m[1], m[2] })
    assert.matches("/nonexistent/program", m[3], 1, true)
    -- Only stdin, stdout and stderr reach the program (not the log pipe).
    assert.same({ "0\n1\n2\n" }, parts(r.fds))
  end)

  it("leaves no child behind after SIGTERM", function()
    for _, r in ipairs(records(d.out("slow"))) do
      assert.is_false(L.alive(tonumber(r.pid)), "run pid " .. r.pid .. " still alive")
    end
    assert.matches("%[slow run %d+%] stopping %(shutdown%)", log)
    local last = records(d.out("tick"))
    assert.is_false(L.alive(tonumber(last[#last].pid)))
  end)
end)

describe("leash run with log_format = json", function()
  local d, p, rc
  lazy_setup(function()
    d = L.dir {
      config = { leash = { log_format = "json" } },
      jobs = {
        talk = 'return { every = "1s", run = function(ctx)\n'
          .. '  print("plain \\"quoted\\" \\t tab")\n'
          .. '  ctx.log("info", "hello", { n = 1, s = "x\\ny" })\n'
          .. 'end }\n',
      },
    }
    p = L.spawn(d)
    p:wait_log('"msg":"finished', 5)
    rc = p:stop()
  end)

  it("writes every line as one JSON object with job and run", function()
    assert.equal(0, rc)
    local lines = p:log_lines()
    assert.is_true(#lines >= 5, p:log_text())
    local seen = {}
    for _, l in ipairs(lines) do
      local obj, _, err = json.decode(l)
      assert.is_table(obj, ("not JSON (%s): %s"):format(tostring(err), l))
      assert.is_string(obj.ts)
      assert.is_string(obj.level)
      assert.is_string(obj.msg)
      if obj.job == "talk" and obj.run then
        assert.is_number(obj.run)
        seen[obj.msg] = obj
      end
    end
    assert.is_table(seen['plain "quoted" \t tab'], p:log_text())
    assert.equal("stdout", seen['plain "quoted" \t tab'].stream)
    assert.is_table(seen.hello)
    assert.equal("1", seen.hello.n)
    assert.equal("x\ny", seen.hello.s)
  end)
end)

describe("leash run, timeouts and services", function()
  local d, p, rc, log, stopped_pid, sleeper_pid, sleeper_alive

  lazy_setup(function()
    d = L.dir { config = { leash = { grace = "1s" } }, jobs = {} }
    -- A service that returns at once, one that fails at once: restarted
    -- after 1s (the whole backoff, 1s 2s 4s ... 60s, is specced on a fake
    -- clock in sched_spec.lua; here only that real runs follow it).
    d.write_job("returns", job_src(d.out("returns"), ""))
    d.write_job("fails", job_src(d.out("fails"), "", 'write("start " .. rec.start) error("no")'))
    -- timeout 1s; the body waits on a command that ignores SIGTERM.
    d.write_job("stubborn", job_src(d.out("stubborn"), 'timeout = "1s",', ([[
      write("left " .. ctx.lease_left())
      write("run " .. rec.pid)
      ctx.exec({ "sh", "-c", "trap '' TERM; echo $$ >> %s; exec sleep 30" })
    ]]):format(d.out("sleeper"))))
    -- timeout 1s; the spec stops (SIGSTOP) this body, so only SIGKILL ends it.
    d.write_job("frozen", job_src(d.out("frozen"), 'timeout = "1s",',
      'write("run " .. rec.pid) ctx.sleep(30)'))
    p = L.spawn(d)
    local pid = L.wait_for(function()
      local l = L.lines(d.out("frozen"))[1]
      return l and tonumber(l:match("run (%d+)"))
    end, 5)
    stopped_pid = pid
    if pid then L.kill(pid, "STOP") end
    -- Right after the first stubborn run is stopped, what it started is gone.
    if p:wait_log("%[stubborn run %d+%] stopped %(timeout%)", 5) then
      sleeper_pid = tonumber(L.read(d.out("sleeper")):match("%d+"))
      sleeper_alive = sleeper_pid and L.wait_for(function() return not L.alive(sleeper_pid) end, 0.5) == nil
    end
    L.wait_for(function()
      return #records(d.out("returns")) >= 2 and #records(d.out("fails")) >= 2
        and #p:grep("%[returns%] service returned; restarting in 2%.0s") > 0
        and #p:grep("%[fails%] service failed; restarting in 2%.0s") > 0
    end, 6)
    p:signal("INT")
    rc = p:wait(10)
    log = p:log_text()
  end)

  lazy_teardown(function() if p then p:stop() end end)

  it("stops on SIGINT with exit 0", function()
    assert.equal(0, rc, log)
    assert.matches("Interrupt: stopping", log, 1, true)
  end)

  it("restarts a service that returns after 1s, then backs off to 2s", function()
    local recs = records(d.out("returns"))
    assert.is_true(#recs >= 2, log)
    local gap = tonumber(recs[2].start) - tonumber(recs[1].start)
    -- Not before its second; how late is the machine's load (the backoff's
    -- instants are specced on the fake clock in sched_spec.lua).
    assert.is_true(gap > 0.95 and gap < 10, ("the restart came after %.3fs, expected 1s"):format(gap))
    assert.matches("%[returns%] service returned; restarting in 1%.0s", log)
    assert.matches("%[returns%] service returned; restarting in 2%.0s", log)
  end)

  it("restarts a service that fails with the same backoff", function()
    local starts = {}
    for _, l in ipairs(L.lines(d.out("fails"))) do
      local t = l:match("^start ([%d.]+)$")
      if t then starts[#starts + 1] = tonumber(t) end
    end
    assert.is_true(#starts >= 2, log)
    local gap = starts[2] - starts[1]
    assert.is_true(gap > 0.95 and gap < 10, ("gap: %.3fs"):format(gap))
    assert.matches("%[fails%] service failed; restarting in 2%.0s", log)
  end)

  it("stops a run at its timeout, whatever it started with it", function()
    assert.matches("%[stubborn run %d+%] stopping %(timeout%): SIGTERM, SIGKILL in 1000ms", log)
    local secs = log:match("%[stubborn run %d+%] stopped %(timeout%) after ([%d.]+)s")
    assert.is_string(secs, log)
    assert.is_true(tonumber(secs) >= 1 and tonumber(secs) < 1.5, secs)
    assert.is_number(sleeper_pid)
    assert.is_false(sleeper_alive, "the command that ignored SIGTERM outlived its run")
    local left = tonumber(L.read(d.out("stubborn")):match("left ([%d.]+)"))
    assert.is_true(left > 0 and left <= 1, "lease_left with a 1s timeout: " .. tostring(left))
  end)

  it("sends SIGKILL a grace after SIGTERM to a body that does not stop", function()
    assert.is_number(stopped_pid)
    local first = log:match("%[frozen run (%d+)%] started pid=" .. stopped_pid)
    assert.is_string(first, log)
    local secs = log:match("%[frozen run " .. first .. "%] stopped %(timeout%) after ([%d.]+)s")
    assert.is_string(secs, log)
    -- timeout 1s + grace 1s
    assert.is_true(tonumber(secs) >= 1.9 and tonumber(secs) < 2.6, secs)
    assert.is_false(L.alive(stopped_pid))
  end)
end)

describe("leash run, SIGHUP", function()
  local d, p, log

  local function recorder(tag, extra)
    return ([[
local OUT = %q
return {
  every = "1s",%s
  run = function(ctx)
    local f = assert(io.open(OUT, "a"))
    f:write(%q, " ", ctx.scheduled_at, "\n")
    f:close()
  end,
}
]]):format("OUTFILE", extra or "", tag)
  end

  local function src(tag, name, extra)
    return (recorder(tag, extra):gsub("OUTFILE", d.out(name)))
  end

  local function tags(name)
    local out = {}
    for _, l in ipairs(L.lines(d.out(name))) do
      local tag, at = l:match("^(%S+) (%d+)$")
      out[#out + 1] = { tag = tag, at = tonumber(at) }
    end
    return out
  end

  local hup_at
  lazy_setup(function()
    d = L.dir { jobs = {} }
    d.write_job("kept", src("kept", "kept"))
    d.write_job("changed", src("old", "changed"))
    d.write_job("gone", src("gone", "gone"))
    d.write_job("breaks", src("good", "breaks"))
    p = L.spawn(d)
    L.wait_for(function()
      return #tags("kept") >= 1 and #tags("changed") >= 1 and #tags("gone") >= 1 and #tags("breaks") >= 1
    end, 5)
    d.write_job("added", src("added", "added"))
    d.write_job("changed", src("new", "changed"))
    d.remove_job("gone")
    d.write_job("breaks", "return {\n  every = \"1s\",\n  run = function(ctx) end,\n  oops = 1,\n}\n")
    hup_at = L.now()
    p:signal("HUP")
    L.wait_for(function()
      local c = tags("changed")
      local b = tags("breaks")
      return #tags("added") >= 2 and c[#c].tag == "new" and b[#b].at > hup_at + 1
    end, 6)
    L.sleep(1.2)
    p:stop()
    log = p:log_text()
  end)

  lazy_teardown(function() if p then p:stop() end end)

  it("logs the reload", function()
    assert.matches("SIGHUP: reloading", log, 1, true)
  end)

  it("starts an added file", function()
    assert.is_true(#tags("added") >= 2, log)
    assert.matches("%[added%] added: every 1s", log)
  end)

  it("uses the new definition of a changed file", function()
    local c = tags("changed")
    assert.equal("old", c[1].tag)
    assert.equal("new", c[#c].tag)
    for i = 2, #c do
      if c[i].tag == "old" then assert.equal("old", c[i - 1].tag) end
      assert.is_true(c[i].at > c[i - 1].at)
    end
  end)

  it("stops firing a removed file", function()
    assert.matches("%[gone%] removed:", log)
    for _, r in ipairs(tags("gone")) do
      assert.is_true(r.at <= hup_at + 1, ("gone fired at %d, after the reload at %.3f"):format(r.at, hup_at))
    end
  end)

  it("keeps the last good definition of a file that broke, and says why", function()
    local b = tags("breaks")
    assert.is_true(b[#b].at > hup_at + 1, log)
    for _, r in ipairs(b) do assert.equal("good", r.tag) end
    assert.matches("/jobs/breaks%.lua:4: oops: unknown key", log)
    assert.matches("%[breaks%] keeps its last good definition", log)
  end)

  it("keeps an unchanged job firing every second across the reload", function()
    local k = tags("kept")
    for i = 2, #k do assert.equal(k[i - 1].at + 1, k[i].at) end
    assert.is_true(k[#k].at > hup_at + 1)
  end)
end)

describe("leash run with an empty jobs directory", function()
  it("keeps running, and picks up a job on SIGHUP", function()
    local d = L.dir { jobs = {} }
    local p = L.spawn(d)
    assert.is_string(p:wait_log("no job files in", 5), p:log_text())
    assert.is_true(p:alive())
    d.write_job("late", 'return { every = "1s", run = function(ctx) print("late ran") end }\n')
    p:signal("HUP")
    local ran = p:wait_log("%[late run %d+%] late ran", 4)
    local rc = p:stop()
    assert.is_string(ran, p:log_text())
    assert.equal(0, rc)
  end)
end)

describe("leash status and version", function()
  it("status with singleton mode off says so and exits 0", function()
    local d = L.dir { jobs = {} }
    local code, out = L.leash { "status", "-c", d.config }
    assert.equal(0, code)
    assert.matches("singleton mode is off", out, 1, true)
  end)

  it("version prints leash's and the linked libraries' versions", function()
    local code, out = L.leash { "version" }
    assert.equal(0, code)
    local version = L.read((os.getenv("LEASH_ROOT") or ".") .. "/VERSION"):match("%S+")
    assert.matches("^leash " .. version:gsub("%p", "%%%0") .. "\n", out)
    assert.matches("\nLua 5%.4%.%d+\n", out)
    assert.matches("\nSQLite 3%.%d+%.%d+\n", out)
    assert.matches("\nlibpq %d+%.%d+\n", out)
    assert.matches("\nFreeTDS %S+\n", out)
  end)

  it("an unknown command is exit 2 with the usage", function()
    local code, _, err = L.leash { "frobnicate" }
    assert.equal(2, code)
    assert.matches("usage: leash run", err, 1, true)
  end)
end)
