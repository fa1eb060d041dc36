-- leash.job: loads one job file and checks it; the policy of what a job is.
local duration = require "leash.duration"
local cron = require "leash.cron"
local config = require "leash.config"
local limits = require("leash.core").limits

local M = {}

-- The keys a job table may have.
M.KEYS = { "every", "cron", "tz", "timeout", "lease", "singleton", "run", "description" }
local known = {}
for _, k in ipairs(M.KEYS) do known[k] = true end

-- Each file gets its own global table (what it sets stays its own), all
-- reading through to the real globals.
local ENV_MT = { __index = _G }

-- Instructions the top-level chunk may run before it counts as stuck.
M.LOAD_BUDGET = 10000000

-- A job's name is its lease's name in the store.
M.NAME_RULE = ("a-z, 0-9, '.', '_' and '-', starting with a letter or digit, at most %d bytes")
  :format(limits.name_max)

function M.valid_name(name)
  return #name <= limits.name_max and name:match("^[a-z0-9][a-z0-9._-]*$") ~= nil
end

-- A job's own lease has the bounds of [singleton] lease.
local LEASE = config.key("singleton", "lease")

-- FNV-1a (32 bits) of the file's text and its length: tells a reload that
-- the file changed even when its schedule did not.
function M.digest(src)
  local h = 2166136261
  for i = 1, #src do
    h = ((h ~ src:byte(i)) * 16777619) & 0xffffffff
  end
  return ("%08x-%d"):format(h, #src)
end

-- The line where `key =` first appears in the source, for messages.
local function key_line(src, key)
  local n = 0
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local code = line:gsub("%-%-.*$", "")
    if code:match("^%s*" .. key .. "%s*=") or code:match("[{,;]%s*" .. key .. "%s*=") then
      return n
    end
  end
end

-- Runs the chunk in a coroutine with an instruction budget.
local function run_chunk(chunk, path)
  local co = coroutine.create(chunk)
  debug.sethook(co, function()
    error(("loading ran more than %d instructions (a loop at the top level?); "
      .. "the file should only build and return the job table"):format(M.LOAD_BUDGET), 2)
  end, "", M.LOAD_BUDGET)
  -- os.exit at the top level would end the scheduler itself (or `leash
  -- check`, with status 0): while loading it raises instead.
  local exit = os.exit
  os.exit = function()
    error("os.exit called while loading; the file should only build and return the job table", 2)
  end
  local ok, res = coroutine.resume(co)
  os.exit = exit
  if ok and coroutine.status(co) ~= "dead" then
    return nil, path .. ": the file yielded while loading"
  end
  if not ok then
    if type(res) ~= "string" then res = path .. ": raised a " .. type(res) .. " value" end
    return nil, res
  end
  return true, res
end

-- Loads and checks one file.  Returns the normalised job, or nil and a list
-- of messages, each starting with "file:line:" (or "file:").
function M.load(path, name)
  if not M.valid_name(name) then
    return nil, { ("%s: %q is not a valid job name (use %s)"):format(path, name, M.NAME_RULE) }
  end
  local f, err = io.open(path, "rb")
  if not f then return nil, { ("%s: %s"):format(path, err) } end
  local src = f:read("a")
  f:close()
  local env = setmetatable({}, ENV_MT)
  local chunk, lerr = load(src, "@" .. path, "t", env)
  if not chunk then return nil, { lerr } end
  local ok, t = run_chunk(chunk, path)
  if not ok then return nil, { t } end
  if type(t) ~= "table" then
    return nil, { ("%s: the file returned %s, expected a table such as "
      .. "return { every = \"30s\", run = function(ctx) ... end }"):format(path,
        t == nil and "nothing" or "a " .. type(t)) }
  end

  local errors = {}
  local function where(key)
    local line = key_line(src, key)
    return line and ("%s:%d"):format(path, line) or path
  end
  local function bad(key, fmt, ...)
    errors[#errors + 1] = ("%s: %s: " .. fmt):format(where(key), key, ...)
  end
  local function dur(key, min, max)
    local v = t[key]
    if v == nil then return nil end
    local ms, msg = duration.parse(v)
    if ms then ms, msg = duration.within(ms, min, max) end
    if not ms then bad(key, "%s", msg) return nil end
    return ms
  end

  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for _, k in ipairs(keys) do
    if not known[k] then
      bad(k, "unknown key (a job has %s)", table.concat(M.KEYS, ", "))
    end
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
  if t.cron ~= nil then
    if type(t.cron) ~= "string" then
      bad("cron", "expected a string such as \"*/10 * * * *\", got a %s", type(t.cron))
    else
      local spec, msg = cron.parse(t.cron)
      if spec then job.cron, job.cron_expr = spec, t.cron else bad("cron", "%q: %s", t.cron, msg) end
    end
    if t.every ~= nil then bad("cron", "give either every or cron, not both") end
  end
  if t.tz ~= nil then
    if t.tz ~= "UTC" and t.tz ~= "local" then
      bad("tz", "%q is not a time zone leash knows (use \"UTC\" or \"local\")", tostring(t.tz))
    elseif t.cron == nil then
      bad("tz", "only applies to cron schedules (every is always aligned to UTC)")
    else
      job.tz = t.tz
    end
  end
  if t.singleton ~= nil then
    if type(t.singleton) ~= "boolean" then
      bad("singleton", "expected true or false, got %s", tostring(t.singleton))
    else
      job.singleton = t.singleton
    end
  end
  if t.description ~= nil and type(t.description) ~= "string" then
    bad("description", "expected a string, got a %s", type(t.description))
  end
  job.description = t.description
  if t.run == nil then
    errors[#errors + 1] = ("%s: run: missing; a job needs run = function(ctx) ... end"):format(path)
  elseif type(t.run) ~= "function" then
    bad("run", "expected a function, got a %s", type(t.run))
  end
  job.run = t.run
  if #errors > 0 then return nil, errors end
  job.kind = job.every_ms and "every" or job.cron and "cron" or "service"
  return job
end

-- The first fire time strictly after after_ms (ms since the epoch), or nil
-- for a service.
function M.next_fire(job, after_ms)
  if job.kind == "every" then
    return cron.every_next(job.every_ms, after_ms)
  elseif job.kind == "cron" then
    local t = cron.next(job.cron, after_ms // 1000, job.tz)
    return t and t * 1000
  end
end

-- What `leash check` and the log say about a loaded job.
function M.describe(job)
  local what
  if job.kind == "every" then what = "every " .. duration.format(job.every_ms)
  elseif job.kind == "cron" then what = ("cron %q %s"):format(job.cron_expr, job.tz)
  else what = "service" end
  if not job.singleton then what = what .. ", on every replica" end
  return what
end

return M
