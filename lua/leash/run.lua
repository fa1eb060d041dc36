-- leash.run: what a forked child does with one run: builds ctx and calls the
-- job's run function.  The parent reads the child's stdout, stderr and the
-- records ctx.log writes, and logs them with the job name and run id.
local core = require "leash.core"

local M = {}

local LEVELS = { debug = true, info = true, warn = true, error = true }

-- Each text of a record (the message, a key, a value) is cut past this many
-- bytes, on a character boundary and saying so, so that a record stays one
-- line for the parent (src/launch/runner.h RUN_LINE_MAX) and one line of the log.
M.TEXT_MAX, M.KEY_MAX = 1024, 128

local function esc(v, max)
  return (core.cut(tostring(v), max):gsub("[\\\t\n\0]",
    { ["\\"] = "\\\\", ["\t"] = "\\t", ["\n"] = "\\n", ["\0"] = "\\0" }))
end

-- One record as the parent reads it: level, message, then key/value pairs,
-- separated by tabs, with \, tab, newline and NUL escaped.
function M.encode(level, msg, fields)
  local parts = { level, esc(msg, M.TEXT_MAX) }
  if fields ~= nil then
    local keys = {}
    for k in pairs(fields) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for _, k in ipairs(keys) do
      parts[#parts + 1] = esc(k, M.KEY_MAX)
      parts[#parts + 1] = esc(fields[k] == nil and fields[tonumber(k)] or fields[k], M.TEXT_MAX)
    end
  end
  return table.concat(parts, "\t")
end

function M.ctx(job, info)
  local ctx = {
    job = job.name,
    replica = info.replica,
    token = info.token,
    run_id = info.run_id,
    scheduled_at = info.scheduled_at,
    catchup = info.catchup == true,
    manual = info.manual == true,        -- a run of leash trigger
  }
  function ctx.log(level, msg, fields)
    if not LEVELS[level] then
      error(("ctx.log: level %q is not debug, info, warn or error"):format(tostring(level)), 2)
    end
    if fields ~= nil and type(fields) ~= "table" then
      error("ctx.log: fields must be a table", 2)
    end
    core.child_log(M.encode(level, msg, fields))
  end
  function ctx.sleep(seconds)
    if type(seconds) ~= "number" or seconds < 0 then
      error("ctx.sleep: seconds must be a number >= 0", 2)
    end
    core.sleep(seconds)
  end
  function ctx.exec(argv, opts)
    if type(argv) ~= "table" or #argv == 0 then
      error("ctx.exec: argv must be a non-empty list of strings, e.g. { \"curl\", \"-fsS\", url }", 2)
    end
    local timeout = opts and opts.timeout
    if timeout ~= nil and (type(timeout) ~= "number" or timeout <= 0) then
      error("ctx.exec: timeout must be a number of seconds > 0", 2)
    end
    return core.exec(argv, timeout)
  end
  ctx.lease_left = core.lease_left
  ctx.now = core.now                  -- wall clock, epoch seconds (microseconds)
  return ctx
end

-- A traceback's lines without leash's own frames: those in its Lua modules,
-- and from the xpcall that runs the body on (the frames below the job's).
function M.traceback(tb)
  local out = {}
  for line in tb:gmatch("[^\n]+") do
    if line:find("^\t%[C%]: in function 'xpcall'") then break end
    if not line:find("lua/leash/[%w_]+%.lua:%d+:") then out[#out + 1] = line end
  end
  return "\n" .. table.concat(out, "\n")
end

-- Runs the body (or, with info.hook, the job's on_failure/on_recover with
-- info.run) with ctx (built from info when nil: a child forked ahead of its
-- fire builds it while it waits); returns true, or false and the error with
-- its traceback.
function M.main(job, info, ctx)
  os.exit = core.child_exit           -- never run the parent's exit handlers
  ctx = ctx or M.ctx(job, info)
  local fn, what = job.run, "run"
  if info.hook then
    fn, what, ctx.hook = job[info.hook], info.hook, info.hook
  end
  -- The error and its traceback; not debug.traceback(e) itself, which
  -- cuts a message at its first NUL.  The frames are the job's: leash's
  -- own (this xpcall, ctx's functions in lua/leash/) are left out.
  local ok, err = xpcall(fn, function(e) return tostring(e) .. M.traceback(debug.traceback("", 2)) end,
    ctx, info.run)
  if not ok then
    local first = tostring(err):match("^[^\n]*")
    core.child_log(M.encode("error", what .. " failed: " .. first, { traceback = tostring(err) }))
  end
  return ok
end

return M
