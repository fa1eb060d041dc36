-- Helpers for the end-to-end specs: temporary directories with a config and
-- job files, real `leash` processes in the background, waiting with a
-- deadline, signals, files, and commands with their exit code and output.
--
--   local L = require "e2e"                   -- tests/support is on LUA_PATH
--   local d = L.dir{ config = { leash = { grace = "1s" } },
--                    jobs = { tick = L.recorder_job("tick", { every = "1s" }) } }
--   local p = L.spawn(d)                       -- leash run -c d.config
--   L.wait_for(function() return #L.lines(d.out "tick") >= 2 end, 5)
--   p:signal("TERM"); assert.equal(0, p:wait(10))
--
-- Nothing here needs a Lua C library besides leash.core: processes are
-- started and signalled through /bin/sh.
local core = require "leash.core"

local M = {}

local function sq(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.quote = sq

local root = os.getenv("LEASH_ROOT") or "."
local function abs(p)
  if p:sub(1, 1) == "/" then return p end
  return root .. "/" .. p
end

-- The leash binary under test ($LEASH_BUILD/leash, made absolute).
M.bin = abs((os.getenv("LEASH_BUILD") or "build") .. "/leash")

-- ---- time ----

M.now = core.now               -- wall clock, float seconds
M.monotonic = core.monotonic

function M.sleep(s)
  if s > 0 then core.sleep(s) end
end

-- Sleeps until just after the next whole wall-clock second + frac.
function M.sleep_to_second(frac)
  local t = M.now()
  local target = math.floor(t) + 1 + (frac or 0)
  M.sleep(target - t)
end

-- Calls fn every `interval` seconds (default 0.05) until it returns a
-- truthy value or `timeout` seconds have passed.  Returns fn's value, or
-- nil and "timed out after Ns".
function M.wait_for(fn, timeout, interval)
  local deadline = M.monotonic() + (timeout or 10)
  repeat
    local v = fn()
    if v then return v end
    M.sleep(interval or 0.05)
  until M.monotonic() >= deadline
  local v = fn()
  if v then return v end
  return nil, ("timed out after %gs"):format(timeout or 10)
end

-- ---- files ----

function M.write(path, text, mode)
  local f = assert(io.open(path, mode or "wb"))
  f:write(text)
  f:close()
end

-- The whole file, or "" when it does not exist (yet).
function M.read(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The file's complete lines (a last line without newline is left out).
function M.lines(path)
  local out = {}
  for line in M.read(path):gmatch("([^\n]*)\n") do out[#out + 1] = line end
  return out
end

-- ---- commands ----

-- Runs a shell command line; returns exit code, stdout, stderr.
function M.sh(cmdline)
  local base = os.tmpname()
  local ok, how, code = os.execute(("(%s) >%s 2>%s </dev/null"):format(cmdline,
    sq(base .. ".out"), sq(base .. ".err")))
  local out, err = M.read(base .. ".out"), M.read(base .. ".err")
  os.remove(base); os.remove(base .. ".out"); os.remove(base .. ".err")
  if how == "signal" then code = 128 + code end
  return code, out, err
end

-- What a command line starts with for opts.env (a table of extra
-- variables; false unsets one) and opts.cwd.
local function shell_prefix(opts)
  local prefix = ""
  for k, v in pairs(opts.env or {}) do
    if v == false then prefix = prefix .. "unset " .. k .. "; "
    else prefix = prefix .. ("export %s=%s; "):format(k, sq(v)) end
  end
  if opts.cwd then prefix = prefix .. "cd " .. sq(opts.cwd) .. " && " end
  return prefix
end

-- Runs argv (a list; no shell involved in the words) with opts.env (a table
-- of extra variables; false unsets one) and opts.cwd.  Returns exit code,
-- stdout, stderr.
function M.exec(argv, opts)
  opts = opts or {}
  local words = {}
  for _, a in ipairs(argv) do words[#words + 1] = sq(a) end
  local prefix = shell_prefix(opts)
  return M.sh(prefix .. "exec " .. table.concat(words, " "))
end

-- The environment that runs a process with its wall clock shifted by shift
-- (libfaketime's relative form: "+30s", "-3d"), its monotonic clocks left
-- alone.  libfaketime is preloaded directly: the faketime wrapper names a
-- semaphore and a shared memory segment by its pid, leaves them behind when
-- it is killed, and refuses to start when a reused pid finds them.
M.FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
function M.faketime_env(shift)
  return { LD_PRELOAD = M.FAKETIME_LIB, FAKETIME = shift,
           FAKETIME_DONT_FAKE_MONOTONIC = "1", FAKETIME_NO_CACHE = "1" }
end

-- `leash ARGS...`: exit code, stdout, stderr.
function M.leash(args, opts)
  local argv = { M.bin }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return M.exec(argv, opts)
end

-- ---- processes ----

-- Sends a signal ("TERM", "KILL", "STOP", "CONT", "HUP", "INT" or a number)
-- to pid; returns true when kill(1) succeeded.
function M.kill(pid, sig)
  local s = type(sig) == "number" and tostring(sig) or (sig or "TERM")
  return os.execute(("kill -s %s %d 2>/dev/null"):format(s, pid)) == true
end

-- Whether pid is a live process (a zombie is not: in a container nobody
-- may reap an orphan, and kill -0 still succeeds on it).
function M.alive(pid)
  local f = io.open(("/proc/%d/stat"):format(pid))
  if not f then return false end
  local stat = f:read("a") or ""
  f:close()
  local state = stat:match("^%d+ %b() (%a)")
  return state ~= nil and state ~= "Z" and state ~= "X"
end

-- The pids of pid's children (from /proc).
function M.children(pid)
  local out = {}
  local code, s = M.sh(("cat /proc/%d/task/*/children 2>/dev/null"):format(pid))
  if code == 0 then
    for n in s:gmatch("%d+") do out[#out + 1] = tonumber(n) end
  end
  return out
end

local Proc = {}
Proc.__index = Proc

-- Starts a command line in the background with its stdout and stderr going
-- to opts.log (default a fresh file).  Returns a process object:
--   p.pid, p.log (path)
--   p:signal(sig)  p:alive()  p:log_text()  p:log_lines()
--   p:wait(timeout) -> exit code (128+N for signal N), or nil on timeout
--   p:stop(timeout) -> SIGTERM, wait, SIGKILL if it did not stop; exit code
function M.spawn_cmd(cmdline, opts)
  opts = opts or {}
  local base = os.tmpname()
  os.remove(base)
  local log = opts.log or (base .. ".log")
  local pidf, rcf = base .. ".pid", base .. ".rc"
  local prefix = shell_prefix(opts)
  -- A subshell starts the command, notes its pid, waits for it and notes
  -- its status, so the exit code is known although we are not its parent.
  local script = ("%s%s >>%s 2>&1 </dev/null & echo $! >%s.tmp; mv %s.tmp %s; wait $!; echo $? >%s.tmp; mv %s.tmp %s")
    :format(prefix, cmdline, sq(log), sq(pidf), sq(pidf), sq(pidf), sq(rcf), sq(rcf), sq(rcf))
  assert(os.execute(("sh -c %s >/dev/null 2>&1 &"):format(sq(script))))
  local pid = assert(M.wait_for(function()
    local s = M.read(pidf)
    return tonumber(s:match("%d+"))
  end, 5), "the process did not start: " .. cmdline)
  return setmetatable({ pid = pid, log = log, rcfile = rcf, cmdline = cmdline }, Proc)
end

-- Starts `leash run -c <config>`; d is a path or what M.dir returned.
function M.spawn(d, opts)
  local config = type(d) == "table" and d.config or d
  return M.spawn_cmd(("exec %s run -c %s"):format(sq(M.bin), sq(config)), opts)
end

function Proc:signal(sig) return M.kill(self.pid, sig) end
function Proc:alive() return not M.exists(self.rcfile) and M.alive(self.pid) end
function Proc:log_text() return M.read(self.log) end
function Proc:log_lines() return M.lines(self.log) end

-- Exit code (nil when it has not ended within timeout seconds).
function Proc:wait(timeout)
  local rc = M.wait_for(function()
    local s = M.read(self.rcfile)
    return tonumber(s:match("%d+"))
  end, timeout or 10)
  self.rc = rc
  return rc
end

function Proc:stop(timeout)
  if self.rc then return self.rc end
  self:signal("TERM")
  local rc = self:wait(timeout or 10)
  if not rc then
    self:signal("KILL")
    rc = self:wait(5)
  end
  return rc
end

-- Log lines matching a Lua pattern.
function Proc:grep(pat)
  local out = {}
  for _, l in ipairs(self:log_lines()) do
    if l:find(pat) then out[#out + 1] = l end
  end
  return out
end

-- Waits until a log line matches pat; returns it (or nil on timeout).
function Proc:wait_log(pat, timeout)
  return M.wait_for(function() return self:grep(pat)[1] end, timeout or 10)
end

-- ---- a temporary leash set-up ----

local counter = 0
local tmp_root = os.getenv("LEASH_TEST_TMP") or "/tmp"

-- A fresh empty directory under $LEASH_TEST_TMP.
function M.tmpdir(prefix)
  counter = counter + 1
  local path = ("%s/%s-%d-%d"):format(tmp_root, prefix or "e2e", counter, math.random(1e9))
  assert(os.execute("mkdir -p " .. sq(path)))
  return path
end

-- INI text from { section = { key = value } } (sections and keys sorted, so
-- the text is stable), or the string itself.
function M.ini(t)
  if type(t) == "string" then return t end
  local out, secs = {}, {}
  for s in pairs(t) do secs[#secs + 1] = s end
  table.sort(secs)
  for _, s in ipairs(secs) do
    out[#out + 1] = "[" .. s .. "]"
    local keys = {}
    for k in pairs(t[s]) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do out[#out + 1] = ("%s = %s"):format(k, tostring(t[s][k])) end
  end
  return table.concat(out, "\n") .. "\n"
end

-- Makes a directory with leash.ini and jobs/:
--   spec.config  a table for M.ini (merged over [leash] jobs = jobs) or INI text
--   spec.jobs    { name = source } written as jobs/<name>.lua (a name with
--                a "." or space is used as given: "Bad Name.lua")
-- Returns d: d.dir, d.config, d.jobs, d:job_path(name), d:write_job(name,
-- src), d:remove_job(name), d.out(name) (a file a job can record into).
function M.dir(spec)
  spec = spec or {}
  local dir = M.tmpdir(spec.prefix)
  local d = { dir = dir, config = dir .. "/leash.ini", jobs = dir .. "/jobs" }
  assert(os.execute("mkdir -p " .. sq(d.jobs)))
  local cfg = spec.config
  if type(cfg) ~= "string" then
    cfg = cfg or {}
    cfg.leash = cfg.leash or {}
    if cfg.leash.jobs == nil then cfg.leash.jobs = "jobs" end
    cfg = M.ini(cfg)
  end
  M.write(d.config, cfg)
  function d.job_path(name)
    if name:find("%.lua$") then return d.jobs .. "/" .. name end
    return d.jobs .. "/" .. name .. ".lua"
  end
  function d.write_job(name, src)
    -- Written beside and renamed, so a reload never sees half a file.
    local p = d.job_path(name)
    M.write(p .. ".tmp", src)
    assert(os.rename(p .. ".tmp", p))
  end
  function d.remove_job(name) assert(os.remove(d.job_path(name))) end
  function d.out(name) return dir .. "/" .. name .. ".out" end
  for name, src in pairs(spec.jobs or {}) do d.write_job(name, src) end
  return d
end

-- Source of a job that writes core.metrics() (the parent's records, seen
-- from its run's child) to path every second, whole: written beside and
-- renamed.
function M.metrics_probe_job(path)
  return ([[
local core = require "leash.core"
return { every = "1s", run = function()
  local f = assert(io.open(%q, "w"))
  f:write(core.metrics())
  f:close()
  assert(os.rename(%q, %q))
end }
]]):format(path .. ".tmp", path .. ".tmp", path)
end

-- Source of a job that appends one line per run to `path`:
--   "<scheduled_at> <pid> <start> <end>" plus, when opts.fields, the ctx
-- fields; opts.every/cron/timeout/extra (raw Lua put into the table) and
-- opts.body (Lua run after the line is written; `ctx` in scope) shape it.
function M.recorder_job(path, opts)
  opts = opts or {}
  local keys = {}
  for _, k in ipairs { "every", "cron", "timeout", "tz", "lease" } do
    if opts[k] then keys[#keys + 1] = ("  %s = %q,"):format(k, opts[k]) end
  end
  return ([[
local core = require "leash.core"
local OUT = %q
local function record(s)
  local f = assert(io.open(OUT, "a"))
  f:write(s, "\n")
  f:close()
end
return {
%s
%s
  run = function(ctx)
    local pid = io.open("/proc/self/stat"):read("l"):match("^%%d+")
    record(("start %%s %%s %%.3f"):format(tostring(ctx.scheduled_at), pid, core.now()))
    %s
    record(("end %%s %%s %%.3f"):format(tostring(ctx.scheduled_at), pid, core.now()))
  end,
}
]]):format(path, table.concat(keys, "\n"), opts.extra or "", opts.body or "")
end

-- Parses the lines recorder_job writes: a list of
-- { what = "start"|"end", scheduled_at =, pid =, t = }.
function M.records(path)
  local out = {}
  for _, l in ipairs(M.lines(path)) do
    local what, sched, pid, t = l:match("^(%a+) (%S+) (%d+) ([%d.]+)$")
    if what then
      out[#out + 1] = { what = what, scheduled_at = tonumber(sched), pid = tonumber(pid),
                        t = tonumber(t) }
    end
  end
  return out
end

-- Epoch seconds of a log line's leading timestamp (2026-11-29T17:26:00.003Z).
function M.log_time(line)
  local y, mo, d, h, mi, s, ms = line:match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)%.(%d+)Z")
  if not y then
    y, mo, d, h, mi, s, ms = line:match('"ts":"(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)%.(%d+)Z"')
  end
  if not y then return nil end
  return M.timegm(tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi),
    tonumber(s)) + tonumber(ms) / 1000
end

-- Days-from-civil (H. Hinnant): UTC calendar time to epoch seconds.
function M.timegm(y, mo, d, h, mi, s)
  y = mo <= 2 and y - 1 or y
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (mo + (mo > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  local days = era * 146097 + doe - 719468
  return days * 86400 + (h or 0) * 3600 + (mi or 0) * 60 + (s or 0)
end

-- "2026-11-29T17:00:05Z" for epoch seconds.
function M.iso(t)
  return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(t))
end

return M
