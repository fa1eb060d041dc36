-- leash.job: loads one job file and checks it; the policy of what a job is.
local duration = require "leash.duration"
local cron = require "leash.cron"
local tz = require "leash.tz"
local config = require "leash.config"
local core = require "leash.core"
local sandbox = require "leash.sandbox"
local quote = require("leash.text").quote
local limits = core.limits

local M = {}

-- The keys a job table may have.
M.KEYS = { "every", "cron", "tz", "jitter", "overlap", "missed", "missed_within", "missed_max",
  "timeout", "lease", "singleton", "weight", "run", "on_failure", "on_recover", "description" }
local known = {}
for _, k in ipairs(M.KEYS) do known[k] = true end

-- What loading one file may take.  Its top level and the copy of the table
-- it returns run under one budget of instructions, bytes of memory (its net
-- growth, and every byte allocated) and time (see leash.sandbox; the
-- caller gives the time, [leash] load_timeout); the file is not read at all
-- when it is larger.
M.LOAD_BUDGET = 10000000
M.LOAD_MEMORY = 64 * 1024 * 1024
M.LOAD_ALLOCATED = 4 * M.LOAD_MEMORY
M.FILE_MAX = 1024 * 1024

-- A job's name is its lease's name in the store.
M.NAME_RULE = ("a-z, 0-9, '.', '_' and '-', starting with a letter or digit, at most %d bytes")
  :format(limits.name_max)

function M.valid_name(name)
  return #name <= limits.name_max and name:match("^[a-z0-9][a-z0-9._-]*$") ~= nil
end

-- A job's own lease has the bounds of [singleton] lease.
local LEASE = config.key("singleton", "lease")

-- What a fire does while the job's previous run still goes (see sched.c).
M.OVERLAP = { "skip", "queue", "replace" }
local overlaps = {}
for _, k in ipairs(M.OVERLAP) do overlaps[k] = true end

-- Which of the fires nobody ran a new holder of the lease runs (see
-- sched.c's catch_up), how old one may be, and for "all" how many.
M.MISSED = { "skip", "once", "all" }
local misseds = {}
for _, k in ipairs(M.MISSED) do misseds[k] = true end
M.MISSED_DEFAULT = "once"
M.MISSED_WITHIN_DEFAULT = 3600000       -- 1h
M.MISSED_WITHIN_MAX = 86400000          -- 24h: a catch-up walks its fires one by one
M.MISSED_MAX_DEFAULT = 10
M.MISSED_MAX_MAX = 1000

-- A job's jitter offset in [0, jitter_ms): FNV-1a (64 bits, wrapping) of its
-- name, so every replica and every restart agrees on it.
function M.offset(name, jitter_ms)
  local h = -3750763034362895579        -- 14695981039346656037 as a signed integer
  for i = 1, #name do
    h = (h ~ name:byte(i)) * 1099511628211
  end
  return h % jitter_ms                  -- floored: in [0, jitter_ms) for any h
end

-- The shortest time between two fires of a job, in ms, or nil for a
-- service.  For cron it is a bound from the finest field that has more than
-- one value (seconds, minutes, then hours, each with its wrap-around gap:
-- `0,45 * * * *` is 15 minutes); with one value in each of those, a day.
-- Daylight saving is not counted.
function M.shortest_period(job)
  if job.kind == "every" or job.every_ms then return job.every_ms end
  local spec = job.cron
  if not spec then return nil end
  for _, f in ipairs { { "sec", 60, 1000 }, { "min", 60, 60000 }, { "hour", 24, 3600000 } } do
    local list = spec[f[1]].list
    if #list > 1 then
      local gap = list[1] + f[2] - list[#list]
      for i = 2, #list do gap = math.min(gap, list[i] - list[i - 1]) end
      return gap * f[3]
    end
  end
  return 86400000
end

-- FNV-1a (32 bits) of the file's text and its length: tells a reload that
-- the file changed even when its schedule did not.
function M.digest(src)
  local h = 2166136261
  for i = 1, #src do
    h = ((h ~ src:byte(i)) * 16777619) & 0xffffffff
  end
  return ("%08x-%d"):format(h, #src)
end

-- The line where each `key =` first appears in the source, for messages.
local function key_lines(src)
  local lines, n = {}, 0
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local code = "{" .. line:gsub("%-%-.*$", "")
    for key in code:gmatch("[{,;]%s*([%a_][%w_]*)%s*=") do
      lines[key] = lines[key] or n
    end
  end
  return lines
end

-- A value in a message, read with raw access only: no metamethod of the
-- file runs, and a big table or string shows as a short line.
local function show(v, depth)
  local ty = type(v)
  if ty == "string" then return quote(v) end
  if ty == "number" or ty == "boolean" or ty == "nil" then return tostring(v) end
  if ty ~= "table" or (depth or 0) >= 2 then return "a " .. ty end
  local parts, more = {}, false
  for k, x in next, v do
    if #parts == 8 then more = true break end
    local key = type(k) == "string" and #k <= 40 and k:match("^[%a_][%w_]*$")
      or "[" .. show(k, 2) .. "]"
    parts[#parts + 1] = key .. " = " .. show(x, (depth or 0) + 1)
  end
  table.sort(parts)
  if more then parts[#parts + 1] = "..." end
  if #parts == 0 then return "{}" end
  return "{ " .. table.concat(parts, ", ") .. " }"
end

-- How many unknown keys a message names; the rest are counted.
local UNKNOWN_SHOWN = 10

-- The fields leash reads from the returned table, copied with raw access
-- (under the load budget: the table may be huge), and its other keys.
local function snapshot(t)
  local fields, unknown, n = {}, {}, 0
  for k, v in next, t do
    if known[k] then
      fields[k] = v
    else
      n = n + 1
      if n <= UNKNOWN_SHOWN then unknown[n] = k end
    end
  end
  return fields, unknown, n
end

-- Lua cuts a chunk's name in messages to its last 60 bytes ("...s/jobs/x.lua:3:
-- msg"); a long jobs/ path gets its whole name back, so the message starts
-- with the file as every other message does.
local function relocate(msg, path)
  local tail, rest = msg:match("^%.%.%.(.-)(:%d+: .*)$")
  if tail and #tail > 0 and path:sub(-#tail) == tail then return path .. rest end
  return msg
end

-- The message for a file whose top level did not return normally (kind
-- "timeout": the checking process ran out of time, see src/plan/job.c).
local HINT = "the file should only build and return the job table"
function M.load_error(path, kind, line, v)
  local where = line and ("%s:%d"):format(path, line) or path
  local hint = HINT
  if kind == "time" or kind == "timeout" then
    return ("%s: loading took more than %s ([leash] load_timeout); %s")
      :format(where, duration.format(v), hint)
  elseif kind == "allocated" then
    return ("%s: loading allocated more than %d MiB in all; %s")
      :format(where, M.LOAD_ALLOCATED // (1024 * 1024), hint)
  elseif kind == "instructions" then
    return ("%s: loading ran more than %d instructions (a loop at the top level?); %s")
      :format(where, M.LOAD_BUDGET, hint)
  elseif kind == "memory" then
    return ("%s: loading used more than %d MiB of memory; %s")
      :format(where, M.LOAD_MEMORY // (1024 * 1024), hint)
  end
  local msg
  if type(v) == "string" then
    v = relocate(v, path)
    if v:sub(1, #path + 1) == path .. ":" then return v end
    -- Where inside leash an error surfaced is no help to the file's author.
    msg = v:gsub("^[^\n]-leash/[%w_]+%.lua:%d+: ", "")
  elseif type(v) == "number" then
    msg = tostring(v)
  elseif type(v) == "table" then
    msg = "error raised with a table: " .. show(v)
  else
    msg = "error raised with " .. (v == nil and "nil" or "a " .. type(v))
  end
  return ("%s: %s"):format(where, msg)
end

-- Strings longer than this are not parsed (a cron expression or a duration
-- is short; parsing a huge one would take the time the budget saves).
local VALUE_MAX = 256

-- Loads and checks one file within timeout_ms (0 or nil: no bound).
-- Returns the normalised job, or nil and a list of messages, each starting
-- with "file:line:" (or "file:").  A good job's `warnings` lists what `leash
-- check` points out without failing ("file:line: key: warning: ...").
-- digest: the text must be the one a checking process passed (src/plan/job.c).
function M.load(path, name, timeout_ms, digest)
  if not M.valid_name(name) then
    return nil, { ("%s: %q is not a valid job name (use %s)"):format(path, name, M.NAME_RULE) }
  end
  local src, err = core.read_job(path, M.FILE_MAX)
  if not src then return nil, { ("%s: %s"):format(path, err) } end
  if digest and M.digest(src) ~= digest then
    return nil, { ("%s: changed while it was being checked: not loaded (load it again: "
      .. "SIGHUP)"):format(path) }
  end
  local chunkname = "@" .. path
  local ok, what, t, fields, unknown, n_unknown = sandbox.run(chunkname,
    { instructions = M.LOAD_BUDGET, bytes = M.LOAD_MEMORY, allocated = M.LOAD_ALLOCATED,
      ms = timeout_ms }, function()
      local chunk, lerr = load(src, chunkname, "t", sandbox.env())
      if not chunk then return "syntax", lerr end
      local r = chunk()
      if type(r) ~= "table" then return "value", r end
      return "table", r, snapshot(r)
    end)
  if not ok then
    return nil, { M.load_error(path, what, t, what == "time" and timeout_ms or fields) }
  end
  if what == "syntax" then return nil, { relocate(t, path) } end
  if what ~= "table" then
    return nil, { ("%s: the file returned %s, expected a table such as "
      .. "return { every = \"30s\", run = function(ctx) ... end }"):format(path,
        t == nil and "nothing" or "a " .. type(t)) }
  end
  t = fields

  local errors = {}
  local lines
  local function where(key)
    lines = lines or key_lines(src)
    local line = lines[key]
    return line and ("%s:%d"):format(path, line) or path
  end
  local function bad(key, fmt, ...)
    errors[#errors + 1] = ("%s: %s: " .. fmt):format(where(key), key, ...)
  end
  local function long(key)
    if type(t[key]) == "string" and #t[key] > VALUE_MAX then
      bad(key, "%s is %d bytes long, more than %d", quote(t[key]), #t[key], VALUE_MAX)
      return true
    end
  end
  local function dur(key, min, max)
    local v = t[key]
    if v == nil or long(key) then return nil end
    local ms, msg = duration.parse(v)
    if ms then ms, msg = duration.within(ms, min, max) end
    if not ms then bad(key, "%s", msg) return nil end
    return ms
  end

  local keys = {}
  for i, k in ipairs(unknown) do
    keys[i] = type(k) == "string" and #k <= 40 and k:match("^[%a_][%w_]*$")
      or "[" .. show(k, 2) .. "]"
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    bad(k, "unknown key (a job has %s)", table.concat(M.KEYS, ", "))
  end
  if n_unknown > #keys then
    errors[#errors + 1] = ("%s: and %d more unknown keys"):format(path, n_unknown - #keys)
  end

  local job = { name = name, file = path, singleton = true, tz = "UTC", digest = M.digest(src) }
  job.every_ms = dur("every", 1000)
  job.timeout_ms = dur("timeout", 1)
  job.lease_ms = dur("lease", LEASE.min, LEASE.max)
  if job.lease_ms then
    local key, msg
    job.renew_ms, job.margin_ms, key, msg = config.timing(job.lease_ms)
    if key then bad("lease", "its %s: %s", key, msg) end
  end
  if t.cron ~= nil and not long("cron") then
    if type(t.cron) ~= "string" then
      bad("cron", "expected a string such as \"*/10 * * * *\", got a %s", type(t.cron))
    else
      local spec, msg = cron.parse(t.cron)
      if spec then job.cron, job.cron_expr = spec, t.cron else bad("cron", "%q: %s", t.cron, msg) end
    end
    if t.every ~= nil then bad("cron", "give either every or cron, not both") end
  end
  if t.tz ~= nil and not long("tz") then
    local zone_err
    if type(t.tz) ~= "string" then
      zone_err = ("%s is not a time zone"):format(show(t.tz))
    elseif t.tz ~= "UTC" and t.tz ~= "local" then
      -- Read (once per process, kept by leash.tz) here, outside the file's
      -- budget and environment, so a bad zone is this file's error.
      zone_err = select(2, tz.get(t.tz))
    end
    if zone_err then
      bad("tz", "%s (use \"UTC\", \"local\" or a zone of %s such as \"Europe/Berlin\")",
        zone_err, tz.dir())
    elseif t.cron == nil then
      bad("tz", "only applies to cron schedules (every is always aligned to UTC)")
    else
      job.tz = t.tz
    end
  end
  if t.singleton ~= nil then
    if type(t.singleton) ~= "boolean" then
      bad("singleton", "expected true or false, got %s", show(t.singleton))
    else
      job.singleton = t.singleton
    end
  end
  if t.weight ~= nil then
    local v = t.weight
    if math.type(v) ~= "integer" or v < 1 or v > limits.weight_max then
      bad("weight", "%s is not a whole number from 1 to %d", show(v), limits.weight_max)
    elseif t.singleton == false then
      bad("weight", "only applies to singleton jobs (a job on every replica is placed nowhere)")
    else
      job.weight = v
    end
  end
  if t.description ~= nil and type(t.description) ~= "string" then
    bad("description", "expected a string, got a %s", type(t.description))
  end
  job.description = t.description
  -- A service (neither every nor cron given) has one run at a time and no
  -- fire times; a bad every or cron leaves the period unknown.
  local service = t.every == nil and t.cron == nil
  -- A word of a list (overlap, missed) that only a periodic job may give.
  local function word(key, words, list, why)
    if t[key] == nil then return nil end
    if not words[t[key]] then
      bad(key, "%s is not one of %s", show(t[key]), (table.concat(list, ", "):gsub("[^, ]+", '"%0"')))
    elseif service then
      bad(key, "only applies to every and cron jobs (%s)", why)
    else
      return t[key]
    end
  end
  local NO_FIRES = "a service has no fires to miss"
  job.overlap = word("overlap", overlaps, M.OVERLAP, "a service has one run at a time")
  job.missed = word("missed", misseds, M.MISSED, NO_FIRES)
  job.missed_within_ms = dur("missed_within", 1000, M.MISSED_WITHIN_MAX)
  if job.missed_within_ms and service then
    bad("missed_within", "only applies to every and cron jobs (%s)", NO_FIRES)
  end
  if t.missed_max ~= nil then
    local v = t.missed_max
    if math.type(v) ~= "integer" or v < 1 or v > M.MISSED_MAX_MAX then
      bad("missed_max", "%s is not a whole number from 1 to %d", show(v), M.MISSED_MAX_MAX)
    elseif service then
      bad("missed_max", "only applies to every and cron jobs (%s)", NO_FIRES)
    elseif (t.missed or M.MISSED_DEFAULT) ~= "all" then
      bad("missed_max", "only applies with missed = \"all\"")
    else
      job.missed_max = v
    end
  end
  job.jitter_ms = dur("jitter", 1)
  if job.jitter_ms then
    local period = (job.every_ms or job.cron) and M.shortest_period(job)
    if service then
      bad("jitter", "only applies to every and cron jobs")
    elseif not period then
      job.jitter_ms = nil
    elseif job.jitter_ms > period then
      bad("jitter", "%s is longer than the job's shortest period (%s)",
        duration.format(job.jitter_ms), duration.format(period))
    else
      job.offset_ms = M.offset(name, job.jitter_ms)
    end
  end
  if t.run == nil then
    errors[#errors + 1] = ("%s: run: missing; a job needs run = function(ctx) ... end"):format(path)
  elseif type(t.run) ~= "function" then
    bad("run", "expected a function, got a %s", type(t.run))
  end
  job.run = t.run
  for _, k in ipairs({ "on_failure", "on_recover" }) do
    if t[k] ~= nil and type(t[k]) ~= "function" then
      bad(k, "expected a function(ctx, run), got a %s", type(t[k]))
    end
    job[k] = t[k]
  end
  if #errors > 0 then return nil, errors end
  job.kind = job.every_ms and "every" or job.cron and "cron" or "service"
  job.overlap = job.overlap or "skip"
  if job.kind ~= "service" then
    job.missed = job.missed or M.MISSED_DEFAULT
    job.missed_within_ms = job.missed_within_ms or M.MISSED_WITHIN_DEFAULT
    job.missed_max = job.missed_max or M.MISSED_MAX_DEFAULT
  end
  job.offset_ms = job.offset_ms or 0
  job.weight = job.weight or 1
  job.warnings = M.warnings(job, where)
  return job
end

-- Whether a period looks meant for the clock: whole minutes.
local MINUTE, DAY = 60000, 86400000

-- What `leash check` warns about in a good job; where(key) gives "file:line".
function M.warnings(job, where)
  local out = {}
  local function warn(key, fmt, ...)
    out[#out + 1] = ("%s: %s: warning: " .. fmt):format(where(key), key, ...)
  end
  local period = M.shortest_period(job)
  if period and job.timeout_ms and job.timeout_ms > period then
    local what = {
      skip = "with overlap = \"skip\" a run that long makes the next fire skip (every other fire, or more)",
      queue = "with overlap = \"queue\" the runs fall behind the fires",
      replace = "with overlap = \"replace\" the next fire stops a run before its timeout",
    }
    warn("timeout", "%s is longer than the job's %speriod (%s): %s", duration.format(job.timeout_ms),
      job.kind == "cron" and "shortest " or "", duration.format(period), what[job.overlap])
  end
  local e = job.every_ms
  if e and e % MINUTE == 0 and (e < DAY and DAY % e ~= 0 or e > DAY and e % DAY ~= 0) then
    warn("every", "%s does not divide a day: the fires drift against the clock from one day "
      .. "to the next (use a divisor of 24h such as 5m, 10m or 1h, or a cron expression)",
      duration.format(e))
  end
  return out
end

-- The first fire time strictly after after_ms (ms since the epoch), or nil
-- for a service.  A jitter offset shifts every fire: the next shifted fire
-- after t is the next base fire after t - offset, plus the offset.
function M.next_fire(job, after_ms)
  local off = job.offset_ms or 0
  if job.kind == "every" then
    local t = cron.every_next(job.every_ms, after_ms - off)
    return t and t + off
  elseif job.kind == "cron" then
    local t = cron.next(job.cron, (after_ms - off) // 1000, job.tz)
    return t and t * 1000 + off
  end
end

-- What `leash check` and the log say about a loaded job.
function M.describe(job)
  local what
  if job.kind == "every" then what = "every " .. duration.format(job.every_ms)
  elseif job.kind == "cron" then what = ("cron %q %s"):format(job.cron_expr, job.tz)
  else what = "service" end
  if job.jitter_ms then what = what .. ", jitter " .. duration.format(job.jitter_ms) end
  if job.overlap and job.overlap ~= "skip" then what = what .. ", overlap " .. job.overlap end
  if job.missed and job.missed ~= M.MISSED_DEFAULT then what = what .. ", missed " .. job.missed end
  if not job.singleton then what = what .. ", on every replica" end
  if job.on_failure or job.on_recover then
    what = what .. ", hooks " .. (job.on_failure and job.on_recover and "on_failure on_recover"
      or job.on_failure and "on_failure" or "on_recover")
  end
  return what
end

return M
